"""Pitfall detectors: plain functions over cluster snapshots that say what is quietly wasting GPUs.

The TUI shows these findings and the coordinator exports them; both build a
:class:`ClusterSnapshot` (node inventories, plus the coordinator's device, job and
queue views when there is a coordinator) and call :func:`detect_all`.

Each detector is a pure function ``detect_x(snapshot, thresholds) -> list[Finding]``:
no I/O, no clock reads (``snapshot.now`` is the time), no dependence on dict order.
The only stateful piece is :class:`PitfallTracker`, which keeps a short history of
per-device activity samples (``now`` is always passed in) for the two findings that
need time: *allocated but idle* and the cluster's *allocation rate*.

A value NVML could not give (an ``Unavailable`` from ``labgang.agent.inventory``)
is never treated as 0: a detector that needs it stays silent.

Units: seconds, bytes, percent (0..100), watts, degrees Celsius.
"""

from __future__ import annotations

import enum
import math
from collections import deque
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

from labgang.agent import tomlfile

MiB = 1024 * 1024

# Device states in the coordinator's ``GET /v1/nodes`` device view.
FREE, ALLOCATED, FOREIGN, LOST, HELD = "free", "allocated", "foreign", "lost", "held"
DEVICE_STATES = (FREE, ALLOCATED, FOREIGN, LOST, HELD)
_FINISHED_JOB_STATES = ("succeeded", "failed", "cancelled")
_HOLDING_JOB_STATES = ("admitted", "running", "terminating")


class Severity(str, enum.Enum):
    """How urgent a finding is; sorts CRITICAL first."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"critical": 0, "warning": 1, "info": 2}[self.value]


class PitfallKind(str, enum.Enum):
    """Every kind of finding the detectors produce."""

    KERNEL_BUSY_SM_IDLE = "kernel-busy-sm-idle"
    ALLOCATED_IDLE = "allocated-idle"
    LOW_ALLOCATION_RATE = "low-allocation-rate"
    ALLOCATED_NO_PROCESS = "allocated-no-process"
    FOREIGN_PROCESS = "foreign-process"
    SHARED_MEMORY_PRESSURE = "shared-memory-pressure"
    BORROWED_AT_RISK = "borrowed-at-risk"
    FRAGMENTED_GANG = "fragmented-gang"
    MIG_PENDING_RESET = "mig-pending-reset"
    THROTTLING = "throttling"
    MEMORY_HELD_AFTER_JOB = "memory-held-after-job"


@dataclass(frozen=True, slots=True)
class Finding:
    """One pitfall, with the numbers that triggered it and one line on what to do.

    Attributes:
        kind: which detector fired.
        severity: how urgent.
        subject: what it is about, e.g. ``"node1 GPU 3"``, ``"job j-12"``, ``"queue vision"``.
        summary: one line with the numbers, e.g. ``"utilization.gpu 97% but SM activity 8%"``.
        advice: one line on what to do.
        numbers: the raw figures by name (units in the name: ``_pct``, ``_s``, ``_bytes``).
        node: the node the finding is about, or None for cluster-wide findings.
        uuid: the device UUID, or None.
        job: the job id, or None.
    """

    kind: PitfallKind
    severity: Severity
    subject: str
    summary: str
    advice: str
    numbers: Mapping[str, float] = field(default_factory=dict)
    node: str | None = None
    uuid: str | None = None
    job: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (enums as their string values)."""
        return {
            "kind": self.kind.value,
            "severity": self.severity.value,
            "subject": self.subject,
            "summary": self.summary,
            "advice": self.advice,
            "numbers": dict(self.numbers),
            "node": self.node,
            "uuid": self.uuid,
            "job": self.job,
        }


@dataclass(frozen=True, slots=True)
class PitfallThresholds:
    """Thresholds of every detector. Defaults suit a lab of shared 8-GPU servers.

    Attributes:
        busy_util_pct: ``utilization.gpu`` at or above which a GPU counts as kernel-busy (%).
        sm_idle_pct: GPM SM activity below which the SMs count as idle (%).
        idle_activity_pct: device activity below which a sample counts as idle (%).
        idle_after_s: an allocated device idle this long is reported (seconds).
        allocation_rate_min_pct: busy device-time over allocated device-time below which the
            cluster's allocation rate is reported (%).
        min_allocated_s: allocated device-time needed before the rate is judged (seconds).
        history_s: how much per-device history the tracker keeps (seconds).
        no_process_after_s: a running job's device with no process after this long is reported
            (seconds since the job started).
        memory_pressure_pct: memory used over total on a shared device at or above which it is
            reported (%).
        shared_min_processes: processes on one device that make it "shared".
    """

    busy_util_pct: float = 80.0
    sm_idle_pct: float = 25.0
    idle_activity_pct: float = 5.0
    idle_after_s: float = 600.0
    allocation_rate_min_pct: float = 50.0
    min_allocated_s: float = 600.0
    history_s: float = 3600.0
    no_process_after_s: float = 120.0
    memory_pressure_pct: float = 90.0
    shared_min_processes: int = 2

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"pitfalls.{f.name}: expected a finite number, got {value!r}")
            if value < 0:
                raise ValueError(f"pitfalls.{f.name}: must be >= 0, got {value!r}")
            if f.name.endswith("_pct") and value > 100:
                raise ValueError(f"pitfalls.{f.name}: a percentage in 0..100, got {value!r}")
        if self.shared_min_processes < 2 or int(self.shared_min_processes) != self.shared_min_processes:
            raise ValueError(f"pitfalls.shared_min_processes: an integer >= 2, got {self.shared_min_processes!r}")

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> PitfallThresholds:
        """Build from a mapping such as the ``[pitfalls]`` table of ``cluster.toml``.

        Raises:
            ValueError: an unknown key (the message lists the allowed ones) or a bad value.
        """
        allowed = [f.name for f in fields(cls)]
        unknown = sorted(set(data) - set(allowed))
        if unknown:
            raise ValueError(f"pitfalls.{unknown[0]}: unknown threshold; allowed: {', '.join(allowed)}")
        return cls(**dict(data))

    @classmethod
    def from_toml(cls, path: str | Path, table: str = "pitfalls") -> PitfallThresholds:
        """Read the ``[pitfalls]`` table of a TOML file; a file without it gives the defaults.

        Raises:
            TomlFileError: (a ValueError) the file is missing, unreadable, not UTF-8 or not TOML.
            ValueError: a bad threshold (see :meth:`from_mapping`).
        """
        doc = tomlfile.read_toml(path)
        section = doc.get(table, {})
        if not isinstance(section, Mapping):
            raise ValueError(f"{path}: [{table}] must be a table")
        return cls.from_mapping(section)


# ----------------------------------------------------------------------------------------
# Typed views of what the coordinator's user API returns (and what local mode synthesizes).


def _opt_float(value: Any) -> float | None:
    return None if value is None else float(value)


def _num(value: Any) -> float | None:
    """A real number, or None for an ``Unavailable`` / missing value (never 0)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@dataclass(frozen=True, slots=True)
class DeviceView:
    """Who holds one allocatable device (a device row of ``GET /v1/nodes``).

    ``state`` is one of ``free``, ``allocated``, ``foreign``, ``lost``, ``held``; ``job``,
    ``user`` and ``queue`` name the holder (for ``held``: the job that last held it).
    """

    node: str
    uuid: str
    resource: str = "gpu"
    model: str = ""
    state: str = FREE
    job: str | None = None
    user: str | None = None
    queue: str | None = None

    @classmethod
    def from_api(cls, node: str, d: Mapping[str, Any]) -> DeviceView:
        """Parse one element of a node's ``devices`` list."""
        state = d.get("state", FREE)
        if state not in DEVICE_STATES:
            raise ValueError(f"devices[].state: {state!r} is not one of {', '.join(DEVICE_STATES)}")
        return cls(
            node=node,
            uuid=d["uuid"],
            resource=d.get("resource", "gpu"),
            model=d.get("model", ""),
            state=state,
            job=d.get("job"),
            user=d.get("user"),
            queue=d.get("queue"),
        )


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node: its last inventory (``labgang.agent.inventory.NodeInventory``) and device holders."""

    name: str
    inventory: Any  # NodeInventory | None (None while an agent never reported)
    devices: tuple[DeviceView, ...] = ()
    connected: bool = True
    last_seen: float | None = None

    @classmethod
    def from_api(cls, d: Mapping[str, Any]) -> NodeView:
        """Parse one element of ``GET /v1/nodes`` → ``nodes``."""
        inv = d.get("inventory")
        if inv is not None:
            from labgang.agent.inventory import NodeInventory

            inv = NodeInventory.from_dict(inv)
        name = d["name"]
        return cls(
            name=name,
            inventory=inv,
            connected=bool(d.get("connected", True)),
            last_seen=_opt_float(d.get("last_seen")),
            devices=tuple(DeviceView.from_api(name, x) for x in d.get("devices", ())),
        )


@dataclass(frozen=True, slots=True)
class RankView:
    """One rank of a job (``JobView.ranks[]``)."""

    rank: int
    node: str | None
    devices: tuple[str, ...]
    state: str
    pid: int | None = None
    exit_status: int | None = None

    @classmethod
    def from_api(cls, d: Mapping[str, Any]) -> RankView:
        return cls(
            rank=int(d["rank"]),
            node=d.get("node"),
            devices=tuple(d.get("devices") or ()),
            state=str(d.get("state", "")),
            pid=d.get("pid"),
            exit_status=d.get("exit_status"),
        )


@dataclass(frozen=True, slots=True)
class JobView:
    """One job as the coordinator's user API shows it (times in unix seconds)."""

    id: str
    user: str
    queue: str
    state: str
    name: str = ""
    workers: int = 1
    gpus_per_worker: int = 1
    resource: str = "gpu"
    priority: int = 0
    submit_time: float | None = None
    admit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    reason_code: str | None = None
    reason_message: str = ""
    nodes: tuple[str, ...] = ()
    exit_status: int | None = None
    restart_count: int = 0
    grace_s: float | None = None
    ranks: tuple[RankView, ...] = ()
    history: tuple[Mapping[str, Any], ...] = ()

    @property
    def devices(self) -> tuple[str, ...]:
        """Every device UUID held by the job's ranks, in rank order."""
        return tuple(u for r in self.ranks for u in r.devices)

    @property
    def total_devices(self) -> int:
        return self.workers * self.gpus_per_worker

    @property
    def finished(self) -> bool:
        return self.state in _FINISHED_JOB_STATES

    @property
    def holds_devices(self) -> bool:
        return self.state in _HOLDING_JOB_STATES

    @classmethod
    def from_api(cls, d: Mapping[str, Any]) -> JobView:
        """Parse one JobView dict (``GET /v1/jobs`` → ``jobs[]``)."""
        reason = d.get("reason") or {}
        priority = d.get("priority", 0)
        return cls(
            id=str(d["id"]),
            user=str(d.get("user", "")),
            queue=str(d.get("queue", "")),
            state=str(d.get("state", "")),
            name=str(d.get("name") or ""),
            workers=int(d.get("workers", 1)),
            gpus_per_worker=int(d.get("gpus_per_worker", 1)),
            resource=str(d.get("resource") or "gpu"),
            priority=priority if isinstance(priority, int) else 0,
            submit_time=_opt_float(d.get("submit_time")),
            admit_time=_opt_float(d.get("admit_time")),
            start_time=_opt_float(d.get("start_time")),
            end_time=_opt_float(d.get("end_time")),
            reason_code=(str(reason["code"]).upper() if reason.get("code") else None),
            reason_message=str(reason.get("message") or ""),
            nodes=tuple(d.get("nodes") or ()),
            exit_status=d.get("exit_status"),
            restart_count=int(d.get("restart_count") or 0),
            grace_s=_opt_float(d.get("grace_s")),
            ranks=tuple(RankView.from_api(r) for r in d.get("ranks") or ()),
            history=tuple(d.get("history") or ()),
        )


@dataclass(frozen=True, slots=True)
class QueueView:
    """One queue with its quota accounting (``GET /v1/queues`` → ``queues[]``; counts per resource)."""

    name: str
    cohort: str | None = None
    nominal: Mapping[str, int] = field(default_factory=dict)
    used: Mapping[str, int] = field(default_factory=dict)
    borrowed: Mapping[str, int] = field(default_factory=dict)
    lent: Mapping[str, int] = field(default_factory=dict)
    borrowing_limit: Mapping[str, int] = field(default_factory=dict)
    lending_limit: Mapping[str, int] = field(default_factory=dict)
    pending: int = 0
    running: int = 0
    reclaim_time_s: float | None = None
    reclaim_within_cohort: str | None = None
    borrow_policy: str | None = None
    borrow_max_priority_threshold: int | None = None
    fair_share: float | None = None  # None: not reported (older coordinator); inf: weight 0 while borrowing
    fair_weight: float = 1.0

    @classmethod
    def from_api(cls, d: Mapping[str, Any]) -> QueueView:
        """Parse one QueueView dict (``GET /v1/queues`` → ``queues[]``).

        The policy keys ``reclaim_within_cohort`` (``never``, ``lower-priority``, ``any``)
        and ``borrow_within_cohort`` (``{policy, max_priority_threshold}``) are optional:
        a coordinator that does not send them gives None (policy unknown).
        """

        def res(key: str) -> dict[str, int]:
            return {k: int(v) for k, v in (d.get(key) or {}).items() if v is not None}

        bwc = d.get("borrow_within_cohort")
        bwc = bwc if isinstance(bwc, Mapping) else {}
        threshold = bwc.get("max_priority_threshold")
        reclaim = d.get("reclaim_within_cohort")
        return cls(
            name=str(d["name"]),
            cohort=d.get("cohort"),
            nominal=res("nominal"),
            used=res("used"),
            borrowed=res("borrowed"),
            lent=res("lent"),
            borrowing_limit=res("borrowing_limit"),
            lending_limit=res("lending_limit"),
            pending=int(d.get("pending") or 0),
            running=int(d.get("running") or 0),
            reclaim_time_s=_opt_float(d.get("reclaim_time_s")),
            fair_share=(float("inf") if d["fair_share"] is None else float(d["fair_share"]))
            if "fair_share" in d
            else None,
            fair_weight=float(d.get("fair_weight", 1.0) or 0.0),
            reclaim_within_cohort=str(reclaim) if reclaim is not None else None,
            borrow_policy=str(bwc["policy"]) if bwc.get("policy") is not None else None,
            borrow_max_priority_threshold=threshold if isinstance(threshold, int) else None,
        )


@dataclass(frozen=True, slots=True)
class ProcessOwner:
    """What the OS says about a pid NVML shows on a device (local mode; optional).

    ``alive`` False means NVML still lists the pid but no such process exists (a context
    left behind); ``job`` is ``LABGANG_JOB_ID`` from its environment when readable.
    """

    node: str
    pid: int
    user: str | None = None
    command: str = ""
    alive: bool = True
    job: str | None = None


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """Everything the detectors look at, taken at one time ``now`` (unix seconds).

    In local mode ``jobs`` and ``queues`` are empty and ``nodes`` has one entry whose
    device views were synthesized from the processes on each device.
    """

    now: float
    nodes: tuple[NodeView, ...]
    jobs: tuple[JobView, ...] = ()
    queues: tuple[QueueView, ...] = ()
    processes: Mapping[tuple[str, int], ProcessOwner] = field(default_factory=dict)

    @classmethod
    def from_api(
        cls,
        now: float,
        nodes: Mapping[str, Any],
        jobs: Mapping[str, Any] | None = None,
        queues: Mapping[str, Any] | None = None,
    ) -> ClusterSnapshot:
        """Build from the JSON bodies of ``GET /v1/nodes``, ``/v1/jobs?all=1`` and ``/v1/queues``."""
        return cls(
            now=now,
            nodes=tuple(NodeView.from_api(n) for n in nodes.get("nodes", ())),
            jobs=tuple(JobView.from_api(j) for j in (jobs or {}).get("jobs", ())),
            queues=tuple(QueueView.from_api(q) for q in (queues or {}).get("queues", ())),
        )

    _by_id: Mapping[str, JobView] = field(default_factory=dict, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_by_id", {j.id: j for j in self.jobs})

    def job(self, job_id: str | None) -> JobView | None:
        """The job with that id, or None."""
        return self._by_id.get(job_id) if job_id is not None else None


# ----------------------------------------------------------------------------------------
# Walking devices.


@dataclass(frozen=True, slots=True)
class DeviceSample:
    """One allocatable device as the detectors see it: the NVML info plus its holder."""

    node: str
    label: str  # "GPU 3" or "GPU 3 MIG 1g.10gb #2"
    uuid: str
    info: Any  # GpuInfo or MigDeviceInfo
    parent: Any | None  # the GpuInfo of a MIG device, else None
    holder: DeviceView | None

    @property
    def is_mig(self) -> bool:
        return self.parent is not None

    @property
    def activity_pct(self) -> float | None:
        """How busy the device is: ``utilization.gpu`` for a full GPU, GPM SM activity for a MIG
        device (NVML gives no utilization on MIG); None when unknown."""
        if self.parent is None:
            return _num(self.info.utilization_gpu_pct)
        return _num(self.info.sm_active_pct)

    @property
    def pids(self) -> tuple[int, ...]:
        """Pids NVML shows on the device (empty when the process list is unavailable)."""
        procs = self.info.processes
        return tuple(sorted({p.pid for p in procs})) if isinstance(procs, tuple) else ()


def iter_devices(snapshot: ClusterSnapshot) -> Iterable[DeviceSample]:
    """Every allocatable device of every node with an inventory, in node and NVML index order.

    A GPU in MIG mode (current) yields its MIG devices and never itself.
    """
    for node in snapshot.nodes:
        if node.inventory is None:
            continue
        holders = {d.uuid: d for d in node.devices}
        for gpu in node.inventory.gpus:
            if gpu.mig_mode_current is True:
                for mig in gpu.mig_devices:
                    if not isinstance(mig.uuid, str):
                        continue
                    yield DeviceSample(
                        node.name,
                        f"GPU {gpu.index} MIG {mig.profile} #{mig.index}",
                        mig.uuid,
                        mig,
                        gpu,
                        holders.get(mig.uuid),
                    )
            elif isinstance(gpu.uuid, str):
                yield DeviceSample(node.name, f"GPU {gpu.index}", gpu.uuid, gpu, None, holders.get(gpu.uuid))


def _pct(x: float) -> str:
    return f"{x:.0f}%"


def _gib(b: float) -> str:
    return f"{b / 1024**3:.1f} GiB"


# ----------------------------------------------------------------------------------------
# Detectors over one snapshot.


def detect_kernel_busy_sm_idle(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Full GPUs where NVML ``utilization.gpu`` is high but GPM SM activity is low.

    ``utilization.gpu`` (``nvmlDeviceGetUtilizationRates``) is the share of time *any* kernel
    ran, not how many SMs did work; GPM ``NVML_GPM_METRIC_SM_UTIL`` measures the latter.
    Never fires when SM activity is unavailable (pre-Hopper, no GPM) or on MIG devices.
    """
    out = []
    for dev in iter_devices(snapshot):
        if dev.is_mig:
            continue
        util, sm = _num(dev.info.utilization_gpu_pct), _num(dev.info.sm_active_pct)
        if util is None or sm is None or util < t.busy_util_pct or sm >= t.sm_idle_pct:
            continue
        out.append(
            Finding(
                PitfallKind.KERNEL_BUSY_SM_IDLE,
                Severity.WARNING,
                f"{dev.node} {dev.label}",
                f"utilization.gpu {_pct(util)} but SM activity {_pct(sm)}",
                "kernels keep the GPU 'busy' while most SMs idle: raise batch size, fuse small kernels, "
                "or check for a spin/sync loop",
                {"utilization_gpu_pct": util, "sm_active_pct": sm},
                dev.node,
                dev.uuid,
                dev.holder.job if dev.holder else None,
            )
        )
    return out


def detect_allocated_no_process(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Devices allocated to a running job on which NVML shows no process at all.

    A rank that crashed without exiting, hangs before CUDA init, or was given the wrong
    ``CUDA_VISIBLE_DEVICES``. Waits ``no_process_after_s`` after the job started.
    """
    out = []
    for dev in iter_devices(snapshot):
        h = dev.holder
        if h is None or h.state != ALLOCATED or dev.pids:
            continue
        job = snapshot.job(h.job)
        if job is None or job.state != "running" or job.start_time is None:
            continue
        running_s = snapshot.now - job.start_time
        if running_s < t.no_process_after_s:
            continue
        out.append(
            Finding(
                PitfallKind.ALLOCATED_NO_PROCESS,
                Severity.WARNING,
                f"{dev.node} {dev.label}",
                f"allocated to job {job.id} ({job.user}) for {running_s / 60:.0f} min with no process on it",
                "a rank may have crashed or hung before touching the GPU: check `labgang logs` and cancel if stuck",
                {"running_s": running_s},
                dev.node,
                dev.uuid,
                job.id,
            )
        )
    return out


def _owners(snapshot: ClusterSnapshot, dev: DeviceSample) -> list[str]:
    names = []
    for pid in dev.pids:
        owner = snapshot.processes.get((dev.node, pid))
        names.append(f"{pid}({owner.user})" if owner and owner.user else str(pid))
    return names


def detect_foreign_processes(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Devices with processes labgang did not start (device state ``foreign``).

    The coordinator marks such devices; in local mode the data source marks a device foreign
    when none of its processes carries ``LABGANG_JOB_ID``. A free device that NVML shows
    processes on also counts.
    """
    out = []
    for dev in iter_devices(snapshot):
        h = dev.holder
        if h is None or not (h.state == FOREIGN or (h.state == FREE and dev.pids)):
            continue
        used = _num(dev.info.memory_used_bytes)
        owners = _owners(snapshot, dev)
        out.append(
            Finding(
                PitfallKind.FOREIGN_PROCESS,
                Severity.WARNING,
                f"{dev.node} {dev.label}",
                f"{len(owners)} process(es) not started by labgang: {', '.join(owners) or 'unknown pids'}"
                + (f", {_gib(used)} used" if used is not None else ""),
                "the device is kept out of scheduling; ask the owner to submit through labgang",
                {"processes": float(len(owners)), **({"memory_used_bytes": used} if used is not None else {})},
                dev.node,
                dev.uuid,
            )
        )
    return out


def detect_shared_memory_pressure(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Devices shared by several processes whose memory is nearly full.

    Without MIG nothing partitions device memory, so one process growing starves the others
    (OOM in whichever allocates next).
    """
    out = []
    for dev in iter_devices(snapshot):
        n = len(dev.pids)
        used, total = _num(dev.info.memory_used_bytes), _num(dev.info.memory_total_bytes)
        if n < t.shared_min_processes or used is None or not total:
            continue
        pct = 100.0 * used / total
        if pct < t.memory_pressure_pct:
            continue
        out.append(
            Finding(
                PitfallKind.SHARED_MEMORY_PRESSURE,
                Severity.WARNING,
                f"{dev.node} {dev.label}",
                f"{n} processes share {_gib(total)}, {_pct(pct)} used",
                "nothing partitions memory on a shared device: give each process its own GPU or MIG device, "
                "or cap its memory fraction",
                {"processes": float(n), "memory_used_pct": pct, "memory_used_bytes": used, "memory_total_bytes": total},
                dev.node,
                dev.uuid,
            )
        )
    return out


def reclaim_time_s(queue: QueueView, jobs: Iterable[JobView]) -> float | None:
    """Seconds a reclaim of ``queue``'s borrowed devices would take: the sum of the victims' grace.

    Uses the coordinator's ``reclaim_time_s`` when given. Otherwise it picks victims the way
    the scheduler does (lowest priority first, most recently admitted first) among the
    queue's device-holding jobs until they cover what it borrowed, and adds their ``grace_s``;
    None when a needed victim's grace is unknown.
    """
    if queue.reclaim_time_s is not None:
        return queue.reclaim_time_s
    borrowed = sum(queue.borrowed.values())
    if borrowed <= 0:
        return 0.0
    mine = sorted(
        (j for j in jobs if j.queue == queue.name and j.holds_devices),
        key=lambda j: (j.priority, -(j.admit_time or 0.0), j.id),
    )
    covered, total = 0, 0.0
    for job in mine:
        if covered >= borrowed:
            break
        if job.grace_s is None:
            return None
        covered += job.total_devices
        total += job.grace_s
    return total


def _preemptor_priority(queue: QueueView, jobs: Iterable[JobView]) -> int:
    """The priority a job of ``queue`` that takes capacity back would likely have: the highest
    among its unfinished jobs in the snapshot (pending ones first), else 0, the priority of a
    plain submission."""
    mine = [j for j in jobs if j.queue == queue.name and not j.finished]
    pending = [j.priority for j in mine if j.state == "pending"]
    if pending:
        return max(pending)
    return max((j.priority for j in mine), default=0)


def can_take_back(other: QueueView, borrower: QueueView, jobs: Iterable[JobView]) -> bool:
    """Whether ``other`` (a queue of ``borrower``'s cohort) could preempt ``borrower``'s jobs.

    True when its ``reclaim_within_cohort`` is ``any``; or ``lower-priority`` and one of
    the borrower's device-holding jobs has a lower priority than ``other``'s likely
    preemptor (:func:`_preemptor_priority`); or its ``borrow_within_cohort`` policy is
    ``lower-priority`` and such a job also has a priority at or below its
    ``max_priority_threshold``. A queue whose policies the coordinator does not send
    (older coordinator: both None) counts as able to, as it may be.
    """
    jobs = tuple(jobs)
    if other.reclaim_within_cohort is None and other.borrow_policy is None:
        return True
    if other.reclaim_within_cohort == "any":
        return True
    holding = [j.priority for j in jobs if j.queue == borrower.name and j.holds_devices]
    lowest = min(holding, default=None)
    if lowest is None:
        return other.reclaim_within_cohort == "lower-priority" or other.borrow_policy == "lower-priority"
    preemptor = _preemptor_priority(other, jobs)
    if other.reclaim_within_cohort == "lower-priority" and lowest < preemptor:
        return True
    threshold = other.borrow_max_priority_threshold
    return other.borrow_policy == "lower-priority" and lowest < preemptor and (threshold is None or lowest <= threshold)


def detect_borrowed_at_risk(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Queues running on borrowed quota that another queue of their cohort could take back.

    Fires only when some other queue of the cohort could reclaim or preempt the borrowed
    capacity (:func:`can_take_back`, from the policies ``GET /v1/queues`` shows): a cohort
    whose other queues all have ``reclaim_within_cohort = never`` and no
    ``borrow_within_cohort`` policy leaves the borrower alone. WARNING when one of those
    queues (the "lending queues" of the summary) has pending jobs (a reclaim may come in the next cycle), INFO otherwise. The
    numbers include the reclaim time.
    """
    out = []
    for q in sorted(snapshot.queues, key=lambda q: q.name):
        borrowed = sum(q.borrowed.values())
        if borrowed <= 0 or q.cohort is None:
            continue
        threats = [
            o
            for o in snapshot.queues
            if o.name != q.name and o.cohort == q.cohort and can_take_back(o, q, snapshot.jobs)
        ]
        if not threats:
            continue
        waiting = sum(o.pending for o in threats)
        rt = reclaim_time_s(q, snapshot.jobs)
        what = ", ".join(f"{v} {k}" for k, v in sorted(q.borrowed.items()) if v)
        out.append(
            Finding(
                PitfallKind.BORROWED_AT_RISK,
                Severity.WARNING if waiting else Severity.INFO,
                f"queue {q.name}",
                f"borrows {what} from cohort {q.cohort}; {waiting} job(s) pending in lending queues; "
                f"reclaim takes {'?' if rt is None else f'{rt:.0f} s'}",
                "jobs above nominal quota can be preempted after their grace period: checkpoint often",
                {
                    "borrowed": float(borrowed),
                    "pending_in_cohort": float(waiting),
                    **({"reclaim_time_s": rt} if rt is not None else {}),
                },
            )
        )
    return out


def detect_fragmented_gangs(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Pending gangs whose reason is FRAGMENTED: enough free devices in total, none placed together."""
    out = []
    for j in sorted(snapshot.jobs, key=lambda j: j.id):
        if j.state != "pending" or j.reason_code != "FRAGMENTED":
            continue
        waited = snapshot.now - j.submit_time if j.submit_time is not None else None
        out.append(
            Finding(
                PitfallKind.FRAGMENTED_GANG,
                Severity.WARNING,
                f"job {j.id}",
                f"{j.workers}x{j.gpus_per_worker} {j.resource} blocked by fragmentation, not quota: "
                f"{j.reason_message or 'no node set holds it'}",
                "fewer, larger ranks (or `--nodes`) may fit; small jobs spread over nodes keep gangs out",
                {
                    "workers": float(j.workers),
                    "gpus_per_worker": float(j.gpus_per_worker),
                    **({"waited_s": waited} if waited is not None else {}),
                },
                job=j.id,
            )
        )
    return out


def detect_mig_pending_reset(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """GPUs whose pending MIG mode differs from the current one (``nvmlDeviceGetMigMode``)."""
    out = []
    for node in snapshot.nodes:
        if node.inventory is None:
            continue
        for gpu in node.inventory.gpus:
            cur, pend = gpu.mig_mode_current, gpu.mig_mode_pending
            if not isinstance(cur, bool) or not isinstance(pend, bool) or cur == pend:
                continue
            out.append(
                Finding(
                    PitfallKind.MIG_PENDING_RESET,
                    Severity.WARNING,
                    f"{node.name} GPU {gpu.index}",
                    f"MIG mode is {'on' if cur else 'off'} but {'on' if pend else 'off'} is pending a GPU reset",
                    "drain the GPU, then `nvidia-smi -r -i <index>` (or reboot) to apply the MIG mode",
                    {"mig_mode_current": float(cur), "mig_mode_pending": float(pend)},
                    node.name,
                    gpu.uuid,
                )
            )
    return out


def throttle_kind(reason: str) -> str | None:
    """``"thermal"``, ``"power"`` or None for one NVML clock-event reason name.

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


def detect_throttling(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """GPUs whose clocks are held down by thermal or power limits
    (``nvmlDeviceGetCurrentClocksEventReasons``)."""
    out = []
    for node in snapshot.nodes:
        if node.inventory is None:
            continue
        for gpu in node.inventory.gpus:
            if not isinstance(gpu.clock_event_reasons, tuple):
                continue
            reasons = [r for r in gpu.clock_event_reasons if throttle_kind(r)]
            if not reasons:
                continue
            kinds = sorted({throttle_kind(r) for r in reasons})
            temp, power, limit = _num(gpu.temperature_c), _num(gpu.power_w), _num(gpu.power_limit_w)
            nums: dict[str, float] = {}
            parts = ["/".join(kinds) + " throttling (" + ", ".join(reasons) + ")"]
            if temp is not None:
                nums["temperature_c"] = temp
                parts.append(f"{temp:.0f} C")
            if power is not None:
                nums["power_w"] = power
                parts.append(f"{power:.0f} W" + (f" of {limit:.0f} W" if limit is not None else ""))
            if limit is not None:
                nums["power_limit_w"] = limit
            out.append(
                Finding(
                    PitfallKind.THROTTLING,
                    Severity.WARNING,
                    f"{node.name} GPU {gpu.index}",
                    ", ".join(parts),
                    "check airflow and fans (thermal) or the power cap (power); throttled GPUs slow the whole gang",
                    nums,
                    node.name,
                    gpu.uuid,
                )
            )
    return out


def detect_memory_held_after_job(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Device memory still held after the job that used it ended.

    Fires for a device the coordinator marks ``held``, for a device whose NVML process list
    names a pid that no longer exists (a leaked context), and for one whose process belongs
    to a job that has finished.
    """
    out = []
    for dev in iter_devices(snapshot):
        h = dev.holder
        dead = [pid for pid in dev.pids if (o := snapshot.processes.get((dev.node, pid))) is not None and not o.alive]
        ended = sorted(
            {
                o.job
                for pid in dev.pids
                if (o := snapshot.processes.get((dev.node, pid))) is not None
                and o.job
                and (j := snapshot.job(o.job)) is not None
                and j.finished
            }
        )
        if not (h is not None and h.state == HELD) and not dead and not ended:
            continue
        job = (h.job if h is not None and h.state == HELD else None) or (ended[0] if ended else None)
        used = _num(dev.info.memory_used_bytes)
        why = []
        if job:
            why.append(f"job {job} ended")
        if dead:
            why.append(f"pid(s) {', '.join(map(str, dead))} gone")
        out.append(
            Finding(
                PitfallKind.MEMORY_HELD_AFTER_JOB,
                Severity.CRITICAL,
                f"{dev.node} {dev.label}",
                ("; ".join(why) or "marked held") + (f", {_gib(used)} still in use" if used is not None else ""),
                "a leftover context or zombie process pins the memory: find it with `fuser -v /dev/nvidia*`, "
                "kill it, or reset the GPU",
                {"memory_used_bytes": used} if used is not None else {},
                dev.node,
                dev.uuid,
                job,
            )
        )
    return out


SNAPSHOT_DETECTORS = (
    detect_memory_held_after_job,
    detect_allocated_no_process,
    detect_foreign_processes,
    detect_kernel_busy_sm_idle,
    detect_shared_memory_pressure,
    detect_throttling,
    detect_mig_pending_reset,
    detect_fragmented_gangs,
    detect_borrowed_at_risk,
)


# ----------------------------------------------------------------------------------------
# History: allocated-but-idle and the allocation rate.


BUSY, IDLE, UNKNOWN = "busy", "idle", "unknown"


@dataclass(slots=True)
class _Run:
    """Consecutive samples of one device with the same holder job and activity class.

    ``start`` is the first sample's time, ``last`` the latest one's. The run lasts until the
    next run starts (or until ``last`` for the newest run).
    """

    start: float
    last: float
    job: str | None  # the holder job while allocated, else None
    activity: str  # BUSY, IDLE or UNKNOWN


class PitfallTracker:
    """Per-device activity history for the time-based findings. Pure: ``now`` comes with each snapshot.

    Call :meth:`observe` once per refresh, then :meth:`findings`. History older than
    ``thresholds.history_s`` is dropped. Samples are kept run-length encoded (one entry
    per change of holder or of busy/idle), so memory grows with changes, not refreshes:
    512 devices sampled every second for an hour stay a few thousand entries.

    The allocation rate is busy device-time over allocated device-time in the last
    ``history_s``: the time between two samples of a device counts for the state of the
    first; it is *allocated* when a job held the device and its activity was known, and
    *busy* when that activity was at least ``idle_activity_pct``.
    """

    def __init__(self, thresholds: PitfallThresholds | None = None) -> None:
        self.thresholds = thresholds or PitfallThresholds()
        self._runs: dict[str, deque[_Run]] = {}
        self._now: float | None = None

    def _classify(self, activity_pct: float | None) -> str:
        if activity_pct is None:
            return UNKNOWN
        return IDLE if activity_pct < self.thresholds.idle_activity_pct else BUSY

    def observe(self, snapshot: ClusterSnapshot) -> None:
        """Record one sample per allocatable device at ``snapshot.now``; snapshots must come in time order.

        Raises:
            ValueError: ``snapshot.now`` is earlier than the previous snapshot's.
        """
        now = snapshot.now
        if self._now is not None and now < self._now:
            raise ValueError(f"now: {now} is before the previous snapshot at {self._now}")
        self._now = now
        for dev in iter_devices(snapshot):
            h = dev.holder
            job = (h.job or "?") if h is not None and h.state == ALLOCATED else None
            activity = self._classify(dev.activity_pct)
            runs = self._runs.setdefault(dev.uuid, deque())
            if runs and runs[-1].job == job and runs[-1].activity == activity:
                runs[-1].last = now
            else:
                runs.append(_Run(now, now, job, activity))
        horizon = now - self.thresholds.history_s
        for uuid in sorted(self._runs):
            runs = self._runs[uuid]
            while len(runs) > 1 and runs[1].start <= horizon:
                runs.popleft()
            if runs[-1].last < horizon:  # a device gone for longer than the history
                del self._runs[uuid]

    def idle_since(self, uuid: str) -> float | None:
        """When the device's current run of allocated, idle samples for one job began (unix s), or None."""
        runs = self._runs.get(uuid)
        if not runs:
            return None
        last = runs[-1]
        return last.start if last.job is not None and last.activity == IDLE else None

    def allocation_rate(self) -> tuple[float, float]:
        """``(busy_s, allocated_s)`` device-seconds over the last ``history_s``."""
        if self._now is None:
            return 0.0, 0.0
        horizon = self._now - self.thresholds.history_s
        busy = alloc = 0.0
        for runs in self._runs.values():
            for i, run in enumerate(runs):
                end = runs[i + 1].start if i + 1 < len(runs) else run.last
                dt = end - max(run.start, horizon)
                if dt <= 0 or run.job is None or run.activity == UNKNOWN:
                    continue
                alloc += dt
                if run.activity == BUSY:
                    busy += dt
        return busy, alloc

    def findings(self, snapshot: ClusterSnapshot) -> list[Finding]:
        """Allocated-but-idle findings (one per job whose every known device is idle long enough)
        and the low-allocation-rate finding."""
        t = self.thresholds
        per_job: dict[str, list[tuple[DeviceSample, float]]] = {}
        all_devs: dict[str, int] = {}
        for dev in iter_devices(snapshot):
            h = dev.holder
            if h is None or h.state != ALLOCATED:
                continue
            key = h.job or "?"
            all_devs[key] = all_devs.get(key, 0) + 1
            since = self.idle_since(dev.uuid)
            if since is not None and snapshot.now - since >= t.idle_after_s:
                per_job.setdefault(key, []).append((dev, snapshot.now - since))
        out = []
        for job_id in sorted(per_job):
            idle = per_job[job_id]
            if len(idle) < all_devs[job_id]:
                continue  # some device of the gang is busy or unknown
            idle_s = min(s for _, s in idle)
            job = snapshot.job(job_id)
            first = idle[0][0]
            holder = first.holder
            who = job.user if job else (holder.user if holder else None)
            out.append(
                Finding(
                    PitfallKind.ALLOCATED_IDLE,
                    Severity.WARNING,
                    f"job {job_id}",
                    f"{len(idle)} device(s) below {t.idle_activity_pct:.0f}% activity for {idle_s / 60:.0f} min"
                    + (f" (user {who})" if who else ""),
                    "the job holds GPUs it does not use: cancel it, or check for a data-loading or I/O stall",
                    {"devices": float(len(idle)), "idle_s": idle_s},
                    first.node if len({d.node for d, _ in idle}) == 1 else None,
                    first.uuid if len(idle) == 1 else None,
                    job_id,
                )
            )
        busy, alloc = self.allocation_rate()
        if alloc >= t.min_allocated_s:
            rate = 100.0 * busy / alloc
            if rate < t.allocation_rate_min_pct:
                out.append(
                    Finding(
                        PitfallKind.LOW_ALLOCATION_RATE,
                        Severity.INFO,
                        "cluster",
                        f"allocated devices were busy {_pct(rate)} of the time over the last "
                        f"{alloc / 3600:.1f} device-hours",
                        "allocated GPUs sit idle: look for idle jobs and right-size requests",
                        {"allocation_rate_pct": rate, "busy_s": busy, "allocated_s": alloc},
                    )
                )
        return out


def detect_all(
    snapshot: ClusterSnapshot, thresholds: PitfallThresholds | None = None, tracker: PitfallTracker | None = None
) -> list[Finding]:
    """Run every detector; with a tracker, also the history-based findings (the tracker must
    already have observed this snapshot). Sorted by severity, kind, subject."""
    t = thresholds or (tracker.thresholds if tracker else PitfallThresholds())
    out: list[Finding] = []
    for detector in SNAPSHOT_DETECTORS:
        out.extend(detector(snapshot, t))
    if tracker is not None:
        out.extend(tracker.findings(snapshot))
    out.sort(key=lambda f: (f.severity.rank, f.kind.value, f.subject))
    return out
