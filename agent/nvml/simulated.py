"""``SimulatedNvml``: a peer of the ``pynvml`` module serving a simulated machine.

Same function names, arguments, return types (pynvml's own ctypes structs and
``nvmlFriendlyObject`` rows) and ``NVMLError`` subclasses and codes as nvidia-ml-py, so
code above cannot tell which backend it runs on. Behaviours reproduced (docs/nvml.md §9,
the ones the inventory touches):

* ``Uninitialized`` before ``nvmlInit`` and after the last ``nvmlShutdown`` (ref-counted);
* handles distinct per call, unequal and unhashable; MIG handles stale after
  :meth:`SimulatedNvml.set_mig_layout` (``INVALID_ARGUMENT``);
* ``nvmlDeviceGetCount`` counts GPUs whose ``GetHandleByIndex`` fails (``handle_error``,
  ``lost`` → ``GPU_IS_LOST`` on every call for that GPU);
* MIG: ``GetMigMode`` current/pending (``NOT_SUPPORTED`` on non-MIG GPUs),
  ``GetMaxMigDeviceCount`` = maximum not actual, ``NOT_FOUND`` for empty (possibly sparse)
  slots, sparse GI ids, CIs of one GI sharing its memory, names ``"<parent> MIG <profile>"``,
  ``GetHandleByUUID`` for GPU, ``MIG-…`` and legacy ``MIG-GPU-…/gi/ci`` UUIDs;
* utilisation ``NOT_SUPPORTED`` on MIG-enabled GPUs and MIG handles;
* GPM only where the model supports it (Hopper+), per-GI MIG samples, per-metric return
  codes, samples closer than 100 ms give a per-metric ``INVALID_ARGUMENT``;
* memory v1 (reserved counted as used) vs v2; parent memory/processes ``NO_PERMISSION`` in
  MIG mode when the machine is ``unprivileged``;
* processes: ``usedGpuMemory`` None, GI/CI ``0xFFFFFFFF`` off MIG,
  ``NVMLLibraryMismatchError`` for the unversioned call when ``_v3`` is missing;
* ``FUNCTION_NOT_FOUND`` for symbols in the machine's ``missing_functions``; per-GPU
  ``errors`` make one function fail with a chosen code.

Live processes whose environment has ``CUDA_VISIBLE_DEVICES`` naming a simulated GPU or
MIG UUID appear as compute processes on that device (psutil), using the machine's
``process_memory_mib`` unless :meth:`SimulatedNvml.hold_memory` says otherwise.

Activity. A device with such processes reports what they do, not the machine file's values:
its ``utilization.gpu`` (and GPM graphics activity) follows their CPU activity (the busiest
process, 0..100 %: a rank that computes keeps "kernels" running, one that sleeps leaves the
device idle), and its GPM SM activity equals that utilization. A process can declare what its
simulated kernels do through its environment (read from ``/proc/<pid>/environ`` at every scan;
see docs/simulated-activity.md):

* ``SIM_GPU_UTIL_PCT``: ``utilization.gpu`` in percent, instead of its CPU activity;
* ``SIM_GPU_SM_ACTIVE_PCT``: GPM SM activity in percent (busy kernels on idle SMs: 100 and 5);
* ``SIM_GPU_MEMORY_MIB``: the memory NVML shows for it on each of its devices.

A device without live processes keeps the machine file's values.

Scopes. Every simulated instance loading the same machine file has the same UUIDs, so two of
them on one host (two ``labgang up --simulate`` with different state dirs, a test suite next to
a user's) would each see the other's ranks as foreign processes on its devices. A backend
opened with ``scope=S`` therefore skips processes whose environment has
``LABGANG_SIM_SCOPE`` (:data:`SCOPE_VARIABLE`) set to anything but ``S``; the agent tags its
ranks with its scope. Processes without the variable (started by hand) still count, and a
backend without a scope sees every process, tagged or not.
"""

from __future__ import annotations

import ctypes
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import psutil
import pynvml
from labgang.agent.nvml.machine import SimGpu, SimMachine, SimMigDevice
from labgang.agent.nvml.simtopo import TopologyNvml

if TYPE_CHECKING:
    from labgang.agent.nvml.recorder import ReplayNvml

MIB = 1024 * 1024
NO_INSTANCE = 0xFFFFFFFF
GPM_MIN_INTERVAL_S = 0.1
SCOPE_VARIABLE = "LABGANG_SIM_SCOPE"
"""Environment variable naming the simulated instance a process belongs to (see the module docstring)."""
UTIL_VARIABLE = "SIM_GPU_UTIL_PCT"
SM_ACTIVE_VARIABLE = "SIM_GPU_SM_ACTIVE_PCT"
MEMORY_VARIABLE = "SIM_GPU_MEMORY_MIB"
ACTIVITY_VARIABLES = (UTIL_VARIABLE, SM_ACTIVE_VARIABLE, MEMORY_VARIABLE)
"""What a process may declare about its simulated kernels (see the module docstring, "Activity")."""


@dataclass(frozen=True, slots=True)
class Declared:
    """What a live process declared in its environment (None: not declared, or not a number).

    Attributes:
        util_pct: ``SIM_GPU_UTIL_PCT``, 0..100.
        sm_active_pct: ``SIM_GPU_SM_ACTIVE_PCT``, 0..100.
        memory_mib: ``SIM_GPU_MEMORY_MIB``, >= 0.
    """

    util_pct: float | None = None
    sm_active_pct: float | None = None
    memory_mib: float | None = None

    @classmethod
    def from_environ(cls, env: dict[str, str]) -> Declared:
        """Read the three variables; a value that is not a finite number in range is ignored."""

        def number(name: str, high: float) -> float | None:
            try:
                value = float(env[name])
            except (KeyError, ValueError):
                return None
            return value if math.isfinite(value) and 0.0 <= value <= high else None

        return cls(number(UTIL_VARIABLE, 100.0), number(SM_ACTIVE_VARIABLE, 100.0), number(MEMORY_VARIABLE, 1e9))


@dataclass(frozen=True, slots=True)
class Activity:
    """What a device's live processes do, in percent: ``utilization.gpu`` and GPM SM activity."""

    util_pct: float
    sm_active_pct: float


_KNOWN_GPM_METRICS = set(range(1, 14)) | {20, 21} | set(range(30, 38)) | set(range(40, 48)) | {50, 51, 60, 61}


class SimHandle:
    """An opaque device handle: a new object per call, equal only to itself, unhashable (like ctypes pointers)."""

    __slots__ = ("generation", "gpu_index", "mig_index")
    __hash__ = None  # type: ignore[assignment]  # unhashable like pynvml's handles; typeshed wants a method

    def __init__(self, gpu_index: int, mig_index: int | None = None, generation: int = 0):
        self.gpu_index = gpu_index
        self.mig_index = mig_index
        self.generation = generation

    def __eq__(self, other: object) -> bool:
        return self is other

    def __repr__(self) -> str:
        kind = "gpu" if self.mig_index is None else f"mig {self.mig_index} of gpu"
        return f"<simulated NVML handle: {kind} {self.gpu_index}>"


class VirtualClock:
    """A monotonic clock in seconds that only moves when :meth:`sleep` is called (tests, replays)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        """Advance the virtual clock by ``seconds``."""
        self.now += max(0.0, seconds)


class SimulatedNvml(TopologyNvml):
    """A simulated NVML with pynvml's API over a :class:`SimMachine` (topology calls: :class:`TopologyNvml`).

    Args:
        machine: the machine to serve.
        virtual_time: use a virtual clock for GPM sample spacing, advanced by
            ``labgang_sleep`` (tests); default is the real monotonic clock.
        scan_processes: look for live processes with ``CUDA_VISIBLE_DEVICES`` naming
            simulated UUIDs (psutil); tests of fixed captures may turn it off.
        scope: this instance's scope (any non-empty string, e.g. the agent's resolved state
            dir): processes whose ``LABGANG_SIM_SCOPE`` names another scope are not reported.
            None = every process counts.

    Raises:
        ValueError: ``scope`` is an empty string.
    """

    # The pynvml names labgang reads directly (``NvmlBackend``); the other constants, error
    # classes and structs are copied from pynvml by _export_pynvml_names below.
    NVMLError: type[Exception] = pynvml.NVMLError
    NVML_TEMPERATURE_GPU: int = pynvml.NVML_TEMPERATURE_GPU
    NVML_MEMORY_ERROR_TYPE_UNCORRECTED: int = pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED
    NVML_VOLATILE_ECC: int = pynvml.NVML_VOLATILE_ECC
    nvmlMemory_v2: int = pynvml.nvmlMemory_v2
    c_nvmlGpmMetricsGet_t: Callable[[], Any] = pynvml.c_nvmlGpmMetricsGet_t
    NVML_GPM_METRICS_GET_VERSION: int = pynvml.NVML_GPM_METRICS_GET_VERSION
    NVML_GPM_METRIC_SM_UTIL: int = pynvml.NVML_GPM_METRIC_SM_UTIL
    NVML_GPM_METRIC_SM_OCCUPANCY: int = pynvml.NVML_GPM_METRIC_SM_OCCUPANCY

    def __init__(
        self, machine: SimMachine, *, virtual_time: bool = False, scan_processes: bool = True, scope: str | None = None
    ):
        if scope is not None and not scope:
            raise ValueError("scope: must be a non-empty string or None (no scope)")
        self._scope = scope
        self.machine = machine
        self._init_count = 0
        self._samples: dict[int, tuple[Any, float, tuple[float, float, float]] | None] = {}
        self._sample_refs: dict[int, Any] = {}
        self._held: dict[tuple[str, int], int] = {}
        self._generation = {gpu.index: 0 for gpu in machine.gpus}
        self._scan = scan_processes
        self._live: dict[str, list[int]] | None = None
        # (pid, create time) -> (CUDA_VISIBLE_DEVICES entries, LABGANG_SIM_SCOPE or None, declared activity)
        self._env_cache: dict[tuple[int, float], tuple[tuple[str, ...], str | None, Declared]] = {}
        # (pid, create time) -> (CPU seconds, wall time) at the previous scan, for CPU activity
        self._cpu_seen: dict[tuple[int, float], tuple[float, float]] = {}
        self._declared: dict[int, Declared] = {}  # pid -> what it declared (this scan)
        self._cpu_pct: dict[int, float] = {}  # pid -> CPU activity since the previous scan (this scan)
        self._pinned: set[str] = set()  # devices whose readings set_utilization fixed (lower-case UUIDs)
        if virtual_time:
            clock = VirtualClock()
            self.labgang_clock: Callable[[], float] = clock
            self.labgang_sleep: Callable[[float], None] = clock.sleep
        else:
            self.labgang_clock = time.monotonic
            self.labgang_sleep = time.sleep

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_file(cls, path: str | Path, **kwargs: Any) -> SimulatedNvml | ReplayNvml:
        """Load a simulated backend from a file, detecting the format from its content.

        TOML machine files, ``nvidia-smi -q -x`` XML, ``nvidia-smi -q`` text, ``nvidia-smi -L``
        listings and transcripts give a :class:`SimulatedNvml`; a recorder JSON gives a
        :class:`~labgang.agent.nvml.recorder.ReplayNvml` (same API, answers replayed).

        Raises:
            FileNotFoundError: no such file.
            ValueError: unrecognised format or invalid content (message names file and field).
        """
        from labgang.agent.nvml.formats import load_machine_or_record

        loaded = load_machine_or_record(Path(path))
        if isinstance(loaded, SimMachine):
            return cls(loaded, **kwargs)
        return loaded

    @property
    def labgang_hostname(self) -> str:
        """The simulated node's name (the inventory's default hostname)."""
        return self.machine.hostname

    @property
    def labgang_sim_scope(self) -> str | None:
        """The scope given at construction (None = none): the value the agent gives its ranks'
        ``LABGANG_SIM_SCOPE``."""
        return self._scope

    # ------------------------------------------------------------------ test controls

    def hold_memory(self, uuid: str, pid: int, used_bytes: int) -> None:
        """Make NVML show ``pid`` using ``used_bytes`` on device ``uuid``, alive or not.

        Models a context NVML still reports after its process is gone (or overrides the
        memory of a live ``CUDA_VISIBLE_DEVICES`` process).

        Raises:
            ValueError: ``uuid`` is not a simulated GPU or MIG device.
        """
        self._device_by_uuid(uuid)
        self._held[(uuid, int(pid))] = int(used_bytes)

    def release_memory(self, uuid: str, pid: int) -> None:
        """Undo :meth:`hold_memory` for (``uuid``, ``pid``); unknown pairs are ignored."""
        self._held.pop((uuid, int(pid)), None)

    def set_utilization(
        self,
        uuid: str,
        gpu_pct: float | None = None,
        sm_active_pct: float | None = None,
        sm_occupancy_pct: float | None = None,
    ) -> None:
        """Set a device's readings (percent); on a MIG device they apply to its GPU instance.

        Set readings win over what the device's live processes do (see "Activity" in the module docstring).

        Raises:
            ValueError: ``uuid`` is not a simulated device.
        """
        gpu, mig = self._device_by_uuid(uuid)
        self._pinned.add(uuid.lower())
        if mig is None:
            if gpu_pct is not None:
                gpu.utilization_gpu_pct.set(gpu_pct)
            if sm_active_pct is not None:
                gpu.sm_active_pct.set(sm_active_pct)
            if sm_occupancy_pct is not None:
                gpu.sm_occupancy_pct.set(sm_occupancy_pct)
            return
        for member in gpu.mig_devices:
            if member.gi_id == mig.gi_id:
                if sm_active_pct is not None:
                    member.sm_active_pct.set(sm_active_pct)
                if sm_occupancy_pct is not None:
                    member.sm_occupancy_pct.set(sm_occupancy_pct)

    def set_mig_layout(self, gpu_index: int, devices: list[SimMigDevice], *, current: bool = True) -> None:
        """Replace a GPU's MIG devices (reconfiguration); older MIG handles go stale."""
        gpu = self.machine.gpus[gpu_index]
        gpu.mig_devices = list(devices)
        gpu.mig_current = gpu.mig_pending = current
        self._generation[gpu_index] += 1

    def _device_by_uuid(self, uuid: str) -> tuple[SimGpu, SimMigDevice | None]:
        for gpu in self.machine.gpus:
            if gpu.uuid.lower() == uuid.lower():
                return gpu, None
            for mig in gpu.mig_devices:
                if mig.uuid.lower() == uuid.lower() or _legacy(gpu, mig).lower() == uuid.lower():
                    return gpu, mig
        raise ValueError(f"uuid: {uuid!r} is not a device of simulated machine {self.machine.hostname}")

    # ------------------------------------------------------------------ plumbing

    def _fail(self, code: int) -> NoReturn:
        raise pynvml.NVMLError(code)

    def _enter(self, fn: str) -> None:
        """The checks of every call: NVML initialised, ``fn`` present in this driver."""
        if self._init_count <= 0:
            self._fail(pynvml.NVML_ERROR_UNINITIALIZED)
        if fn in self.machine.missing_functions:
            self._fail(pynvml.NVML_ERROR_FUNCTION_NOT_FOUND)

    def _device(self, fn: str, handle: Any) -> tuple[SimGpu, SimMigDevice | None]:
        """:meth:`_enter`, then the GPU (and MIG device) ``handle`` names, failing as NVML does."""
        self._enter(fn)
        if not isinstance(handle, SimHandle) or not 0 <= handle.gpu_index < len(self.machine.gpus):
            self._fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.machine.gpus[handle.gpu_index]
        if gpu.lost:
            self._fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        if fn in gpu.errors:
            self._fail(gpu.errors[fn])
        if handle.mig_index is None:
            return gpu, None
        if handle.generation != self._generation[gpu.index] or not gpu.mig_current:
            self._fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        mig = next((m for m in gpu.mig_devices if m.index == handle.mig_index), None)
        if mig is None:
            self._fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return gpu, mig

    # ------------------------------------------------------------------ init / system

    def nvmlInit(self) -> None:
        """``nvmlInit``: increments the init reference count."""
        self.nvmlInitWithFlags(0)

    def nvmlInitWithFlags(self, flags: int) -> None:
        """``nvmlInitWithFlags``; flags are accepted and ignored."""
        if "nvmlInit_v2" in self.machine.missing_functions:
            self._fail(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
        self._init_count += 1

    def nvmlShutdown(self) -> None:
        """``nvmlShutdown``: ``Uninitialized`` when not initialised."""
        if self._init_count <= 0:
            self._fail(pynvml.NVML_ERROR_UNINITIALIZED)
        self._init_count -= 1

    def nvmlSystemGetDriverVersion(self) -> str:
        """Driver version string, e.g. ``"565.57.01"``."""
        self._enter("nvmlSystemGetDriverVersion")
        return self.machine.driver_version

    def nvmlSystemGetNVMLVersion(self) -> str:
        """NVML version string, e.g. ``"12.565.57.01"``."""
        self._enter("nvmlSystemGetNVMLVersion")
        return self.machine.nvml_version

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        """CUDA driver API version as an int, e.g. ``12070``."""
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.machine.cuda_driver_version

    nvmlSystemGetCudaDriverVersion_v2 = nvmlSystemGetCudaDriverVersion

    # ------------------------------------------------------------------ enumeration

    def nvmlDeviceGetCount(self) -> int:
        """Counts every GPU, including ones whose handle cannot be opened. Starts a new process scan."""
        self._enter("nvmlDeviceGetCount")
        self._live = None
        return len(self.machine.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> SimHandle:
        """A new handle for GPU ``index``; ``GPU_IS_LOST`` or the GPU's ``handle_error`` when it cannot be opened."""
        self._enter("nvmlDeviceGetHandleByIndex")
        if not 0 <= int(index) < len(self.machine.gpus):
            self._fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        gpu = self.machine.gpus[int(index)]
        if gpu.lost:
            self._fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        if gpu.handle_error is not None:
            self._fail(gpu.handle_error)
        return SimHandle(gpu.index)

    def nvmlDeviceGetHandleByUUID(self, uuid: str | bytes) -> SimHandle:
        """GPU, ``MIG-…`` or legacy ``MIG-GPU-…/gi/ci`` UUIDs; ``GPU_IS_LOST`` if any GPU is lost."""
        self._enter("nvmlDeviceGetHandleByUUID")
        text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        if any(g.lost for g in self.machine.gpus):
            self._fail(pynvml.NVML_ERROR_GPU_IS_LOST)
        try:
            gpu, mig = self._device_by_uuid(text)
        except ValueError:
            self._fail(pynvml.NVML_ERROR_NOT_FOUND)
            raise
        if mig is None:
            return SimHandle(gpu.index)
        return SimHandle(gpu.index, mig.index, self._generation[gpu.index])

    def nvmlDeviceGetHandleByPciBusId(self, bus_id: str | bytes) -> SimHandle:
        """A new handle for the GPU at a PCI bus id; ``NOT_FOUND`` when none."""
        self._enter("nvmlDeviceGetHandleByPciBusId")
        text = (bus_id.decode() if isinstance(bus_id, bytes) else str(bus_id)).lower()
        for gpu in self.machine.gpus:
            if gpu.pci_bus_id.lower() == text:
                if gpu.lost:
                    self._fail(pynvml.NVML_ERROR_GPU_IS_LOST)
                return SimHandle(gpu.index)
        self._fail(pynvml.NVML_ERROR_NOT_FOUND)
        raise AssertionError

    # ------------------------------------------------------------------ identity

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        """``GPU-…`` or ``MIG-…`` UUID of a handle."""
        gpu, mig = self._device("nvmlDeviceGetUUID", handle)
        return mig.uuid if mig else gpu.uuid

    def nvmlDeviceGetName(self, handle: Any) -> str:
        """Product name; a MIG handle's name is ``"<parent name> MIG <profile>"``."""
        gpu, mig = self._device("nvmlDeviceGetName", handle)
        return f"{gpu.name} MIG {mig.profile}" if mig else gpu.name

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        """``nvmlPciInfo_t`` (``busId``, ``domain``, ``bus``, ``device``, ``pciDeviceId``).

        A MIG handle gives its parent's.
        """
        gpu, _ = self._device("nvmlDeviceGetPciInfo", handle)
        info = pynvml.nvmlPciInfo_t()
        bus = gpu.pci_bus_id.encode()
        info.busId = bus
        info.busIdLegacy = bus[-12:] if len(bus) > 12 else bus
        parts = gpu.pci_bus_id.replace(".", ":").split(":")
        try:
            info.domain, info.bus, info.device = int(parts[0], 16), int(parts[1], 16), int(parts[2], 16)
        except (IndexError, ValueError):
            pass
        info.pciDeviceId = gpu.pci_device_id
        return info

    nvmlDeviceGetPciInfo_v3 = nvmlDeviceGetPciInfo

    def nvmlDeviceGetIndex(self, handle: Any) -> int:
        """NVML index of a GPU; ``NOT_SUPPORTED`` on MIG handles."""
        gpu, mig = self._device("nvmlDeviceGetIndex", handle)
        if mig is not None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.index

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        """``/dev/nvidiaN`` minor number (the index here)."""
        gpu, _ = self._device("nvmlDeviceGetMinorNumber", handle)
        return gpu.index

    def nvmlDeviceGetSerial(self, handle: Any) -> str:
        """Board serial; ``NOT_SUPPORTED`` on GeForce boards (no ECC) without one."""
        gpu, _ = self._device("nvmlDeviceGetSerial", handle)
        if not gpu.serial and not gpu.ecc:  # GeForce boards: N/A in nvidia-smi
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.serial or "0000000000000"

    def nvmlDeviceGetArchitecture(self, handle: Any) -> int:
        """``NVML_DEVICE_ARCH_*`` of the GPU."""
        gpu, _ = self._device("nvmlDeviceGetArchitecture", handle)
        return gpu.arch

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        """``(major, minor)``, e.g. ``(9, 0)``."""
        gpu, _ = self._device("nvmlDeviceGetCudaComputeCapability", handle)
        return gpu.cuda_capability

    # ------------------------------------------------------------------ memory

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: int | None = None) -> Any:
        """v1 (``used`` includes reserved) or, with ``version=nvmlMemory_v2``, v2; bytes."""
        gpu, mig = self._device("nvmlDeviceGetMemoryInfo_v2" if version else "nvmlDeviceGetMemoryInfo", handle)
        if mig is not None:
            total_mib, reserved_mib = float(mig.memory_total_mib), 0.0
            used_bytes = self._gi_used_bytes(gpu, mig.gi_id)
        else:
            if gpu.mig_current and self.machine.unprivileged:
                self._fail(pynvml.NVML_ERROR_NO_PERMISSION)
            if gpu.memory_total_mib is None or gpu.memory_used_mib is None:
                self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
            total_mib, reserved_mib = float(gpu.memory_total_mib), float(gpu.memory_reserved_mib)
            used_bytes = int(gpu.memory_used_mib * MIB) + sum(b or 0 for _, b in self._device_processes(gpu, None))
            if gpu.mig_current:
                used_bytes = int(gpu.memory_used_mib * MIB) + sum(
                    self._gi_used_bytes(gpu, gi) for gi in sorted({m.gi_id for m in gpu.mig_devices})
                )
        total, reserved = int(total_mib * MIB), int(reserved_mib * MIB)
        if version:
            mem = pynvml.c_nvmlMemory_v2_t()
            mem.version = version
            mem.total, mem.reserved = total, reserved
            mem.used = min(used_bytes, total - reserved)
            mem.free = total - reserved - mem.used
        else:
            mem = pynvml.c_nvmlMemory_t()
            mem.total = total
            mem.used = min(used_bytes + reserved, total)
            mem.free = total - mem.used
        return mem

    def _gi_used_bytes(self, gpu: SimGpu, gi_id: int) -> int:
        members = [m for m in gpu.mig_devices if m.gi_id == gi_id]
        base = max((m.memory_used_mib for m in members), default=0.0)
        procs = sum(b or 0 for m in members for _, b in self._device_processes(gpu, m))
        return int(base * MIB) + procs

    # ------------------------------------------------------------------ utilisation, thermal, power

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        """``NOT_SUPPORTED`` on MIG-enabled GPUs and MIG handles (nvml.h; docs/nvml.md §5.1)."""
        gpu, mig = self._device("nvmlDeviceGetUtilizationRates", handle)
        if mig is not None or gpu.mig_current:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        g, m = gpu.utilization_gpu_pct.next(), gpu.utilization_memory_pct.next()
        if g is None or m is None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        live = self.labgang_activity(gpu.uuid)
        if live is not None:
            g = live.util_pct
        util = pynvml.c_nvmlUtilization_t()
        util.gpu, util.memory = int(g), int(m)
        return util

    def nvmlDeviceGetTemperature(self, handle: Any, sensor: int) -> int:
        """GPU temperature in °C for ``NVML_TEMPERATURE_GPU``; ``NOT_SUPPORTED`` on MIG handles."""
        gpu, mig = self._device("nvmlDeviceGetTemperature", handle)
        if mig is not None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if sensor != pynvml.NVML_TEMPERATURE_GPU:
            self._fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        value = gpu.temperature_c.next()
        if value is None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return int(value)

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> int:
        """Power draw in **milliwatts**."""
        gpu, mig = self._device("nvmlDeviceGetPowerUsage", handle)
        value = gpu.power_w.next()
        if mig is not None or value is None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return round(float(value) * 1000)

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: Any) -> int:
        """Enforced power limit in **milliwatts**."""
        gpu, mig = self._device("nvmlDeviceGetEnforcedPowerLimit", handle)
        if mig is not None or gpu.power_limit_w is None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return round(float(gpu.power_limit_w) * 1000)

    nvmlDeviceGetPowerManagementLimit = nvmlDeviceGetEnforcedPowerLimit

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: Any) -> int:
        """Bit mask of active clock-event reasons (``nvmlClocksEventReason*``)."""
        gpu, mig = self._device("nvmlDeviceGetCurrentClocksEventReasons", handle)
        if mig is not None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.clock_event_mask

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle: Any) -> int:
        """Deprecated name of :meth:`nvmlDeviceGetCurrentClocksEventReasons`."""
        gpu, mig = self._device("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
        if mig is not None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.clock_event_mask

    def nvmlDeviceGetSupportedClocksEventReasons(self, handle: Any) -> int:
        """Mask of the reasons this GPU can report (all nine bits)."""
        self._device("nvmlDeviceGetSupportedClocksEventReasons", handle)
        return 0x1FF

    def nvmlDeviceGetEccMode(self, handle: Any) -> list[int]:
        """``[current, pending]`` ECC mode; ``NOT_SUPPORTED`` without ECC."""
        gpu, _ = self._device("nvmlDeviceGetEccMode", handle)
        if not gpu.ecc:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [1, 1]

    def nvmlDeviceGetTotalEccErrors(self, handle: Any, error_type: int, counter_type: int) -> int:
        """ECC error count; ``NOT_SUPPORTED`` on boards without ECC (GeForce)."""
        gpu, mig = self._device("nvmlDeviceGetTotalEccErrors", handle)
        if not gpu.ecc or mig is not None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if error_type == pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED and counter_type == pynvml.NVML_VOLATILE_ECC:
            return gpu.ecc_volatile_uncorrected
        return 0

    # ------------------------------------------------------------------ MIG

    def nvmlDeviceGetMigMode(self, handle: Any) -> list[int]:
        """``[current, pending]``; ``NOT_SUPPORTED`` on GPUs that cannot do MIG."""
        gpu, mig = self._device("nvmlDeviceGetMigMode", handle)
        if not gpu.mig_capable or mig is not None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [int(gpu.mig_current), int(gpu.mig_pending)]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: Any) -> int:
        """The maximum number of MIG devices (7), not the number that exist; 0 with MIG off."""
        gpu, mig = self._device("nvmlDeviceGetMaxMigDeviceCount", handle)
        if mig is not None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return gpu.max_mig_devices if gpu.mig_current else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: Any, index: int) -> SimHandle:
        """``NOT_FOUND`` for an empty slot, ``INVALID_ARGUMENT`` beyond the maximum."""
        gpu, mig = self._device("nvmlDeviceGetMigDeviceHandleByIndex", handle)
        if mig is not None or not gpu.mig_capable:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not gpu.mig_current or not 0 <= int(index) < gpu.max_mig_devices:
            self._fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        if not any(m.index == int(index) for m in gpu.mig_devices):
            self._fail(pynvml.NVML_ERROR_NOT_FOUND)
        return SimHandle(gpu.index, int(index), self._generation[gpu.index])

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, handle: Any) -> SimHandle:
        """The parent GPU's handle; ``INVALID_ARGUMENT`` for a GPU handle."""
        gpu, mig = self._device("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", handle)
        if mig is None:
            self._fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return SimHandle(gpu.index)

    def nvmlDeviceIsMigDeviceHandle(self, handle: Any) -> ctypes.c_uint:
        """Like pynvml 12.535+: a ``c_uint`` (``bool()`` works, ``== 1`` does not)."""
        _, mig = self._device("nvmlDeviceIsMigDeviceHandle", handle)
        return ctypes.c_uint(1 if mig is not None else 0)

    def nvmlDeviceGetGpuInstanceId(self, handle: Any) -> int:
        """GPU instance id of a MIG handle; ``NOT_SUPPORTED`` for a GPU handle."""
        _, mig = self._device("nvmlDeviceGetGpuInstanceId", handle)
        if mig is None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return mig.gi_id

    def nvmlDeviceGetComputeInstanceId(self, handle: Any) -> int:
        """Compute instance id of a MIG handle; ``NOT_SUPPORTED`` for a GPU handle."""
        _, mig = self._device("nvmlDeviceGetComputeInstanceId", handle)
        if mig is None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return mig.ci_id

    def nvmlDeviceGetAttributes(self, handle: Any) -> Any:
        """``c_nvmlDeviceAttributes``: SMs, slice counts and memory (MB) of a MIG device or GPU."""
        gpu, mig = self._device("nvmlDeviceGetAttributes_v2", handle)
        attrs = pynvml.c_nvmlDeviceAttributes()
        if mig is None:
            attrs.multiprocessorCount = gpu.sm_count
            attrs.memorySizeMB = int(gpu.memory_total_mib or 0)
            return attrs
        attrs.multiprocessorCount = mig.sm_count
        attrs.gpuInstanceSliceCount = mig.gi_slices
        attrs.computeInstanceSliceCount = mig.ci_slices
        attrs.memorySizeMB = mig.memory_total_mib
        attrs.sharedCopyEngineCount = mig.gi_slices
        attrs.sharedDecoderCount = mig.gi_slices
        return attrs

    nvmlDeviceGetAttributes_v2 = nvmlDeviceGetAttributes

    def nvmlDeviceGetGpuInstanceProfileInfo(self, handle: Any, profile: int, version: int = 2) -> Any:
        """Profile info by enum index; ``NOT_SUPPORTED`` when MIG is not enabled or the profile is absent."""
        gpu, mig = self._device("nvmlDeviceGetGpuInstanceProfileInfoV", handle)
        from labgang.agent.nvml import models

        model = models.by_name(gpu.name)
        if mig is not None or not gpu.mig_current or model is None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        enum_to_slices = {0: 1, 1: 2, 2: 3, 3: 4, 4: 7}
        slices = enum_to_slices.get(int(profile))
        prof = next((p for p in model.mig_profiles if p.slices == slices and "+" not in p.name), None)
        if prof is None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        info = pynvml.c_nvmlGpuInstanceProfileInfo_v2_t()
        info.id, info.sliceCount, info.multiprocessorCount = prof.profile_id, prof.slices, prof.sm_count
        info.memorySizeMB = prof.memory_mib
        info.instanceCount = 7 // prof.slices
        info.name = f"MIG {prof.name}".encode()
        return info

    # ------------------------------------------------------------------ processes

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        """Unversioned call: ``NVMLLibraryMismatchError`` when the driver lacks ``_v3`` (pynvml ≥ 12.5xx)."""
        if "nvmlDeviceGetComputeRunningProcesses_v3" in self.machine.missing_functions:
            try:
                return self.nvmlDeviceGetComputeRunningProcesses_v3(handle)
            except pynvml.NVMLError_FunctionNotFound:
                raise pynvml.NVMLLibraryMismatchError(
                    "Unversioned function called and the pyNVML version does not match the NVML lib version. "
                    "Either use matching pyNVML and NVML lib versions or use a versioned function such as "
                    "nvmlDeviceGetComputeRunningProcesses_v2"
                ) from None
        return self.nvmlDeviceGetComputeRunningProcesses_v3(handle)

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any) -> list[Any]:
        """Rows with ``pid``, ``usedGpuMemory`` (bytes or None), ``gpuInstanceId``, ``computeInstanceId``."""
        gpu, mig = self._device("nvmlDeviceGetComputeRunningProcesses_v3", handle)
        rows: list[Any] = []
        sources: list[SimMigDevice | None]
        if mig is not None:
            sources = [mig]
        elif gpu.mig_current:
            if self.machine.unprivileged:
                self._fail(pynvml.NVML_ERROR_NO_PERMISSION)
            sources = list(gpu.mig_devices)
        else:
            sources = [None]
        for src in sources:
            for pid, used in self._device_processes(gpu, src):
                gi = src.gi_id if src is not None else NO_INSTANCE
                ci = src.ci_id if src is not None else NO_INSTANCE
                rows.append(
                    pynvml.nvmlFriendlyObject(
                        {"pid": pid, "usedGpuMemory": used, "gpuInstanceId": gi, "computeInstanceId": ci}
                    )
                )
        if gpu.mig_current and mig is None:
            rows.extend(self._static_rows(gpu, None, unassigned_only=True))
        return rows

    nvmlDeviceGetComputeRunningProcesses_v2 = nvmlDeviceGetComputeRunningProcesses_v3

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]:
        """Graphics processes: none on simulated machines."""
        self._device("nvmlDeviceGetGraphicsRunningProcesses", handle)
        return []

    def _static_rows(self, gpu: SimGpu, mig: SimMigDevice | None, unassigned_only: bool = False) -> list[Any]:
        rows = []
        ids = {(m.gi_id, m.ci_id) for m in gpu.mig_devices}
        for p in gpu.processes:
            if unassigned_only and (p.gi_id, p.ci_id) not in ids and p.gi_id is not None:
                rows.append(
                    pynvml.nvmlFriendlyObject(
                        {
                            "pid": p.pid,
                            "usedGpuMemory": None if p.used_memory_mib is None else int(p.used_memory_mib * MIB),
                            "gpuInstanceId": p.gi_id,
                            "computeInstanceId": p.ci_id if p.ci_id is not None else NO_INSTANCE,
                        }
                    )
                )
        return rows

    def _device_processes(self, gpu: SimGpu, mig: SimMigDevice | None) -> list[tuple[int, int | None]]:
        """(pid, used bytes or None) on one device: fixed, live (CUDA_VISIBLE_DEVICES) and held."""
        uuid = mig.uuid if mig is not None else gpu.uuid
        out: dict[int, int | None] = {}
        for p in gpu.processes:
            if (mig is None and p.gi_id is None) or (mig is not None and (p.gi_id, p.ci_id) == (mig.gi_id, mig.ci_id)):
                out[p.pid] = None if p.used_memory_mib is None else int(p.used_memory_mib * MIB)
        for pid in self._live_processes().get(uuid.lower(), []):
            declared = self._declared.get(pid, Declared()).memory_mib
            out[pid] = int((self.machine.process_memory_mib if declared is None else declared) * MIB)
        for (held_uuid, pid), used in self._held.items():
            if held_uuid.lower() == uuid.lower():
                out[pid] = used
        return sorted(out.items())

    def _live_processes(self) -> dict[str, list[int]]:
        """``{uuid (lower case): [pids]}`` of live processes whose CUDA_VISIBLE_DEVICES names it.

        With a scope, processes whose ``LABGANG_SIM_SCOPE`` names another scope are left out.

        Scanned once per inventory read (``nvmlDeviceGetCount`` starts a new scan).
        """
        if self._live is not None:
            return self._live
        live: dict[str, list[int]] = {}
        self._declared, self._cpu_pct = {}, {}
        if self._scan:
            known = self._uuid_aliases()
            seen: set[tuple[int, float]] = set()
            for proc in psutil.process_iter(["pid", "create_time"]):
                key = (proc.info["pid"], proc.info["create_time"] or 0.0)
                seen.add(key)
                if key not in self._env_cache:
                    try:
                        env = proc.environ()
                    except (psutil.Error, OSError):
                        env = {}
                    cvd = env.get("CUDA_VISIBLE_DEVICES", "")
                    self._env_cache[key] = (
                        tuple(x.strip().lower() for x in cvd.split(",") if x.strip()),
                        env.get(SCOPE_VARIABLE),
                        Declared.from_environ(env),
                    )
                entries, scope, declared = self._env_cache[key]
                if self._scope is not None and scope is not None and scope != self._scope:
                    continue  # a rank of another simulated instance on this host
                bound = False
                for entry in entries:
                    target = known.get(entry)
                    if target is not None:
                        live.setdefault(target, []).append(key[0])
                        bound = True
                if bound:
                    # Read again on every scan: a process that re-executed itself with its declaration
                    # (examples/*.py) keeps its pid and start time, so the cache may hold the old environment.
                    try:
                        declared = Declared.from_environ(proc.environ())
                    except (psutil.Error, OSError):
                        pass
                    self._declared[key[0]] = declared
                    self._cpu_pct[key[0]] = self._cpu_activity(proc, key)
            for stale in [k for k in self._env_cache if k not in seen]:
                del self._env_cache[stale]
            for stale in [k for k in self._cpu_seen if k not in seen]:
                del self._cpu_seen[stale]
        self._live = live
        return live

    def _cpu_activity(self, proc: Any, key: tuple[int, float]) -> float:
        """The process's CPU activity in percent of one core (0..100) since the previous scan, or
        since it started when this scan is the first to see it; 0 when psutil cannot tell."""
        try:
            times = proc.cpu_times()
        except (psutil.Error, OSError):
            return 0.0
        cpu_s, now = float(times.user + times.system), time.time()
        before = self._cpu_seen.get(key)
        self._cpu_seen[key] = (cpu_s, now)
        if before is None:
            cpu_before, since = 0.0, key[1] or now
        else:
            cpu_before, since = before
        wall = now - since
        if wall <= 0.0:
            return 0.0
        return max(0.0, min(100.0, 100.0 * (cpu_s - cpu_before) / wall))

    def labgang_activity(self, uuid: str) -> Activity | None:
        """What the live processes on device ``uuid`` do (see the module docstring, "Activity"), or None
        when it has none (then the machine file's values apply).

        ``utilization.gpu`` is the busiest process's: its declared ``SIM_GPU_UTIL_PCT``, else its CPU
        activity; SM activity the busiest declared ``SIM_GPU_SM_ACTIVE_PCT``, else that utilization.
        None also for a device whose readings :meth:`set_utilization` fixed.
        """
        pids = self._live_processes().get(uuid.lower())
        if not pids or uuid.lower() in self._pinned:
            return None
        util = sm = 0.0
        sm_declared: float | None = None
        for pid in pids:
            declared = self._declared.get(pid, Declared())
            util = max(util, declared.util_pct if declared.util_pct is not None else self._cpu_pct.get(pid, 0.0))
            if declared.sm_active_pct is not None:
                sm_declared = max(sm_declared or 0.0, declared.sm_active_pct)
        sm = util if sm_declared is None else sm_declared
        return Activity(round(util, 1), round(sm, 1))

    def _uuid_aliases(self) -> dict[str, str]:
        aliases: dict[str, str] = {}
        for gpu in self.machine.gpus:
            aliases[gpu.uuid.lower()] = gpu.uuid.lower()
            for mig in gpu.mig_devices:
                aliases[mig.uuid.lower()] = mig.uuid.lower()
                aliases[_legacy(gpu, mig).lower()] = mig.uuid.lower()
        return aliases

    # ------------------------------------------------------------------ GPM

    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> Any:
        """``c_nvmlGpmSupport_t``; ``isSupportedDevice`` only on Hopper and later."""
        gpu, _ = self._device("nvmlGpmQueryDeviceSupport", handle)
        support = pynvml.c_nvmlGpmSupport_t()
        support.version = pynvml.NVML_GPM_SUPPORT_VERSION
        support.isSupportedDevice = 1 if gpu.gpm else 0
        return support

    def nvmlGpmSampleAlloc(self) -> Any:
        """A new ``c_nvmlGpmSample_t`` (a real ctypes pointer, tracked by address)."""
        self._enter("nvmlGpmSampleAlloc")
        sample = pynvml.c_nvmlGpmSample_t(pynvml.struct_c_nvmlGpmSample_t())
        address = ctypes.addressof(sample.contents)
        self._samples[address] = None
        self._sample_refs[address] = sample
        return sample

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        """Forget a sample; unknown samples are ``INVALID_ARGUMENT``."""
        self._enter("nvmlGpmSampleFree")
        address = self._address(sample)
        self._samples.pop(address, None)
        self._sample_refs.pop(address, None)

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> Any:
        """Fill a sample of a whole GPU.

        ``NOT_SUPPORTED`` without GPM or on MIG handles (use ``nvmlGpmMigSampleGet``).
        """
        gpu, mig = self._device("nvmlGpmSampleGet", handle)
        if not gpu.gpm or mig is not None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        util = gpu.utilization_gpu_pct.peek()
        values = (float(util or 0.0), float(gpu.sm_active_pct.next() or 0.0), float(gpu.sm_occupancy_pct.next() or 0.0))
        live = self.labgang_activity(gpu.uuid)
        if live is not None:
            values = (live.util_pct, live.sm_active_pct, min(values[2], live.sm_active_pct))
        self._samples[self._address(sample)] = (("gpu", gpu.index), self.labgang_clock(), values)
        return sample

    def nvmlGpmMigSampleGet(self, handle: Any, gpu_instance_id: int, sample: Any) -> Any:
        """A sample of one GPU instance, taken through its parent GPU's handle."""
        gpu, mig = self._device("nvmlGpmMigSampleGet", handle)
        if not gpu.gpm or mig is not None:
            self._fail(pynvml.NVML_ERROR_NOT_SUPPORTED)
        members = [m for m in gpu.mig_devices if m.gi_id == int(gpu_instance_id)]
        if not gpu.mig_current or not members:
            self._fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        first = members[0]
        values = (0.0, float(first.sm_active_pct.next() or 0.0), float(first.sm_occupancy_pct.next() or 0.0))
        readings = [a for m in members if (a := self.labgang_activity(m.uuid)) is not None]
        if readings:
            sm = max(a.sm_active_pct for a in readings)
            values = (0.0, sm, min(values[2], sm))
        self._samples[self._address(sample)] = (("gi", gpu.index, int(gpu_instance_id)), self.labgang_clock(), values)
        return sample

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        """Fill ``request.metrics[:numMetrics]``; each metric gets its own ``nvmlReturn``."""
        self._enter("nvmlGpmMetricsGet")
        if request.version != pynvml.NVML_GPM_METRICS_GET_VERSION:
            self._fail(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        first = self._samples.get(self._address(request.sample1))
        second = self._samples.get(self._address(request.sample2))
        if first is None or second is None or first[0] != second[0]:
            self._fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        assert first is not None and second is not None
        too_close = second[1] - first[1] < GPM_MIN_INTERVAL_S
        for i in range(int(request.numMetrics)):
            metric = request.metrics[i]
            metric_id = int(metric.metricId)
            if metric_id not in _KNOWN_GPM_METRICS:
                metric.nvmlReturn, metric.value = pynvml.NVML_ERROR_NOT_SUPPORTED, 0.0
            elif too_close:
                metric.nvmlReturn, metric.value = pynvml.NVML_ERROR_INVALID_ARGUMENT, 0.0
            else:
                value = {
                    pynvml.NVML_GPM_METRIC_GRAPHICS_UTIL: second[2][0],
                    pynvml.NVML_GPM_METRIC_SM_UTIL: second[2][1],
                    pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: second[2][2],
                }.get(metric_id, 0.0)
                metric.nvmlReturn, metric.value = pynvml.NVML_SUCCESS, value
        return request

    def _address(self, sample: Any) -> int:
        try:
            return ctypes.addressof(sample.contents)
        except (AttributeError, ValueError, TypeError):
            self._fail(pynvml.NVML_ERROR_INVALID_ARGUMENT)
            raise


def _legacy(gpu: SimGpu, mig: SimMigDevice) -> str:
    """The pre-R470 MIG UUID form ``MIG-GPU-<gpu uuid>/<gi>/<ci>``."""
    return f"MIG-{gpu.uuid}/{mig.gi_id}/{mig.ci_id}"


def _export_pynvml_names() -> None:
    """Give SimulatedNvml pynvml's constants, error classes and structs (not its functions)."""
    for name in dir(pynvml):
        if name.startswith("nvml") and callable(getattr(pynvml, name)) and not isinstance(getattr(pynvml, name), type):
            continue  # functions: only those defined above exist on the simulator
        if name.startswith("_") or hasattr(SimulatedNvml, name):
            continue
        value = getattr(pynvml, name)
        if name.startswith(("NVML", "nvml", "c_nvml", "struct_c_nvml")):
            setattr(SimulatedNvml, name, value)


_export_pynvml_names()

__all__ = ["SCOPE_VARIABLE", "SimHandle", "SimulatedNvml", "VirtualClock"]
