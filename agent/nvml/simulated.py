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

The backend is composed of parts it holds: the devices and their handles
(:mod:`labgang.agent.nvml.simdevices`), live processes and their activity, and scopes
(:mod:`labgang.agent.nvml.simprocs`), GPM (:mod:`labgang.agent.nvml.simgpm`) and topology
(:mod:`labgang.agent.nvml.simtopo`); its pynvml functions of those areas hand the call to the part.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pynvml
from labgang.agent.nvml.machine import SimGpu, SimMachine, SimMigDevice
from labgang.agent.nvml.simdevices import SimDevices, SimHandle, fail
from labgang.agent.nvml.simgpm import GpmModel
from labgang.agent.nvml.simprocs import MIB, SCOPE_VARIABLE, Activity, ProcessModel
from labgang.agent.nvml.simshare import OutOfMemory, ShareModel
from labgang.agent.nvml.simtopo import TopologyModel

if TYPE_CHECKING:
    from labgang.agent.nvml.recorder import ReplayNvml


class VirtualClock:
    """A monotonic clock in seconds that only moves when :meth:`sleep` is called (tests, replays)."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        """Advance the virtual clock by ``seconds``."""
        self.now += max(0.0, seconds)


class SimulatedNvml:
    """A simulated NVML with pynvml's API over a :class:`SimMachine`.

    Processes, GPM and topology calls go to the parts it holds (:class:`ProcessModel`,
    :class:`GpmModel`, :class:`TopologyModel`), which share its :class:`SimDevices`.

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
        self.machine = machine
        self._init_count = 0
        self._devices = SimDevices(machine, lambda: self._init_count > 0)
        if virtual_time:
            clock = VirtualClock()
            self.labgang_clock: Callable[[], float] = clock
            self.labgang_sleep: Callable[[float], None] = clock.sleep
        else:
            self.labgang_clock = time.monotonic
            self.labgang_sleep = time.sleep
        self._processes = ProcessModel(self._devices, scope=scope, scan=scan_processes)
        self._shares = ShareModel(self._devices, self._processes)
        self._gpm = GpmModel(self._devices, self.labgang_clock, self._processes.labgang_activity)
        self._topology = TopologyModel(self._devices)
        self._scope = scope

    @property
    def _samples(self) -> dict[int, tuple[Any, float, tuple[float, float, float]] | None]:
        """The GPM samples allocated and not freed, by address (tests check that none leak)."""
        return self._gpm.samples

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

    def set_mig_layout(self, gpu_index: int, devices: list[SimMigDevice], *, current: bool = True) -> None:
        """Replace a GPU's MIG devices (reconfiguration); older MIG handles go stale."""
        gpu = self.machine.gpus[gpu_index]
        gpu.mig_devices = list(devices)
        gpu.mig_current = gpu.mig_pending = current
        self._devices.new_layout(gpu_index)

    def hold_memory(self, uuid: str, pid: int, used_bytes: int) -> None:
        """:meth:`ProcessModel.hold_memory`: NVML shows ``pid`` using ``used_bytes`` on ``uuid``, alive or not.

        Raises:
            ValueError: ``uuid`` is not a simulated GPU or MIG device.
        """
        self._processes.hold_memory(uuid, pid, used_bytes)

    def release_memory(self, uuid: str, pid: int) -> None:
        """Undo :meth:`hold_memory` for (``uuid``, ``pid``); unknown pairs are ignored."""
        self._processes.release_memory(uuid, pid)

    def set_utilization(
        self,
        uuid: str,
        gpu_pct: float | None = None,
        sm_active_pct: float | None = None,
        sm_occupancy_pct: float | None = None,
    ) -> None:
        """:meth:`ProcessModel.set_utilization`: fix a device's readings (percent).

        Raises:
            ValueError: ``uuid`` is not a simulated device.
        """
        self._processes.set_utilization(uuid, gpu_pct, sm_active_pct, sm_occupancy_pct)

    def labgang_activity(self, uuid: str) -> Activity | None:
        """:meth:`ProcessModel.labgang_activity`: what the live processes on ``uuid`` do, or None."""
        return self._processes.labgang_activity(uuid)

    def _device_by_uuid(self, uuid: str) -> tuple[SimGpu, SimMigDevice | None]:
        return self._devices.by_uuid(uuid)

    # ------------------------------------------------------------------ plumbing

    def _fail(self, code: int) -> NoReturn:
        fail(code)

    def _enter(self, fn: str) -> None:
        """The checks of every call: NVML initialised, ``fn`` present in this driver."""
        self._devices.enter(fn)

    def _device(self, fn: str, handle: Any) -> tuple[SimGpu, SimMigDevice | None]:
        """:meth:`_enter`, then the GPU (and MIG device) ``handle`` names, failing as NVML does."""
        return self._devices.device(fn, handle)

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
        self._processes.new_scan()
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
        return SimHandle(gpu.index, mig.index, self._devices.generation(gpu.index))

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
        """``nvmlPciInfo_t`` (``busId``, ``domain``, ``bus``, ``device``, ``pciDeviceId``,
        ``pciSubSystemId``: 0 where the machine's source does not say it).

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
        info.pciSubSystemId = gpu.pci_sub_system_id
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
            processes = self._processes.device_processes(gpu, None)
            used_bytes = int(gpu.memory_used_mib * MIB) + sum(b or 0 for _, b in processes)
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
        procs = sum(b or 0 for m in members for _, b in self._processes.device_processes(gpu, m))
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
        return SimHandle(gpu.index, int(index), self._devices.generation(gpu.index))

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

    # ------------------------------------------------------------------ processes (ProcessModel)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        """Unversioned call: ``NVMLLibraryMismatchError`` when the driver lacks ``_v3`` (pynvml ≥ 12.5xx)."""
        if "nvmlDeviceGetComputeRunningProcesses_v3" in self.machine.missing_functions:
            return self._processes.nvmlDeviceGetComputeRunningProcesses(handle)
        return self.nvmlDeviceGetComputeRunningProcesses_v3(handle)

    def nvmlDeviceGetComputeRunningProcesses_v3(self, handle: Any) -> list[Any]:
        """Rows with ``pid``, ``usedGpuMemory`` (bytes or None), ``gpuInstanceId``, ``computeInstanceId``;
        a whole GPU's MPS clients are folded into their server (:class:`ShareModel`)."""
        return self._shares.compute_rows(handle)

    def nvmlDeviceGetMPSComputeRunningProcesses_v3(self, handle: Any) -> list[Any]:
        """:meth:`ShareModel.nvmlDeviceGetMPSComputeRunningProcesses_v3`: the MPS clients of a whole GPU."""
        return self._shares.nvmlDeviceGetMPSComputeRunningProcesses_v3(handle)

    def labgang_out_of_memory(self) -> list[OutOfMemory]:
        """:meth:`ShareModel.out_of_memory`: the processes simulated cards refused memory to (and ended)."""
        return self._shares.out_of_memory()

    nvmlDeviceGetComputeRunningProcesses_v2 = nvmlDeviceGetComputeRunningProcesses_v3

    def nvmlDeviceGetGraphicsRunningProcesses(self, handle: Any) -> list[Any]:
        """Graphics processes: none on simulated machines."""
        return self._processes.nvmlDeviceGetGraphicsRunningProcesses(handle)

    # ------------------------------------------------------------------ GPM (GpmModel)

    def nvmlGpmQueryDeviceSupport(self, handle: Any) -> Any:
        """``c_nvmlGpmSupport_t``; ``isSupportedDevice`` only on Hopper and later."""
        return self._gpm.nvmlGpmQueryDeviceSupport(handle)

    def nvmlGpmSampleAlloc(self) -> Any:
        """A new ``c_nvmlGpmSample_t`` (a real ctypes pointer, tracked by address)."""
        return self._gpm.nvmlGpmSampleAlloc()

    def nvmlGpmSampleFree(self, sample: Any) -> None:
        """Forget a sample; unknown samples are ``INVALID_ARGUMENT``."""
        self._gpm.nvmlGpmSampleFree(sample)

    def nvmlGpmSampleGet(self, handle: Any, sample: Any) -> Any:
        """Fill a sample of a whole GPU; ``NOT_SUPPORTED`` without GPM or on MIG handles."""
        return self._gpm.nvmlGpmSampleGet(handle, sample)

    def nvmlGpmMigSampleGet(self, handle: Any, gpu_instance_id: int, sample: Any) -> Any:
        """A sample of one GPU instance, taken through its parent GPU's handle."""
        return self._gpm.nvmlGpmMigSampleGet(handle, gpu_instance_id, sample)

    def nvmlGpmMetricsGet(self, request: Any) -> Any:
        """Fill ``request.metrics[:numMetrics]``; each metric gets its own ``nvmlReturn``."""
        return self._gpm.nvmlGpmMetricsGet(request)

    # ------------------------------------------------------------------ topology (TopologyModel)

    def nvmlDeviceGetTopologyCommonAncestor(self, device1: Any, device2: Any) -> int:
        """``nvmlGpuTopologyLevel_t`` of the pair; ``NOT_SUPPORTED`` when unknown, ``INVALID_ARGUMENT`` for one GPU."""
        return self._topology.nvmlDeviceGetTopologyCommonAncestor(device1, device2)

    def nvmlDeviceGetP2PStatus(self, device1: Any, device2: Any, p2pIndex: int) -> int:
        """``nvmlGpuP2PStatus_t``: NVLink OK when NVLinks join the pair; other indexes OK below SYS."""
        return self._topology.nvmlDeviceGetP2PStatus(device1, device2, p2pIndex)

    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        """1 for each of the GPU's links (all active); errors as in :mod:`~labgang.agent.nvml.simtopo`."""
        return self._topology.nvmlDeviceGetNvLinkState(device, link)

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: Any, link: int) -> Any:
        """``nvmlPciInfo_t`` of the link's far end: the peer GPU, or an NVSwitch."""
        return self._topology.nvmlDeviceGetNvLinkRemotePciInfo(device, link)

    nvmlDeviceGetNvLinkRemotePciInfo_v2 = nvmlDeviceGetNvLinkRemotePciInfo

    def nvmlDeviceGetMemoryAffinity(self, handle: Any, nodeSetSize: int, scope: int) -> Any:
        """Mask of the GPU's NUMA node; ``NOT_SUPPORTED`` when unknown."""
        return self._topology.nvmlDeviceGetMemoryAffinity(handle, nodeSetSize, scope)

    def nvmlDeviceGetCpuAffinity(self, handle: Any, cpuSetSize: int) -> Any:
        """Mask of the GPU's CPUs (64 per word); ``NOT_SUPPORTED`` when unknown."""
        return self._topology.nvmlDeviceGetCpuAffinity(handle, cpuSetSize)


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
