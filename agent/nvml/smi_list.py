"""``nvidia-smi -L`` listings (``GPU 0: NAME (UUID: GPU-…)`` / ``  MIG 1g.10gb Device 0: (UUID: MIG-…)``),
read into a :class:`~labgang.agent.nvml.smi.Capture`: they give GPU and MIG UUIDs and MIG profile names."""

from __future__ import annotations

import re

from labgang.agent.nvml.smi import (
    Capture,
    GpuRecord,
    MigRecord,
)

LIST_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$")
# MIG lines are indented under their GPU; copies pasted from NVIDIA's documentation often lost the indent.
LIST_MIG = re.compile(r"^\s*MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)\s*$")
LIST_ALLOWED = "'GPU N: NAME (UUID: GPU-...)' or, under a GPU, 'MIG PROFILE Device N: (UUID: MIG-...)'"
LEGACY_MIG = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]+)/(\d+)/(\d+)$")


def capture_from_list(lines: list[str]) -> Capture:
    """Extract GPUs and MIG devices (profile, UUID) from ``nvidia-smi -L`` lines."""
    cap = Capture()
    for line in lines:
        m = LIST_GPU.match(line)
        if m:
            cap.gpus.append(GpuRecord(name=m.group(2).strip(), uuid=m.group(3).strip()))
            continue
        m = LIST_MIG.match(line)
        if m and cap.gpus:
            g = cap.gpus[-1]
            rec = MigRecord(index=int(m.group(2)), uuid=m.group(3).strip(), profile=m.group(1))
            legacy = LEGACY_MIG.match(rec.uuid or "")
            if legacy:
                rec.gi_id, rec.ci_id = int(legacy.group(2)), int(legacy.group(3))
            g.migs.append(rec)
            g.mig_current = True
    return cap


def listing_problem(text: str) -> str | None:
    """The first line of a whole ``nvidia-smi -L`` file that is not a listing line, or None.

    Blank lines are fine; a MIG line before any GPU line is not (it has no GPU to belong to).

    Returns:
        ``line 7: 'Some text' is not an nvidia-smi -L line; allowed: ...`` or None.
    """
    seen_gpu = False
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        if LIST_GPU.match(line):
            seen_gpu = True
            continue
        if seen_gpu and LIST_MIG.match(line):
            continue
        return f"line {number}: {line.strip()[:120]!r} is not an nvidia-smi -L line; allowed: {LIST_ALLOWED}"
    return None


def list_lines(text: str) -> list[str]:
    """The first contiguous block of ``nvidia-smi -L`` lines in ``text`` (empty if none)."""
    out: list[str] = []
    for line in text.splitlines():
        if LIST_GPU.match(line) or (out and LIST_MIG.match(line)):
            out.append(line)
        elif out and line.strip():
            break
    return out
