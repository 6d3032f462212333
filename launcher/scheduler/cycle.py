"""One scheduling cycle: a pure function from a :class:`Snapshot` to a :class:`CycleResult`.

Phases, in the order :func:`run_cycle` runs them (Kueue's ``schedule()`` in spirit):

1. **nominate** (:mod:`.nominate`): each queue's pending jobs in queue order; unschedulable
   jobs set aside (they never block and never preempt).
2. **reserve** (:mod:`.starvation`): devices reserved for starving gangs.
3. **order**: across queues, a preemptor not yet admitted first, then jobs that fit within
   their queue's nominal quota before jobs that would borrow, then priority, submit time and
   submission order. Best-effort-fifo queues offer every job (a head that does not fit lets
   later jobs try); a strict-fifo queue offers only its head until the head starts.
   The borrow test is re-evaluated when a job comes up, since earlier admissions change it.
   Jobs of one queue with the same request form a class: once one fails, the copy only gets
   fuller, so the class's later (weaker) jobs get the same answer without a second search.
4. for each job, **quota fit** then **placement**, both against the cycle's copy; when either
   fails, the **preemption search** (:mod:`.preemption`) with simulate-and-undo and a minimal
   victim set; else a typed pending reason with numbers.
5. **admit on the copy**: an admitted job's usage and devices, a preemptor's usage and its
   reserved devices, and quota held by a waiting head are added to the copy, so later jobs
   of the same cycle see them and nothing is over-admitted. A head's idle hold binds only
   borrowers of other queues: it is lifted for its own queue's later jobs and for any job
   that stays within its own nominal quota.

The function reads no clock, does no I/O, uses no randomness and never iterates a set or
dict whose order could vary: the same snapshot always gives the same decisions. A snapshot
that already reflects a cycle's decisions (admitted jobs running, victims terminating,
preemptors with ``nominated`` set) yields no new admissions or preemptions for them.
"""

from __future__ import annotations

import enum
import gc
import heapq
from bisect import bisect_left
from collections.abc import Hashable
from dataclasses import replace

from labgang.launcher.model import JobRequest, Queueing, ReclaimWithinCohort, WithinQueue
from labgang.launcher.scheduler import hostquota, reasons
from labgang.launcher.scheduler.capacity import FreeIndex
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Pending, PendingReason, Preempt, ReasonCode
from labgang.launcher.scheduler.explain import preemption_text
from labgang.launcher.scheduler.fairpreempt import find_fair_victims
from labgang.launcher.scheduler.fairshare import branch, lowest_common
from labgang.launcher.scheduler.groups import (
    NEED_MARK,
    ONE_GROUP,
    group_shape,
    group_sizes,
    is_template,
    names_groups,
    plain_gang,
    plain_size,
    reason_template,
    render,
)
from labgang.launcher.scheduler.groups import capacity_reason as groups_capacity_reason
from labgang.launcher.scheduler.hostres import host_reason
from labgang.launcher.scheduler.nominate import Entry, nominate
from labgang.launcher.scheduler.placement import feasible, topology_reason
from labgang.launcher.scheduler.preemption import find_victims, no_candidates, search_refusal
from labgang.launcher.scheduler.shares import trust_user
from labgang.launcher.scheduler.snapshot import PendingJob, RunningJob, Snapshot
from labgang.launcher.scheduler.starvation import reserve_for_starving
from labgang.launcher.scheduler.state import CycleState, RawPlacement
from labgang.launcher.scheduler.tenants import TenantBook, key_of
from labgang.launcher.scheduler.userlimits import UserBook

ANY_USER = "<any user>"
"""In a share's search key in place of the user: a verdict that holds for every user but the ones it
names (see ``_try_job``)."""


def _any_user_cls(e: Entry) -> tuple[Hashable, ...]:
    """``e``'s class (:attr:`Entry.cls`) with its last item, what the trust rule reads of a share
    (nominate.py), replaced by :data:`ANY_USER`: the class of the same share of every user."""
    req = e.job.request
    return (*e.cls[:-1], (req.shards, req.mps, ANY_USER))


class Outcome(enum.Enum):
    """What happened to one job in a cycle."""

    ADMITTED = "admitted"
    WAITING = "waiting"  # preempted victims (now or earlier) and waits for them
    FAILED = "failed"  # does not fit, no victims
    UNSCHEDULABLE = "unschedulable"
    LIMITED = "limited"  # held by its user's limits in its queue: never preempts, never blocks others


def run_cycle(snapshot: Snapshot) -> CycleResult:
    """Decide admissions, preemptions and pending reasons for one snapshot.

    Args:
        snapshot: the cluster at one instant (never mutated).

    Returns:
        Every pending job of ``snapshot`` exactly once in ``admitted`` or ``pending``
        (preemptors also in ``preempted``), in the order they were decided.

    The cyclic garbage collector is paused for the cycle (and restored after): a cycle makes
    tens of thousands of short-lived, acyclic objects, and a full collection over a big
    coordinator heap in the middle of it would dominate the cycle time. Reference counting
    still frees everything the cycle drops.
    """
    held: list[Pending] = []
    if any(job.on_hold is not None for job in snapshot.pending):
        # Held jobs (``labgang hold``) are answered first and never seen by the phases: no
        # admission, no preemption, no quota held and no devices reserved for them.
        held = [
            Pending(j.id, reasons.held_reason(j.id, j.on_hold, j.hold_admin))
            for j in snapshot.pending
            if j.on_hold is not None
        ]
        snapshot = replace(snapshot, pending=tuple(j for j in snapshot.pending if j.on_hold is None))
    was_enabled = gc.isenabled()
    gc.disable()
    cycle: _Cycle | None = None
    try:
        cycle = _Cycle(snapshot)
        result = cycle.run()
        return replace(result, pending=(*held, *result.pending)) if held else result
    finally:
        if cycle is not None:  # nothing reads its state again: the next cycle's memos may reuse its maps
            cycle.state.retire()
        if was_enabled:
            gc.enable()


#: A group's place in the order heap: (not a waiting preemptor, would borrow, -priority,
#: submit time, seq, group id); the smallest goes first.
_HeapKey = tuple[int, int, int, float, int, int]

#: A failed victim search: (priority, submit time, devices per rank, ranks, users it does not answer,
#: users whose cards it met (a share's; None: unknown, anyone)).
_SearchFail = tuple[int, float, int, int, frozenset[str], frozenset[str] | None]


class _Cycle:
    share_verdicts_across_users = True
    """A share's failure (and failed search) answers the same share of every user of its queue
    whose own cards it did not meet with room for it (``ShareBook.readers``); off only to check that
    it changes no decision."""

    memo_heights = True
    """:meth:`height` remembers its answer per (queue, resource, devices) until the cycle's copy
    changes (:attr:`version`): the order phase's many classes of one queue (a share per user) ask
    alike; off only to check that it changes no decision."""

    memo_per_tree = True
    """The failure memo (:meth:`_known_failure`, a class's failure in the order loop) keys on its
    queue's :meth:`stamp`: a change of quota alone (an idle hold) in another cohort tree leaves it
    valid; off only to check that it changes no decision (then every change of the cycle's copy ends
    every failure's validity, as :attr:`version` does)."""

    lift_own_tree_only = True
    """:meth:`_try` lifts only the idle holds of the job's own cohort tree that do not bind it: a hold in
    another tree is never read by the job's fit, search or reason (the premise :meth:`stamp` rests on;
    without the switch it is lifted and put back around every try); off only to check that it changes
    no decision."""

    reuse_quota_check = True
    """:meth:`_try_job` takes a failed job's quota fit (for its reason and its hold) from the size loop's
    check of the same request, where the loop made one (not for an elastic gang, judged at its floor, nor
    where its user's limit cut its size); off only to check that it changes no decision."""

    holds_by_tree = True
    """:meth:`_try` finds the idle holds of the job's own tree and resource in a list kept per (resource,
    tree root) as holds are taken, instead of walking every hold; off only to check that it changes no
    decision."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.state = CycleState(snapshot)
        self.admitted: list[Admit] = []
        self.preempted: list[Preempt] = []
        self.pending: list[Pending] = []
        self.chosen_victims: set[str] = set()
        self._claimed_from: dict[str, int] = {}  # chosen victims per queue they run in (_own_stamp)
        self.held_queues: set[str] = set()
        self.held: dict[tuple[str, str], int] = {}  # usage added for waiting jobs, per (queue, resource)
        self.idle_hold: dict[tuple[str, str], int] = {}  # the part of ``held`` from _hold_quota
        # its keys per (resource, cohort tree root), in the order taken (one hold per queue a cycle)
        self._holds_in: dict[tuple[str, int], list[tuple[str, str]]] = {}
        self.holders: dict[tuple[str, str], list[str]] = {}  # who holds ``held`` and until when, for reasons
        self.reservations: dict[str, list[int]] = {}
        self.epoch = 0  # bumped whenever devices become free for real; caches key on it
        self.version = 0  # bumped on every change to the cycle's copy
        # what the failure memo keys on (stamp): changes of devices, reservations or more than one
        # queue's quota, and changes of one queue's quota alone per cohort tree root
        self._all_changes = 0
        self._tree_changes: dict[int, int] = {}
        self._root_of: dict[str, int] = {}
        self._one_tree = snapshot.sharing.fair_sharing or snapshot.sharing.admission is not None
        self._heights: dict[tuple[str, str, int], int] = {}  # height's answers at _heights_at
        self._heights_at = -1
        # failures: per class, (version, priority, submit time, reason (a template for a job of groups),
        # the one group shape it holds for or None, users it does not answer)
        self._fail_memo: dict[
            tuple[Hashable, ...], tuple[int, int, float, PendingReason, Hashable | None, frozenset[str]]
        ] = {}
        self._place_fails: dict[tuple[Hashable, ...], tuple[int, list[tuple[int, int]]]] = {}
        # failed searches: per key, when it stays valid and (priority, submit, per rank, ranks, users it
        # does not answer: ``ShareBook.readers`` for an any-user key, else none) per failed job
        self._search_fails: dict[tuple[Hashable, ...], tuple[Hashable, list[_SearchFail]]] = {}
        self.verdict_met: frozenset[str] | None = None
        """The users whose cards the failed search that last answered a search met (None: anyone)."""
        self._reason_cache: dict[tuple[Hashable, ...], PendingReason] = {}
        self._quota_reasons: dict[tuple[int, str, str, int, int, str], PendingReason] = {}  # at _quota_reasons_at
        self._quota_reasons_at = -1
        self.failure = PendingReason(ReasonCode.NO_CAPACITY, "")
        """The reason of the last job that failed, as its class's later jobs get it (a job of
        groups: a template, :func:`.groups.render` puts each job's group names in)."""
        self.failure_shape: Hashable | None = None
        """The one group shape (:func:`.groups.group_shape`) ``failure`` holds for, when it describes
        the groups one by one; None when it holds for the whole class."""
        self._heap: list[_HeapKey] = []
        self._groups: list[_Group] = []
        self.held_jobs: list[str] = []  # jobs that held idle quota this cycle (CycleResult.held)
        self.on_change: list[str] = []  # queues whose usage changed (the tournament listens)
        self.tenants: TenantBook | None = None
        self.users = UserBook(snapshot)  # per-user limits (falsy when no queue sets any)
        self.limits_users = bool(self.users)  # (its queues never change in the cycle: asked once)
        afs = snapshot.sharing.admission
        if afs is not None:
            self.tenants = TenantBook(snapshot.tenants, snapshot.running, afs)
            self.state.tenant_score = self._running_score

    def _running_score(self, job: RunningJob) -> float:
        assert self.tenants is not None
        return self.tenants.score(key_of(job.queue, job.tenant))

    def result(self) -> CycleResult:
        """The decisions made so far."""
        tenants = self.tenants.result() if self.tenants is not None else ()
        return CycleResult(
            tuple(self.admitted), tuple(self.preempted), tuple(self.pending), tuple(self.held_jobs), tenants
        )

    # --- orchestration ---------------------------------------------------------------------------

    def run(self) -> CycleResult:
        by_queue, orphans = nominate(self.snapshot, self.state)
        self.pending.extend(orphans)
        users, limited = self.users, self.limits_users
        self.reservations = reserve_for_starving(
            self.state,
            [
                e
                for entries in by_queue.values()
                for e in entries
                if not limited or users.reason(e.job, e.spec.queueing is Queueing.STRICT_FIFO) is None
            ],
        )
        sharing = self.snapshot.sharing
        if sharing.fair_sharing or sharing.admission is not None:
            from labgang.launcher.scheduler.heads import run_by_heads

            run_by_heads(self, by_queue)
            return self.result()
        self._build_groups(by_queue)
        heap, groups, pending = self._heap, self._groups, self.pending
        while heap:
            key = heapq.heappop(heap)
            g = groups[key[5]]
            e = g.entries[g.ptr]
            if g.pushed_at != self.version:
                g.pushed_at = self.version
                height = self.height(e)
                if height > key[1]:  # usage grew since it was queued: now it needs a larger subtree
                    heapq.heappush(heap, (key[0], height, *key[2:]))
                    continue
            if g.strict:
                outcome = self._process(e)
                g.ptr += 1
                if outcome in (Outcome.ADMITTED, Outcome.UNSCHEDULABLE, Outcome.LIMITED):
                    self._push_group(g)
                else:
                    self._block(e, g.entries, g.ptr)
                continue
            if g.failed_at == self.stamp(e.spec.name) and (g.shape is None or group_shape(e.job.request) == g.shape):
                # the class already failed and nothing changed since: every member that comes
                # before the next other job fails the same way (see Entry.cls)
                end = len(g.entries)
                if heap:
                    bound = heap[0]
                    if bound[:2] < key[:2]:
                        end = g.ptr + 1
                    elif bound[:2] == key[:2]:
                        end = max(g.ptr + 1, bisect_left(g.order_keys(), bound[2:5], g.ptr))
                reason = g.reason
                assert reason is not None  # recorded with failed_at
                end = _alike(g.entries, g.ptr, end, g.shape)
                pending.extend(_answers(g.entries[g.ptr : end], reason))
                g.ptr = end
            else:
                outcome = self._process(e)
                g.ptr += 1
                if outcome is Outcome.FAILED:
                    g.failed_at, g.reason, g.shape = self.stamp(e.spec.name), self.failure, self.failure_shape
                    if not self.reservations:
                        # without starvation reservations the copy only gets fuller from here
                        # on (admissions, preemptors, held quota), so the rest of the class
                        # fails too: answer them now with this reason (those it holds for)
                        end = _alike(g.entries, g.ptr, len(g.entries), g.shape)
                        pending.extend(_answers(g.entries[g.ptr : end], self.failure))
                        g.ptr = end
            self._push_group(g)
        return self.result()

    def _build_groups(self, by_queue: dict[str, list[Entry]]) -> None:
        """Order phase: one heap of groups, keyed by their next job's
        ``(sticky, borrows, -priority, submit, seq)``. A best-effort queue's jobs are grouped by
        class (queue order kept inside each group); waiting preemptors and starving jobs are
        groups of their own. A strict-fifo queue is one group that offers its head only."""
        self._heap, self._groups = [], []
        for entries in by_queue.values():
            if not entries:
                continue
            if entries[0].spec.queueing is Queueing.STRICT_FIFO:
                self._add_group(_Group(entries, strict=True))
                continue
            by_cls: dict[tuple[Hashable, ...], _Group] = {}
            for e in entries:
                if e.unschedulable is not None:
                    self.pending.append(Pending(e.job.id, e.unschedulable))
                elif e.job.nominated or e.starving:
                    self._add_group(_Group([e]))
                else:
                    g = by_cls.get(e.cls)
                    if g is None:
                        g = by_cls[e.cls] = _Group([])
                        self._add_group(g)
                    g.entries.append(e)
        for g in self._groups:
            self._push_group(g, heap=False)
        heapq.heapify(self._heap)

    def _add_group(self, g: _Group) -> None:
        g.gid = len(self._groups)
        self._groups.append(g)

    def _push_group(self, g: _Group, heap: bool = True) -> None:
        if g.strict:  # unschedulable jobs never head a strict-fifo queue: answer them now
            while g.ptr < len(g.entries):
                reason = g.entries[g.ptr].unschedulable
                if reason is None:
                    break
                self.pending.append(Pending(g.entries[g.ptr].job.id, reason))
                g.ptr += 1
        if g.ptr >= len(g.entries):
            return
        e = g.entries[g.ptr]
        j = e.job
        g.pushed_at = self.version
        key: _HeapKey = (0 if j.nominated else 1, self.height(e), -j.priority, j.submit_time, j.seq, g.gid)
        if heap:
            heapq.heappush(self._heap, key)
        else:
            self._heap.append(key)

    def height(self, e: Entry) -> int:
        """Height of the job's fitting subtree now: 0 within its queue's nominal, 1 for a flat
        cohort, more for a cohort higher up the tree (lower goes first)."""
        req = e.job.request
        q, res = e.spec.name, req.resource
        if not self.memo_heights:
            own = self.idle_hold.get((q, res), 0)
            return self.state.quota.fit_height(q, res, req.total - own)
        # quota usage and idle holds change only with the version (a search or a lifted hold puts
        # them back before the order phase asks again)
        if self._heights_at != self.version:
            self._heights.clear()
            self._heights_at = self.version
        key = (q, res, req.total)
        got = self._heights.get(key)
        if got is None:
            own = self.idle_hold.get((q, res), 0)
            got = self._heights[key] = self.state.quota.fit_height(q, res, req.total - own)
        return got

    def stamp(self, queue: str) -> int:
        """What a failure of a job of ``queue`` stays valid for (the failure memo's key): it changes
        with every change of devices, of reservations or of quota the cycle makes beside them, and
        with a change of one queue's quota alone (an idle hold, :meth:`_add_held`) in ``queue``'s
        cohort tree; nothing else. A job's fit, search and reason never read another tree's quota
        (that tree's idle holds are lifted for it: :meth:`_hold_binds` finds no common cohort).
        Under fair sharing or admission fair sharing every change counts."""
        if not self.memo_per_tree:
            return self.version
        root = self._root_of.get(queue)  # :meth:`_root`, its hit inlined (asked for every job offered)
        if root is None:
            root = self._root(queue)
        return self._all_changes + self._tree_changes.get(root, 0)

    def _root(self, queue: str) -> int:
        """:meth:`_tree_root` of ``queue``, remembered for the cycle."""
        root = self._root_of.get(queue)
        if root is None:
            root = self._root_of[queue] = self._tree_root(queue)
        return root

    def _tree_root(self, queue: str) -> int:
        """The root of ``queue``'s cohort tree (its own node without a cohort; 0 for every queue
        under fair sharing, -1 for a queue the tree does not know)."""
        if self._one_tree:
            return 0
        tree = self.state.quota.tree
        n = tree.queue_id.get(queue, -1)
        while n >= 0 and tree.parent[n] >= 0:
            n = tree.parent[n]
        return n

    def _changed(self, queue: str | None = None) -> None:
        """The cycle's copy changed: ``queue``'s quota alone (an idle hold), or (None) anything
        else: devices, reservations, quota beside them."""
        self.version += 1
        if queue is None:
            self._all_changes += 1
        else:
            root = self._root_of.get(queue)
            if root is None:
                root = self._root_of[queue] = self._tree_root(queue)
            self._tree_changes[root] = self._tree_changes.get(root, 0) + 1

    def _block(self, head: Entry, entries: list[Entry], start: int) -> None:
        reason = reasons.blocked_reason(head.spec.name, head.job.id)
        for e in entries[start:]:
            self.pending.append(Pending(e.job.id, e.unschedulable or reason))

    # --- one job ---------------------------------------------------------------------------------

    def _process(self, e: Entry) -> Outcome:
        if e.unschedulable is not None:
            self.pending.append(Pending(e.job.id, e.unschedulable))
            return Outcome.UNSCHEDULABLE
        if self.limits_users:
            strict = e.spec.queueing is Queueing.STRICT_FIFO
            limited = self.users.reason(e.job, strict)
            if limited is not None:
                if strict:
                    self.users.passed_over(e.job)
                self.pending.append(Pending(e.job.id, limited))
                return Outcome.LIMITED
        own = self.reservations.pop(e.job.id, None)
        if own:
            self.state.devices.unreserve(own, e.job.id)
            self.epoch += 1
            self._changed()
        elif not e.job.nominated and self._known_failure(e):
            return Outcome.FAILED
        outcome = self._try(e)
        if outcome is Outcome.FAILED and own:
            self.reservations[e.job.id] = self.state.devices.reserve(own, e.job.id)
            self._changed()
        return outcome

    def known_failure(self, e: Entry) -> bool:
        """True (and ``e`` answered as pending) when a job of its class at least as strong
        failed and nothing changed since; see :meth:`_known_failure`."""
        if e.job.nominated or e.unschedulable is not None:
            return False
        return self._known_failure(e)

    def _known_failure(self, e: Entry) -> bool:
        """Same queue, same request, nothing changed since a job at least as strong failed:
        this one fails the same way (within a cycle room only shrinks)."""
        job = e.job
        memo = self._fail_memo.get(e.cls)
        stamp = self.stamp(e.spec.name)
        if (memo is None or memo[0] != stamp) and job.request.shared:
            memo = self._fail_memo.get(_any_user_cls(e))  # a share's failure that held for other users
            if memo is not None and job.user in memo[5]:
                return False
        if memo is None or memo[0] != stamp or job.priority > memo[1]:
            return False
        if e.spec.within_queue is WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY and job.submit_time < memo[2]:
            return False
        if memo[4] is not None and group_shape(job.request) != memo[4]:
            return False  # a reason naming the groups of another cut of the same plain size
        self.failure, self.failure_shape = memo[3], memo[4]
        self.pending.append(Pending(job.id, render(memo[3], job.request)))
        return True

    def _remember_failure(self, e: Entry, reason: PendingReason, readers: frozenset[str] | None = None) -> None:
        """Remember ``e``'s failure (``reason``: a template for a job of groups) for the later jobs of
        its class; ``readers``: for a share's failure, the users whose own shared cards with room for
        it it met (quota, placement, search; ``ShareBook.readers``): it holds for the same share of
        every other user of its queue too (its reason names no user). None: it holds for ``e``'s user only."""
        stamp = self.stamp(e.spec.name)
        memo = (stamp, e.job.priority, e.job.submit_time, reason, self.failure_shape, frozenset[str]())
        self._fail_memo[e.cls] = memo
        if readers is not None and self.share_verdicts_across_users:
            self._fail_memo[_any_user_cls(e)] = (*memo[:5], readers)

    def _try(self, e: Entry) -> Outcome:
        """Quota, placement, then victims for one job, with idle holds (:meth:`_hold_quota`)
        lifted where they must not bind: the hold keeps *borrowers* of other queues off a
        waiting head's quota (docs/queue-semantics.md §A2), so it is lifted for the holder's own later
        jobs (best-effort-fifo: Kueue's failed head goes inadmissible and the next job becomes
        head) and for any job that stays within its own nominal quota (its entitlement; Kueue
        admits it the next cycle, when the inadmissible head holds nothing). In a cohort tree
        the test is made at the lowest common cohort L of the job's queue and the holder's: the
        hold binds only when the job's branch below L would go above its quota."""
        if not self.idle_hold:
            return self._try_job(e)
        res = e.job.request.resource
        q = e.spec.name
        own = self.idle_hold.get((q, res), 0)
        need = e.job.request.total - own
        quota = self.state.quota
        if self.lift_own_tree_only and not self._one_tree:
            binds = self._hold_binds
            if self.holds_by_tree:  # the holds of its own tree and resource, in the order taken
                lifted = [
                    k
                    for k in self._holds_in.get((res, self._root(q)), ())
                    if k[0] == q or not binds(q, k[0], res, need)
                ]
            else:
                root = self._root(q)
                lifted = [
                    k
                    for k in self.idle_hold
                    if k[1] == res and (k[0] == q or (self._root(k[0]) == root and not binds(q, k[0], res, need)))
                ]
        else:
            lifted = [
                k for k in self.idle_hold if k[1] == res and (k[0] == q or not self._hold_binds(q, k[0], res, need))
            ]
        for k in lifted:
            quota.add(k[0], k[1], -self.idle_hold[k])
            self.held[k] -= self.idle_hold[k]
        try:
            return self._try_job(e)
        finally:
            for k in lifted:
                quota.add(k[0], k[1], self.idle_hold[k])
                self.held[k] += self.idle_hold[k]

    skip_hopeless_searches = True
    """:meth:`_try_job` makes no victim search for a job :func:`.preemption.no_candidates` says has no
    candidate (a plain job of the lowest priority its queue runs, in a queue that reclaims nothing
    within its cohort: most failed tries of a long backlog); off only to check that it changes no
    decision."""

    def _hold_binds(self, q: str, holder: str, res: str, need: int) -> bool:
        """True when ``holder``'s idle hold keeps ``need`` more devices for ``q`` out: ``q``'s
        branch below their lowest common cohort would go above its quota with them."""
        quota = self.state.quota
        tree = quota.tree
        qn, hn = tree.queue_id[q], tree.queue_id[holder]
        lca = lowest_common(quota, qn, hn)
        if lca < 0:
            return False
        b = branch(quota, qn, lca)
        return quota.usage_with(q, res, need, b) > tree.quota(b, res)

    def _try_job(self, e: Entry) -> Outcome:
        state, job, spec = self.state, e.job, e.spec
        req, q = job.request, spec.name
        cards = state.cards
        mark_before = cards.mark(fresh=True) if cards is not None and req.shared else None
        version_before = self.version
        # quota fit, then placement; an elastic gang tries each smaller size down to its minimum
        # (and starts no larger than its user's device limit in the queue leaves room for)
        top = req.workers
        room = self.users.room(q, job.user) if self.limits_users else None
        if room is not None and not req.groups:
            top = max(min(top, room // req.per_worker), req.min_workers or req.workers)
        over_placed: dict[str, int] | None = None  # what a placement counted that its quota did not hold
        low = (req.min_workers or req.workers) - 1
        sizes = (req if size == req.workers else req.at_size(size) for size in range(top, low, -1))
        fits_as_asked: bool | None = None  # the quota check of ``req`` itself, when the loop made it
        for sized in group_sizes(req) if req.groups else sizes:
            fits = state.quota_fits(q, sized, job=job)
            if sized is req:
                fits_as_asked = fits
            if fits:
                raw = self._place(sized, job)
                if raw is not None and not state.placed_fits(q, sized, raw):
                    over_placed = state.placed_demand(q, sized, raw)
                    raw = None
                if raw is not None:
                    note = state.share_note(sized, raw) if sized.shared else ""
                    placement = state.assume(job.id, q, sized, raw, job.user)
                    self._changed()
                    whole = state.whole_nodes(sized, raw) if sized.exclusive else ()
                    self.admitted.append(Admit(job.id, placement, whole, note))
                    self.on_change.append(q)
                    self.users.add(q, job.user, sized)
                    if self.tenants is not None:
                        self.tenants.admit(key_of(q, job.tenant), self.snapshot.now, sized.total)
                    return Outcome.ADMITTED
        # an elastic gang preempts (and waits, and is described) only for its minimum: never to grow
        if req.elastic:
            req = req.floor()
            job = replace(job, request=req)
            fits_as_asked = None
        # nothing the loop did changed the cycle's copy (a failed fit or placement adds nothing), so the
        # loop's check of the same request stands (a share's placement it read is remembered, and the
        # readers it logged are logged)
        if fits_as_asked is None or not self.reuse_quota_check:
            quota_ok = state.quota_fits(q, req, job=job)
        else:
            quota_ok = fits_as_asked
        # a preemptor whose earlier victims are still leaving: does it fit once they are gone?
        live = [v for v in e.live_victims if v not in self.chosen_victims]
        if live:
            with state.without(live):
                raw = state.place_within_quota(q, req, job=job)
            if raw is not None:
                if any(not state.running[v].terminating for v in live):
                    # the snapshot does not show them stopping yet: say it again (idempotent)
                    self.preempted.append(
                        Preempt(job.id, tuple(live), self._preempt_text(e, live), self._reclaims(e, live))
                    )
                self._wait_for(e, live, raw, req)
                return Outcome.WAITING
        # preemption search
        refusal = search_refusal(state, spec, job)  # docs/queue-semantics.md §A3.1
        searchable = refusal is None
        cards = state.cards
        search_mark = cards.mark() if cards is not None and req.shared else None
        # no running job it may evict at all (its own queue's, of a priority it may not evict, and no
        # reclaim in a cohort): the search finds none, so it is neither made nor remembered (a job its
        # failure would have answered, of the queue and no stronger, is found hopeless here too)
        hopeless = (
            searchable
            and self.skip_hopeless_searches
            and search_mark is None
            and not self.snapshot.sharing.fair_sharing
            and no_candidates(state, spec, job)
        )
        answered = searchable and not hopeless and self._search_known_to_fail(e)
        if searchable and not answered and not hopeless:
            # Victims other preemptors of this cycle claimed from other queues count as gone, their
            # preemptors' held usage standing in (§A3.6): the same room is not counted twice, so
            # reclaimers of one instant take one victim each, most recently admitted first (§A3.4).
            # The searcher's own queue still counts its claimed jobs until they are gone: it never
            # reclaims back, in the same cycle, from the queue that just reclaimed from it.
            claimed_elsewhere = [v for v in self.chosen_victims if state.running[v].queue != q]
            with state.without(live), state.leaving(claimed_elsewhere):
                sharing = self.snapshot.sharing
                if sharing.fair_sharing and spec.cohort is not None:
                    score = self._running_score if self.tenants is not None else None
                    found = find_fair_victims(state, spec, job, self.chosen_victims, sharing.fair_preemption, score)
                else:
                    found = find_victims(state, spec, job, self.chosen_victims)  # the floor of an elastic gang
            if found is not None:
                victims, raw = found
                chosen = live + victims
                self.preempted.append(
                    Preempt(job.id, tuple(chosen), self._preempt_text(e, victims), self._reclaims(e, chosen))
                )
                self._wait_for(e, live + victims, raw, req)
                return Outcome.WAITING
            if not live:
                # a share's search failed whatever the trust rule says for a user whose own cards with
                # room it never met: it answers the same share of every such user of the queue
                readers = cards.readers(search_mark) if search_mark is not None and cards is not None else None
                self._record_search_fail(e, readers if self.share_verdicts_across_users else None, readers)
        # stays pending; a job of groups's reason is built as its shape's template (``render`` names them)
        shown = reason_template(req) if req.groups else req
        if not quota_ok:
            if (
                searchable
                and spec.reclaim_within_cohort is not ReclaimWithinCohort.ANY
                and not job.held_last_cycle  # a hold lasts the one cycle that computed it
            ):
                self._hold_quota(e)
            reason = self._host_quota_reason(q, shown) or self._quota_reason(
                q, shown, e.job.request.total, self.version == version_before
            )
            if req.shared and state.cards is not None:
                reason = replace(reason, message=reason.message + "; " + state.cards.quota_note(q, req))
        elif over_placed is not None:  # the nodes it would take (whole, or --mem on each) are over quota
            reason = hostquota.quota_shortfall(
                state.quota, q, over_placed, exclusive=req.exclusive
            ) or self._capacity_reason(shown)
        elif req.shared and state.cards is not None:
            reason = state.cards.reason(req, q, job.user)
        else:
            reason = self._capacity_reason(shown)
        if refusal is not None:
            reason = replace(reason, no_preemption=refusal)
        self.failure = reason
        # a reason whose only words of the job's own are its need holds for its whole class (a plain
        # job of groups shares its gang's class); any other for the jobs of this one's shape
        holds_for_all = NEED_MARK in reason.message and not names_groups(reason)
        self.failure_shape = None if holds_for_all else group_shape(e.job.request)
        self.pending.append(Pending(job.id, render(reason, req)))
        # shared only when this failure changed nothing (a hold it took would be named in its reason,
        # and other users' jobs see the hold lifted as the holder's own queue does)
        # (a failed search's verdict that answered this one's search: the users whose cards that
        # search met, not logged here, are named too)
        readers = None
        if mark_before is not None and cards is not None and self.version == version_before:
            readers = cards.readers(mark_before)
            if answered and readers is not None:
                met = self.verdict_met
                readers = None if met is None else readers | met
        self._remember_failure(e, reason, readers)
        return Outcome.FAILED

    memo_quota_reasons = True
    """:meth:`_quota_reason` keeps its answers per (version, queue, resource, devices, devices asked); off only to check
    that it changes no reason."""

    def _quota_reason(self, q: str, req: JobRequest, asked: int, kept: bool) -> PendingReason:
        """OVER_QUOTA/COHORT_EXHAUSTED for ``req`` of queue ``q`` (its need in the words
        :data:`.groups.NEED_MARK` stands for), asked inside :meth:`_try`; ``kept``: the try changed nothing in
        the cycle's copy (it took no hold), so its answer is kept and a kept one answers it. What it reads is
        then fixed by the key it is kept under: the quota book is the cycle's copy at :attr:`version` with the
        idle holds :meth:`_try` lifted for a job of ``q`` asking ``asked`` devices of ``req.resource`` (its
        whole request: an elastic gang's reason is of its floor, ``req``; a search puts back what it takes
        off), the held devices and their holders change only with the version, and the request is read for
        its resource, total and need words only (a share and a one-gpu job of one queue get the same words;
        a share's note is added after). A try that took a hold reads it unlifted: neither kept nor answered."""
        k, need = (q, req.resource), NEED_MARK or reasons.needed(req)
        if not kept:
            return reasons.quota_reason(self.state.quota, q, req, self.held.get(k, 0), self.holders.get(k, ()), need)
        key = (self.version, q, req.resource, req.total, asked, need)
        if self.memo_quota_reasons:
            got = self._quota_reasons.get(key)
            if got is not None:
                return got
        reason = reasons.quota_reason(self.state.quota, q, req, self.held.get(k, 0), self.holders.get(k, ()), need)
        if self._quota_reasons_at != self.version:
            self._quota_reasons.clear()
            self._quota_reasons_at = self.version
        self._quota_reasons[key] = reason
        return reason

    def _host_quota_reason(self, q: str, req: JobRequest) -> PendingReason | None:
        """OVER_QUOTA/COHORT_EXHAUSTED naming ``cpu`` or ``memory`` when the job's devices fit its
        queue's quota but its host resources do not (``hostquota.py``); else None."""
        state = self.state
        if not (state.host_quota and req.host) or req.total > state.quota.available(q, req.resource):
            return None
        demand = hostquota.demand_before_placement(state.quota, q, req, True)
        return hostquota.quota_shortfall(state.quota, q, demand)

    def _wait_for(self, e: Entry, victims: list[str], raw: RawPlacement, req: JobRequest) -> None:
        """The preemptor keeps its room (``req``: its request, an elastic gang's floor): its usage is
        counted and its devices reserved."""
        running, q = self.state.running, e.spec.name
        reclaimed_from = tuple(running[v].queue if v in running and running[v].queue != q else "" for v in victims)
        self._changed()
        self._add_held(e.spec.name, req.resource, req.total, f"job {e.job.id} until its victims exit")
        if self.state.shares is not None:  # a waiting preemptor counts in fair-sharing usage
            for res, n in self.state.pending_share_demand(e.spec.name, req).items():
                self.state.shares.add(e.spec.name, res, n)
        self.on_change.append(e.spec.name)
        self.state.devices.reserve([d for _, ds in raw for d in ds], e.job.id)
        self.state.placed.add(e.job.id)
        claimed = self._claimed_from
        for v in victims:
            if v not in self.chosen_victims:
                self.chosen_victims.add(v)
                queue = self.state.running[v].queue
                claimed[queue] = claimed.get(queue, 0) + 1
        self.users.add(e.spec.name, e.job.user, req)  # its room counts towards its user's limits
        self.pending.append(Pending(e.job.id, reasons.waiting_reason(victims, reclaimed_from)))

    def _hold_quota(self, e: Entry) -> None:
        """Kueue's "reserve capacity for an unreclaimable preempt": a head that found no victims
        and whose queue cannot always reclaim later holds its queue's idle quota this cycle."""
        q, req = e.spec.name, e.job.request.floor()
        if q in self.held_queues or e.spec.cohort is None:
            return  # without a cohort nobody borrows: a hold would keep nothing from anyone
        self.held_queues.add(q)
        quota = self.state.quota
        u, n = quota.usage(q, req.resource), quota.nominal(q, req.resource)
        if u + req.total > n:
            limit = quota.borrowing_limit(q, req.resource)
            held = req.total if limit is None else min(req.total, n + limit - u)
        else:
            held = min(req.total, n - u)
        if held > 0:
            self._add_held(q, req.resource, held, f"job {e.job.id}, kept from borrowers this cycle only")
            self.idle_hold[(q, req.resource)] = held
            self._holds_in.setdefault((req.resource, self._root(q)), []).append((q, req.resource))
            self.held_jobs.append(e.job.id)

    def _add_held(self, queue: str, res: str, n: int, holder: str) -> None:
        """Count ``n`` devices of ``res`` in ``queue``'s usage for a waiting job; ``holder`` says
        for whom and until when ("job 7 until its victims exit"), for pending reasons."""
        self._changed(queue)
        self.holders.setdefault((queue, res), []).append(holder)
        self.state.quota.add(queue, res, n)
        self.held[(queue, res)] = self.held.get((queue, res), 0) + n

    # --- placement with a failure cache --------------------------------------------------------

    def _place(self, req: JobRequest, job: PendingJob) -> RawPlacement | None:
        if req.shared:  # where a share fits depends on its queue and user (the trust rule): no cache
            return self.state.place(req, job)
        if req.groups:
            return self.state.place(req)
        key = (
            req.resource,
            req.gpu_model,
            req.nodes,
            req.topology,
            req.cpus_per_task,
            req.mem,
            req.mem_per_gpu,
            req.exclusive,
        )
        known = self._place_fails.get(key)
        if known is not None and known[0] == self.epoch:
            for p, w in known[1]:
                if req.per_worker >= p and req.workers >= w:
                    return None
        raw = self.state.place(req)
        if raw is None:
            if known is None or known[0] != self.epoch:
                known = (self.epoch, [])
                self._place_fails[key] = known
            known[1].append((req.per_worker, req.workers))
        return raw

    def _search_key(self, e: Entry, any_user: bool = False) -> tuple[Hashable, ...]:
        """What a preemption search's answer depends on; ``any_user``: a share's, for every user
        (:data:`ANY_USER` in place of what the trust rule reads). A share's key holds its mode, not
        its size: :meth:`_search_size` compares sizes (a larger share of one mode never fits where a
        smaller one does not: it costs at least as much quota and needs more room on a card)."""
        req = e.job.request.floor()
        gang = plain_gang(req)
        if gang is not None:  # searches as one gang of its ranks does: one memo for both
            req = gang
        host = (req.cpus_per_task, req.mem, req.mem_per_gpu, req.exclusive)
        cards = self.state.cards
        share: Hashable = None
        if req.shared and cards is not None:
            mode = "mps" if req.mps else "shard"
            share = (mode, ANY_USER if any_user else trust_user(e.spec, cards.specs, req, e.job.user))
        plain = plain_size(req)
        if plain is not None:  # a plain job of groups searches like one gang of its device ranks
            return (e.spec.name, req.resource, req.gpu_model, "plain groups", plain[2] > 0, share)
        return (
            e.spec.name,
            req.resource,
            req.gpu_model,
            req.nodes,
            req.topology,
            host,
            group_shape(req),  # names do not change what a search finds
            share,
        )

    @staticmethod
    def _search_size(req: JobRequest) -> tuple[int, int]:
        """``(devices per rank, ranks)`` a failed victim search is compared by (an elastic gang's
        floor; a plain job of groups: its device ranks, :func:`.groups.plain_size`; a share: its
        shards or MPS percent in place of devices per rank)."""
        if req.shared:
            return req.shards or req.mps, req.workers
        floor = req.floor()
        plain = plain_size(floor)
        if plain is not None:
            return plain[0], plain[1]
        return req.per_worker, floor.workers

    def _search_known_to_fail(self, e: Entry) -> bool:
        """True when a job of the same queue, at least as strong and no larger, found no victims.

        Valid because within one cycle room only shrinks: usage grows, victims get taken; for a
        share, while its queue's share use is as it was (see :meth:`_own_stamp`).
        """
        self.verdict_met = None
        if e.job.nominated:
            return False
        if self._search_failed(e, self._search_key(e), self._own_stamp(e)):
            return True
        return e.job.request.shared and self._search_failed(
            e, self._search_key(e, any_user=True), self._any_stamp(e), e.job.user
        )

    share_use_in_search_stamps = True
    """A share's failed search stays valid only while its queue's exact share use is unchanged
    (:meth:`_own_stamp`); off only to show the cycle without it answering a share whose own search
    finds victims."""

    def _own_stamp(self, e: Entry) -> Hashable:
        """When ``e``'s failed search stays valid: the epoch and how many victims the cycle has claimed
        from queues other than ``e``'s (a search counts those as gone, their preemptors' held usage
        standing in: room a failed search lacked can appear with each claim); for a share, also its
        queue's exact share use (units) and share charge (:meth:`.shares.ShareBook.charged`). A share
        admitted to the queue can open a card its queue holds alone, where a later share fits at no
        quota charge once a victim is taken off: room does not only shrink for shares. Under fair sharing
        or admission fair sharing, every change of the cycle's copy (:attr:`version`): an admission
        or a hold moves the shares (and tenant scores) a fair search reads."""
        if self._one_tree:
            return self.version
        q = e.spec.name
        elsewhere = len(self.chosen_victims) - self._claimed_from.get(q, 0)
        cards = self.state.cards
        if not e.job.request.shared or cards is None or not self.share_use_in_search_stamps:
            return (self.epoch, elsewhere)
        # its charge (cards held alone): another queue's share joining a card it holds alone lowers
        # it; with share_with, any share change can move where its share lands and what that costs
        mixed = cards.version if e.spec.share_with else 0
        return (self.epoch, elsewhere, cards.queue_use.get(q, 0), cards.charged(q), mixed)

    def _any_stamp(self, e: Entry) -> Hashable:
        """When a verdict for every user stays valid: :meth:`_own_stamp`, and no victim claimed since
        (a victim claimed from another queue counts as gone for later searches, so room can grow)."""
        return (self._own_stamp(e), len(self.chosen_victims))

    def _search_failed(self, e: Entry, key: tuple[Hashable, ...], stamp: Hashable, user: str | None = None) -> bool:
        """True when ``key`` recorded a failed search, still valid at ``stamp``, of a job at least as
        strong and no larger than ``e``; ``user``: ``e``'s user, for an any-user key (a failure
        answers only users it did not name)."""
        known = self._search_fails.get(key)
        if known is None or known[0] != stamp:
            return False
        j = e.job
        per, ranks = self._search_size(j.request)
        for prio, submit, p, w, readers, met in known[1]:
            if j.priority <= prio and j.submit_time >= submit and per >= p and ranks >= w and user not in readers:
                self.verdict_met = met
                return True
        return False

    def _record_search_fail(
        self, e: Entry, readers: frozenset[str] | None = None, met: frozenset[str] | None = None
    ) -> None:
        """Remember that ``e``'s search found no victims; ``readers``: for a share's search, the users
        whose own shared cards with room for it it met (``ShareBook.readers``): it answers the same
        share of every other user of the queue too. None: ``e``'s user only. ``met``: those users
        whatever the verdicts across users say (None: unknown, anyone), for the failure of a share
        the verdict answers (:attr:`verdict_met`)."""
        j = e.job
        keys: list[tuple[tuple[Hashable, ...], Hashable, frozenset[str]]] = [
            (self._search_key(e), self._own_stamp(e), frozenset())
        ]
        if readers is not None:
            keys.append((self._search_key(e, True), self._any_stamp(e), readers))
        for key, stamp, named in keys:
            known = self._search_fails.get(key)
            if known is None or known[0] != stamp:
                known = (stamp, [])
                self._search_fails[key] = known
            known[1].append((j.priority, j.submit_time, *self._search_size(j.request), named, met))

    # --- reasons -----------------------------------------------------------------------------------

    def _capacity_reason(self, req: JobRequest) -> PendingReason:
        ix = self.state.index(req)
        key = (req, self.epoch, ix.total)
        cached = self._reason_cache.get(key)
        if cached is not None:
            return cached
        reason = reasons.capacity_reason(ix.total, ix.largest(), req)
        if req.groups:
            reason = groups_capacity_reason(self.state.devices, req, reasons.describe_request(req)) or reason
        elif req.topology is not None and ix.total >= req.total:
            reason = topology_reason(self.state.devices, ix, req, reasons.describe_request(req))
        elif ix.total >= req.total:
            host = host_reason(self.state.devices, ix, req, reasons.describe_request(req))
            if host is not None:
                reason = host
        holders = self._reservation_holders(req, ix)
        if holders:
            reason = reasons.reserved_reason(
                [h for h in holders if h in self.reservations], [h for h in holders if h not in self.reservations]
            )
        self._reason_cache[key] = reason
        return reason

    def _reservation_holders(self, req: JobRequest, ix: FreeIndex) -> list[str]:
        """Holders of reservations without which ``req`` would fit now (empty when none; a job of
        groups names none)."""
        book = self.state.devices
        if req.groups:
            return []
        if book.reserved_for.count(None) == len(book.reserved_for):
            return []  # no device reserved at all (one C-level pass instead of the filter below)
        model = req.gpu_model.lower() if req.gpu_model else None
        reserved = [
            d
            for d in book.by_resource.get(req.resource, ())
            if book.reserved_for[d] is not None and book.owner[d] is None and (model is None or model in book.model[d])
        ]
        if not reserved:
            return []
        wider = FreeIndex(len(book.node_names), [d for n in ix.free for d in n] + reserved, book.node_of)
        if not feasible(wider, req.workers, req.per_worker, req.nodes, book.topology, req.topology):
            return []
        return sorted({job for d in reserved if (job := book.reserved_for[d])})

    def _reclaim_why(self, e: Entry, victim: str) -> str:
        """Why ``victim``, a job of another queue of ``e``'s cohort, is taken back: its queue was
        borrowing (the search takes other queues' jobs only while their queue is above its nominal,
        preemption.py), the preemptor's nominal when it fits within it once admitted (a *reclaim*),
        else the cohort's (*reclaim while borrowing*). "" for a job of ``e``'s own queue."""
        running = self.state.running.get(victim)
        q = e.spec.name
        if running is None or running.queue == q:
            return ""
        req = e.job.request
        res, quota = req.resource, self.state.quota
        if quota.usage(q, res) + req.total <= quota.nominal(q, res):
            return f"{running.queue} was borrowing {q}'s nominal {res}"
        return f"{running.queue} was borrowing above its nominal {res} ({q} borrows too)"

    def _reclaims(self, e: Entry, victims: list[str]) -> tuple[str, ...]:
        """``Preempt.reclaims``: :meth:`_reclaim_why` of each victim, in order."""
        return tuple(self._reclaim_why(e, v) for v in victims)

    def _preempt_text(self, e: Entry, victims: list[str]) -> str:
        running = self.state.running
        parts = []
        for v in victims:
            why = self._reclaim_why(e, v)
            head = f"job {v} (queue {running[v].queue}, priority {running[v].priority}"
            parts.append(head + (f"; reclaimed: {why})" if why else ")"))
        req = e.job.request
        text = (
            f"job {e.job.id} (queue {e.spec.name}, priority {e.job.priority}) needs "
            f"{reasons.describe_request(req)}; stopping " + ", ".join(parts)
        )
        shares = self.state.shares
        if shares is not None and e.spec.cohort is not None:
            fair = preemption_text(
                shares,
                e.spec.name,
                req,
                [running[v].queue for v in victims if v in running],
                self.state.pending_share_demand(e.spec.name, req),
            )
            if fair:
                text += "; fair sharing: " + fair
        return text


def _alike(entries: list[Entry], start: int, end: int, shape: Hashable | None) -> int:
    """Where the run of ``entries[start:end]`` of group shape ``shape`` ends (``end`` when ``shape``
    is None: a reason that holds for the whole class)."""
    if shape is None:
        return end
    if shape == ONE_GROUP:
        for i in range(start, end):
            if entries[i].job.request.groups:
                return i
        return end
    for i in range(start, end):
        if group_shape(entries[i].job.request) != shape:
            return i
    return end


def _answers(entries: list[Entry], reason: PendingReason) -> list[Pending]:
    """``reason`` for each of ``entries`` (one class), a template in each job's own words
    (:func:`.groups.render`): a job of groups's names and need; one-group jobs of a class all
    need the same, rendered once."""
    if not is_template(reason):
        return [Pending(x.job.id, reason) for x in entries]
    one = next((render(reason, x.job.request) for x in entries if not x.job.request.groups), reason)
    return [Pending(x.job.id, render(reason, x.job.request) if x.job.request.groups else one) for x in entries]


class _Group:
    """Jobs that the order phase offers one after another (see ``_Cycle._build_groups``).

    Attributes:
        entries: the jobs, in queue order.
        strict: a strict-fifo queue: offer the head only, block the rest when it fails.
        ptr: the next job to offer.
        keys: ``(-priority, submit, seq)`` per job, for finding where the next group's job falls
            (:meth:`order_keys`: made when first asked; most groups, a share class per user, never are).
        gid: position in the cycle's group list (the heap's last tie-break).
        pushed_at: cycle version when its heap key was computed (borrow test staleness).
        failed_at: cycle version at which its last evaluated job failed (-1: none).
        reason: that job's pending reason (a template for jobs of groups, :func:`.groups.render`).
        shape: the one group shape ``reason`` holds for (None: every job of the class).
    """

    __slots__ = ("entries", "failed_at", "gid", "keys", "ptr", "pushed_at", "reason", "shape", "strict")

    def __init__(self, entries: list[Entry], strict: bool = False) -> None:
        self.entries = entries
        self.strict = strict
        self.ptr = 0
        self.keys: list[tuple[int, float, int]] | None = None
        self.gid = 0
        self.pushed_at = 0
        self.failed_at = -1
        self.reason: PendingReason | None = None
        self.shape: Hashable | None = None

    def order_keys(self) -> list[tuple[int, float, int]]:
        """:attr:`keys`, made on first use (the entries are fixed once the order phase starts)."""
        keys = self.keys
        if keys is None:
            keys = self.keys = [(-x.job.priority, x.job.submit_time, x.job.seq) for x in self.entries]
        return keys
