"""Turn real ``nvidia-smi`` output into a :class:`~labgang.agent.nvml.machine.SimMachine`.

Reads, detected from content, not file names:

* ``nvidia-smi -q -x`` XML (``<nvidia_smi_log>``);
* ``nvidia-smi -q`` text (``==============NVSMI LOG==============``), an indented tree;
* ``nvidia-smi -L`` listings (``GPU 0: NAME (UUID: GPU-…)`` / ``  MIG 1g.10gb Device 0: (UUID: MIG-…)``);
* transcripts holding several commands' outputs (the first ``-q`` block and the first
  ``-L`` block are used together: ``-L`` gives MIG UUIDs and profile names, ``-q`` the rest).

MIG devices in ``-q`` output carry no UUID or profile name: the profile is inferred from
SM count and memory as ``nvidia-smi -L`` would print it (``models.infer_profile``) and the
UUID is derived from the parent UUID and GI/CI ids (``machine.derived_mig_uuid``).
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from labgang.agent.nvml import models
from labgang.agent.nvml.machine import (
    Script,
    SimGpu,
    SimMachine,
    SimMigDevice,
    SimProcess,
    derived_gpu_uuid,
    derived_mig_uuid,
    mig_device,
)

LIST_GPU = re.compile(r"^GPU (\d+): (.+?) \(UUID: ([^)]+)\)\s*$")
# MIG lines are indented under their GPU; copies pasted from NVIDIA's documentation often lost the indent.
LIST_MIG = re.compile(r"^\s*MIG (\S+)\s+Device\s+(\d+): \(UUID: ([^)]+)\)\s*$")
LIST_ALLOWED = "'GPU N: NAME (UUID: GPU-...)' or, under a GPU, 'MIG PROFILE Device N: (UUID: MIG-...)'"
LEGACY_MIG = re.compile(r"^MIG-(GPU-[0-9a-fA-F-]+)/(\d+)/(\d+)$")
NVSMI_LOG = "==============NVSMI LOG=============="

_CLOCK_TEXT = {
    "idle": 0x1,
    "gpu_idle": 0x1,
    "applications clocks setting": 0x2,
    "applications_clocks_setting": 0x2,
    "sw power cap": 0x4,
    "sw_power_cap": 0x4,
    "hw slowdown": 0x8,
    "hw_slowdown": 0x8,
    "sync boost": 0x10,
    "sync_boost": 0x10,
    "sw thermal slowdown": 0x20,
    "sw_thermal_slowdown": 0x20,
    "hw thermal slowdown": 0x40,
    "hw_thermal_slowdown": 0x40,
    "hw power brake slowdown": 0x80,
    "hw_power_brake_slowdown": 0x80,
    "display clock setting": 0x100,
    "display_clocks_setting": 0x100,
    "display_clock_setting": 0x100,
}


# --------------------------------------------------------------------------- format-neutral records


@dataclass
class MigRecord:
    """One MIG device as a capture shows it (ids, SMs, memory MiB; UUID/profile from ``-L``)."""

    index: int
    gi_id: int | None = None
    ci_id: int | None = None
    sm_count: int | None = None
    memory_total_mib: int | None = None
    memory_used_mib: float | None = None
    uuid: str | None = None
    profile: str | None = None


@dataclass
class GpuRecord:
    """One GPU as a capture shows it (memory MiB, power W, temperature °C, percent)."""

    name: str = ""
    uuid: str | None = None
    bus_id: str | None = None
    arch_text: str | None = None
    memory_total_mib: int | None = None
    memory_reserved_mib: int | None = None
    memory_used_mib: float | None = None
    util_gpu: float | None = None
    util_mem: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    clock_mask: int = 0
    ecc_enabled: bool | None = None
    ecc_uncorrected: int | None = None
    mig_current: bool | None = None
    mig_pending: bool | None = None
    migs: list[MigRecord] = field(default_factory=list)
    processes: list[SimProcess] = field(default_factory=list)


@dataclass
class Capture:
    """The GPUs of one ``nvidia-smi`` output plus driver and CUDA versions."""

    driver_version: str | None = None
    cuda_version: str | None = None
    gpus: list[GpuRecord] = field(default_factory=list)


def _num(text: str | None) -> float | None:
    if text is None:
        return None
    m = re.match(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)", text)
    return float(m.group(1)) if m else None


def _int(text: str | None) -> int | None:
    value = _num(text)
    return None if value is None else int(value)


def _mode(text: str | None) -> bool | None:
    if text is None:
        return None
    low = text.strip().lower().rstrip("*")
    if low == "enabled":
        return True
    if low == "disabled":
        return False
    return None


def _cuda_int(text: str | None) -> int | None:
    if not text:
        return None
    m = re.match(r"^\s*(\d+)\.(\d+)", text)
    return int(m.group(1)) * 1000 + int(m.group(2)) * 10 if m else None


# --------------------------------------------------------------------------- -q text


@dataclass
class Node:
    """A section of ``nvidia-smi -q`` text: ordered (key, value-or-Node) entries."""

    entries: list[tuple[str, Any]] = field(default_factory=list)

    def get(self, *path: str) -> Any:
        """The value at a path of section keys, or None."""
        node: Any = self
        for key in path:
            if not isinstance(node, Node):
                return None
            node = next((v for k, v in node.entries if k == key), None)
        return node

    def text(self, *paths: tuple[str, ...] | str) -> str | None:
        """The first of several paths (tuples or single keys) that has a text value."""
        for path in paths:
            value = self.get(*((path,) if isinstance(path, str) else path))
            if (
                isinstance(value, str)
                and value.strip()
                and not value.strip().startswith(("N/A", "[N/A", "Insufficient", "[Insufficient"))
            ):
                return value.strip()
        return None

    def all(self, key: str) -> Iterator[Any]:
        """Every value under ``key`` in this section, in order."""
        return (v for k, v in self.entries if k == key)

    def walk(self, key: str) -> Iterator[Node]:
        """Every section named ``key`` at any depth."""
        for k, v in self.entries:
            if isinstance(v, Node):
                if k == key:
                    yield v
                yield from v.walk(key)


def parse_q_tree(text: str) -> Node:
    """Parse ``nvidia-smi -q`` text into a :class:`Node` tree by indentation."""
    root = Node()
    stack: list[tuple[int, Node]] = [(-1, root)]
    for raw in text.splitlines():
        if not raw.strip() or raw.lstrip().startswith(("#", "=====")):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        line = raw.strip()
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        m = re.match(r"^(.*?\S)\s+:\s?(.*)$", line) or re.match(r"^(.*?\S)\s*:\s*$", line)
        if m and m.lastindex == 2:
            parent.entries.append((m.group(1).strip(), m.group(2).strip()))
        elif m:
            parent.entries.append((m.group(1).strip(), ""))
        else:
            child = Node()
            parent.entries.append((line, child))
            stack.append((indent, child))
    return root


def capture_from_q_text(text: str) -> Capture:
    """Extract GPUs (and MIG devices, processes) from ``nvidia-smi -q`` text."""
    tree = parse_q_tree(text)
    cap = Capture(driver_version=tree.text("Driver Version"), cuda_version=tree.text("CUDA Version"))
    for key, node in tree.entries:
        if not (isinstance(node, Node) and key.startswith("GPU ")):
            continue
        g = GpuRecord(
            name=node.text("Product Name") or "",
            uuid=node.text("GPU UUID"),
            bus_id=node.text(("PCI", "Bus Id")) or key[4:].strip(),
            arch_text=node.text("Product Architecture"),
        )
        fb = node.get("FB Memory Usage")
        if isinstance(fb, Node):
            g.memory_total_mib = _int(fb.text("Total"))
            g.memory_reserved_mib = _int(fb.text("Reserved"))
            g.memory_used_mib = _num(fb.text("Used"))
        g.util_gpu = _num(node.text(("Utilization", "Gpu"), ("Utilization", "GPU")))
        g.util_mem = _num(node.text(("Utilization", "Memory")))
        g.temperature_c = _num(node.text(("Temperature", "GPU Current Temp")))
        for section in ("GPU Power Readings", "Power Readings"):
            sec = node.get(section)
            if isinstance(sec, Node):
                g.power_w = _num(sec.text("Power Draw", "Average Power Draw", "Instantaneous Power Draw"))
                g.power_limit_w = _num(sec.text("Current Power Limit", "Enforced Power Limit", "Power Limit"))
                break
        for section in ("Clocks Event Reasons", "Clocks Throttle Reasons"):
            sec = node.get(section)
            if isinstance(sec, Node):
                for k, v in sec.entries:
                    if isinstance(v, str) and v.strip() == "Active":
                        g.clock_mask |= _CLOCK_TEXT.get(k.lower(), 0)
                break
        g.ecc_enabled = _mode(node.text(("ECC Mode", "Current")))
        g.ecc_uncorrected = _int(
            node.text(
                ("ECC Errors", "Volatile", "DRAM Uncorrectable"), ("ECC Errors", "Volatile", "Double Bit", "Total")
            )
        )
        g.mig_current = _mode(node.text(("MIG Mode", "Current")))
        g.mig_pending = _mode(node.text(("MIG Mode", "Pending")))
        for slot, mig in enumerate(node.walk("MIG Device")):
            mem = mig.get("FB Memory Usage") or mig.get("Shared FB Memory Usage")
            listed = _int(mig.text("Index"))
            rec = MigRecord(
                index=listed if listed is not None else slot,
                gi_id=_int(mig.text("GPU Instance ID")),
                ci_id=_int(mig.text("Compute Instance ID")),
                sm_count=_int(mig.text(("Device Attributes", "Shared", "Multiprocessor count"))),
            )
            if isinstance(mem, Node):
                rec.memory_total_mib = _int(mem.text("Total"))
                rec.memory_used_mib = _num(mem.text("Used"))
            g.migs.append(rec)
        procs = node.get("Processes")
        if isinstance(procs, Node):
            g.processes = _q_processes(procs)
        cap.gpus.append(g)
    return cap


def _q_processes(node: Node) -> list[SimProcess]:
    out: list[SimProcess] = []
    current: dict[str, str] = {}

    def flush() -> None:
        if "Process ID" in current and current.get("Type", "C").strip() not in ("G",):
            used = current.get("Used GPU Memory")
            out.append(
                SimProcess(
                    pid=int(_num(current["Process ID"]) or 0),
                    used_memory_mib=_num(used) if used and not used.startswith(("N/A", "Not available")) else None,
                    gi_id=_int(current.get("GPU instance ID"))
                    if _num(current.get("GPU instance ID")) is not None
                    else None,
                    ci_id=_int(current.get("Compute instance ID"))
                    if _num(current.get("Compute instance ID")) is not None
                    else None,
                )
            )
        current.clear()

    for key, value in node.entries:
        if not isinstance(value, str):
            continue
        if key in current or (key == "GPU instance ID" and "Process ID" in current):
            flush()
        current[key] = value
    flush()
    return out


# --------------------------------------------------------------------------- XML


def capture_from_xml(text: str) -> Capture:
    """Extract GPUs (and MIG devices, processes) from ``nvidia-smi -q -x`` XML.

    Raises:
        ValueError: the XML is malformed or its root is not ``nvidia_smi_log``.
    """
    body = re.sub(r"<!DOCTYPE[^>]*>", "", text.lstrip("\ufeff"), count=1)
    try:
        root = ET.fromstring(body)  # noqa: S314 - nvidia-smi's own output; the DOCTYPE is stripped above
    except ET.ParseError as exc:
        raise ValueError(f"nvidia-smi XML: {exc}") from None
    if root.tag != "nvidia_smi_log":
        raise ValueError(f"nvidia-smi XML: root element is <{root.tag}>, expected <nvidia_smi_log>")

    def t(el: ET.Element, *paths: str) -> str | None:
        for path in paths:
            found = el.find(path)
            if (
                found is not None
                and found.text
                and found.text.strip()
                and not found.text.strip().startswith(("N/A", "[N/A", "Insufficient", "[Insufficient"))
            ):
                return found.text.strip()
        return None

    cap = Capture(driver_version=t(root, "driver_version"), cuda_version=t(root, "cuda_version"))
    for el in root.findall("gpu"):
        g = GpuRecord(
            name=t(el, "product_name") or "",
            uuid=t(el, "uuid"),
            bus_id=t(el, "pci/pci_bus_id") or el.get("id"),
            arch_text=t(el, "product_architecture"),
        )
        g.memory_total_mib = _int(t(el, "fb_memory_usage/total"))
        g.memory_reserved_mib = _int(t(el, "fb_memory_usage/reserved"))
        g.memory_used_mib = _num(t(el, "fb_memory_usage/used"))
        g.util_gpu = _num(t(el, "utilization/gpu_util"))
        g.util_mem = _num(t(el, "utilization/memory_util"))
        g.temperature_c = _num(t(el, "temperature/gpu_temp"))
        g.power_w = _num(
            t(
                el,
                "gpu_power_readings/power_draw",
                "gpu_power_readings/average_power_draw",
                "gpu_power_readings/instant_power_draw",
                "power_readings/power_draw",
            )
        )
        g.power_limit_w = _num(
            t(
                el,
                "gpu_power_readings/current_power_limit",
                "gpu_power_readings/enforced_power_limit",
                "power_readings/enforced_power_limit",
                "power_readings/power_limit",
            )
        )
        for section, prefix in (
            ("clocks_event_reasons", "clocks_event_reason_"),
            ("clocks_throttle_reasons", "clocks_throttle_reason_"),
        ):
            sec = el.find(section)
            if sec is not None:
                for child in sec:
                    if (child.text or "").strip() == "Active":
                        g.clock_mask |= _CLOCK_TEXT.get(child.tag.removeprefix(prefix), 0)
                break
        g.ecc_enabled = _mode(t(el, "ecc_mode/current_ecc"))
        g.ecc_uncorrected = _int(
            t(el, "ecc_errors/volatile/dram_uncorrectable", "ecc_errors/volatile/double_bit/total")
        )
        g.mig_current = _mode(t(el, "mig_mode/current_mig"))
        g.mig_pending = _mode(t(el, "mig_mode/pending_mig"))
        for slot, mig in enumerate(el.findall("mig_devices/mig_device")):
            listed = _int(t(mig, "index"))
            g.migs.append(
                MigRecord(
                    index=listed if listed is not None else slot,
                    gi_id=_int(t(mig, "gpu_instance_id")),
                    ci_id=_int(t(mig, "compute_instance_id")),
                    sm_count=_int(t(mig, "device_attributes/shared/multiprocessor_count")),
                    memory_total_mib=_int(t(mig, "fb_memory_usage/total")),
                    memory_used_mib=_num(t(mig, "fb_memory_usage/used")),
                )
            )
        for proc in el.findall("processes/process_info"):
            if (t(proc, "type") or "C") == "G":
                continue
            gi, ci = t(proc, "gpu_instance_id"), t(proc, "compute_instance_id")
            used = t(proc, "used_memory")
            g.processes.append(
                SimProcess(
                    int(_num(t(proc, "pid")) or 0),
                    _num(used) if used else None,
                    _int(gi) if _num(gi) is not None else None,
                    _int(ci) if _num(ci) is not None else None,
                )
            )
        cap.gpus.append(g)
    return cap


# --------------------------------------------------------------------------- default table

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
                gi, ci = _num(m.group(2)), _num(m.group(3))
                cap.gpus[int(m.group(1))].processes.append(
                    SimProcess(
                        int(m.group(4)),
                        _num(m.group(6)) if "MiB" in m.group(6) else None,
                        None if gi is None else int(gi),
                        None if ci is None else int(ci),
                    )
                )
            continue
        m = TABLE_GPU.match(line)
        if m:
            g = GpuRecord(name=m.group(2).strip(), bus_id=m.group(4))
            g.ecc_uncorrected = _int(m.group(5))
            cap.gpus.append(g)
            continue
        m = TABLE_GPU_2.match(line)
        if m and cap.gpus and cap.gpus[-1].memory_total_mib is None:
            g = cap.gpus[-1]
            g.temperature_c = _num(m.group(2))
            g.power_w, g.power_limit_w = _num(m.group(4)), _num(m.group(5))
            g.memory_used_mib, g.memory_total_mib = _num(m.group(6)), _int(m.group(7))
            g.util_gpu = _num(m.group(8))
            continue
        m = TABLE_GPU_3.match(line)
        if m and cap.gpus and cap.gpus[-1].mig_current is None and not in_procs:
            cap.gpus[-1].mig_current = _mode(m.group(1))
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
                    memory_used_mib=_num(m.group(5)),
                    memory_total_mib=_int(m.group(6)),
                )
            )
    for g in cap.gpus:
        if g.name.endswith("..."):
            stem = g.name[:-3].strip().lower()
            full = next((m.name for m in models.CATALOGUE if m.name.lower().startswith(stem)), None)
            g.name = full or g.name
    return cap


# --------------------------------------------------------------------------- -L listings


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


def q_block(text: str) -> str | None:
    """The first ``nvidia-smi -q`` block of ``text`` (up to the next ``####`` banner), or None."""
    start = text.find(NVSMI_LOG)
    if start < 0:
        return None
    rest = text[start + len(NVSMI_LOG) :]
    end = re.search(r"^#{8,}", rest, flags=re.M)
    nxt = rest.find(NVSMI_LOG)
    cut = min(x for x in (end.start() if end else len(rest), nxt if nxt >= 0 else len(rest)))
    return NVSMI_LOG + rest[:cut]


# --------------------------------------------------------------------------- merge and build


def merge_list(cap: Capture, listing: Capture) -> None:
    """Copy UUIDs and MIG profile names from an ``-L`` listing into a ``-q`` capture (same order)."""
    for g, lg in zip(cap.gpus, listing.gpus, strict=False):  # a short listing fills what it has
        g.uuid = g.uuid or lg.uuid
        by_index = {m.index: m for m in lg.migs}
        for m in g.migs:
            lm = by_index.get(m.index)
            if lm is not None:
                m.uuid, m.profile = lm.uuid, lm.profile


def build_machine(cap: Capture, hostname: str, source: str) -> SimMachine:
    """Build the simulated machine from a format-neutral capture.

    Raises:
        ValueError: the capture holds no GPU.
    """
    if not cap.gpus:
        raise ValueError(f"{source}: no GPU found in this nvidia-smi output")
    driver = cap.driver_version or "550.54.15"
    machine = SimMachine(
        hostname=hostname,
        driver_version=driver,
        cuda_driver_version=_cuda_int(cap.cuda_version) or 12040,
        source=source,
    )
    for index, g in enumerate(cap.gpus):
        machine.gpus.append(_build_gpu(index, g, hostname))
    return machine


def _name_memory_mib(name: str) -> int | None:
    m = re.search(r"(\d+)\s*GB", name, flags=re.I)
    return int(m.group(1)) * 1024 if m else None


def _build_gpu(index: int, g: GpuRecord, hostname: str) -> SimGpu:
    model = models.by_name(g.name)
    arch = models.arch_from_text(g.arch_text, g.name)
    uuid = g.uuid or derived_gpu_uuid(hostname, index, g.bus_id or "", g.name)
    total = (
        g.memory_total_mib
        if g.memory_total_mib is not None
        else (model.memory_total_mib if model else _name_memory_mib(g.name))
    )
    gpu = SimGpu(
        index=index,
        uuid=uuid,
        name=g.name,
        pci_bus_id=g.bus_id or f"00000000:{index + 1:02X}:00.0",
        memory_total_mib=total,
        memory_reserved_mib=g.memory_reserved_mib
        if g.memory_reserved_mib is not None
        else (model.memory_reserved_mib if model else 0),
        memory_used_mib=g.memory_used_mib
        if g.memory_used_mib is not None
        else (0.0 if g.memory_total_mib is None else None),
        sm_count=model.sm_count if model else 0,
        arch=arch,
        gpm=model.gpm if model else arch in (models.ARCH_HOPPER, models.ARCH_BLACKWELL),
        mig_capable=g.mig_current is not None or (model.mig_capable if model else False),
        mig_current=bool(g.mig_current),
        mig_pending=bool(g.mig_pending if g.mig_pending is not None else g.mig_current),
        temperature_c=Script(g.temperature_c),
        power_w=Script(g.power_w),
        power_limit_w=g.power_limit_w if g.power_limit_w is not None else (model.power_limit_w if model else None),
        ecc=bool(g.ecc_enabled) if g.ecc_enabled is not None else (model.ecc if model else False),
        ecc_volatile_uncorrected=g.ecc_uncorrected or 0,
        utilization_gpu_pct=Script(g.util_gpu if g.util_gpu is not None else 0),
        utilization_memory_pct=Script(g.util_mem if g.util_mem is not None else 0),
        clock_event_mask=g.clock_mask,
        pci_device_id=model.pci_device_id if model else 0x000010DE,
        cuda_capability=model.cuda_capability if model else (0, 0),
        processes=list(g.processes),
    )
    if gpu.mig_current:
        gpu.mig_devices = _build_migs(model, gpu, g.migs)
    return gpu


def _build_migs(model: models.GpuModel | None, gpu: SimGpu, recs: list[MigRecord]) -> list[SimMigDevice]:
    one_slice_sm = None
    if model is not None:
        one = next((p for p in model.mig_profiles if p.slices == 1 and "+" not in p.name), None)
        one_slice_sm = one.sm_count if one else None
    if one_slice_sm is None:
        known = [r.sm_count for r in recs if r.sm_count]
        one_slice_sm = models.ONE_SLICE_SMS.get(gpu.arch) or (min(known) if known else 1)
    next_gi = 1
    by_gi: dict[int, list[MigRecord]] = {}
    for r in recs:
        if r.gi_id is None:  # an -L listing: assign ids, CI splits of one GI follow each other
            split = models.ci_slices(r.profile or "")
            prev = recs[recs.index(r) - 1] if recs.index(r) > 0 else None
            if (
                split is not None
                and prev is not None
                and prev.profile
                and models.ci_slices(prev.profile) is not None
                and models.gi_profile_name(prev.profile) == models.gi_profile_name(r.profile or "")
                and prev.gi_id is not None
            ):
                r.gi_id, r.ci_id = prev.gi_id, (prev.ci_id or 0) + 1
            else:
                r.gi_id, r.ci_id = next_gi, 0
                next_gi += 1
        else:
            next_gi = max(next_gi, r.gi_id + 1)
        by_gi.setdefault(r.gi_id, []).append(r)
    out: list[SimMigDevice] = []
    for r in recs:
        assert r.gi_id is not None
        ci = r.ci_id if r.ci_id is not None else 0
        uuid = r.uuid or derived_mig_uuid(gpu.uuid, r.gi_id, ci)
        profile = r.profile or _infer_name(model, gpu, r, by_gi[r.gi_id], one_slice_sm)
        gi_prof = model.profile(profile) if model else None
        mem_total = r.memory_total_mib
        if mem_total is None:
            mem_total = gi_prof.memory_mib if gi_prof else (_name_memory_mib(profile.rsplit(".", 1)[-1].upper()) or 0)
        sm = r.sm_count
        if sm is None and gi_prof is None:
            ci_sl = models.ci_slices(profile) or int(models.gi_profile_name(profile).split("g", 1)[0])
            sm = ci_sl * one_slice_sm
        dev = mig_device(
            model if gi_prof else None, r.index, uuid, profile, r.gi_id, ci, sm, mem_total, r.memory_used_mib or 0.0
        )
        out.append(dev)
    return out


def _infer_name(
    model: models.GpuModel | None, gpu: SimGpu, rec: MigRecord, members: list[MigRecord], one_slice_sm: int
) -> str:
    """The ``nvidia-smi -L`` profile name of a MIG device seen only in ``-q`` output."""
    mem = rec.memory_total_mib or 0
    gpu_mem = gpu.memory_total_mib or mem * 8
    if len(members) == 1:
        return models.infer_profile(model, rec.sm_count or 0, mem, gpu_mem, one_slice_sm, gpu.name).name
    ci_slices = [max(1, round((m.sm_count or one_slice_sm) / one_slice_sm)) for m in members]
    need = sum(ci_slices)
    gi_name = None
    if model is not None:
        fits = [
            p for p in model.mig_profiles if "+" not in p.name and abs(p.memory_mib - mem) <= 256 and p.slices >= need
        ]
        if fits:
            gi_name = min(fits, key=lambda p: p.slices).name
    if gi_name is None:
        gi_name = models.infer_profile(None, need * one_slice_sm, mem, gpu_mem, one_slice_sm, gpu.name).name
    own = max(1, round((rec.sm_count or one_slice_sm) / one_slice_sm))
    return f"{own}c.{gi_name}"


__all__ = [
    "build_machine",
    "capture_from_list",
    "capture_from_q_text",
    "capture_from_table",
    "capture_from_xml",
    "list_lines",
    "merge_list",
    "parse_q_tree",
    "q_block",
    "table_block",
]
