"""Fluent builders for scheduler tests (kueue's ``utiltesting.MakeClusterQueue`` style).

    cluster = Cluster().node("n1", gpus=8).mig_node("m1", gpus=1, profiles=["3g.40gb", "1g.10gb"])
    q = queue("team-a").nominal(gpu=4).cohort("lab").borrowing_limit(gpu=2).build()
    snap = cluster.snapshot(queues=[q], running=[job("a1").queue("team-a").gpus(2).running_on(...)], ...)

Running jobs are placed by the real placement code (:meth:`Cluster.run`), so tests state
*what* runs, not which UUIDs it holds, unless they want to.
"""

from __future__ import annotations

from dataclasses import replace

from labgang.launcher.model import (
    GPU,
    BorrowPolicy,
    BorrowWithinCohort,
    GroupRequest,
    JobRequest,
    Queueing,
    QueueSpec,
    ReclaimWithinCohort,
    WithinQueue,
    mig_resource,
)
from labgang.launcher.scheduler.capacity import UNAVAILABLE, DeviceBook
from labgang.launcher.scheduler.groups import place_groups
from labgang.launcher.scheduler.hostres import capped_index
from labgang.launcher.scheduler.placement import place
from labgang.launcher.scheduler.snapshot import (
    Device,
    Node,
    PendingJob,
    RankPlacement,
    RunningJob,
    Snapshot,
)


class QueueBuilder:
    """Builds a :class:`QueueSpec` step by step."""

    def __init__(self, name: str) -> None:
        self._spec = QueueSpec(name=name)

    def nominal(self, **q: int) -> QueueBuilder:
        self._spec = replace(self._spec, nominal=_res(q))
        return self

    def cohort(self, name: str) -> QueueBuilder:
        self._spec = replace(self._spec, cohort=name)
        return self

    def borrowing_limit(self, **q: int) -> QueueBuilder:
        self._spec = replace(self._spec, borrowing_limit=_res(q))
        return self

    def lending_limit(self, **q: int) -> QueueBuilder:
        self._spec = replace(self._spec, lending_limit=_res(q))
        return self

    def within_queue(self, policy: str) -> QueueBuilder:
        self._spec = replace(self._spec, within_queue=WithinQueue(policy))
        return self

    def reclaim(self, policy: str) -> QueueBuilder:
        self._spec = replace(self._spec, reclaim_within_cohort=ReclaimWithinCohort(policy))
        return self

    def borrow_within_cohort(self, policy: str, threshold: int | None = None) -> QueueBuilder:
        self._spec = replace(self._spec, borrow_within_cohort=BorrowWithinCohort(BorrowPolicy(policy), threshold))
        return self

    def strict(self) -> QueueBuilder:
        self._spec = replace(self._spec, queueing=Queueing.STRICT_FIFO)
        return self

    def starvation_after(self, seconds: float) -> QueueBuilder:
        self._spec = replace(self._spec, starvation_after=seconds)
        return self

    def user_limits(self, gpus: int | None = None, jobs: int | None = None) -> QueueBuilder:
        """``max_gpus_per_user`` and ``max_running_jobs_per_user``."""
        self._spec = replace(self._spec, max_gpus_per_user=gpus, max_running_jobs_per_user=jobs)
        return self

    def build(self) -> QueueSpec:
        return self._spec


def _res(q: dict[str, int]) -> dict[str, int]:
    """``gpu=4, mig_1g_10gb=2`` → ``{"gpu": 4, "mig-1g.10gb": 2}``."""
    out = {}
    for k, v in q.items():
        if k == "gpu":
            out[GPU] = v
        else:  # mig_1g_10gb
            _, g, mem = k.split("_")
            out[mig_resource(f"{g}.{mem}")] = v
    return out


def queue(name: str) -> QueueBuilder:
    """Start a queue builder."""
    return QueueBuilder(name)


class JobBuilder:
    """Builds pending or running jobs."""

    def __init__(self, job_id: str) -> None:
        self.id = job_id
        self._queue = "q"
        self._req = JobRequest()
        self._prio = 0
        self._submit = 0.0
        self._since: float | None = None
        self._nominated: tuple[str, ...] = ()
        self._terminating = False
        self._admit: float | None = None
        self._user = ""

    def user(self, name: str) -> JobBuilder:
        self._user = name
        return self

    def elastic(self, min_workers: int) -> JobBuilder:
        self._req = replace(self._req, min_workers=min_workers)
        return self

    def queue(self, name: str) -> JobBuilder:
        self._queue = name
        return self

    def gang(self, workers: int, per_worker: int = 1) -> JobBuilder:
        self._req = replace(self._req, workers=workers, per_worker=per_worker)
        return self

    def gpus(self, n: int) -> JobBuilder:
        """One rank with ``n`` GPUs."""
        return self.gang(1, n)

    def mig(self, profile: str, workers: int = 1) -> JobBuilder:
        self._req = replace(self._req, workers=workers, per_worker=1, resource=mig_resource(profile))
        return self

    def model(self, name: str) -> JobBuilder:
        self._req = replace(self._req, gpu_model=name)
        return self

    def host(self, cpus: int = 0, mem_gib: int = 0, mem_per_gpu_gib: int = 0, exclusive: bool = False) -> JobBuilder:
        """Host requests: ``-c cpus``, ``--mem`` / ``--mem-per-gpu`` in GiB, ``--exclusive``."""
        g = 1024**3
        self._req = replace(
            self._req, cpus_per_task=cpus, mem=mem_gib * g, mem_per_gpu=mem_per_gpu_gib * g, exclusive=exclusive
        )
        return self

    def nodes(self, n: int) -> JobBuilder:
        self._req = replace(self._req, nodes=n)
        return self

    def groups(self, *groups: tuple[str, JobRequest], colocate: tuple[tuple[str, ...], ...] = ()) -> JobBuilder:
        """A job of groups: ``(name, request of the group's ranks)`` each, in rank order."""
        named = tuple(GroupRequest(n, r) for n, r in groups)
        resource = next((r.resource for _, r in groups if r.per_worker), GPU)
        self._req = JobRequest(
            workers=sum(r.workers for _, r in groups),
            per_worker=groups[0][1].per_worker,
            resource=resource,
            groups=named,
            colocate=colocate,
        )
        return self

    def priority(self, p: int) -> JobBuilder:
        self._prio = p
        return self

    def submitted(self, t: float) -> JobBuilder:
        self._submit = t
        return self

    def pending_since(self, t: float) -> JobBuilder:
        self._since = t
        return self

    def nominated(self, *victims: str) -> JobBuilder:
        self._nominated = victims
        return self

    def terminating(self) -> JobBuilder:
        self._terminating = True
        return self

    def admitted(self, t: float) -> JobBuilder:
        self._admit = t
        return self

    @property
    def request(self) -> JobRequest:
        return self._req

    def pending(self, seq: int) -> PendingJob:
        return PendingJob(
            self.id,
            self._queue,
            self._req,
            self._prio,
            self._submit,
            seq,
            self._submit if self._since is None else self._since,
            self._nominated,
            user=self._user,
        )

    def running(self, placement: tuple[RankPlacement, ...], seq: int) -> RunningJob:
        admit = self._submit if self._admit is None else self._admit
        return RunningJob(
            self.id,
            self._queue,
            self._req,
            self._prio,
            self._submit,
            admit,
            placement,
            0.0,
            self._terminating,
            seq,
            user=self._user,
        )


def job(job_id: str) -> JobBuilder:
    """Start a job builder."""
    return JobBuilder(job_id)


class Cluster:
    """Nodes plus running jobs placed by the real placement code."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.running: list[RunningJob] = []
        self.unavailable: set[str] = set()

    def node(
        self,
        name: str,
        gpus: int,
        model: str = "",
        groups: int = 1,
        cpus: int | None = None,
        mem_gib: int | None = None,
    ) -> Cluster:
        """A node with ``gpus`` full GPUs in ``groups`` locality groups of consecutive GPUs, and
        ``cpus`` host CPUs and ``mem_gib`` GiB host memory for jobs (None: unknown)."""
        per = max(1, gpus // groups)
        devs = tuple(Device(f"GPU-{name}-{i}", name, GPU, model, f"g{i // per}") for i in range(gpus))
        memory = None if mem_gib is None else mem_gib * 1024**3
        self.nodes.append(Node(name, devs, cpus=cpus, memory=memory))
        return self

    def mig_node(self, name: str, gpus: int, profiles: list[str], model: str = "") -> Cluster:
        """A node whose GPUs are all in MIG mode with ``profiles``."""
        devs = tuple(
            Device(f"MIG-{name}-{i}-{k}", name, mig_resource(p), model, f"GPU-{name}-{i}")
            for i in range(gpus)
            for k, p in enumerate(profiles)
        )
        self.nodes.append(Node(name, devs))
        return self

    def run(self, builder: JobBuilder) -> Cluster:
        """Add a running job, placed where the scheduler would put it now."""
        snap = self.snapshot([], [])
        book = DeviceBook(snap)
        req = builder.request
        ix = book.index(req.resource, req.gpu_model.lower() if req.gpu_model else None)
        if req.groups:
            raw = place_groups(book, req)
        else:
            raw = place(book, ix, req.workers, req.per_worker, req.nodes, capped=capped_index(book, ix, req))
        assert raw is not None, f"no room to run {builder.id}"
        placement = tuple(
            RankPlacement(i, book.node_names[n], tuple(book.uuid[d] for d in ds)) for i, (n, ds) in enumerate(raw)
        )
        self.running.append(builder.running(placement, len(self.running)))
        return self

    def snapshot(self, queues: list[QueueSpec], pending: list[JobBuilder], now: float = 0.0) -> Snapshot:
        """A snapshot with this cluster's nodes and running jobs."""
        return Snapshot(
            now=now,
            nodes=tuple(self.nodes),
            queues=tuple(queues),
            running=tuple(self.running),
            pending=tuple(b.pending(i) for i, b in enumerate(pending)),
            unavailable=frozenset(self.unavailable),
        )


def device_owners(snap: Snapshot, uuids: list[str]) -> list[str | None]:
    """What ``DeviceBook(snap).owner`` must hold, worked out the plain way: per device of ``uuids``,
    the last running job whose placement names it, UNAVAILABLE for one the snapshot says is, else None."""
    owner: dict[str, str | None] = {u: (UNAVAILABLE if u in snap.unavailable else None) for u in uuids}
    for j in snap.running:
        for rp in j.placement:
            for u in rp.devices:
                if u in owner:
                    owner[u] = j.id
    return [owner[u] for u in uuids]
