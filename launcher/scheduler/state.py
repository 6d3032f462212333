"""One cycle's private, mutable copy of the snapshot: quota usage plus device owners.

Admissions, preemptors' reservations and held quota change only this copy, so later
candidates of the same cycle see them. "What if these victims left" is
:meth:`CycleState.without`, a context manager that restores the copy on exit
(Kueue's ``SimulateWorkloadRemoval`` / ``restoreSnapshot``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler.capacity import DeviceBook, FreeIndex
from labgang.launcher.scheduler.carry import carried
from labgang.launcher.scheduler.hostres import capped_index
from labgang.launcher.scheduler.placement import place
from labgang.launcher.scheduler.quota import QuotaBook
from labgang.launcher.scheduler.snapshot import (
    PendingJob,
    Placement,
    RankPlacement,
    RunningJob,
    Snapshot,
    victim_order,
)

RawPlacement = list[tuple[int, list[int]]]
"""``[(node position, [device positions]), ...]`` per rank, as :func:`place` returns it."""


class CycleState:
    """Quota usage and device ownership for one cycle.

    Args:
        snapshot: the cycle's input (never mutated).
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        derived = carried(snapshot.running)  # the previous cycle's, updated for the jobs gone and new
        self.running: dict[str, RunningJob] = derived.running
        self.quota = QuotaBook(snapshot.queues, derived.usage, snapshot.cohorts)
        self.shares: QuotaBook | None = None
        if snapshot.sharing.fair_sharing:
            # fair sharing judges shares by running jobs not told to leave, plus waiting preemptors
            self.shares = QuotaBook((), tree=self.quota.tree)
            for job in self.running.values():
                if not job.terminating:
                    self.shares.add(job.queue, job.request.resource, job.request.total)
        self.devices = DeviceBook(snapshot)
        self._job_devices: dict[str, list[int]] = {}
        self.removed: set[str] = set()
        self._leaving: set[str] = set()  # see :meth:`leaving`
        self._released: dict[str, list[int]] = {}
        self._by_queue: dict[str, list[RunningJob]] | None = None
        self._victims: dict[tuple[str, str, bool], list[RunningJob]] = derived.victims
        self.tenant_score: Callable[[RunningJob], float] | None = None  # admission fair sharing
        self.placed: set[str] = set()  # pending jobs admitted, or holding room as preemptors, this cycle
        self._pending_by_queue: dict[str, list[PendingJob]] | None = None

    def victims_in(self, queue: str, res: str, terminating: bool = False) -> list[RunningJob]:
        """``queue``'s running jobs using ``res`` that are (or are not) ``terminating``, in
        eviction order (lowest priority, most recently admitted, id); built once, then carried
        to later cycles (:mod:`.carry`). Callers must not change the list."""
        key = (queue, res, terminating)
        out = self._victims.get(key)
        if out is None:
            out = sorted(
                (j for j in self.running_in(queue) if j.terminating == terminating and j.request.resource == res),
                key=victim_order,
            )
            self._victims[key] = out
        return out

    def running_in(self, queue: str) -> list[RunningJob]:
        """Running jobs of ``queue`` from the snapshot, in snapshot order."""
        if self._by_queue is None:
            self._by_queue = {}
            for job in self.running.values():
                self._by_queue.setdefault(job.queue, []).append(job)
        return self._by_queue.get(queue, [])

    def pending_in(self, queue: str) -> list[PendingJob]:
        """Pending jobs of ``queue`` from the snapshot, in snapshot order (those placed this cycle
        included: see :attr:`placed`)."""
        if self._pending_by_queue is None:
            self._pending_by_queue = {}
            for job in self.snapshot.pending:
                self._pending_by_queue.setdefault(job.queue, []).append(job)
        return self._pending_by_queue.get(queue, [])

    def job_devices(self, job_id: str) -> list[int]:
        """Device positions a running job holds (devices missing from the snapshot skipped)."""
        devs = self._job_devices.get(job_id)
        if devs is None:
            pos = self.devices.pos
            devs = [pos[u] for rp in self.running[job_id].placement for u in rp.devices if u in pos]
            self._job_devices[job_id] = devs
        return devs

    def index(self, req: JobRequest) -> FreeIndex:
        """Free devices matching ``req``'s resource and model."""
        return self.devices.index(req.resource, req.gpu_model.lower() if req.gpu_model else None)

    def place(self, req: JobRequest) -> RawPlacement | None:
        """Where ``req`` would go on the devices (and host CPUs and memory) free in this copy, or None."""
        ix = self.index(req)
        capped = capped_index(self.devices, ix, req)
        return place(self.devices, ix, req.workers, req.per_worker, req.nodes, req.topology, capped)

    def quota_fits(self, queue: str, req: JobRequest, *, within_nominal: bool = False) -> bool:
        """True when ``queue`` may take ``req`` now (and stay within nominal, if asked)."""
        res, need = req.resource, req.total
        if need > self.quota.available(queue, res):
            return False
        return not within_nominal or self.quota.usage(queue, res) + need <= self.quota.nominal(queue, res)

    # --- simulated removal ----------------------------------------------------------------------

    def remove(self, job_id: str) -> None:
        """Pretend running job ``job_id`` is gone: release its quota and devices."""
        job = self.running[job_id]
        self.removed.add(job_id)
        if job_id not in self._leaving:
            self._count(job, -1)
        self._released[job_id] = self.devices.release(self.job_devices(job_id), job_id)

    def restore(self, job_id: str) -> None:
        """Undo :meth:`remove`."""
        job = self.running[job_id]
        self.removed.discard(job_id)
        if job_id not in self._leaving:
            self._count(job, 1)
        self.devices.retake(self._released.pop(job_id, []), job_id)

    @contextmanager
    def leaving(self, job_ids: Iterable[str]) -> Iterator[None]:
        """Within the block, the quota usage (and fair-sharing share) of the given running jobs
        does not count; their devices stay taken. For a preemptor's victim search: victims other
        preemptors of this cycle claimed from other queues are leaving, and those preemptors' held
        usage already stands in for theirs (Kueue's ``fits`` with the preempted workloads removed),
        so the same room is not counted twice and no more jobs are evicted than needed. Plain
        admissions never look through this: a victim's quota counts until it is gone.

        Args:
            job_ids: ids of running jobs (``Snapshot.running``); ones already removed or
                leaving are skipped. Raises ``KeyError`` for an id that is not running."""
        gone = [j for j in job_ids if j not in self._leaving and j not in self.removed]
        for j in gone:
            self._count(self.running[j], -1)
            self._leaving.add(j)
        try:
            yield
        finally:
            for j in gone:
                self._leaving.discard(j)
                self._count(self.running[j], 1)

    def _count(self, job: RunningJob, sign: int) -> None:
        """Add (``sign`` 1) or take away (-1) ``job``'s quota usage and fair-sharing share."""
        res, n = job.request.resource, sign * job.request.total
        self.quota.add(job.queue, res, n)
        if self.shares is not None and not job.terminating:
            self.shares.add(job.queue, res, n)

    @contextmanager
    def without(self, job_ids: list[str]) -> Iterator[None]:
        """Within the block, the given running jobs count as gone; restored on exit."""
        for j in job_ids:
            self.remove(j)
        try:
            yield
        finally:
            for j in reversed(job_ids):
                self.restore(j)

    # --- assumed decisions ----------------------------------------------------------------------

    def assume(self, job_id: str, queue: str, req: JobRequest, raw: RawPlacement) -> Placement:
        """Admit ``job_id`` in this copy: add its usage and take its devices."""
        self.placed.add(job_id)
        self.quota.add(queue, req.resource, req.total)
        if self.shares is not None:
            self.shares.add(queue, req.resource, req.total)
        devs = [d for _, ds in raw for d in ds]
        self.devices.take(devs, job_id)
        return self.to_placement(raw)

    def to_placement(self, raw: RawPlacement) -> Placement:
        """Turn positions into the public :data:`Placement` (node names, device UUIDs)."""
        names, uuid = self.devices.node_names, self.devices.uuid
        return tuple(
            RankPlacement(rank=i, node=names[n], devices=tuple(uuid[d] for d in ds)) for i, (n, ds) in enumerate(raw)
        )
