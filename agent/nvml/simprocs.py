"""Live processes on a simulated machine: the pynvml process calls, the psutil scan behind them, scopes.

:class:`ProcessModel` is a part :class:`~labgang.agent.nvml.simulated.SimulatedNvml` holds. Live
processes whose environment has ``CUDA_VISIBLE_DEVICES`` naming a simulated GPU or MIG UUID appear
as compute processes on that device (psutil), using the machine's ``process_memory_mib`` unless
``SimulatedNvml.hold_memory`` (:meth:`ProcessModel.hold_memory`) says otherwise.


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
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import psutil
import pynvml
from labgang.agent.nvml.machine import SimGpu, SimMigDevice
from labgang.agent.nvml.simdevices import SimDevices, fail, legacy_mig_uuid

MIB = 1024 * 1024
NO_INSTANCE = 0xFFFFFFFF
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


KTHREADD_PID = 2  # the parent of every kernel thread (Linux)


def _visible_devices_and_scope(
    proc: psutil.Process,
) -> tuple[tuple[tuple[str, ...], str | None, Declared], bool]:
    """``((CUDA_VISIBLE_DEVICES entries, lower case), LABGANG_SIM_SCOPE or None, what it declares)``
    of a process, and whether that answer is final for this process (worth caching).

    An empty environment is not final: a process that is still inside ``execve`` (its parent
    already returned from ``Popen``/``posix_spawn``) shows an empty ``/proc/PID/environ`` for a
    moment, and caching that would hide it for its whole life. A process whose environment is
    unreadable (another user's) is final; one that is gone or a zombie is not.
    """
    try:
        env = proc.environ()
    except psutil.AccessDenied:
        return ((), None, Declared()), True
    except (psutil.Error, OSError):
        return ((), None, Declared()), False
    cvd = env.get("CUDA_VISIBLE_DEVICES", "")
    entries = tuple(x.strip().lower() for x in cvd.split(",") if x.strip())
    return (entries, env.get(SCOPE_VARIABLE), Declared.from_environ(env)), bool(env)


PARKED_CHILD_S = 30.0
"""How long a forked child may still be before its ``exec`` (three times the start gate's 10 s
bound on a parked rank, agent/supervisor/gate.py ``DEFAULT_TIMEOUT_S``)."""


def _maybe_before_exec(info: dict[str, Any], names: dict[int, str], now: float) -> bool:
    """Whether a process may be a fork that has not called ``exec`` yet: it has its parent's name and
    started less than :data:`PARKED_CHILD_S` seconds ago (``info``: psutil's pid, ppid, name and
    create_time; ``names``: every process's name by pid).

    Until its ``exec`` such a child shows its parent's environment under the pid and start time its
    new image keeps, as a rank parked at its start gate does (everything but the ``exec`` done):
    an answer read from that image is not the process's.
    """
    if info.get("name") != names.get(info.get("ppid") or 0):
        return False
    return now - (info.get("create_time") or 0.0) < PARKED_CHILD_S


class ProcessModel:
    """The processes on a simulated machine's devices (fixed, live and held) and pynvml's process calls over them.

    Args:
        devices: the machine's devices (handle and UUID look-up, the checks of every call).
        scope: the backend's scope (see "Scopes" in the module docstring); None = every process counts.
        scan: look for live processes with psutil; False = fixed and held processes only.
    """

    def __init__(self, devices: SimDevices, *, scope: str | None, scan: bool) -> None:
        self._devices = devices
        self.machine = devices.machine
        self._scope = scope
        self._scan = scan
        self._held: dict[tuple[str, int], int] = {}
        self._live: dict[str, list[int]] | None = None
        # (pid, create time) -> (CUDA_VISIBLE_DEVICES entries, LABGANG_SIM_SCOPE or None, declared activity)
        self._env_cache: dict[tuple[int, float], tuple[tuple[str, ...], str | None, Declared]] = {}
        # (pid, create time) -> (CPU seconds, wall time) at the previous scan, for CPU activity
        self._cpu_seen: dict[tuple[int, float], tuple[float, float]] = {}
        self._declared: dict[int, Declared] = {}  # pid -> what it declared (this scan)
        self._cpu_pct: dict[int, float] = {}  # pid -> CPU activity since the previous scan (this scan)
        self._pinned: set[str] = set()  # devices whose readings set_utilization fixed (lower-case UUIDs)

    def new_scan(self) -> None:
        """Forget the last process scan: the next call that needs live processes scans again."""
        self._live = None

    # ------------------------------------------------------------------ test controls

    def hold_memory(self, uuid: str, pid: int, used_bytes: int) -> None:
        """Make NVML show ``pid`` using ``used_bytes`` on device ``uuid``, alive or not.

        Models a context NVML still reports after its process is gone (or overrides the
        memory of a live ``CUDA_VISIBLE_DEVICES`` process).

        Raises:
            ValueError: ``uuid`` is not a simulated GPU or MIG device.
        """
        self._devices.by_uuid(uuid)
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
        gpu, mig = self._devices.by_uuid(uuid)
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
        gpu, mig = self._devices.device("nvmlDeviceGetComputeRunningProcesses_v3", handle)
        rows: list[Any] = []
        sources: list[SimMigDevice | None]
        if mig is not None:
            sources = [mig]
        elif gpu.mig_current:
            if self.machine.unprivileged:
                fail(pynvml.NVML_ERROR_NO_PERMISSION)
            sources = list(gpu.mig_devices)
        else:
            sources = [None]
        for src in sources:
            for pid, used in self.device_processes(gpu, src):
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
        self._devices.device("nvmlDeviceGetGraphicsRunningProcesses", handle)
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

    def device_processes(self, gpu: SimGpu, mig: SimMigDevice | None) -> list[tuple[int, int | None]]:
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

    def live_pids(self, uuid: str) -> list[int]:
        """The live processes whose ``CUDA_VISIBLE_DEVICES`` names device ``uuid`` (this scan)."""
        return list(self._live_processes().get(uuid.lower(), []))

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
            procs = list(psutil.process_iter(["pid", "ppid", "create_time", "name"]))
            names = {proc.info["pid"]: proc.info["name"] for proc in procs}
            now = time.time()
            for proc in procs:
                key = (proc.info["pid"], proc.info["create_time"] or 0.0)
                seen.add(key)
                cached = self._env_cache.get(key)
                if cached is None:
                    cached, final = _visible_devices_and_scope(proc)
                    if final and not cached[0] and _maybe_before_exec(proc.info, names, now):
                        final = False  # read again next scan: its own image may name devices
                    # A kernel thread (kthreadd, pid 2, and its children) never has an environment
                    # and never execs: its empty answer is final (most of a host's processes).
                    if final or KTHREADD_PID in (proc.info["pid"], proc.info["ppid"]):
                        self._env_cache[key] = cached
                if any(entry in known for entry in cached[0]):
                    # Read again on every scan: a process that re-executed itself keeps its pid and start
                    # time, so the cache may hold its old environment, while it may now name other devices
                    # (a real one would hold a context on those; a device violation, docs/security.md) or
                    # declare other activity (examples/*.py).
                    fresh, final = _visible_devices_and_scope(proc)
                    if final:
                        self._env_cache[key] = cached = fresh
                entries, scope, declared = cached
                if self._scope is not None and scope is not None and scope != self._scope:
                    continue  # a rank of another simulated instance on this host
                bound = False
                for entry in entries:
                    target = known.get(entry)
                    if target is not None:
                        live.setdefault(target, []).append(key[0])
                        bound = True
                if bound:
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
                aliases[legacy_mig_uuid(gpu, mig).lower()] = mig.uuid.lower()
        return aliases
