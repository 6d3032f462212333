"""Read a node's GPU topology through any NVML backend: links between GPU pairs, NUMA node and CPUs.

Calls (pynvml names), all through :func:`labgang.agent.nvml.query.query`, so a call the driver
or product does not support is an ``Unavailable`` on that fact, never a guess:

* per GPU: ``nvmlDeviceGetMemoryAffinity(h, n, NVML_AFFINITY_SCOPE_NODE)`` (the NUMA node set
  closest to the GPU; one node → ``numa_node``), ``nvmlDeviceGetCpuAffinity(h, n)`` (the CPU
  mask closest to it), and for ``link`` = 0, 1, … ``nvmlDeviceGetNvLinkState`` (stops at
  ``INVALID_ARGUMENT``/``NOT_SUPPORTED``: no such link) with ``nvmlDeviceGetNvLinkRemotePciInfo``
  for each active link;
* per GPU pair: ``nvmlDeviceGetTopologyCommonAncestor`` and, when both GPUs have active links
  that do not end on the other GPU (NVSwitch), ``nvmlDeviceGetP2PStatus(a, b,
  NVML_P2P_CAPS_INDEX_NVLINK)``.

On the real driver (``pynvml`` itself, or a recorder around it) a NUMA node or CPU list that
NVML does not give is read from sysfs (``/sys/bus/pci/devices/<bus id>/numa_node`` and
``local_cpulist``); simulated backends never look at this host's sysfs.
"""

from __future__ import annotations

import types
from pathlib import Path
from typing import Any

from labgang.agent.inventory import GpuLink, Unavailable
from labgang.agent.nvml.query import INVALID_ARGUMENT, NOT_SUPPORTED, query

#: ``nvmlGpuTopologyLevel_t`` values → :data:`labgang.agent.inventory.PCIE_LEVELS` names.
TOPOLOGY_LEVELS = {0: "internal", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
#: Words of the CPU mask asked from NVML (64 CPUs each): 1024 CPUs.
CPU_SET_WORDS = 16
#: Words of the NUMA node mask asked from NVML: 64 nodes.
NODE_SET_WORDS = 1
NVML_AFFINITY_SCOPE_NODE = 0
NVML_P2P_CAPS_INDEX_NVLINK = 2
NVML_P2P_STATUS_OK = 0
SYSFS_PCI = Path("/sys/bus/pci/devices")


def mask_bits(words: Any) -> tuple[int, ...]:
    """The set bit positions of a mask given as 64-bit words (a ctypes array or a list), ascending."""
    out: list[int] = []
    for w, word in enumerate(words):
        value = int(getattr(word, "value", word))
        bit = 0
        while value:
            if value & 1:
                out.append(w * 64 + bit)
            value >>= 1
            bit += 1
    return tuple(out)


def parse_cpulist(text: str) -> tuple[int, ...]:
    """``"0-3,8,10-11"`` → ``(0, 1, 2, 3, 8, 10, 11)`` (the kernel's cpulist format).

    Raises:
        ValueError: a part is not ``N`` or ``N-M`` with N <= M.
    """
    cpus: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        if not lo.isdigit() or (sep and not hi.isdigit()):
            raise ValueError(f"cpu list: {text!r} is not a list of CPUs like 0-3,8")
        first, last = int(lo), int(hi) if sep else int(lo)
        if last < first:
            raise ValueError(f"cpu list: range {part!r} runs backwards")
        cpus.update(range(first, last + 1))
    return tuple(sorted(cpus))


def format_cpulist(cpus: tuple[int, ...] | list[int]) -> str:
    """``(0, 1, 2, 3, 8)`` → ``"0-3,8"`` (inverse of :func:`parse_cpulist`)."""
    parts: list[str] = []
    ordered = sorted(set(cpus))
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def _is_real_driver(backend: Any) -> bool:
    inner = getattr(backend, "_backend", backend)
    return isinstance(inner, types.ModuleType)


def _sysfs_dir(bus_id: str) -> Path:
    """``00000000:18:00.0`` → ``/sys/bus/pci/devices/0000:18:00.0`` (sysfs uses a 4-digit domain)."""
    domain, _, rest = bus_id.lower().partition(":")
    return SYSFS_PCI / f"{domain[-4:]:0>4}:{rest}"


def _sysfs_numa(bus_id: Any) -> int | Unavailable:
    if not isinstance(bus_id, str):
        return Unavailable("unknown")
    try:
        node = int((_sysfs_dir(bus_id) / "numa_node").read_text().strip())
    except (OSError, ValueError):
        return Unavailable("unsupported", NOT_SUPPORTED)
    return node if node >= 0 else Unavailable("unsupported", NOT_SUPPORTED)  # -1: no NUMA information


def _sysfs_cpus(bus_id: Any) -> tuple[int, ...] | Unavailable:
    if not isinstance(bus_id, str):
        return Unavailable("unknown")
    try:
        cpus = parse_cpulist((_sysfs_dir(bus_id) / "local_cpulist").read_text())
    except (OSError, ValueError):
        return Unavailable("unsupported", NOT_SUPPORTED)
    return cpus or Unavailable("unsupported", NOT_SUPPORTED)


def read_affinity(backend: Any, handle: Any, bus_id: Any) -> tuple[int | Unavailable, tuple[int, ...] | Unavailable]:
    """One GPU's NUMA node and CPU list (see the module docstring for the calls).

    Returns:
        ``(numa_node, cpus)``; either may be :class:`Unavailable`. A memory-affinity mask with
        several nodes is ``Unavailable("unknown")`` (no single node to name).
    """
    nodes = query(backend, "nvmlDeviceGetMemoryAffinity", handle, NODE_SET_WORDS, NVML_AFFINITY_SCOPE_NODE)
    numa: int | Unavailable
    if isinstance(nodes, Unavailable):
        numa = nodes
    else:
        bits = mask_bits(nodes)
        numa = bits[0] if len(bits) == 1 else Unavailable("unknown")
    mask = query(backend, "nvmlDeviceGetCpuAffinity", handle, CPU_SET_WORDS)
    cpus: tuple[int, ...] | Unavailable = mask if isinstance(mask, Unavailable) else mask_bits(mask)
    if cpus == ():
        cpus = Unavailable("unknown")
    if _is_real_driver(backend):
        if isinstance(numa, Unavailable):
            numa = _sysfs_numa(bus_id)
        if isinstance(cpus, Unavailable):
            cpus = _sysfs_cpus(bus_id)
    return numa, cpus


def _bus(value: Any) -> str:
    text = value.decode() if isinstance(value, bytes) else str(value)
    return text.strip().lower()


def _nvlink_ends(backend: Any, handle: Any) -> list[str] | Unavailable:
    """Remote PCI bus ids (lower case) of a GPU's active NVLinks; Unavailable when it has no NVLink."""
    ends: list[str] = []
    link = 0
    while True:
        state = query(backend, "nvmlDeviceGetNvLinkState", handle, link)
        if isinstance(state, Unavailable):
            if link == 0:
                return state
            if state.code in (INVALID_ARGUMENT, NOT_SUPPORTED):
                return ends  # past this GPU's last link
            return state
        if int(getattr(state, "value", state)):
            remote = query(backend, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            if isinstance(remote, Unavailable):
                return remote
            ends.append(_bus(remote.busId))
        link += 1
        if link >= int(getattr(backend, "NVML_NVLINK_MAX_LINKS", 18)):
            return ends


def read_links(backend: Any, gpus: list[tuple[int, Any, Any]]) -> tuple[GpuLink, ...]:
    """One :class:`GpuLink` per pair of the opened GPUs.

    Args:
        backend: an initialised NVML backend.
        gpus: ``(NVML index, handle, PCI bus id or Unavailable)`` of every GPU whose handle opened.
    """
    ends = {index: _nvlink_ends(backend, handle) for index, handle, _ in gpus}
    bus_of = {index: _bus(bus) if isinstance(bus, str) else None for index, _, bus in gpus}
    gpu_buses = {b for b in bus_of.values() if b is not None}
    out: list[GpuLink] = []
    for i, (a, ha, _) in enumerate(gpus):
        for b, hb, _ in gpus[i + 1 :]:
            level = query(backend, "nvmlDeviceGetTopologyCommonAncestor", ha, hb)
            pcie: str | Unavailable = (
                level if isinstance(level, Unavailable) else TOPOLOGY_LEVELS.get(int(level), Unavailable("unknown"))
            )
            nvlinks = _pair_nvlinks(backend, (ha, hb), (ends[a], ends[b]), bus_of[b], gpu_buses)
            out.append(GpuLink(a, b, pcie, nvlinks))
    return tuple(out)


def _pair_nvlinks(
    backend: Any,
    handles: tuple[Any, Any],
    ends: tuple[list[str] | Unavailable, list[str] | Unavailable],
    bus_b: str | None,
    gpu_buses: set[str],
) -> int | Unavailable:
    """NVLinks between GPUs a and b: a's links ending on b, plus NVSwitch links when P2P over NVLink is OK."""
    ends_a, ends_b = ends
    if isinstance(ends_a, Unavailable):
        return ends_a
    if isinstance(ends_b, Unavailable):
        return ends_b
    direct = sum(1 for e in ends_a if e == bus_b) if bus_b is not None else 0
    switched_a = sum(1 for e in ends_a if e not in gpu_buses)
    switched_b = sum(1 for e in ends_b if e not in gpu_buses)
    if switched_a and switched_b:
        status = query(backend, "nvmlDeviceGetP2PStatus", handles[0], handles[1], NVML_P2P_CAPS_INDEX_NVLINK)
        if isinstance(status, Unavailable):
            return status
        if int(status) == NVML_P2P_STATUS_OK:
            direct += min(switched_a, switched_b)
    return direct


__all__ = ["TOPOLOGY_LEVELS", "format_cpulist", "mask_bits", "parse_cpulist", "read_affinity", "read_links"]
