"""GPU topology of a simulated machine and the pynvml topology calls that serve it.

:class:`SimTopology` holds what ``nvidia-smi topo -m`` shows: per GPU pair the PCIe common
ancestor and NVLink count, per GPU its NUMA node, CPUs and NVSwitch links. It comes from a
machine file (``[[link]]`` tables and ``numa_node`` / ``cpu_affinity`` / ``nvswitch_links``
GPU keys, see ``docs/topology.md``) or from a real ``nvidia-smi topo -m`` capture
(:func:`parse_topo_matrix`). :class:`TopologyModel`, a part
:class:`~labgang.agent.nvml.simulated.SimulatedNvml` holds, answers the same pynvml functions the
real driver does, with NVML's real errors where a fact is absent:

* ``nvmlDeviceGetTopologyCommonAncestor``: the pair's level, ``NOT_SUPPORTED`` when unknown
  (a ``topo -m`` cell ``NV#`` names the NVLinks, not the PCIe level);
* ``nvmlDeviceGetNvLinkState`` / ``nvmlDeviceGetNvLinkRemotePciInfo``: links ``0..n-1`` active,
  ``INVALID_ARGUMENT`` past the GPU's last link, ``NOT_SUPPORTED`` for a GPU without NVLink or
  in MIG mode ("NVLink queries are not supported for devices in MIG mode"); direct links end on
  the peer GPU's bus id, NVSwitch links on a switch's;
* ``nvmlDeviceGetP2PStatus``: ``NVML_P2P_STATUS_OK`` for NVLink when the pair has NVLinks,
  else ``NVML_P2P_STATUS_NOT_SUPPORTED``; for the other indexes OK below ``SYS``;
* ``nvmlDeviceGetMemoryAffinity`` (node scope) / ``nvmlDeviceGetCpuAffinity``: masks of the
  GPU's NUMA node and CPUs, ``NOT_SUPPORTED`` when not given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pynvml
from labgang.agent.nvml.simdevices import SimDevices, fail

if TYPE_CHECKING:  # machine.py imports this module
    from labgang.agent.nvml.machine import SimGpu

#: ``nvidia-smi topo -m`` / machine-file words → ``nvmlGpuTopologyLevel_t``.
LEVEL_VALUES = {"internal": 0, "PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}
_CELL_ALIASES = {"SOC": "SYS"}  # drivers before 396 printed SOC for SYS
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_SPLIT = re.compile(r"\t| {2,}")


@dataclass
class SimTopology:
    """A simulated node's topology; GPUs by NVML index, pairs as ``(lower, higher)``.

    Attributes:
        pcie: PCIe common ancestor per pair (a :data:`LEVEL_VALUES` key); absent = unknown.
        nvlinks: direct NVLinks per pair (absent = 0).
        nvswitch_links: per GPU, NVLinks that end on NVSwitches; two such GPUs reach each
            other over min(a, b) of them.
        numa_node: per GPU, its NUMA node; absent = unknown.
        cpus: per GPU, its CPUs (ascending); absent = unknown.
    """

    pcie: dict[tuple[int, int], str] = field(default_factory=dict)
    nvlinks: dict[tuple[int, int], int] = field(default_factory=dict)
    nvswitch_links: dict[int, int] = field(default_factory=dict)
    numa_node: dict[int, int] = field(default_factory=dict)
    cpus: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def links_of(self, gpu: int) -> list[int | None]:
        """The peer GPU index of each of ``gpu``'s NVLinks in link order; None = an NVSwitch."""
        out: list[int | None] = []
        for (a, b), n in sorted(self.nvlinks.items()):
            if gpu in (a, b):
                out.extend([b if gpu == a else a] * n)
        out.extend([None] * self.nvswitch_links.get(gpu, 0))
        return out

    def pair_nvlinks(self, a: int, b: int) -> int:
        """NVLinks joining GPUs ``a`` and ``b`` (direct plus through NVSwitches)."""
        direct = self.nvlinks.get((min(a, b), max(a, b)), 0)
        return direct + min(self.nvswitch_links.get(a, 0), self.nvswitch_links.get(b, 0))

    def check(self, gpu_count: int, where: str = "topology") -> None:
        """Validate indexes and link budgets.

        Raises:
            ValueError: a GPU index out of range, or a GPU with more NVLinks than NVML has
                (``NVML_NVLINK_MAX_LINKS``); the message names the field.
        """
        for a, b in list(self.pcie) + list(self.nvlinks):
            if not (0 <= a < b < gpu_count):
                raise ValueError(f"{where}: GPU pair ({a}, {b}) is not two different GPUs of 0..{gpu_count - 1}")
        for gpu in range(gpu_count):
            n = len(self.links_of(gpu))
            if n > pynvml.NVML_NVLINK_MAX_LINKS:
                raise ValueError(
                    f"{where}: GPU {gpu} has {n} NVLinks (nvlinks + nvswitch_links); NVML has at most "
                    f"{pynvml.NVML_NVLINK_MAX_LINKS} per GPU (give NVSwitch-connected GPUs nvswitch_links instead)"
                )


# --------------------------------------------------------------------------- nvidia-smi topo -m


def _cells(line: str) -> list[str]:
    return [t.strip() for t in _SPLIT.split(_ANSI.sub("", line)) if t.strip()]


def topo_block(text: str) -> list[str] | None:
    """The lines of an ``nvidia-smi topo -m`` matrix (header first) in ``text``, or None.

    The header is a line whose first cell is ``GPU0`` and that does not start with it (it is
    indented, by spaces or a tab); the next line's first cell is ``GPU0`` and has an ``X``.
    """
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    for i, line in enumerate(lines[:-1]):
        plain = _ANSI.sub("", line)
        head = _cells(line)
        if not head or head[0] != "GPU0" or plain[:1] not in (" ", "\t"):
            continue
        row = _cells(lines[i + 1])
        if row and row[0] == "GPU0" and "X" in row:
            end = i + 1
            while end < len(lines) and _cells(lines[end]) and not lines[end].startswith("Legend"):
                end += 1
            return lines[i:end]
    return None


def parse_topo_matrix(lines: list[str]) -> tuple[int, SimTopology]:
    """Parse a ``topo -m`` matrix (from :func:`topo_block`) into (GPU count, topology).

    NIC rows and columns are skipped. ``CPU Affinity`` gives each GPU's CPUs and ``NUMA
    Affinity`` its NUMA node when it names one node; ``N/A`` cells leave the fact unknown. When
    every GPU pair shows the same ``NV#`` (three or more GPUs), the links are NVSwitch links.

    Raises:
        ValueError: a GPU row is missing or a cell is not one of X, NV#, PIX, PXB, PHB, NODE, SYS.
    """
    header = _cells(lines[0])
    gpu_cols = [k for k, name in enumerate(header) if re.fullmatch(r"GPU\d+", name)]
    count = len(gpu_cols)
    rows: dict[int, list[str]] = {}
    for line in lines[1:]:
        cells = _cells(line)
        m = re.fullmatch(r"GPU(\d+)", cells[0]) if cells else None
        if m:
            rows[int(m.group(1))] = cells[1:]
    topo = SimTopology()
    nv: dict[tuple[int, int], int] = {}
    for i in range(count):
        if i not in rows:
            raise ValueError(f"nvidia-smi topo -m: no row for GPU{i}")
        row = rows[i]
        for k, name in enumerate(header):
            value = row[k] if k < len(row) else "N/A"
            if name == "CPU Affinity" and value != "N/A":
                from labgang.agent.nvml.topology import parse_cpulist

                topo.cpus[i] = parse_cpulist(value)
            elif name == "NUMA Affinity" and value.isdigit():
                topo.numa_node[i] = int(value)
            elif k in gpu_cols:
                j = int(name[3:])
                if j <= i:
                    continue
                cell = _CELL_ALIASES.get(value, value)
                if cell.startswith("NV") and cell[2:].isdigit():
                    nv[(i, j)] = int(cell[2:])
                elif cell in LEVEL_VALUES:
                    topo.pcie[(i, j)] = cell
                else:
                    raise ValueError(
                        f"nvidia-smi topo -m: GPU{i}/GPU{j} cell {value!r}; allowed: X, NV#, PIX, PXB, PHB, NODE, SYS"
                    )
    pairs = count * (count - 1) // 2
    if count >= 3 and len(nv) == pairs and len(set(nv.values())) == 1:
        topo.nvswitch_links = {i: next(iter(nv.values())) for i in range(count)}
    else:
        topo.nvlinks = nv
    topo.check(count, "nvidia-smi topo -m")
    return count, topo


# --------------------------------------------------------------------------- machine files

LINK_KEYS = {"gpus", "nvlinks", "pcie"}


def topology_from_toml(links: Any, gpus: list[dict[str, Any]]) -> SimTopology | None:
    """Build the topology from ``[[link]]`` tables and GPU keys; None when the file has neither.

    Raises:
        ValueError: an invalid key or value (the message names the field and the allowed values).
    """
    from labgang.agent.nvml.topology import parse_cpulist

    if not isinstance(links, list):
        raise ValueError("link: must be an array of tables ([[link]])")
    topo = SimTopology()
    given = bool(links)
    for index, g in enumerate(gpus):
        where = f"gpu[{index}]"
        if "numa_node" in g:
            if not isinstance(g["numa_node"], int) or g["numa_node"] < 0:
                raise ValueError(f"{where}.numa_node: expected a NUMA node number >= 0; got {g['numa_node']!r}")
            topo.numa_node[index] = g["numa_node"]
        if "cpu_affinity" in g:
            try:
                topo.cpus[index] = parse_cpulist(str(g["cpu_affinity"]))
            except ValueError as exc:
                raise ValueError(f'{where}.cpu_affinity: {exc}; expected a CPU list like "0-23,48-71"') from None
        if "nvswitch_links" in g:
            if not isinstance(g["nvswitch_links"], int) or g["nvswitch_links"] < 0:
                raise ValueError(f"{where}.nvswitch_links: expected an NVLink count >= 0")
            topo.nvswitch_links[index] = g["nvswitch_links"]
        given = given or any(k in g for k in ("numa_node", "cpu_affinity", "nvswitch_links"))
    for k, link in enumerate(links):
        where = f"link[{k}]"
        unknown = sorted(set(link) - LINK_KEYS)
        if unknown:
            raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(LINK_KEYS))}")
        pair = link.get("gpus")
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(x, int) for x in pair)):
            raise ValueError(f"{where}.gpus: expected two GPU indexes, e.g. [0, 1]")
        key = (min(pair), max(pair))
        if "nvlinks" in link:
            if not isinstance(link["nvlinks"], int) or link["nvlinks"] < 0:
                raise ValueError(f"{where}.nvlinks: expected an NVLink count >= 0")
            topo.nvlinks[key] = link["nvlinks"]
        if "pcie" in link:
            if link["pcie"] not in LEVEL_VALUES:
                raise ValueError(f"{where}.pcie: {link['pcie']!r}; allowed: {', '.join(LEVEL_VALUES)}")
            topo.pcie[key] = link["pcie"]
    if not given:
        return None
    topo.check(len(gpus), "link")
    return topo


# --------------------------------------------------------------------------- pynvml calls


def _mask(bits: tuple[int, ...], words: int) -> Any:
    out = (pynvml.c_ulonglong * words)()
    for bit in bits:
        if bit // 64 < words:
            out[bit // 64] |= 1 << (bit % 64)
    return out


def _switch_bus(link: int) -> str:
    return f"00000000:{0xC0 + link % 4:02X}:00.0"  # four NVSwitches, links spread round-robin


class TopologyModel:
    """pynvml's topology functions over ``devices.machine.topology``.

    Args:
        devices: the machine's devices (handle look-up, the checks of every call).
    """

    def __init__(self, devices: SimDevices) -> None:
        self._devices = devices
        self.machine = devices.machine

    def _topo_gpu(self, fn: str, handle: Any) -> tuple[SimGpu, SimTopology]:
        gpu, mig = self._devices.device(fn, handle)
        topo = self.machine.topology
        if mig is not None or topo is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu, topo

    def nvmlDeviceGetTopologyCommonAncestor(self, device1: Any, device2: Any) -> int:
        """``nvmlGpuTopologyLevel_t`` of the pair; ``NOT_SUPPORTED`` when unknown, ``INVALID_ARGUMENT`` for one GPU."""
        a, topo = self._topo_gpu("nvmlDeviceGetTopologyCommonAncestor", device1)
        b, _ = self._topo_gpu("nvmlDeviceGetTopologyCommonAncestor", device2)
        if a.index == b.index:
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        level = topo.pcie.get((min(a.index, b.index), max(a.index, b.index)))
        if level is None:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(LEVEL_VALUES[str(level)])

    def nvmlDeviceGetP2PStatus(self, device1: Any, device2: Any, p2pIndex: int) -> int:
        """``nvmlGpuP2PStatus_t``: NVLink OK when NVLinks join the pair; other indexes OK below SYS."""
        a, topo = self._topo_gpu("nvmlDeviceGetP2PStatus", device1)
        b, _ = self._topo_gpu("nvmlDeviceGetP2PStatus", device2)
        if int(p2pIndex) == pynvml.NVML_P2P_CAPS_INDEX_NVLINK:
            ok = topo.pair_nvlinks(a.index, b.index) > 0 and not (a.mig_current or b.mig_current)
        else:
            ok = topo.pcie.get((min(a.index, b.index), max(a.index, b.index))) not in (None, "SYS")
        return int(pynvml.NVML_P2P_STATUS_OK if ok else pynvml.NVML_P2P_STATUS_NOT_SUPPORTED)

    def _link(self, fn: str, device: Any, link: int) -> tuple[Any, int | None]:
        gpu, topo = self._topo_gpu(fn, device)
        ends = topo.links_of(gpu.index)
        if not ends or gpu.mig_current:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= int(link) < len(ends):
            fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu, ends[int(link)]

    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        """1 for each of the GPU's links (all active); errors as in the module docstring."""
        self._link("nvmlDeviceGetNvLinkState", device, link)
        return 1

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: Any, link: int) -> Any:
        """``nvmlPciInfo_t`` of the link's far end: the peer GPU, or an NVSwitch."""
        _, peer = self._link("nvmlDeviceGetNvLinkRemotePciInfo_v2", device, link)
        info = pynvml.nvmlPciInfo_t()
        bus = _switch_bus(int(link)) if peer is None else self.machine.gpus[peer].pci_bus_id
        info.busId = bus.encode()
        info.busIdLegacy = bus[4:].encode()
        return info

    nvmlDeviceGetNvLinkRemotePciInfo_v2 = nvmlDeviceGetNvLinkRemotePciInfo

    def nvmlDeviceGetMemoryAffinity(self, handle: Any, nodeSetSize: int, scope: int) -> Any:
        """Mask of the GPU's NUMA node (either scope: one socket per node here); ``NOT_SUPPORTED`` when unknown."""
        gpu, topo = self._topo_gpu("nvmlDeviceGetMemoryAffinity", handle)
        if gpu.index not in topo.numa_node:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return _mask((topo.numa_node[gpu.index],), int(nodeSetSize))

    def nvmlDeviceGetCpuAffinity(self, handle: Any, cpuSetSize: int) -> Any:
        """Mask of the GPU's CPUs (64 per word); ``NOT_SUPPORTED`` when unknown."""
        gpu, topo = self._topo_gpu("nvmlDeviceGetCpuAffinity", handle)
        if gpu.index not in topo.cpus:
            fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return _mask(topo.cpus[gpu.index], int(cpuSetSize))


__all__ = ["LEVEL_VALUES", "SimTopology", "TopologyModel", "parse_topo_matrix", "topo_block", "topology_from_toml"]
