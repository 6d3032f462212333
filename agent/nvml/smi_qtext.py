"""``nvidia-smi -q`` text (``==============NVSMI LOG==============``): an indented tree, read into a
:class:`~labgang.agent.nvml.smi.Capture`.

MIG devices in ``-q`` output carry no UUID or profile name; :func:`~labgang.agent.nvml.smi.build_machine`
infers them (an ``-L`` listing, when the transcript has one, gives them: ``merge_list``).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from labgang.agent.nvml.machine import SimProcess
from labgang.agent.nvml.smi import (
    CLOCK_REASON_BITS,
    Capture,
    GpuRecord,
    MigRecord,
    integer,
    mode_enabled,
    number,
    pci_id,
)

NVSMI_LOG = "==============NVSMI LOG=============="


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
            pci_device_id=pci_id(node.text(("PCI", "Device Id"))),
            pci_sub_system_id=pci_id(node.text(("PCI", "Sub System Id"))),
        )
        fb = node.get("FB Memory Usage")
        if isinstance(fb, Node):
            g.memory_total_mib = integer(fb.text("Total"))
            g.memory_reserved_mib = integer(fb.text("Reserved"))
            g.memory_used_mib = number(fb.text("Used"))
        g.util_gpu = number(node.text(("Utilization", "Gpu"), ("Utilization", "GPU")))
        g.util_mem = number(node.text(("Utilization", "Memory")))
        g.temperature_c = number(node.text(("Temperature", "GPU Current Temp")))
        for section in ("GPU Power Readings", "Power Readings"):
            sec = node.get(section)
            if isinstance(sec, Node):
                g.power_w = number(sec.text("Power Draw", "Average Power Draw", "Instantaneous Power Draw"))
                g.power_limit_w = number(sec.text("Current Power Limit", "Enforced Power Limit", "Power Limit"))
                break
        for section in ("Clocks Event Reasons", "Clocks Throttle Reasons"):
            sec = node.get(section)
            if isinstance(sec, Node):
                for k, v in sec.entries:
                    if isinstance(v, str) and v.strip() == "Active":
                        g.clock_mask |= CLOCK_REASON_BITS.get(k.lower(), 0)
                break
        g.ecc_enabled = mode_enabled(node.text(("ECC Mode", "Current")))
        g.ecc_uncorrected = integer(
            node.text(
                ("ECC Errors", "Volatile", "DRAM Uncorrectable"), ("ECC Errors", "Volatile", "Double Bit", "Total")
            )
        )
        g.mig_current = mode_enabled(node.text(("MIG Mode", "Current")))
        g.mig_pending = mode_enabled(node.text(("MIG Mode", "Pending")))
        for slot, mig in enumerate(node.walk("MIG Device")):
            mem = mig.get("FB Memory Usage") or mig.get("Shared FB Memory Usage")
            listed = integer(mig.text("Index"))
            rec = MigRecord(
                index=listed if listed is not None else slot,
                gi_id=integer(mig.text("GPU Instance ID")),
                ci_id=integer(mig.text("Compute Instance ID")),
                sm_count=integer(mig.text(("Device Attributes", "Shared", "Multiprocessor count"))),
            )
            if isinstance(mem, Node):
                rec.memory_total_mib = integer(mem.text("Total"))
                rec.memory_used_mib = number(mem.text("Used"))
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
                    pid=int(number(current["Process ID"]) or 0),
                    used_memory_mib=number(used) if used and not used.startswith(("N/A", "Not available")) else None,
                    gi_id=integer(current.get("GPU instance ID"))
                    if number(current.get("GPU instance ID")) is not None
                    else None,
                    ci_id=integer(current.get("Compute instance ID"))
                    if number(current.get("Compute instance ID")) is not None
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
