"""Typed, read-only views of what the coordinator's user API returns (and what local mode synthesizes),
and the walk over every device of a :class:`ClusterSnapshot` that the detectors share."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from labgang.launcher.pitfalls.findings import _FINISHED_JOB_STATES, _HOLDING_JOB_STATES, DEVICE_STATES, FREE, Finding

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
class ViolationView:
    """A rank's process on a device it was not given (a ``violations`` row of ``GET /v1/nodes``)."""

    job: str
    rank: int
    pid: int
    device: str
    allowed: tuple[str, ...] = ()
    user: str | None = None

    @classmethod
    def from_api(cls, d: Mapping[str, Any]) -> ViolationView:
        """Parse one element of a node's ``violations`` list."""
        return cls(
            job=str(d["job"]),
            rank=int(d["rank"]),
            pid=int(d["pid"]),
            device=str(d["device"]),
            allowed=tuple(str(x) for x in d.get("allowed") or ()),
            user=d.get("user"),
        )


@dataclass(frozen=True, slots=True)
class NodeView:
    """One node: its last inventory (``labgang.agent.inventory.NodeInventory``) and device holders."""

    name: str
    inventory: Any  # NodeInventory | None (None while an agent never reported)
    devices: tuple[DeviceView, ...] = ()
    connected: bool = True
    last_seen: float | None = None
    confinement: Mapping[str, Any] | None = None
    violations: tuple[ViolationView, ...] = ()
    shards_per_gpu: int | None = None  # the cluster's [sharing] for this node; None = not said
    drain: str | None = None  # why an admin drained it (``labgang drain``); None = offered to new jobs

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
            confinement=d.get("confinement") if isinstance(d.get("confinement"), Mapping) else None,
            violations=tuple(
                ViolationView.from_api(x)
                for x in d.get("violations") or ()
                if x.get("kind") != "gpu-mem"  # a budget, not a device, violation: the job's history says it
            ),
            shards_per_gpu=d["shards_per_gpu"] if isinstance(d.get("shards_per_gpu"), int) else None,
            drain=str(drain.get("reason")) if isinstance(drain := d.get("drain"), Mapping) else None,
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
    array_id: str | None = None
    array_index: int | None = None
    array_limit: int | None = None
    groups: tuple[tuple[str, int, int], ...] = ()
    """A job of groups' ``(name, ranks, devices per rank)`` per group (docs/job-groups.md); () otherwise."""
    shards: int = 0
    """``--shards N``: the shards of one GPU its one rank takes (docs/sharing.md); 0 for whole devices."""
    mps: int = 0
    """``--mps P``: the percent of one GPU's SMs its one rank takes through MPS; 0 for whole devices."""

    @property
    def shape(self) -> str:
        """``4×2``; a job of groups: ``1×0+4×2``; a share of one GPU as ``queue``'s GANG names it
        (:func:`labgang.launcher.jobtable.gang_shape`): ``1×shard:2``, ``1×mps:25``."""
        if self.shards or self.mps:
            return f"{self.workers}×{f'shard:{self.shards}' if self.shards else f'mps:{self.mps}'}"
        if self.groups:
            return "+".join(f"{w}×{g}" for _, w, g in self.groups)
        return f"{self.workers}×{self.gpus_per_worker}"

    @property
    def shape_with_resource(self) -> str:
        """``top``'s RANKS×DEV cell: ``4×2 gpu``, ``2×1 mig-1g.10gb``; a share of one GPU as
        :attr:`shape` alone (``1×shard:2``, ``1×mps:25``: the share already says what it holds)."""
        return self.shape if self.shards or self.mps else f"{self.shape} {self.resource}"

    @property
    def devices(self) -> tuple[str, ...]:
        """Every device UUID held by the job's ranks, in rank order."""
        return tuple(u for r in self.ranks for u in r.devices)

    @property
    def total_devices(self) -> int:
        if self.groups:
            return sum(w * g for _, w, g in self.groups)
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
            array_id=None if d.get("array_id") is None else str(d["array_id"]),
            array_index=d.get("array_index"),
            array_limit=d.get("array_limit"),
            groups=tuple(
                (str(g.get("name")), int(g.get("workers", 1)), int(g.get("gpus_per_worker", 1)))
                for g in d.get("groups") or ()
            ),
            shards=int(d.get("shards") or 0),
            mps=int(d.get("mps") or 0),
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

    ``findings`` and ``allocation_rate_pct`` are the coordinator's own pitfall findings and
    allocation rate (``GET /v1/pitfalls``) when the snapshot came from one: every view then
    shows the findings of one history (the coordinator's) instead of each keeping its own.
    None = not given (compute them locally).
    """

    now: float
    nodes: tuple[NodeView, ...]
    jobs: tuple[JobView, ...] = ()
    queues: tuple[QueueView, ...] = ()
    processes: Mapping[tuple[str, int], ProcessOwner] = field(default_factory=dict)
    findings: tuple[Finding, ...] | None = None
    allocation_rate_pct: float | None = None
    series: Any = None  # SeriesView (pitfalls/series.py): recent samples per device; None = not fetched

    @classmethod
    def from_api(
        cls,
        now: float,
        nodes: Mapping[str, Any],
        jobs: Mapping[str, Any] | None = None,
        queues: Mapping[str, Any] | None = None,
        pitfalls: Mapping[str, Any] | None = None,
        series: Mapping[str, Any] | None = None,
    ) -> ClusterSnapshot:
        """Build from the JSON bodies of ``GET /v1/nodes``, ``/v1/jobs?all=1``, ``/v1/queues`` and
        (optionally) ``/v1/pitfalls`` and ``/v1/series``.

        Raises:
            ValueError: a malformed body (the message names the field).
        """
        from labgang.launcher.pitfalls.series import SeriesView

        return cls(
            series=None if series is None else SeriesView.from_dict(series),
            now=now,
            nodes=tuple(NodeView.from_api(n) for n in nodes.get("nodes", ())),
            jobs=tuple(JobView.from_api(j) for j in (jobs or {}).get("jobs", ())),
            queues=tuple(QueueView.from_api(q) for q in (queues or {}).get("queues", ())),
            findings=None if pitfalls is None else tuple(Finding.from_dict(f) for f in pitfalls.get("findings", ())),
            allocation_rate_pct=None if pitfalls is None else _opt_float(pitfalls.get("allocation_rate_pct")),
        )

    _by_id: Mapping[str, JobView] = field(default_factory=dict, init=False, repr=False, compare=False)
    _devices: tuple[DeviceSample, ...] | None = field(default=None, init=False, repr=False, compare=False)
    """:func:`iter_devices`' answer, made on its first call (every part of a snapshot is frozen)."""

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
        """Pids NVML shows on the device (empty when the process list is unavailable), but
        labgang's own MPS servers (``ProcessInfo.mps_server``): no one's foreign process."""
        procs = self.info.processes
        return tuple(sorted({p.pid for p in procs if p.mps_server is None})) if isinstance(procs, tuple) else ()


def iter_devices(snapshot: ClusterSnapshot) -> Sequence[DeviceSample]:
    """Every allocatable device of every node with an inventory, in node and NVML index order.

    A GPU in MIG mode (current) yields its MIG devices and never itself. Walked once per snapshot
    and kept with it: the detectors, the tracker and the history graphs each walk every device
    (about ten walks of 512 devices per ``labgang top`` refresh or pitfall sample).
    """
    devices = snapshot._devices
    if devices is None:
        devices = tuple(_walk_devices(snapshot))
        object.__setattr__(snapshot, "_devices", devices)  # frozen: set once, as _by_id
    return devices


def _walk_devices(snapshot: ClusterSnapshot) -> Iterator[DeviceSample]:
    """:func:`iter_devices`, walked anew."""
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
