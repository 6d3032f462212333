"""One cycle's private, mutable copy of the snapshot: quota usage plus device owners.

Admissions, preemptors' reservations and held quota change only this copy, so later
candidates of the same cycle see them. "What if these victims left" is
:meth:`CycleState.without`, a context manager that restores the copy on exit
(Kueue's ``SimulateWorkloadRemoval`` / ``restoreSnapshot``).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from operator import attrgetter, is_

from labgang.launcher.host_quota import HOST_RESOURCES
from labgang.launcher.model import GPU, JobRequest
from labgang.launcher.scheduler import hostquota
from labgang.launcher.scheduler.capacity import DeviceBook, FreeIndex, identity_delta, running_by_identity
from labgang.launcher.scheduler.groups import place_groups
from labgang.launcher.scheduler.hostres import capped_index
from labgang.launcher.scheduler.placement import place
from labgang.launcher.scheduler.quota import QuotaBook
from labgang.launcher.scheduler.shares import ShareBook, Sharer
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

_ID = attrgetter("id")

_NOTHING: AbstractContextManager[None] = nullcontext()
"""The block of :meth:`CycleState.without` and :meth:`CycleState.leaving` with no job: it changes
nothing (a ``nullcontext`` may be entered again and again)."""

memo_usage = True
"""Tests turn it off to build the reference: :func:`_plain_usage` off, every cycle's usage summed
job by job."""

_last_plain: tuple[bool, dict[int, RunningJob], dict[tuple[str, str], int], int, dict[str, RunningJob]] | None = None
"""The last :func:`_plain_usage` answer's inputs and sums: whether host quotas were counted, the
running jobs by identity (kept alive here, so no identity is reused), usage per (queue, resource),
how many of the jobs are shares of a card, and the running jobs by id it handed out (never
changed by its callers: :class:`CycleState` only reads ``running``)."""

_plain_retired: dict[str, RunningJob] | None = None
"""The map by id of :data:`_last_plain` once the state it was handed to was retired
(:meth:`CycleState.retire`: its cycle is over): the next update changes that map in place
instead of a copy. None while the map may still be read."""


def _plain_usage(
    running: tuple[RunningJob, ...], host_quota: bool
) -> tuple[dict[str, RunningJob], dict[tuple[str, str], int], bool] | None:
    """The running jobs by id (snapshot order), their usage per ``(queue, resource)`` in devices,
    and whether any is a share of a card, when every running job is *plain* or a share: whole
    devices, not ``--exclusive``, and (``host_quota``: some quota counts CPUs or memory) no host
    resources, so each counts ``request.total`` devices of ``request.resource`` in its queue; a
    share counts nothing here (its queue's shares are counted together, :mod:`.shares`). None when
    some job is neither or one id is listed twice (:class:`CycleState` then sums job by job).

    A pure memo on the previous call (as ``capacity._owners``): consecutive cycles differ by a
    few running jobs, so the previous sums are updated for the jobs gone and the jobs new,
    compared by identity with set operations. Integer sums: the answer is the full sum's. The
    map by id is updated the same way (:func:`_by_id_from`) and handed out only where it is the
    full build's, in snapshot order, each id with this snapshot's very view.
    """
    global _last_plain, _plain_retired
    retired, _plain_retired = _plain_retired, None  # handed out again below, or dropped
    if not memo_usage:
        _last_plain = None
        return None
    last = _last_plain
    if last is not None and last[0] != host_quota:
        last = None
    by_id = None
    ident = running_by_identity(running)
    if last is not None:
        gone, added = identity_delta(last[1], ident)
        by_id = _by_id_from(last[4], last[1], ident, gone, added, running, in_place=retired is last[4])
    if by_id is None:
        by_id = dict(zip(map(_ID, running), running, strict=True))
    if len(by_id) != len(running):
        _last_plain = None
        return None
    usage: dict[tuple[str, str], int]
    if last is not None:
        before, usage, shared = last[1], dict(last[2]), last[3]
        for i in gone:
            job = before[i]
            if job.request.shared:
                shared -= 1
                continue
            key = (job.queue, job.request.resource)
            usage[key] -= job.request.total
        new = [ident[i] for i in added]
    else:
        usage, new, shared = {}, list(running), 0
    for job in new:
        req = job.request
        if req.shared:
            shared += 1
            continue
        if req.exclusive or (host_quota and req.host):
            _last_plain = None
            return None
        key = (job.queue, req.resource)
        usage[key] = usage.get(key, 0) + req.total
    _last_plain = (host_quota, ident, usage, shared, by_id)
    return by_id, dict(usage), shared > 0


def _by_id_from(
    last: dict[str, RunningJob],
    before: dict[int, RunningJob],
    ident: dict[int, RunningJob],
    gone: set[int],
    added: set[int],
    running: tuple[RunningJob, ...],
    *,
    in_place: bool = False,
) -> dict[str, RunningJob] | None:
    """``running`` by id in snapshot order (its full build, ``dict(zip(ids, running))``) from the
    last cycle's map ``last`` (of ``before``) and the views gone and new: a view built anew for the
    same job takes its old place, views gone are dropped and new jobs go at the end. None when that
    is not the snapshot's order (a new job that is not the last in submission order) or an id is
    listed twice: the caller builds it in full. ``in_place``: ``last`` is read by nobody any more
    (:data:`_plain_retired`): it is changed into the answer (left changed when the answer is None)
    instead of a copy."""
    out = last if in_place else dict(last)  # a C-level copy
    replaced: set[str] = set()
    for i in added:
        job = ident[i]
        if job.id in out:
            replaced.add(job.id)
        out[job.id] = job  # an existing key keeps its place
    for i in gone:
        job_id = before[i].id
        if job_id not in replaced:
            out.pop(job_id, None)
    if len(out) != len(running) or not all(map(is_, out.values(), running)):
        return None
    return out


memo_priorities = True
"""Tests turn it off to build the reference: every cycle's priority counts made anew."""

PriorityCounts = dict[tuple[str, str], dict[int, int]]
_last_priorities: tuple[dict[int, RunningJob], PriorityCounts] | None = None
"""The last :func:`_priority_counts` answer and the running jobs by identity it was made from (kept
alive here, so no identity is reused)."""


def _priority_counts(running: tuple[RunningJob, ...]) -> PriorityCounts | None:
    """Per ``(queue, resource)``: how many of ``running`` (terminating or not) run at each priority;
    None when one object is listed twice. A pure memo on the last answer: consecutive cycles differ by
    a few running jobs, so the last counts are updated for the jobs gone and new (by identity, as
    :func:`_plain_usage`); an answer is never changed once handed out (an update copies the map and
    each count it changes). A priority whose count falls to 0 is dropped: every count is positive."""
    global _last_priorities
    ident = running_by_identity(running)
    if len(ident) != len(running):
        _last_priorities = None
        return None
    last = _last_priorities if memo_priorities else None
    if last is not None and last[0] is ident:
        return last[1]
    if last is None:
        counts: PriorityCounts = {}
        for job in ident.values():
            per = counts.setdefault((job.queue, job.request.resource), {})
            per[job.priority] = per.get(job.priority, 0) + 1
    else:
        before = last[0]
        gone, new = identity_delta(before, ident)
        counts = dict(last[1])
        copied: set[tuple[str, str]] = set()
        for i, sign in [(i, -1) for i in gone] + [(i, 1) for i in new]:
            job = before[i] if sign < 0 else ident[i]
            key = (job.queue, job.request.resource)
            if key not in copied:
                copied.add(key)
                counts[key] = dict(counts.get(key, {}))
            per = counts[key]
            n = per.get(job.priority, 0) + sign
            if n:
                per[job.priority] = n
            else:
                del per[job.priority]
    _last_priorities = (ident, counts)
    return counts


memo_victims = True
"""Tests turn it off to build the reference: every cycle's victim orders sorted anew."""

VictimKey = tuple[int, float, int, str]
_last_victims: dict[
    tuple[str, str, bool], tuple[dict[int, RunningJob], dict[int, RunningJob], list[VictimKey], list[RunningJob]]
] = {}
"""Per (queue, resource, terminating): the running jobs by identity it was made from, its
members by identity, and their :func:`victim_order` keys and jobs in that order."""


def _victims_memo(
    running: tuple[RunningJob, ...], by_id: dict[str, RunningJob], key: tuple[str, str, bool]
) -> list[RunningJob] | None:
    """:meth:`CycleState.victims_in` of ``key`` = (queue, resource, terminating): the running jobs
    of ``running`` that match it, in :func:`victim_order`; None when an id is listed twice (then
    the caller sorts). A pure memo on the last answer for ``key``: the jobs gone since are taken
    out and the new ones put in by bisection (the keys are distinct: they end with the job id), so
    the order is the full sort's. The list is the memo's own (never changed once made: an update
    builds a new one), handed out without a copy: callers only read it. The members and keys are
    never handed out: an update changes them in place.
    """
    if not memo_victims or len(by_id) != len(running):
        return None
    ident = running_by_identity(running)
    queue, res, terminating = key
    last = _last_victims.get(key)
    if last is not None and last[0] is ident:
        return last[3]
    if last is None:
        members = {
            id(j): j
            for j in by_id.values()
            if j.queue == queue and j.terminating == terminating and j.request.resource == res
        }
        pairs = sorted(((victim_order(j), j) for j in members.values()), key=lambda kj: kj[0])
        keys, jobs = [k for k, _ in pairs], [j for _, j in pairs]
    else:
        gone, new = identity_delta(last[0], ident)
        # the members and keys are the memo's own (never handed out): updated in place; the
        # jobs' list was handed out, so it is copied
        members, keys, jobs = last[1], last[2], list(last[3])
        for i in gone:
            job = members.pop(i, None)
            if job is not None:
                at = bisect_left(keys, victim_order(job))
                del keys[at], jobs[at]
        for i in new:
            job = ident[i]
            if job.queue == queue and job.terminating == terminating and job.request.resource == res:
                k = victim_order(job)
                at = bisect_left(keys, k)
                keys.insert(at, k)
                jobs.insert(at, job)
                members[i] = job
    _last_victims[key] = (ident, members, keys, jobs)
    return jobs


class CycleState:
    """Quota usage and device ownership for one cycle.

    Args:
        snapshot: the cycle's input (never mutated).
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.running: dict[str, RunningJob] = {}
        usage: dict[tuple[str, str], int] = {}
        self.quota = QuotaBook(snapshot.queues, {}, snapshot.cohorts)
        self.devices = DeviceBook(snapshot)
        # host CPUs and memory in quotas, --exclusive's whole nodes (hostquota.py): per job, what
        # its queue's quota counts; a plain job counts its devices alone, as before
        self.host_quota = hostquota.counts_host(self.quota)
        self.demand: dict[str, dict[str, int]] = {}
        any_shared = False
        # all plain (whole devices, no host quota) or shares: the sums updated from the last cycle's
        plain = _plain_usage(snapshot.running, self.host_quota)
        if plain is not None:
            self.running, usage, any_shared = plain
        for job in snapshot.running if plain is None else ():
            if job.id in self.running:
                continue
            self.running[job.id] = job
            if job.request.shared:
                any_shared = True
                continue  # counted below, in whole GPUs per queue (:mod:`.shares`)
            if job.request.exclusive or (self.host_quota and job.request.host):
                nodes = [self.devices.node_pos[rp.node] for rp in job.placement if rp.node in self.devices.node_pos]
                demand = hostquota.demand_on_nodes(
                    self.quota, self.devices, job.queue, job.request, nodes, self.host_quota
                )
                self.demand[job.id] = demand
            else:
                demand = {job.request.resource: job.request.total}
            for res, n in demand.items():
                usage[(job.queue, res)] = usage.get((job.queue, res), 0) + n
        # shares of one card (--shards, --mps): None when the cluster shares no card
        self.cards: ShareBook | None = None
        if any_shared or snapshot.gpu_sharing.enabled:
            self.cards = ShareBook(snapshot.gpu_sharing, snapshot.queues, self.running.values())
            for q, n in self.cards.initial_usage().items():
                usage[(q, GPU)] = usage.get((q, GPU), 0) + n
        for (queue, res), n in sorted(usage.items()):
            self.quota.add(queue, res, n)
        self.shares: QuotaBook | None = None
        if snapshot.sharing.fair_sharing:
            # fair sharing judges shares by running jobs not told to leave, plus waiting preemptors
            self.shares = QuotaBook((), tree=self.quota.tree)
            for job in self.running.values():
                if not job.terminating and not job.request.shared:
                    for res, n in self.share_demand(job).items():
                        self.shares.add(job.queue, res, n)
            if self.cards is not None:
                live = ShareBook(snapshot.gpu_sharing, (), (j for j in self.running.values() if not j.terminating))
                for q, n in live.initial_usage().items():
                    self.shares.add(q, GPU, n)
        if self.cards is not None:
            self.cards.attach(self.devices)
        self._left: dict[str, tuple[Sharer | None, bool]] = {}
        # what the last :meth:`remove` changed: (the quota book's usage, the device book); a share
        # taken off changes the usage only when a queue's share charge changed (:mod:`.shares`),
        # and the devices only when it freed its card (the victim search skips fit checks it cannot change)
        self.last_removal: tuple[bool, bool] = (True, True)
        self._job_devices: dict[str, list[int]] = {}
        self.removed: set[str] = set()
        self._leaving: set[str] = set()  # see :meth:`leaving`
        self._released: dict[str, list[int]] = {}
        self._by_queue: dict[str, list[RunningJob]] | None = None
        self._victims: dict[tuple[str, str, bool], list[RunningJob]] = {}
        self._priorities: PriorityCounts | None = None  # :meth:`lowest_priority`'s counts, made when first asked
        self._priorities_exact = True  # False: the counts are not this snapshot's (ids listed twice)
        self.tenant_score: Callable[[RunningJob], float] | None = None  # admission fair sharing
        self.placed: set[str] = set()  # pending jobs admitted, or holding room as preemptors, this cycle
        self._pending_by_queue: dict[str, list[PendingJob]] | None = None

    def retire(self) -> None:
        """Say that nothing reads this state again (:func:`.cycle.run_cycle` does when its cycle is
        over): the running jobs' maps the memos handed it (:attr:`running`, the device book's
        request map: :meth:`.capacity.DeviceBook.retire`) are then changed in place into the next
        snapshot's instead of copied. Reading the state afterwards may show another snapshot's jobs."""
        global _plain_retired
        if _last_plain is not None and _last_plain[4] is self.running:
            _plain_retired = self.running
        self.devices.retire()

    def victims_in(self, queue: str, res: str, terminating: bool = False) -> list[RunningJob]:
        """``queue``'s running jobs using ``res`` that are (or are not) ``terminating``, in
        eviction order (lowest priority, most recently admitted, id); built once per cycle.
        Callers only read the list (it may be the victim-order memo's own)."""
        key = (queue, res, terminating)
        out = self._victims.get(key)
        if out is None:
            out = _victims_memo(self.snapshot.running, self.running, key)
            if out is None:
                out = sorted(
                    (j for j in self.running_in(queue) if j.terminating == terminating and j.request.resource == res),
                    key=victim_order,
                )
            self._victims[key] = out
        return out

    def lowest_priority(self, queue: str, res: str) -> int | None:
        """The lowest priority of ``queue``'s running jobs using ``res`` in the snapshot, terminating
        or not (None: it runs none): the first of :meth:`victims_in`'s lists, without sorting them."""
        counts = self._priorities
        if counts is None:
            counts = self._priorities = _priority_counts(self.snapshot.running)
            if counts is None or len(self.running) != len(self.snapshot.running):  # an id listed twice
                counts = self._priorities = {}
                self._priorities_exact = False
        if not self._priorities_exact:
            firsts = [jobs[0].priority for t in (True, False) if (jobs := self.victims_in(queue, res, t))]
            return min(firsts, default=None)
        per = counts.get((queue, res))
        return min(per) if per else None

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

    def place(self, req: JobRequest, job: PendingJob | None = None) -> RawPlacement | None:
        """Where ``req`` would go on the devices (and host CPUs and memory) free in this copy, or None.

        A share (``req.shared``) goes through :mod:`.shares`, which needs ``job`` (its queue and user)
        to join a shared card; without it only a whole free card is offered."""
        if req.shared:
            if self.cards is None:
                return None
            return self.cards.place(req, None if job is None else job.queue, "" if job is None else job.user)
        if req.groups:
            return place_groups(self.devices, req)
        ix = self.index(req)
        capped = capped_index(self.devices, ix, req)
        return place(self.devices, ix, req.workers, req.per_worker, req.nodes, req.topology, capped)

    def quota_fits(
        self, queue: str, req: JobRequest, *, within_nominal: bool = False, job: PendingJob | None = None
    ) -> bool:
        """True when ``queue`` may take ``req`` now (and stay within nominal, if asked): its
        devices, and the CPUs and memory it counts at least (:mod:`.hostquota`). ``job``: the pending
        job ``req`` is for (a share's charge depends on the card it would take, :meth:`charge`; where
        that card is held alone by another queue, whose charge goes down as it becomes mixed, the
        check reads that queue's usage as it would then be: its cohort has that room)."""
        lowered = None
        if req.shared and self.cards is not None:
            lowered = self.cards.lowered(queue, req, None if job is None else job.user)
        if lowered is None:
            return self._quota_fits(queue, req, within_nominal, job)
        self.quota.add(lowered[0], GPU, lowered[1])
        try:
            return self._quota_fits(queue, req, within_nominal, job)
        finally:
            self.quota.add(lowered[0], GPU, -lowered[1])

    def _quota_fits(self, queue: str, req: JobRequest, within_nominal: bool, job: PendingJob | None) -> bool:
        res, need = req.resource, self.charge(queue, req, job)
        if need > self.quota.available(queue, res):
            return False
        if within_nominal and self.quota.usage(queue, res) + need > self.quota.nominal(queue, res):
            return False
        if self.host_quota and req.host:
            demand = hostquota.demand_before_placement(self.quota, queue, req, True)
            return hostquota.fits(self.quota, queue, demand, within_nominal=within_nominal)
        return True

    def placed_demand(self, queue: str, req: JobRequest, raw: RawPlacement) -> dict[str, int]:
        """What ``req`` counts in ``queue``'s quota on the nodes of ``raw`` (:mod:`.hostquota`)."""
        if not req.exclusive and not (self.host_quota and req.host):
            return {req.resource: req.total}
        return hostquota.demand_on_nodes(self.quota, self.devices, queue, req, (n for n, _ in raw), self.host_quota)

    def place_within_quota(
        self, queue: str, req: JobRequest, *, within_nominal: bool = False, job: PendingJob | None = None
    ) -> RawPlacement | None:
        """:meth:`place` when ``queue``'s quota holds ``req`` there (:meth:`quota_fits`, then
        :meth:`placed_fits`; with ``within_nominal``, within its nominal quota); else None. ``job``:
        the pending job ``req`` is for (a share needs its queue and user, :meth:`place`)."""
        if not self.quota_fits(queue, req, within_nominal=within_nominal, job=job):
            return None
        raw = self.place(req, job)
        if raw is None or not (req.exclusive or (self.host_quota and req.host)):
            return raw
        demand = self.placed_demand(queue, req, raw)
        return raw if hostquota.fits(self.quota, queue, demand, within_nominal=within_nominal) else None

    def placed_fits(self, queue: str, req: JobRequest, raw: RawPlacement) -> bool:
        """True when ``queue``'s quota holds ``req`` on the nodes ``raw`` chose: the exact count
        (``--mem`` once per node, ``--exclusive``'s whole nodes) that :meth:`quota_fits` could only
        bound from below."""
        if not req.exclusive and not (self.host_quota and req.host):
            return True
        return hostquota.fits(self.quota, queue, self.placed_demand(queue, req, raw))

    def share_demand(self, job: RunningJob) -> dict[str, int]:
        """What running ``job`` counts in fair-sharing usage (:attr:`shares`): its devices asked
        (``req.total``), and the ``cpu`` / ``memory`` its queue's quota counts (:mod:`.hostquota`),
        so dominant resource shares weigh host resources where a quota lists them."""
        req = job.request
        own = {req.resource: req.total}
        counted = self.demand.get(job.id)
        if counted and self.host_quota:
            own.update((res, n) for res, n in counted.items() if res in HOST_RESOURCES)
        return own

    def pending_share_demand(self, queue: str, req: JobRequest) -> dict[str, int]:
        """What ``req`` would count in ``queue``'s fair-sharing usage before its nodes are chosen:
        its devices, and the ``cpu`` / ``memory`` it counts at least where ``queue`` lists them."""
        own = {req.resource: req.total}
        if self.host_quota and req.host:
            least = hostquota.demand_before_placement(self.quota, queue, req, True)
            own.update((res, n) for res, n in least.items() if res in HOST_RESOURCES)
        return own

    def charge(self, queue: str, req: JobRequest, job: PendingJob | None = None) -> int:
        """Whole devices ``queue``'s quota usage would grow by with ``req``: its total, or for a share
        what its queue's share charge grows by where :meth:`place` would put it for ``job``'s user
        (:meth:`.shares.ShareBook.charge`; without ``job``, a whole free card, as :meth:`place`)."""
        if req.shared and self.cards is not None:
            return self.cards.charge(queue, req, None if job is None else job.user)
        return req.total

    def _count_shares(self, deltas: list[tuple[str, int]], sign: int, terminating: bool) -> None:
        """Add ``sign`` times each ``(queue, whole GPUs)`` of a share's charge change (:class:`.shares.
        ShareBook`) to the quota book, and to the fair-sharing shares unless the share is ``terminating``."""
        for q, n in deltas:
            self.quota.add(q, GPU, sign * n)
            if self.shares is not None and not terminating:
                self.shares.add(q, GPU, sign * n)

    # --- simulated removal ----------------------------------------------------------------------

    def remove(self, job_id: str) -> bool:
        """Pretend running job ``job_id`` is gone: release its quota and devices.

        Returns:
            False when only the room on a shared card changed (a share that changed no queue's
            charge (:class:`.shares.ShareBook`) and freed no card): what a whole-device request
            reads is as before. True otherwise."""
        job = self.running[job_id]
        self.removed.add(job_id)
        if job.request.shared and self.cards is not None:
            delta, sharer, freed = self.cards.leave(job)
            self._left[job_id] = (sharer, freed)
            self.last_removal = (bool(delta), freed)
            self._count_shares(delta, -1, job.terminating)  # a charge changed (its queue's, or a card's other queue's)
            return bool(delta) or freed
        self.last_removal = (True, True)
        if job_id not in self._leaving:
            self._count(job, -1)
        self._released[job_id] = self.devices.release(self.job_devices(job_id), job_id)
        return True

    def restore(self, job_id: str) -> None:
        """Undo :meth:`remove`."""
        job = self.running[job_id]
        self.removed.discard(job_id)
        if job.request.shared and self.cards is not None:
            sharer, freed = self._left.pop(job_id, (None, False))
            self._count_shares(self.cards.back(job, sharer, freed), 1, job.terminating)
            return
        if job_id not in self._leaving:
            self._count(job, 1)
        self.devices.retake(self._released.pop(job_id, []), job_id)

    def leaving(self, job_ids: Iterable[str]) -> AbstractContextManager[None]:
        """Within the block, the quota usage (and fair-sharing share) of the given running jobs
        does not count; their devices stay taken. For a preemptor's victim search: victims other
        preemptors of this cycle claimed from other queues are leaving, and those preemptors' held
        usage already stands in for theirs (Kueue's ``fits`` with the preempted workloads removed),
        so the same room is not counted twice and no more jobs are evicted than needed. Plain
        admissions never look through this: a victim's quota counts until it is gone.

        Args:
            job_ids: ids of running jobs (``Snapshot.running``); ones already removed or
                leaving are skipped. Raises ``KeyError`` for an id that is not running.

        With no ids (most victim searches) the block changes nothing: a shared no-op context."""
        if isinstance(job_ids, list | tuple | set | frozenset) and not job_ids:
            return _NOTHING
        return self._leaving_block(job_ids)

    @contextmanager
    def _leaving_block(self, job_ids: Iterable[str]) -> Iterator[None]:
        """:meth:`leaving`'s block."""
        # a share's usage is its queue's share charge (:mod:`.shares`), not its own count:
        # shares stay counted here (as before this rule: a share victim may be counted twice)
        gone = [
            j
            for j in job_ids
            if j not in self._leaving and j not in self.removed and not self.running[j].request.shared
        ]
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
        for res, n in self.demand.get(job.id, {job.request.resource: job.request.total}).items():
            self.quota.add(job.queue, res, sign * n)
        if self.shares is not None and not job.terminating:
            for res, n in self.share_demand(job).items():
                self.shares.add(job.queue, res, sign * n)

    def without(self, job_ids: list[str]) -> AbstractContextManager[None]:
        """Within the block, the given running jobs count as gone; restored on exit (no ids: a
        shared no-op context, as most victim searches have)."""
        if not job_ids:
            return _NOTHING
        return self._without_block(job_ids)

    @contextmanager
    def _without_block(self, job_ids: list[str]) -> Iterator[None]:
        """:meth:`without`'s block."""
        for j in job_ids:
            self.remove(j)
        try:
            yield
        finally:
            for j in reversed(job_ids):
                self.restore(j)

    # --- assumed decisions ----------------------------------------------------------------------

    def share_note(self, req: JobRequest, raw: RawPlacement) -> str:
        """How share ``req`` is about to go to ``raw``'s card (before :meth:`assume`); "" for a job of
        whole devices (see :meth:`ShareBook.placement_note`)."""
        if not req.shared or self.cards is None:
            return ""
        return self.cards.placement_note(req, raw[0][1][0])

    def assume(self, job_id: str, queue: str, req: JobRequest, raw: RawPlacement, user: str = "") -> Placement:
        """Admit ``job_id`` in this copy: add its usage and take its devices (a share: join its card as
        ``user``, for the trust rule of later shares)."""
        self.placed.add(job_id)
        if req.shared and self.cards is not None:
            self._count_shares(self.cards.take(job_id, queue, user, req, raw[0][1][0]), 1, False)
            return self.to_placement(raw)
        demand = self.placed_demand(queue, req, raw)
        for res, n in demand.items():
            self.quota.add(queue, res, n)
        if self.shares is not None:  # devices asked, and cpu/memory as the running job will count them
            self.shares.add(queue, req.resource, req.total)
            for res, n in demand.items():
                if res in HOST_RESOURCES:
                    self.shares.add(queue, res, n)
        devs = [d for _, ds in raw for d in ds]
        self.devices.take(devs, job_id)
        return self.to_placement(raw)

    def whole_nodes(self, req: JobRequest, raw: RawPlacement) -> tuple[str, ...]:
        """Every device of ``req``'s resource on the nodes of ``raw``, as ``"node/uuid"`` in node
        and device order: what an ``--exclusive`` job holds whole."""
        nodes = {n for n, _ in raw}
        books = self.devices
        return tuple(
            f"{books.node_names[books.node_of[d]]}/{books.uuid[d]}"
            for d in sorted(books.by_resource.get(req.resource, ()), key=lambda d: (books.node_of[d], d))
            if books.node_of[d] in nodes
        )

    def to_placement(self, raw: RawPlacement) -> Placement:
        """Turn positions into the public :data:`Placement` (node names, device UUIDs)."""
        names, uuid = self.devices.node_names, self.devices.uuid
        return tuple(
            RankPlacement(rank=i, node=names[n], devices=tuple(uuid[d] for d in ds)) for i, (n, ds) in enumerate(raw)
        )
