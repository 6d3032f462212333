"""The default ``nvidia-smi`` table (``Driver Version: … CUDA Version: …`` and its boxes), read into a
:class:`~labgang.agent.nvml.smi.Capture`."""

from __future__ import annotations

import re

from labgang.agent.nvml import models
from labgang.agent.nvml.machine import SimProcess
from labgang.agent.nvml.smi import (
    Capture,
    GpuRecord,
    MigRecord,
    integer,
    mode_enabled,
    number,
)

TABLE_HEADER = re.compile(r"Driver Version:\s*(\S+)\s+CUDA Version:\s*(\S+)")
TABLE_GPU = re.compile(
    r"^\|\s+(\d+)\s+(.+?)\s+(On|Off)\s+\|\s+([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s+(?:On|Off)\s+\|\s*(\S+)\s*\|"
)
TABLE_GPU_2 = re.compile(
    r"^\|\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)\s+\|\s+(\S+)\s*/\s*(\S+)\s+\|\s+(\S+)\s+(\S.*?)\s*\|"
)
TABLE_GPU_3 = re.compile(r"^\|\s+\|\s+\|\s+(\S+)\s*\|\s*$")
TABLE_MIG = re.compile(r"^\|\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+\|\s+(\S+)\s*/\s*(\S+)\s+\|\s+(\d+)\s")
TABLE_PROC = re.compile(r"^\|\s+(\d+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(C|G|C\+G|M|M\+C)\s+.*?(\S+)\s*\|\s*$")


def table_block(text: str) -> str | None:
    """The first default ``nvidia-smi`` table in ``text`` (header box up to the process box), or None."""
    m = TABLE_HEADER.search(text)
    if m is None:
        return None
    start = text.rfind("\n", 0, m.start()) + 1
    end = re.search(r"^#{8,}", text[start:], flags=re.M)
    return text[start : start + end.start()] if end else text[start:]


def capture_from_table(text: str) -> Capture:
    """Extract GPUs, MIG devices and processes from the default ``nvidia-smi`` table."""
    header = TABLE_HEADER.search(text)
    cap = Capture(driver_version=header.group(1) if header else None, cuda_version=header.group(2) if header else None)
    in_procs = False
    for line in text.splitlines():
        if "Processes:" in line:
            in_procs = True
            continue
        if in_procs:
            m = TABLE_PROC.match(line)
            if m and int(m.group(1)) < len(cap.gpus) and "C" in m.group(5):
                gi, ci = number(m.group(2)), number(m.group(3))
                cap.gpus[int(m.group(1))].processes.append(
                    SimProcess(
                        int(m.group(4)),
                        number(m.group(6)) if "MiB" in m.group(6) else None,
                        None if gi is None else int(gi),
                        None if ci is None else int(ci),
                    )
                )
            continue
        m = TABLE_GPU.match(line)
        if m:
            g = GpuRecord(name=m.group(2).strip(), bus_id=m.group(4))
            g.ecc_uncorrected = integer(m.group(5))
            cap.gpus.append(g)
            continue
        m = TABLE_GPU_2.match(line)
        if m and cap.gpus and cap.gpus[-1].memory_total_mib is None:
            g = cap.gpus[-1]
            g.temperature_c = number(m.group(2))
            g.power_w, g.power_limit_w = number(m.group(4)), number(m.group(5))
            g.memory_used_mib, g.memory_total_mib = number(m.group(6)), integer(m.group(7))
            g.util_gpu = number(m.group(8))
            continue
        m = TABLE_GPU_3.match(line)
        if m and cap.gpus and cap.gpus[-1].mig_current is None and not in_procs:
            cap.gpus[-1].mig_current = mode_enabled(m.group(1))
            cap.gpus[-1].mig_pending = cap.gpus[-1].mig_current
            continue
        m = TABLE_MIG.match(line)
        if m and int(m.group(1)) < len(cap.gpus):
            cap.gpus[int(m.group(1))].migs.append(
                MigRecord(
                    index=int(m.group(4)),
                    gi_id=int(m.group(2)),
                    ci_id=int(m.group(3)),
                    sm_count=int(m.group(7)),
                    memory_used_mib=number(m.group(5)),
                    memory_total_mib=integer(m.group(6)),
                )
            )
    for g in cap.gpus:
        if g.name.endswith("..."):
            stem = g.name[:-3].strip().lower()
            full = next((m.name for m in models.CATALOGUE if m.name.lower().startswith(stem)), None)
            g.name = full or g.name
    return cap
