"""Read a :class:`~labgang.agent.inventory.NodeInventory` through any NVML backend.

Every field goes through :func:`labgang.agent.nvml.query.query`, so an NVML error is
an ``Unavailable`` on that field and the read carries on. The calls made, in order,
per GPU (pynvml names; docs/nvml.md §2–§7): ``nvmlDeviceGetHandleByIndex``, ``GetUUID``,
``GetName``, ``GetPciInfo``, ``GetMigMode``, ``GetMemoryInfo`` (v2, v1 when the driver
lacks ``_v2``), ``GetUtilizationRates``, ``GetTemperature``, ``GetPowerUsage``,
``GetEnforcedPowerLimit``, ``GetCurrentClocksEventReasons``, ``GetTotalEccErrors``,
``GetComputeRunningProcesses`` (then ``GetProcessUtilization`` and, not in MIG mode,
``GetMPSComputeRunningProcesses_v3`` when it listed any: MPS clients hide behind their server),
``nvmlGpmQueryDeviceSupport``, the NUMA/CPU affinity calls of :mod:`labgang.agent.nvml.topology`;
per GPU pair, its link calls; in MIG mode, for every slot ``0 ≤ i < GetMaxMigDeviceCount``
(``NOT_FOUND`` holes skipped, not a stop):
``GetMigDeviceHandleByIndex``, ``GetUUID``, ``GetName``, ``GetGpuInstanceId``,
``GetComputeInstanceId``, ``GetAttributes``, ``GetMemoryInfo``, ``GetComputeRunningProcesses``.
"""

from __future__ import annotations

import dataclasses
import socket
import threading
import time
import weakref
from typing import Any

from labgang.agent.inventory import (
    NO_INSTANCE,
    GpuInfo,
    MigDeviceInfo,
    NodeInventory,
    ProcessInfo,
    Unavailable,
)
from labgang.agent.nvml.backend import NvmlBackend
from labgang.agent.nvml.gpm import GpmSampler, GpmTarget, sampler_for
from labgang.agent.nvml.query import FUNCTION_NOT_FOUND, NOT_SUPPORTED, query
from labgang.agent.nvml.topology import read_affinity, read_links

MIB = 1024 * 1024

#: nvml.h ``nvmlClocksEventReason*`` bits → names used in ``GpuInfo.clock_event_reasons``.
CLOCK_EVENT_REASONS: tuple[tuple[int, str], ...] = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)


def clock_event_names(mask: int) -> tuple[str, ...]:
    """Names of the bits set in a ``nvmlDeviceGetCurrentClocksEventReasons`` mask."""
    return tuple(name for bit, name in CLOCK_EVENT_REASONS if mask & bit)


def _text(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def _map(value: Any, fn: Any) -> Any:
    return value if isinstance(value, Unavailable) else fn(value)


_missing: weakref.WeakKeyDictionary[NvmlBackend, set[str]] = weakref.WeakKeyDictionary()
_locks: weakref.WeakKeyDictionary[NvmlBackend, threading.Lock] = weakref.WeakKeyDictionary()
_locks_guard = threading.Lock()


def _lock_for(backend: NvmlBackend) -> threading.Lock:
    """One lock per backend: reads from several threads (agent loops) take turns, so each
    snapshot is consistent and the GPM sampler's kept samples are never used twice."""
    with _locks_guard:
        lock = _locks.get(backend)
        if lock is None:
            lock = _locks[backend] = threading.Lock()
        return lock


def _versioned(backend: NvmlBackend, new: str, call_new: Any, call_old: Any) -> Any:
    """Try the newer call unless this backend already said it lacks it (probe cached per backend)."""
    missing = _missing.setdefault(backend, set())
    if new not in missing:
        value = call_new()
        if not (isinstance(value, Unavailable) and value.code == FUNCTION_NOT_FOUND):
            return value
        missing.add(new)
    return call_old()


def _memory(backend: NvmlBackend, handle: Any) -> Any:
    """``nvmlDeviceGetMemoryInfo`` v2 (reserved not in used), v1 on drivers without ``_v2`` (docs/nvml.md §4)."""
    return _versioned(
        backend,
        "nvmlDeviceGetMemoryInfo_v2",
        lambda: query(backend, "nvmlDeviceGetMemoryInfo", handle, version=backend.nvmlMemory_v2),
        lambda: query(backend, "nvmlDeviceGetMemoryInfo", handle),
    )


def _processes(
    backend: NvmlBackend, handle: Any, fn: str = "nvmlDeviceGetComputeRunningProcesses"
) -> tuple[ProcessInfo, ...] | Unavailable:
    rows = query(backend, fn, handle)
    if isinstance(rows, Unavailable):
        return rows
    out = []
    for row in rows:
        used = getattr(row, "usedGpuMemory", None)
        gi = getattr(row, "gpuInstanceId", NO_INSTANCE)
        ci = getattr(row, "computeInstanceId", NO_INSTANCE)
        out.append(
            ProcessInfo(
                pid=int(row.pid),
                used_memory_bytes=Unavailable("unknown") if used is None else int(used),
                gi_id=None if gi is None or gi == NO_INSTANCE else int(gi),
                ci_id=None if ci is None or ci == NO_INSTANCE else int(ci),
            )
        )
    return tuple(sorted(out, key=lambda p: p.pid))


def _mps_processes(
    backend: NvmlBackend, handle: Any, procs: tuple[ProcessInfo, ...] | Unavailable
) -> tuple[ProcessInfo, ...] | Unavailable:
    """The GPU's MPS clients (``nvmlDeviceGetMPSComputeRunningProcesses_v3``); asked only when
    ``procs`` lists a process (an MPS server is one), so an idle node makes no extra call."""
    if isinstance(procs, Unavailable) or not procs:
        return ()
    return _processes(backend, handle, "nvmlDeviceGetMPSComputeRunningProcesses_v3")


def _with_sm(
    backend: NvmlBackend, handle: Any, procs: tuple[ProcessInfo, ...] | Unavailable
) -> tuple[ProcessInfo, ...] | Unavailable:
    """``procs`` with each one's SM share (``nvmlDeviceGetProcessUtilization``: the driver's
    buffered samples, the newest per pid), where the driver gives one; whole GPUs only (NVML has
    no per-process figure on MIG devices). No process, no call."""
    if isinstance(procs, Unavailable) or not procs:
        return procs
    samples = query(backend, "nvmlDeviceGetProcessUtilization", handle, 0)
    if isinstance(samples, Unavailable):  # say why (unsupported, no permission ...)
        return tuple(dataclasses.replace(p, sm_pct=samples) for p in procs)
    newest: dict[int, tuple[int, float]] = {}
    for sample in samples:
        pid, stamp, sm = int(sample.pid), int(getattr(sample, "timeStamp", 0)), float(sample.smUtil)
        if pid not in newest or stamp >= newest[pid][0]:
            newest[pid] = (stamp, sm)
    return tuple(dataclasses.replace(p, sm_pct=newest[p.pid][1]) if p.pid in newest else p for p in procs)


def _profile_from(name: Any, attrs: Any) -> str | Unavailable:
    """MIG profile from the MIG handle's name (``"… MIG 1g.10gb"``), else from its attributes."""
    if isinstance(name, str) and " MIG " in name:
        return name.rsplit(" MIG ", 1)[1].strip()
    if isinstance(attrs, Unavailable):
        return attrs if isinstance(name, Unavailable) else Unavailable("unknown")
    g, c = int(attrs.gpuInstanceSliceCount), int(attrs.computeInstanceSliceCount)
    gb = int(int(attrs.memorySizeMB) / 1024 + 0.5)
    return f"{c}c.{g}g.{gb}gb" if c and c < g else f"{g}g.{gb}gb"


def _read_mig(backend: NvmlBackend, parent_uuid: Any, index: int, mig: Any) -> MigDeviceInfo:
    uuid = _text(query(backend, "nvmlDeviceGetUUID", mig))
    name = _text(query(backend, "nvmlDeviceGetName", mig))
    gi = query(backend, "nvmlDeviceGetGpuInstanceId", mig)
    ci = query(backend, "nvmlDeviceGetComputeInstanceId", mig)
    attrs = query(backend, "nvmlDeviceGetAttributes", mig)
    mem = _memory(backend, mig)
    procs = _processes(backend, mig)
    return MigDeviceInfo(
        uuid=uuid,
        index=index,
        profile=_profile_from(name, attrs),
        gi_id=_map(gi, int),
        ci_id=_map(ci, int),
        memory_total_bytes=_map(mem, lambda m: int(m.total)),
        memory_used_bytes=_map(mem, lambda m: int(m.used)),
        sm_count=_map(attrs, lambda a: int(a.multiprocessorCount)),
        parent_uuid=parent_uuid,
        processes=procs,
    )


def _read_gpu(backend: NvmlBackend, index: int) -> tuple[dict[str, Any], list[MigDeviceInfo], Any]:
    handle = query(backend, "nvmlDeviceGetHandleByIndex", index)
    if isinstance(handle, Unavailable):
        fields: dict[str, Any] = {
            name: handle for name in GpuInfo.__dataclass_fields__ if name not in ("index", "mig_devices")
        }
        fields.update(index=index)
        return fields, [], handle
    uuid = _text(query(backend, "nvmlDeviceGetUUID", handle))
    name = _text(query(backend, "nvmlDeviceGetName", handle))
    pci = query(backend, "nvmlDeviceGetPciInfo", handle)
    numa_node, cpu_affinity = _affinity(backend, handle, uuid, _map(pci, lambda p: _text(p.busId)))
    mig_mode = query(backend, "nvmlDeviceGetMigMode", handle)
    current: bool | Unavailable | None
    pending: bool | Unavailable | None
    if isinstance(mig_mode, Unavailable):
        current = pending = None if mig_mode.code == NOT_SUPPORTED else mig_mode
    else:
        current, pending = bool(mig_mode[0]), bool(mig_mode[1])
    mem = _memory(backend, handle)
    util = query(backend, "nvmlDeviceGetUtilizationRates", handle)
    temp = query(backend, "nvmlDeviceGetTemperature", handle, backend.NVML_TEMPERATURE_GPU)
    power = query(backend, "nvmlDeviceGetPowerUsage", handle)
    limit = query(backend, "nvmlDeviceGetEnforcedPowerLimit", handle)
    reasons = _versioned(
        backend,
        "nvmlDeviceGetCurrentClocksEventReasons",
        lambda: query(backend, "nvmlDeviceGetCurrentClocksEventReasons", handle),
        lambda: query(backend, "nvmlDeviceGetCurrentClocksThrottleReasons", handle),
    )
    ecc = query(
        backend,
        "nvmlDeviceGetTotalEccErrors",
        handle,
        backend.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
        backend.NVML_VOLATILE_ECC,
    )
    procs = _with_sm(backend, handle, _processes(backend, handle))
    gpm = query(backend, "nvmlGpmQueryDeviceSupport", handle)
    if isinstance(gpm, Unavailable):
        gpm_state: bool | Unavailable = gpm
    else:
        gpm_state = True if gpm.isSupportedDevice else Unavailable("unsupported", NOT_SUPPORTED)

    migs: list[MigDeviceInfo] = []
    if current is True:
        slots = query(backend, "nvmlDeviceGetMaxMigDeviceCount", handle)
        for slot in range(0 if isinstance(slots, Unavailable) else int(slots)):
            mig = query(backend, "nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
            if isinstance(mig, Unavailable):
                # NOT_FOUND / INVALID_ARGUMENT: an empty slot (slots may be sparse, go-nvlib
                # VisitMigDevices); any other error: this slot is unreadable, later ones may not be.
                continue
            info = _read_mig(backend, uuid, slot, mig)
            if isinstance(info.processes, Unavailable) and isinstance(procs, tuple):
                info = _with_parent_processes(info, procs)
            migs.append(info)

    fields = dict(
        index=index,
        uuid=uuid,
        name=name,
        pci_bus_id=_map(pci, lambda p: _text(p.busId)),
        memory_total_bytes=_map(mem, lambda m: int(m.total)),
        memory_used_bytes=_map(mem, lambda m: int(m.used)),
        memory_free_bytes=_map(mem, lambda m: int(m.free)),
        utilization_gpu_pct=_map(util, lambda u: float(u.gpu)),
        utilization_memory_pct=_map(util, lambda u: float(u.memory)),
        temperature_c=_map(temp, float),
        power_w=_map(power, lambda mw: round(mw / 1000.0, 3)),
        power_limit_w=_map(limit, lambda mw: round(mw / 1000.0, 3)),
        clock_event_reasons=_map(reasons, lambda m: clock_event_names(int(m))),
        ecc_volatile_uncorrected=_map(ecc, int),
        mig_mode_current=current,
        mig_mode_pending=pending,
        processes=procs,
        mps_processes=_mps_processes(backend, handle, procs) if current is not True else (),
        numa_node=numa_node,
        cpu_affinity=cpu_affinity,
        handle=handle,
    )
    return fields, migs, gpm_state


_static: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()


def _settled(*values: Any) -> bool:
    """True when no value is a transient failure (only known facts and "unsupported" are kept)."""
    return not any(isinstance(v, Unavailable) and v.reason != "unsupported" for v in values)


def _affinity(backend: Any, handle: Any, uuid: Any, bus_id: Any) -> tuple[Any, Any]:
    """A GPU's NUMA node and CPUs, read once per backend and GPU (they do not change while it runs)."""
    cache = _static.setdefault(backend, {})
    key = ("affinity", uuid)
    if key in cache:
        return cache[key]  # type: ignore[no-any-return]
    found = read_affinity(backend, handle, bus_id)
    if isinstance(uuid, str) and _settled(*found):
        cache[key] = found
    return found


def _links(backend: Any, opened: list[tuple[int, Any, Any]], raw: list[Any]) -> tuple[Any, ...]:
    """The GPU pair links, read again only when the set of GPUs or a MIG mode changed (MIG mode
    turns NVLink queries off) or when the last read hit a transient error."""
    if len(opened) < 2:
        return ()
    cache = _static.setdefault(backend, {})
    key = ("links", tuple((f["index"], f["uuid"], f["mig_mode_current"]) for f, _, _ in raw if "handle" in f))
    if key in cache:
        return cache[key]  # type: ignore[no-any-return]
    links = read_links(backend, opened)
    if _settled(*(v for link in links for v in (link.pcie, link.nvlinks))):
        for old in [k for k in cache if k[0] == "links"]:
            del cache[old]
        cache[key] = links
    return links


def _with_parent_processes(info: MigDeviceInfo, parent: tuple[ProcessInfo, ...]) -> MigDeviceInfo:
    """A MIG device's processes taken from its parent's list (GI/CI ids match)."""
    own = tuple(p for p in parent if p.gi_id == info.gi_id and p.ci_id == info.ci_id)
    return MigDeviceInfo(**{**info.__dict__, "processes": own})


def read_node(
    backend: NvmlBackend, *, hostname: str | None = None, now: float | None = None, gpm: GpmSampler | None = None
) -> NodeInventory:
    """Read one snapshot; see :func:`labgang.agent.inventory.read_inventory`.

    Args:
        backend: an initialised NVML backend.
        hostname: node name (default: the backend's ``labgang_hostname``, else the host name).
        now: timestamp, unix seconds (default ``time.time()``).
        gpm: the GPM sampler keeping previous samples (default: one kept per backend).
    """
    with _lock_for(backend):
        return _read_node(backend, hostname, now, gpm)


def _read_node(backend: NvmlBackend, hostname: str | None, now: float | None, gpm: GpmSampler | None) -> NodeInventory:
    taken = time.time() if now is None else float(now)
    host = hostname or getattr(backend, "labgang_hostname", None) or socket.gethostname()
    driver = _text(query(backend, "nvmlSystemGetDriverVersion"))
    nvml_version = _text(query(backend, "nvmlSystemGetNVMLVersion"))
    cuda = _map(query(backend, "nvmlSystemGetCudaDriverVersion"), int)
    count = query(backend, "nvmlDeviceGetCount")
    raw = [_read_gpu(backend, i) for i in range(0 if isinstance(count, Unavailable) else int(count))]

    targets: list[GpmTarget] = []
    for fields, migs, gpm_state in raw:
        if gpm_state is not True:
            continue
        if fields["mig_mode_current"] is True:
            for gi in sorted({m.gi_id for m in migs if isinstance(m.gi_id, int)}):
                members = tuple(str(m.uuid) for m in migs if m.gi_id == gi)
                targets.append(GpmTarget((fields["uuid"], gi, members), fields["handle"], gi))
        else:
            targets.append(GpmTarget(fields["uuid"], fields["handle"]))
    sampler = gpm if gpm is not None else sampler_for(backend)
    activity = sampler.measure(backend, targets) if targets else {}

    opened = [(f["index"], f["handle"], f["pci_bus_id"]) for f, _, _ in raw if "handle" in f]
    links = _links(backend, opened, raw)

    gpus = []
    for fields, migs, gpm_state in raw:
        fields = dict(fields)
        handle = fields.pop("handle", None)
        if handle is not None:
            unsupported = Unavailable("unsupported", NOT_SUPPORTED)
            if gpm_state is not True:
                sm_active = sm_occ = gpm_state
            elif fields["mig_mode_current"] is True:
                sm_active = sm_occ = unsupported  # in MIG mode GPM is per GPU instance (below)
                migs = [_with_gi_activity(m, fields["uuid"], migs, activity) for m in migs]
            else:
                sm_active, sm_occ = activity.get(fields["uuid"], (unsupported, unsupported))
            fields["sm_active_pct"], fields["sm_occupancy_pct"] = sm_active, sm_occ
        fields["mig_devices"] = tuple(migs)
        gpus.append(GpuInfo(**fields))
    return NodeInventory(host, taken, driver, nvml_version, cuda, tuple(gpus), links)


def _with_gi_activity(
    mig: MigDeviceInfo, parent_uuid: Any, migs: list[MigDeviceInfo], activity: dict[Any, Any]
) -> MigDeviceInfo:
    members = tuple(str(m.uuid) for m in migs if m.gi_id == mig.gi_id)
    value = activity.get((parent_uuid, mig.gi_id, members))
    if value is None:
        return mig
    return MigDeviceInfo(**{**mig.__dict__, "sm_active_pct": value[0]})


__all__ = ["CLOCK_EVENT_REASONS", "clock_event_names", "read_node"]
