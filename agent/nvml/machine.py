"""The simulated machine: GPUs, MIG devices and their scripted readings, and the TOML loader.

A :class:`SimMachine` is what every input format (``config/sim/*.toml``, ``nvidia-smi -q``
text or XML, ``nvidia-smi -L``) becomes before :class:`~labgang.agent.nvml.simulated.SimulatedNvml`
serves it through pynvml's function names. Units: memory MiB, power W, temperature °C,
utilisation percent. A reading given as a list is a script: each read takes the next
value and the last one repeats.
"""

from __future__ import annotations

import math
import uuid as uuidlib
from dataclasses import dataclass, field
from typing import Any

from labgang.agent.nvml import models
from labgang.agent.nvml.simtopo import SimTopology, topology_from_toml
from labgang.agent.tomlfile import TomlTextError, loads_toml

#: Namespace for UUIDs derived from captures that carry none (stable across loads).
UUID_NAMESPACE = uuidlib.UUID("5f1a2b3c-4d5e-4f60-8a71-b2c3d4e5f607")

#: NVML return codes by name (nvml.h ``nvmlReturn_t``), accepted in machine files' ``errors``.
ERROR_CODES = {
    "UNINITIALIZED": 1,
    "INVALID_ARGUMENT": 2,
    "NOT_SUPPORTED": 3,
    "NO_PERMISSION": 4,
    "NOT_FOUND": 6,
    "INSUFFICIENT_SIZE": 7,
    "DRIVER_NOT_LOADED": 9,
    "TIMEOUT": 10,
    "IRQ_ISSUE": 11,
    "LIBRARY_NOT_FOUND": 12,
    "FUNCTION_NOT_FOUND": 13,
    "CORRUPTED_INFOROM": 14,
    "GPU_IS_LOST": 15,
    "RESET_REQUIRED": 16,
    "LIB_RM_VERSION_MISMATCH": 18,
    "IN_USE": 19,
    "UNKNOWN": 999,
}


def _is_number(value: Any) -> bool:
    """True for a finite int or float (a TOML boolean is not a number)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


class Script:
    """A reading that is a constant or a list replayed one value per read (last one repeats)."""

    def __init__(self, values: Any, where: str = "reading"):
        if values is None:
            self.values: list[Any] = [None]
        elif isinstance(values, (list, tuple)):
            if not values:
                raise ValueError(f"{where}: a scripted reading needs at least one value")
            if not all(_is_number(v) for v in values):
                raise ValueError(f"{where}: scripted values must be numbers; got {values!r}")
            self.values = list(values)
        elif not _is_number(values):
            raise ValueError(f"{where}: expected a number or a list of numbers; got {values!r}")
        else:
            self.values = [values]
        self.position = 0

    def next(self) -> Any:
        """The current value; advances the script."""
        value = self.values[min(self.position, len(self.values) - 1)]
        self.position += 1
        return value

    def peek(self) -> Any:
        """The current value without advancing."""
        return self.values[min(self.position, len(self.values) - 1)]

    def set(self, value: Any) -> None:
        """Replace the script by a constant."""
        self.values, self.position = [value], 0


@dataclass
class SimProcess:
    """A compute process fixed in the machine file or capture (not a live process).

    Attributes:
        pid: process id.
        used_memory_mib: device memory, MiB; None = NVML reports ``usedGpuMemory`` None.
        gi_id, ci_id: GPU/compute instance on a MIG-enabled GPU, else None.
    """

    pid: int
    used_memory_mib: float | None
    gi_id: int | None = None
    ci_id: int | None = None


@dataclass
class SimMigDevice:
    """One MIG device (compute instance) of a simulated GPU.

    Attributes:
        index: MIG slot index on the parent (slots may be sparse).
        uuid: ``MIG-…`` UUID.
        profile: device profile name as ``nvidia-smi -L`` prints it (``1g.10gb``, ``1c.3g.71gb``).
        gi_id, ci_id: GPU / compute instance ids.
        sm_count: SMs of this compute instance.
        memory_total_mib: memory of the GPU instance (shared by its compute instances).
        memory_used_mib: memory used in the GPU instance besides processes, MiB.
        gi_slices, ci_slices: GPU instance and compute instance slice counts.
        gi_profile_id: ``nvmlGpuInstanceProfileInfo_t.id`` of its GPU instance.
        sm_active_pct, sm_occupancy_pct: GPM readings of its GPU instance (scripts).
    """

    index: int
    uuid: str
    profile: str
    gi_id: int
    ci_id: int
    sm_count: int
    memory_total_mib: int
    memory_used_mib: float = 0.0
    gi_slices: int = 1
    ci_slices: int = 1
    gi_profile_id: int = -1
    sm_active_pct: Script = field(default_factory=lambda: Script(0.0))
    sm_occupancy_pct: Script = field(default_factory=lambda: Script(0.0))


@dataclass
class SimGpu:
    """One simulated GPU; a None reading makes NVML answer NOT_SUPPORTED for it."""

    index: int
    uuid: str
    name: str
    pci_bus_id: str
    memory_total_mib: int | None
    memory_reserved_mib: int = 0
    memory_used_mib: float | None = 0.0
    sm_count: int = 0
    arch: int = models.ARCH_UNKNOWN
    gpm: bool = False
    mig_capable: bool = False
    mig_current: bool = False
    mig_pending: bool = False
    max_mig_devices: int = 7
    mig_devices: list[SimMigDevice] = field(default_factory=list)
    temperature_c: Script = field(default_factory=lambda: Script(30))
    power_w: Script = field(default_factory=lambda: Script(60.0))
    power_limit_w: float | None = None
    ecc: bool = True
    ecc_volatile_uncorrected: int = 0
    utilization_gpu_pct: Script = field(default_factory=lambda: Script(0))
    utilization_memory_pct: Script = field(default_factory=lambda: Script(0))
    sm_active_pct: Script = field(default_factory=lambda: Script(0.0))
    sm_occupancy_pct: Script = field(default_factory=lambda: Script(0.0))
    clock_event_mask: int = 0x1
    processes: list[SimProcess] = field(default_factory=list)
    lost: bool = False
    handle_error: int | None = None
    errors: dict[str, int] = field(default_factory=dict)
    pci_device_id: int = 0x000010DE
    pci_sub_system_id: int = 0
    cuda_capability: tuple[int, int] = (0, 0)
    serial: str | None = None


@dataclass
class SimMachine:
    """A whole simulated node.

    Attributes:
        hostname: node name the inventory reports.
        driver_version: ``nvmlSystemGetDriverVersion``.
        nvml_version: ``nvmlSystemGetNVMLVersion``.
        cuda_driver_version: ``nvmlSystemGetCudaDriverVersion`` (e.g. 12040).
        process_memory_mib: memory NVML shows for each live process whose
            ``CUDA_VISIBLE_DEVICES`` names a simulated device.
        missing_functions: NVML symbols this "driver" lacks (FUNCTION_NOT_FOUND).
        unprivileged: parent-handle memory/process queries of MIG-enabled GPUs answer
            NO_PERMISSION (an unprivileged container, docs/nvml.md §3.5).
        gpus: the GPUs in index order.
        source: where it was loaded from (file name and format), for messages.
        topology: GPU links, NUMA nodes and CPUs (None: the topology calls answer
            NOT_SUPPORTED), see :mod:`labgang.agent.nvml.simtopo`.
    """

    hostname: str
    driver_version: str = "550.54.15"
    nvml_version: str = ""
    cuda_driver_version: int = 12040
    process_memory_mib: float = 512.0
    missing_functions: set[str] = field(default_factory=set)
    unprivileged: bool = False
    gpus: list[SimGpu] = field(default_factory=list)
    source: str = ""
    topology: SimTopology | None = None

    def __post_init__(self) -> None:
        if not self.nvml_version:
            self.nvml_version = f"{self.cuda_driver_version // 1000}.{self.driver_version}"


def derived_gpu_uuid(*parts: Any) -> str:
    """A stable ``GPU-…`` UUID from identifying parts (captures without UUIDs)."""
    return "GPU-" + str(uuidlib.uuid5(UUID_NAMESPACE, "gpu/" + "/".join(map(str, parts))))


def derived_mig_uuid(parent_uuid: str, gi_id: int, ci_id: int) -> str:
    """A stable ``MIG-…`` UUID (version-5 shape like real ones) from parent UUID and GI/CI ids."""
    return "MIG-" + str(uuidlib.uuid5(UUID_NAMESPACE, f"mig/{parent_uuid}/{gi_id}/{ci_id}"))


def mig_device(
    model: models.GpuModel | None,
    index: int,
    uuid: str,
    profile: str,
    gi_id: int,
    ci_id: int,
    sm_count: int | None = None,
    memory_total_mib: int | None = None,
    memory_used_mib: float = 0.0,
) -> SimMigDevice:
    """Build a :class:`SimMigDevice`, filling SMs and memory from the catalogue profile.

    Raises:
        ValueError: the profile is unknown for the model and SMs/memory are not given.
    """
    gi_prof = model.profile(profile) if model is not None else None
    ci = models.ci_slices(profile)
    if gi_prof is None and (sm_count is None or memory_total_mib is None):
        allowed = (
            ", ".join(p.name for p in model.mig_profiles)
            if model
            else "(unknown model: give sm_count and memory_total_mib)"
        )
        raise ValueError(f"mig_device.profile: unknown profile {profile!r} for this GPU; allowed: {allowed}")
    gi_slices = gi_prof.slices if gi_prof else int(models.gi_profile_name(profile).split("g", 1)[0])
    ci_slices = ci if ci is not None else gi_slices
    if sm_count is None:
        assert gi_prof is not None and model is not None
        if ci is None:
            sm_count = gi_prof.sm_count
        else:  # a compute instance of c slices has c times the SMs of a 1-slice instance
            one = next((p for p in model.mig_profiles if p.slices == 1 and "+" not in p.name), None)
            sm_count = one.sm_count * ci if one else gi_prof.sm_count * ci // gi_prof.slices
    if memory_total_mib is None:
        assert gi_prof is not None  # an unknown profile without memory_total_mib was refused above
        memory_total_mib = gi_prof.memory_mib
    return SimMigDevice(
        index=index,
        uuid=uuid,
        profile=profile,
        gi_id=gi_id,
        ci_id=ci_id,
        sm_count=int(sm_count),
        memory_total_mib=int(memory_total_mib),
        memory_used_mib=memory_used_mib,
        gi_slices=gi_slices,
        ci_slices=ci_slices,
        gi_profile_id=gi_prof.profile_id if gi_prof else -1,
    )


# --------------------------------------------------------------------------- TOML machine files

_MACHINE_KEYS = {
    "hostname",
    "driver_version",
    "nvml_version",
    "cuda_driver_version",
    "process_memory_mib",
    "missing_functions",
    "unprivileged",
}
_GPU_KEYS = {
    "model",
    "uuid",
    "name",
    "pci_bus_id",
    "memory_total_mib",
    "memory_reserved_mib",
    "memory_used_mib",
    "sm_count",
    "gpm",
    "mig_capable",
    "mig_current",
    "mig_pending",
    "max_mig_devices",
    "mig_device",
    "temperature_c",
    "power_w",
    "power_limit_w",
    "ecc",
    "ecc_volatile_uncorrected",
    "utilization_gpu_pct",
    "utilization_memory_pct",
    "sm_active_pct",
    "sm_occupancy_pct",
    "clock_event_reasons",
    "processes",
    "lost",
    "handle_error",
    "errors",
    "serial",
    "numa_node",
    "cpu_affinity",
    "nvswitch_links",
}
_MIG_KEYS = {
    "profile",
    "gi_id",
    "ci_id",
    "uuid",
    "index",
    "sm_count",
    "memory_total_mib",
    "memory_used_mib",
    "sm_active_pct",
    "sm_occupancy_pct",
}
_NUMBER: tuple[type, ...] = (int, float)
_SCRIPTED: tuple[type, ...] = (int, float, list)
_GPU_TYPES: dict[str, tuple[type, ...]] = {
    "model": (str,),
    "uuid": (str,),
    "name": (str,),
    "pci_bus_id": (str,),
    "memory_total_mib": _NUMBER,
    "memory_reserved_mib": (int,),
    "memory_used_mib": _NUMBER,
    "sm_count": (int,),
    "gpm": (bool,),
    "mig_capable": (bool,),
    "mig_current": (bool,),
    "mig_pending": (bool,),
    "max_mig_devices": (int,),
    "mig_device": (list,),
    "temperature_c": _SCRIPTED,
    "power_w": _SCRIPTED,
    "power_limit_w": _NUMBER,
    "ecc": (bool,),
    "ecc_volatile_uncorrected": (int,),
    "utilization_gpu_pct": _SCRIPTED,
    "utilization_memory_pct": _SCRIPTED,
    "sm_active_pct": _SCRIPTED,
    "sm_occupancy_pct": _SCRIPTED,
    "clock_event_reasons": (list,),
    "processes": (list,),
    "lost": (bool,),
    "errors": (dict,),
    "serial": (str,),
}
_MIG_TYPES: dict[str, tuple[type, ...]] = {
    "profile": (str,),
    "gi_id": (int,),
    "ci_id": (int,),
    "uuid": (str,),
    "index": (int,),
    "sm_count": (int,),
    "memory_total_mib": _NUMBER,
    "memory_used_mib": _NUMBER,
    "sm_active_pct": _SCRIPTED,
    "sm_occupancy_pct": _SCRIPTED,
}
_PROCESS_KEYS = {"pid", "used_memory_mib", "gi_id", "ci_id"}


def _check_keys(table: Any, allowed: set[str], where: str) -> None:
    if not isinstance(table, dict):
        raise ValueError(f"{where}: must be a table; got {table!r}")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ValueError(f"{where}: unknown field(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


_TYPE_NAMES = {
    str: "a string",
    bool: "true or false",
    int: "an integer",
    float: "a number",
    list: "a list",
    dict: "a table",
}


def _typed(table: dict[str, Any], where: str, types: dict[str, tuple[type, ...]]) -> None:
    """Refuse a value of the wrong TOML type, naming the key (``gpu[0].model: must be a string; got False``).

    Numbers must be finite and >= 0; a boolean is never a number.

    Raises:
        ValueError: the first key whose value has none of its allowed types.
    """
    for key, allowed in types.items():
        if key not in table:
            continue
        value = table[key]
        is_bool = isinstance(value, bool)
        ok = isinstance(value, allowed) and (bool in allowed or not is_bool)
        numeric = isinstance(value, (int, float)) and not is_bool
        if ok and numeric and not (math.isfinite(value) and value >= 0):
            ok = False
        if not ok:
            want = " or ".join(dict.fromkeys(_TYPE_NAMES[t] for t in allowed))
            bound = " >= 0" if any(t in (int, float) for t in allowed) else ""
            raise ValueError(f"{where}.{key}: must be {want}{bound}; got {value!r}")


def _error_code(value: Any, where: str) -> int:
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.upper() in ERROR_CODES:
        return ERROR_CODES[value.upper()]
    raise ValueError(f"{where}: unknown NVML error {value!r}; allowed: an integer or {', '.join(ERROR_CODES)}")


def _clock_mask(names: list[str], where: str) -> int:
    from labgang.agent.nvml.read import CLOCK_EVENT_REASONS

    by_name = {name: bit for bit, name in CLOCK_EVENT_REASONS}
    mask = 0
    for name in names:
        if name not in by_name:
            raise ValueError(f"{where}: unknown clock event reason {name!r}; allowed: {', '.join(by_name)}")
        mask |= by_name[name]
    return mask


def machine_from_toml(text: str, source: str = "") -> SimMachine:
    """Parse a ``config/sim/*.toml`` machine file.

    Raises:
        ValueError: invalid TOML or an invalid field (the message names the field and the allowed values).
    """
    try:
        data = loads_toml(text)
    except TomlTextError as exc:
        raise ValueError(f"{source}: {exc}") from None
    _check_keys(data, {"machine", "gpu", "link"}, f"{source}: top level")
    mdata = data.get("machine", {})
    _check_keys(mdata, _MACHINE_KEYS, "machine")
    _typed(
        mdata,
        "machine",
        {
            "hostname": (str,),
            "driver_version": (str,),
            "nvml_version": (str,),
            "cuda_driver_version": (int,),
            "process_memory_mib": _NUMBER,
            "missing_functions": (list,),
            "unprivileged": (bool,),
        },
    )
    if "hostname" not in mdata:
        raise ValueError("machine.hostname: missing (the node name the simulated machine reports)")
    machine = SimMachine(
        hostname=str(mdata["hostname"]),
        driver_version=str(mdata.get("driver_version", "550.54.15")),
        nvml_version=str(mdata.get("nvml_version", "")),
        cuda_driver_version=int(mdata.get("cuda_driver_version", 12040)),
        process_memory_mib=float(mdata.get("process_memory_mib", 512)),
        missing_functions=set(mdata.get("missing_functions", [])),
        unprivileged=bool(mdata.get("unprivileged", False)),
        source=source,
    )
    gpus = data.get("gpu", [])
    if not isinstance(gpus, list):
        raise ValueError("gpu: must be an array of tables ([[gpu]])")
    for index, g in enumerate(gpus):
        machine.gpus.append(_gpu_from_toml(machine, index, g))
    machine.topology = topology_from_toml(data.get("link", []), gpus)
    seen: set[str] = set()
    for gpu in machine.gpus:
        for u in [gpu.uuid] + [m.uuid for m in gpu.mig_devices]:
            if u in seen:
                raise ValueError(f"gpu[{gpu.index}].uuid: duplicate UUID {u}")
            seen.add(u)
    return machine


def _gpu_from_toml(machine: SimMachine, index: int, g: dict[str, Any]) -> SimGpu:
    where = f"gpu[{index}]"
    _check_keys(g, _GPU_KEYS, where)
    _typed(g, where, _GPU_TYPES)
    model = models.by_key(g["model"]) if "model" in g else None
    if model is None and ("name" not in g or "memory_total_mib" not in g):
        raise ValueError(f"{where}.model: missing; give a catalogue model or name and memory_total_mib")

    def pick(key: str, default: Any) -> Any:
        return g.get(key, default)

    gpu = SimGpu(
        index=index,
        uuid=str(pick("uuid", derived_gpu_uuid(machine.hostname, index))),
        name=str(pick("name", model.name if model else "")),
        pci_bus_id=str(pick("pci_bus_id", f"00000000:{0x18 + index * 0x10:02X}:00.0")),
        memory_total_mib=pick("memory_total_mib", model.memory_total_mib if model else None),
        memory_reserved_mib=int(pick("memory_reserved_mib", model.memory_reserved_mib if model else 0)),
        memory_used_mib=pick("memory_used_mib", 0.0),
        sm_count=int(pick("sm_count", model.sm_count if model else 0)),
        arch=model.arch if model else models.arch_from_text(None, str(g.get("name", ""))),
        gpm=bool(pick("gpm", model.gpm if model else False)),
        mig_capable=bool(pick("mig_capable", model.mig_capable if model else False)),
        mig_current=bool(pick("mig_current", False)),
        mig_pending=bool(pick("mig_pending", g.get("mig_current", False))),
        max_mig_devices=int(pick("max_mig_devices", 7)),
        temperature_c=Script(pick("temperature_c", 30), f"{where}.temperature_c"),
        power_w=Script(pick("power_w", 60.0), f"{where}.power_w"),
        power_limit_w=pick("power_limit_w", model.power_limit_w if model else None),
        ecc=bool(pick("ecc", model.ecc if model else True)),
        ecc_volatile_uncorrected=int(pick("ecc_volatile_uncorrected", 0)),
        utilization_gpu_pct=Script(pick("utilization_gpu_pct", 0), f"{where}.utilization_gpu_pct"),
        utilization_memory_pct=Script(pick("utilization_memory_pct", 0), f"{where}.utilization_memory_pct"),
        sm_active_pct=Script(pick("sm_active_pct", 0.0), f"{where}.sm_active_pct"),
        sm_occupancy_pct=Script(pick("sm_occupancy_pct", 0.0), f"{where}.sm_occupancy_pct"),
        clock_event_mask=_clock_mask(pick("clock_event_reasons", ["gpu_idle"]), f"{where}.clock_event_reasons"),
        lost=bool(pick("lost", False)),
        handle_error=_error_code(g["handle_error"], f"{where}.handle_error") if "handle_error" in g else None,
        errors={k: _error_code(v, f"{where}.errors.{k}") for k, v in pick("errors", {}).items()},
        pci_device_id=model.pci_device_id if model else 0x000010DE,
        cuda_capability=model.cuda_capability if model else (0, 0),
        serial=g.get("serial"),
    )
    if (gpu.mig_current or gpu.mig_pending) and not gpu.mig_capable:
        raise ValueError(f"{where}.mig_current: this GPU ({gpu.name}) cannot do MIG; allowed: false")
    for k, p in enumerate(g.get("processes", [])):
        _check_keys(p, _PROCESS_KEYS, f"{where}.processes[{k}]")
        _typed(
            p, f"{where}.processes[{k}]", {"pid": (int,), "used_memory_mib": _NUMBER, "gi_id": (int,), "ci_id": (int,)}
        )
        gpu.processes.append(SimProcess(int(p["pid"]), p.get("used_memory_mib"), p.get("gi_id"), p.get("ci_id")))
    migs = g.get("mig_device", [])
    if migs and not gpu.mig_current:
        raise ValueError(f"{where}.mig_device: MIG devices need mig_current = true")
    for k, m in enumerate(migs):
        mw = f"{where}.mig_device[{k}]"
        _check_keys(m, _MIG_KEYS, mw)
        _typed(m, mw, _MIG_TYPES)
        for req in ("profile", "gi_id", "ci_id"):
            if req not in m:
                raise ValueError(f"{mw}.{req}: missing")
        dev = mig_device(
            model,
            int(m.get("index", k)),
            str(m.get("uuid") or derived_mig_uuid(gpu.uuid, m["gi_id"], m["ci_id"])),
            str(m["profile"]),
            int(m["gi_id"]),
            int(m["ci_id"]),
            m.get("sm_count"),
            m.get("memory_total_mib"),
            float(m.get("memory_used_mib", 0.0)),
        )
        dev.sm_active_pct = Script(m.get("sm_active_pct", 0.0), f"{mw}.sm_active_pct")
        dev.sm_occupancy_pct = Script(m.get("sm_occupancy_pct", 0.0), f"{mw}.sm_occupancy_pct")
        gpu.mig_devices.append(dev)
    indices = [d.index for d in gpu.mig_devices]
    if len(set(indices)) != len(indices) or any(i >= gpu.max_mig_devices for i in indices):
        raise ValueError(
            f"{where}.mig_device.index: indices must be distinct and below max_mig_devices ({gpu.max_mig_devices})"
        )
    return gpu


__all__ = [
    "ERROR_CODES",
    "Script",
    "SimGpu",
    "SimMachine",
    "SimMigDevice",
    "SimProcess",
    "derived_gpu_uuid",
    "derived_mig_uuid",
    "machine_from_toml",
    "mig_device",
]
