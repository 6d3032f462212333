"""Immutable, timestamped snapshots of a node's GPUs, MIG devices and GPU processes.

Everything above ``labgang.agent.nvml`` sees the node through these frozen
dataclasses. A value NVML could not give is an :class:`Unavailable` (with the
reason and, when there was one, the NVML error code), never ``0``.

``NodeInventory.to_dict()`` is the documented JSON schema of
``labgang nodes --local --json``, the agent→coordinator wire format and what the
TUI reads. Units are in the field names (``*_bytes``, ``*_pct``, ``*_w``,
``*_c``); ``timestamp`` is unix seconds. An unavailable field is written as
``null`` with a sibling ``"<field>_unavailable": "<reason>"`` and, when NVML gave
an error code, ``"<field>_nvml_error": <code>``. Each GPU object also carries
``"warnings"`` (:meth:`GpuInfo.warnings`, derived, ignored by ``from_dict``).
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from labgang.agent.nvml.backend import NvmlBackend

REASONS = ("unsupported", "no_permission", "gpu_lost", "error", "unknown")

#: NVML's value for "no MIG GPU/compute instance" in process rows (nvml.h ``nvmlProcessInfo_v2_t``).
NO_INSTANCE = 0xFFFFFFFF


@dataclass(frozen=True)
class Unavailable:
    """A field NVML could not give.

    Attributes:
        reason: one of ``"unsupported"`` (NOT_SUPPORTED, FUNCTION_NOT_FOUND),
            ``"no_permission"`` (NO_PERMISSION), ``"gpu_lost"`` (GPU_IS_LOST),
            ``"error"`` (any other NVML error) or ``"unknown"`` (the driver
            reported no value, e.g. ``usedGpuMemory`` = NVML_VALUE_NOT_AVAILABLE).
        code: the NVML return code (``NVMLError.value``), or None.

    Raises:
        ValueError: ``reason`` is not one of the allowed values.
    """

    reason: str
    code: int | None = None

    def __post_init__(self) -> None:
        if self.reason not in REASONS:
            raise ValueError(f"Unavailable.reason must be one of {', '.join(REASONS)}; got {self.reason!r}")

    def __str__(self) -> str:
        return "n/a"


def is_known(value: Any) -> bool:
    """True when ``value`` is neither None nor :class:`Unavailable`."""
    return value is not None and not isinstance(value, Unavailable)


# --------------------------------------------------------------------------- dataclasses


@dataclass(frozen=True)
class ProcessInfo:
    """One compute process NVML shows on a device.

    Attributes:
        pid: process id as NVML reports it (host PID namespace).
        used_memory_bytes: device memory used (bytes) or ``Unavailable("unknown")``
            when NVML reports ``usedGpuMemory`` as None.
        gi_id: GPU instance id, or None when the GPU is not in MIG mode (NVML 0xFFFFFFFF).
        ci_id: compute instance id, or None likewise.
        sm_pct: the process's share of SM time over the last sample, percent
            (``nvmlDeviceGetProcessUtilization``), or ``Unavailable`` where NVML has no per-process figure.

    Host facts, filled in by the agent (``labgang.agent.procfacts``, psutil); None where the OS
    would not tell (the process is gone, or belongs to someone the agent may not inspect):

        user: login name of the process's real uid.
        command: its command line, words joined by spaces (cut to 512 characters).
        cpu_pct: CPU use since the agent's previous report, percent of one core (None on first sight).
        rss_bytes: resident host memory, bytes.
        started_at: when it started, unix seconds.
        job: the labgang job it belongs to (a rank or a descendant of one); None for a process
            labgang did not start.
        rank: the rank of ``job`` it belongs to.
        alive: False when the OS has no such process (a context NVML still lists), True when it
            has, None when nobody looked (an inventory straight from NVML, an older agent).
        mps_server: set on labgang's own MPS server of a card (the control daemon the agent
            started for one user's MPS ranks there, ``agent/mps.py``): that user's login name;
            None for every other process. Such a process is no one's foreign process.
        mps_jobs: the jobs (ids people see) whose MPS ranks that server serves; () otherwise.
    """

    pid: int
    used_memory_bytes: int | Unavailable
    gi_id: int | None = None
    ci_id: int | None = None
    sm_pct: float | Unavailable = Unavailable("unsupported")
    user: str | None = None
    command: str | None = None
    cpu_pct: float | None = None
    rss_bytes: int | None = None
    started_at: float | None = None
    job: str | None = None
    rank: int | None = None
    alive: bool | None = None
    mps_server: str | None = None
    mps_jobs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Sharer:
    """One rank sharing a GPU (``--shards``/``--mps``), as its node's agent granted it.

    Attributes:
        job: the labgang job id people see. rank: the global rank.
        kind: ``"shard"`` (time-sliced) or ``"mps"``.
        shards: shards of the card it holds (``shard``; 0 for ``mps``).
        sm_percent: its share of the card's SMs (``mps``; None for ``shard``).
        gpu_mem_bytes: its ``--gpu-mem`` budget, bytes, or None.
        used_memory_bytes: device memory its processes use on the card now (MPS clients
            included), bytes; 0 when NVML shows none of them.
    """

    job: str
    rank: int
    kind: str
    shards: int = 0
    sm_percent: int | None = None
    gpu_mem_bytes: int | None = None
    used_memory_bytes: int = 0


@dataclass(frozen=True)
class MigDeviceInfo:
    """One MIG device (a compute instance inside a GPU instance) of a MIG-enabled GPU.

    Attributes:
        uuid: ``MIG-…`` UUID (``nvmlDeviceGetUUID`` on the MIG handle).
        index: MIG device index on its parent (``nvmlDeviceGetMigDeviceHandleByIndex``).
        profile: profile name as ``nvidia-smi -L`` prints it, e.g. ``1g.10gb`` or ``1c.3g.71gb``.
        gi_id: GPU instance id (``nvmlDeviceGetGpuInstanceId``).
        ci_id: compute instance id (``nvmlDeviceGetComputeInstanceId``).
        memory_total_bytes: memory of the GPU instance (shared by its compute instances), bytes.
        memory_used_bytes: used memory of the GPU instance, bytes.
        sm_count: streaming multiprocessors (``nvmlDeviceGetAttributes().multiprocessorCount``).
        parent_uuid: UUID of the parent GPU.
        processes: compute processes on this MIG device.
        sm_active_pct: GPM SM utilisation of the GPU instance, percent (Hopper and later).
    """

    uuid: str | Unavailable
    index: int
    profile: str | Unavailable
    gi_id: int | Unavailable
    ci_id: int | Unavailable
    memory_total_bytes: int | Unavailable
    memory_used_bytes: int | Unavailable
    sm_count: int | Unavailable
    parent_uuid: str | Unavailable
    processes: tuple[ProcessInfo, ...] | Unavailable = ()
    sm_active_pct: float | Unavailable = Unavailable("unsupported")


def throttle_kind(reason: str) -> str | None:
    """``"thermal"``, ``"power"`` or None for one clock-event reason name
    (``nvmlDeviceGetCurrentClocksEventReasons``).

    Names are those of ``nvmlClocksEventReason*`` in snake case (``sw_thermal_slowdown``,
    ``hw_power_brake_slowdown``, ``sw_power_cap``...); ``hw_slowdown`` (either cause) counts
    as thermal. Idle, application clocks, sync boost and display clocks are not throttling.
    """
    r = reason.lower().replace("-", "_")
    if "thermal" in r:
        return "thermal"
    if "power" in r:
        return "power"
    if r.endswith("hw_slowdown") or r == "hwslowdown":
        return "thermal"
    return None


def held_at_power_cap_only(reasons: tuple[str, ...]) -> bool:
    """True when the only throttling reason among ``reasons`` is ``sw_power_cap``: the driver holds
    the clocks at the power cap, which a GPU running flat out does all the time (a real H200 under
    large matrix products reports it in every sample at about 510 W of its 700 W limit,
    ``tests/fixtures/device-h200/run-big.json``). Not a fault: shown, never warned of."""
    throttling = {r.lower().replace("-", "_") for r in reasons if throttle_kind(r)}
    return throttling == {"sw_power_cap"}


@dataclass(frozen=True)
class GpuInfo:
    """One physical GPU.

    Attributes:
        index: NVML index (not the CUDA ordinal; look devices up by UUID).
        uuid: ``GPU-…`` UUID.
        name: product name, e.g. ``NVIDIA H100 80GB HBM3``.
        pci_bus_id: e.g. ``00000000:18:00.0``.
        memory_total_bytes, memory_used_bytes, memory_free_bytes: bytes, from
            ``nvmlDeviceGetMemoryInfo`` v2 where the driver has it (reserved memory not in used).
        utilization_gpu_pct: percent of time a kernel ran (``nvmlDeviceGetUtilizationRates().gpu``).
        utilization_memory_pct: percent of time memory was read/written.
        sm_active_pct: GPM ``SM_UTIL``, percent of SMs busy (Hopper and later).
        sm_occupancy_pct: GPM ``SM_OCCUPANCY``, percent of warps resident vs theoretical maximum.
        temperature_c: GPU core temperature, °C.
        power_w: power draw, W (``nvmlDeviceGetPowerUsage`` mW / 1000).
        power_limit_w: enforced power limit, W.
        clock_event_reasons: active clock-event (throttle) reasons, e.g. ``("sw_power_cap",)``.
        ecc_volatile_uncorrected: volatile uncorrected ECC error count.
        mig_mode_current: MIG mode now; None when the GPU cannot do MIG.
        mig_mode_pending: MIG mode after the next GPU reset; None when the GPU cannot do MIG.
        processes: compute processes on the whole GPU (all instances in MIG mode).
        mig_devices: MIG devices when MIG mode is current.
        numa_node: the NUMA node closest to the GPU (``nvmlDeviceGetMemoryAffinity`` with
            ``NVML_AFFINITY_SCOPE_NODE``, one node set; sysfs ``numa_node`` on a real driver
            without it). See ``docs/topology.md``.
        cpu_affinity: the CPUs closest to the GPU, ascending (``nvmlDeviceGetCpuAffinity``;
            sysfs ``local_cpulist`` on a real driver without it).
        mps_processes: the MPS clients on the GPU (``nvmlDeviceGetMPSComputeRunningProcesses_v3``),
            which ``processes`` does not list (it shows their ``nvidia-cuda-mps-server``, holding
            their memory); read only when ``processes`` lists any. ``()`` = none.
        sharers: the ranks sharing this GPU and what each was granted (filled in by the agent,
            ``agent/sharers.py``; ``()`` = none, or an inventory straight from NVML).
    """

    index: int
    uuid: str | Unavailable
    name: str | Unavailable
    pci_bus_id: str | Unavailable
    memory_total_bytes: int | Unavailable
    memory_used_bytes: int | Unavailable
    memory_free_bytes: int | Unavailable
    utilization_gpu_pct: float | Unavailable
    utilization_memory_pct: float | Unavailable
    sm_active_pct: float | Unavailable
    sm_occupancy_pct: float | Unavailable
    temperature_c: float | Unavailable
    power_w: float | Unavailable
    power_limit_w: float | Unavailable
    clock_event_reasons: tuple[str, ...] | Unavailable
    ecc_volatile_uncorrected: int | Unavailable
    mig_mode_current: bool | Unavailable | None
    mig_mode_pending: bool | Unavailable | None
    processes: tuple[ProcessInfo, ...] | Unavailable = ()
    mig_devices: tuple[MigDeviceInfo, ...] = ()
    numa_node: int | Unavailable = Unavailable("unknown")
    cpu_affinity: tuple[int, ...] | Unavailable = Unavailable("unknown")
    mps_processes: tuple[ProcessInfo, ...] | Unavailable = ()
    sharers: tuple[Sharer, ...] = ()

    @property
    def lost(self) -> bool:
        """True when NVML reported the GPU as fallen off the bus (GPU_IS_LOST)."""
        return any(
            isinstance(getattr(self, f.name), Unavailable) and getattr(self, f.name).reason == "gpu_lost"
            for f in dataclasses.fields(self)
        )

    @property
    def mig_enabled(self) -> bool:
        """True when MIG mode is current (the GPU is never handed out whole then)."""
        return self.mig_mode_current is True

    def warnings(self) -> tuple[str, ...]:
        """Short human warnings for this GPU (MIG pending, lost, throttled, ECC errors, held memory).

        Throttled means a thermal, hardware-slowdown or power-brake reason (:func:`throttle_kind`);
        clocks held at the power cap alone (:func:`held_at_power_cap_only`) are no warning.

        Returns:
            tuple of short strings, e.g. ``("mig pending enable (reset needed)",)``.
        """
        out: list[str] = []
        if self.lost:
            out.append("gpu lost")
        cur, pend = self.mig_mode_current, self.mig_mode_pending
        if isinstance(cur, bool) and isinstance(pend, bool) and cur != pend:
            out.append(f"mig pending {'enable' if pend else 'disable'} (reset needed)")
        if cur is True and not self.mig_devices:
            out.append("mig enabled, no instances")
        if isinstance(self.clock_event_reasons, tuple):
            bad = [r for r in self.clock_event_reasons if throttle_kind(r)]
            if bad and not held_at_power_cap_only(self.clock_event_reasons):
                out.append("throttled: " + ",".join(bad))
        if isinstance(self.ecc_volatile_uncorrected, int) and self.ecc_volatile_uncorrected > 0:
            out.append(f"ecc errors: {self.ecc_volatile_uncorrected}")
        return tuple(out)


#: PCIe common-ancestor levels (``nvmlDeviceGetTopologyCommonAncestor``), closest first, as
#: ``nvidia-smi topo -m`` names them; "internal" is two GPUs on one board (NVML_TOPOLOGY_INTERNAL).
PCIE_LEVELS = ("internal", "PIX", "PXB", "PHB", "NODE", "SYS")


@dataclass(frozen=True)
class GpuLink:
    """How two GPUs of one node are connected (``docs/topology.md``).

    Attributes:
        gpu_a: NVML index of the first GPU (the lower index).
        gpu_b: NVML index of the second GPU.
        pcie: the closest PCIe common ancestor, one of :data:`PCIE_LEVELS`
            (``nvmlDeviceGetTopologyCommonAncestor``): "PIX" same PCIe switch, "PXB" several
            switches, "PHB" one host bridge, "NODE" one NUMA node, "SYS" across sockets.
        nvlinks: active NVLinks between the two (direct links counted through
            ``nvmlDeviceGetNvLinkState`` + ``nvmlDeviceGetNvLinkRemotePciInfo``; links through
            NVSwitches when ``nvmlDeviceGetP2PStatus(..., NVML_P2P_CAPS_INDEX_NVLINK)`` is OK);
            0 when both GPUs have NVLink but none joins them.
    """

    gpu_a: int
    gpu_b: int
    pcie: str | Unavailable
    nvlinks: int | Unavailable

    @property
    def link_class(self) -> str:
        """``"NV<n>"`` when NVLinks join them, else the PCIe level, else ``"n/a"`` (``nvidia-smi topo -m`` words)."""
        if isinstance(self.nvlinks, int) and self.nvlinks > 0:
            return f"NV{self.nvlinks}"
        return self.pcie if isinstance(self.pcie, str) else "n/a"


@dataclass(frozen=True)
class AllocatableDevice:
    """A device the coordinator may hand to one rank.

    Attributes:
        uuid: ``GPU-…`` (whole GPU) or ``MIG-…`` (MIG device) UUID.
        resource: ``"gpu"`` or ``"mig-<profile>"`` (e.g. ``"mig-1g.10gb"``).
        model: the GPU product name.
        gpu_index: NVML index of the (parent) GPU.
        parent_uuid: parent GPU UUID for MIG devices, None for whole GPUs.
    """

    uuid: str
    resource: str
    model: str
    gpu_index: int
    parent_uuid: str | None = None


@dataclass(frozen=True)
class NodeInventory:
    """One consistent snapshot of a node's GPUs.

    Attributes:
        hostname: node name.
        timestamp: when the snapshot was taken, unix seconds.
        driver_version: ``nvmlSystemGetDriverVersion``, e.g. ``"565.57.01"``.
        nvml_version: ``nvmlSystemGetNVMLVersion``.
        cuda_driver_version: ``nvmlSystemGetCudaDriverVersion``, e.g. ``12070``.
        gpus: the GPUs in NVML index order.
        links: one :class:`GpuLink` per GPU pair (index order), () when the node has one GPU
            or its GPUs could not be opened.
        host_cpus: logical CPUs jobs may use: the host's minus the agent's ``reserve_cpus``
            (``agent/hostres.py``); None when not read (straight from NVML, an older agent).
        host_memory: host memory jobs may use, bytes: total minus ``reserve_memory``; None when not read.
    """

    hostname: str
    timestamp: float
    driver_version: str | Unavailable
    nvml_version: str | Unavailable
    cuda_driver_version: int | Unavailable
    gpus: tuple[GpuInfo, ...] = ()
    links: tuple[GpuLink, ...] = ()
    host_cpus: int | None = None
    host_memory: int | None = None

    def link(self, a: int, b: int) -> GpuLink | None:
        """The link between GPUs of NVML index ``a`` and ``b`` (either order), or None."""
        lo, hi = min(a, b), max(a, b)
        for link in self.links:
            if (link.gpu_a, link.gpu_b) == (lo, hi):
                return link
        return None

    def allocatable(self) -> tuple[AllocatableDevice, ...]:
        """Devices that can be given to ranks.

        Whole GPUs not in MIG mode (resource ``"gpu"``) and MIG devices of GPUs in
        MIG mode (resource ``"mig-<profile>"``). A GPU whose MIG mode is current is
        never listed whole; devices whose UUID NVML could not read are left out.

        Returns:
            tuple of :class:`AllocatableDevice` in GPU index, then MIG index order.
        """
        out: list[AllocatableDevice] = []
        for gpu in self.gpus:
            if not isinstance(gpu.uuid, str):
                continue
            model = gpu.name if isinstance(gpu.name, str) else ""
            if gpu.mig_mode_current is True:
                for mig in gpu.mig_devices:
                    if isinstance(mig.uuid, str) and isinstance(mig.profile, str):
                        out.append(AllocatableDevice(mig.uuid, f"mig-{mig.profile}", model, gpu.index, gpu.uuid))
            elif not isinstance(gpu.mig_mode_current, Unavailable):
                out.append(AllocatableDevice(gpu.uuid, "gpu", model, gpu.index, None))
        return tuple(out)

    def device_pids(self) -> dict[str, frozenset[int]]:
        """PIDs NVML shows on each allocatable device, but labgang's own MPS servers (marked
        ``mps_server`` by the agent): they belong to the MPS ranks holding the card.

        Returns:
            ``{uuid: frozenset(pids)}`` for every device of :meth:`allocatable`: a MIG
            device's own processes, a whole GPU's processes.
        """
        by_uuid: dict[str, frozenset[int]] = {}
        for gpu in self.gpus:
            by_uuid[gpu.uuid if isinstance(gpu.uuid, str) else ""] = _pids(gpu.processes) | _pids(gpu.mps_processes)
            for mig in gpu.mig_devices:
                if isinstance(mig.uuid, str):
                    by_uuid[mig.uuid] = _pids(mig.processes)
        return {dev.uuid: by_uuid.get(dev.uuid, frozenset()) for dev in self.allocatable()}

    def device_memory(self) -> dict[str, list[tuple[int, int | None]]]:
        """(pid, used bytes or None when NVML cannot tell) of every process on each whole GPU,
        MPS clients included (``agent/supervisor/budgets.py`` sums them per rank)."""
        out: dict[str, list[tuple[int, int | None]]] = {}
        for gpu in self.gpus:
            if not isinstance(gpu.uuid, str):
                continue
            rows = out.setdefault(gpu.uuid, [])
            for procs in (gpu.processes, gpu.mps_processes):
                if not isinstance(procs, Unavailable):
                    rows.extend((p.pid, _bytes(p.used_memory_bytes)) for p in procs)
        return out

    def find(self, uuid: str) -> GpuInfo | MigDeviceInfo | None:
        """The GPU or MIG device with this UUID, or None."""
        for gpu in self.gpus:
            if gpu.uuid == uuid:
                return gpu
            for mig in gpu.mig_devices:
                if mig.uuid == uuid:
                    return mig
        return None

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready dict (``labgang nodes --local --json`` schema, see module docstring)."""
        return _to_dict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeInventory:
        """Rebuild a snapshot from :meth:`to_dict` output; ``from_dict(x.to_dict()) == x``.

        Raises:
            ValueError: a required field is missing or has the wrong type (the message names it).
        """
        return _from_dict(cls, data, "inventory")


def _bytes(value: int | Unavailable) -> int | None:
    return value if isinstance(value, int) else None


def _pids(processes: tuple[ProcessInfo, ...] | Unavailable) -> frozenset[int]:
    if isinstance(processes, Unavailable):
        return frozenset()
    return frozenset(p.pid for p in processes if p.mps_server is None)  # labgang's MPS server is no one's process


# --------------------------------------------------------------------------- (de)serialisation

_NESTED: dict[tuple[type, str], type] = {
    (NodeInventory, "gpus"): GpuInfo,
    (NodeInventory, "links"): GpuLink,
    (GpuInfo, "processes"): ProcessInfo,
    (GpuInfo, "mps_processes"): ProcessInfo,
    (GpuInfo, "sharers"): Sharer,
    (GpuInfo, "mig_devices"): MigDeviceInfo,
    (MigDeviceInfo, "processes"): ProcessInfo,
}


def _to_dict(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, Unavailable):
            out[f.name] = None
            out[f"{f.name}_unavailable"] = value.reason
            if value.code is not None:
                out[f"{f.name}_nvml_error"] = value.code
        elif isinstance(value, tuple):
            out[f.name] = [_to_dict(v) if dataclasses.is_dataclass(v) else v for v in value]
        else:
            out[f.name] = value
    if isinstance(obj, GpuInfo):
        out["warnings"] = list(obj.warnings())
        for name in ("mps_processes", "sharers"):
            if out[name] == []:
                del out[name]  # nothing shared: the schema of a node without sharing is unchanged
    if isinstance(obj, ProcessInfo) and obj.mps_server is None and not obj.mps_jobs:
        del out["mps_server"], out["mps_jobs"]  # any process but labgang's MPS server: schema unchanged
    if isinstance(obj, GpuLink):
        out["link_class"] = obj.link_class
    return out


@functools.cache
def _field_specs(cls: type) -> tuple[tuple[str, bool, str, type | None], ...]:
    """Per field of the dataclass ``cls``: its name, whether it has a default, the key that says
    it was unavailable (``<name>_unavailable``) and the class of its nested items (:data:`_NESTED`).
    Read once per class: ``labgang top`` parses every GPU of every node on each refresh, and
    ``dataclasses.fields`` builds its tuple anew on each call."""
    return tuple(
        (
            f.name,
            f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING,
            f"{f.name}_unavailable",
            _NESTED.get((cls, f.name)),
        )
        for f in dataclasses.fields(cls)
    )


def _from_dict(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected an object, got {type(data).__name__}")
    kwargs: dict[str, Any] = {}
    for name, optional, unavailable, nested in _field_specs(cls):
        if name not in data:
            if optional:
                continue
            raise ValueError(f"{where}.{name}: missing field")
        value = data[name]
        if value is None and unavailable in data:
            kwargs[name] = Unavailable(data[unavailable], data.get(f"{name}_nvml_error"))
            continue
        if nested is not None:
            if not isinstance(value, list):
                raise ValueError(f"{where}.{name}: expected a list, got {type(value).__name__}")
            kwargs[name] = tuple(_from_dict(nested, v, f"{where}.{name}[{i}]") for i, v in enumerate(value))
        elif isinstance(value, list):
            kwargs[name] = tuple(value)
        else:
            kwargs[name] = value
    return cls(**kwargs)


def read_inventory(backend: NvmlBackend, *, hostname: str | None = None, now: float | None = None) -> NodeInventory:
    """Read one snapshot of the node's GPUs through an NVML backend.

    Args:
        backend: what :func:`labgang.agent.nvml.open_backend` returned (``pynvml``,
            a ``SimulatedNvml`` or a recorder); already initialised.
        hostname: node name; defaults to ``socket.gethostname()`` (or the simulated
            machine's hostname).
        now: snapshot timestamp in unix seconds; defaults to ``time.time()``.

    Returns:
        A :class:`NodeInventory`. NVML errors become :class:`Unavailable` fields;
        only a failing ``nvmlDeviceGetCount`` yields a snapshot with no GPUs.
    """
    from labgang.agent.nvml.read import read_node  # the reader lives beside the one pynvml seam

    return read_node(backend, hostname=hostname, now=now)


__all__ = [
    "NO_INSTANCE",
    "PCIE_LEVELS",
    "REASONS",
    "AllocatableDevice",
    "GpuInfo",
    "GpuLink",
    "MigDeviceInfo",
    "NodeInventory",
    "ProcessInfo",
    "Unavailable",
    "is_known",
    "read_inventory",
]
