"""Preemption for fairness: Kueue's fair-sharing victim search over a cohort tree.

For job ``j`` of queue ``Q`` with request ``r`` (docs/scenarios.md, "Fair sharing",
"Choosing victims"); every share is computed with ``r`` added to ``Q``'s fair-sharing usage
and the victims taken so far removed:

1. Pick the target queue from the root down: at each cohort the borrowing child queue with
   the highest share (``Q`` counts whenever it has candidates), and the borrowing child cohort
   (or the one holding ``Q``) with the highest share; descend into the cohort when its share is
   >= the queue's. Whatever has no candidates or does not borrow drops out of that walk.
2. Own-queue candidates are taken as they come; if ``Q`` stays within its nominal with ``r``,
   another queue's too. Otherwise a candidate of target ``T`` must pass the first strategy:
   ``less-than-or-equal-to-final-share``: ``P <= T1``; ``less-than-initial-share``: ``P < T0``
   (``P``: share of ``Q``'s branch below the lowest common cohort ``L`` of ``Q`` and ``T``;
   ``T0``/``T1``: share of ``T``'s branch before/after removing the candidate). Failures are
   set aside.
3. Stop as soon as ``j`` fits (quota and placement).
4. With a second strategy, one more walk over the set-aside candidates: at most one victim per
   queue, each only if ``P < T0``.
5. No fit: no victims at all. A fit: trim the set as the classical search does.

``less-than-initial-share`` (in step 2 or 4) also refuses a candidate whose removal would leave
``T``'s branch, with any one victim already taken from it put back, below ``P`` (labgang's
addition to Kueue's rule). ``P <= T1`` keeps each victim's branch at or above the preemptor's;
``P < T0`` alone only keeps the candidate itself from coming back, while its removal can take
the branch below ``P`` and let an earlier, smaller victim, requeued, evict the preemptor back by
the same rule: an eviction cycle. With the addition, every victim of one search, requeued alone,
leaves its branch at a share >= ``P``, so it cannot win back by ``less-than-initial-share``
(``P`` only drops during a search; trimming can raise it again by putting back ``Q``'s own
victims, a limit shared with Kueue). For the same reason a trimmed set holding a
``less-than-initial-share`` victim is dropped (no victims at all) when, once ``j`` holds its
room, a victim or a pending job of that victim's branch, added alone, would leave the branch
below ``P`` and would not fit: it would evict ``j`` back at once, and ``Q`` would gain nothing.
"""

from __future__ import annotations

from collections.abc import Callable

from labgang.launcher.model import FairPreemption, QueueSpec, ReclaimWithinCohort, WithinQueue
from labgang.launcher.scheduler.fairshare import Share, add_demand, branch, lowest_common, share
from labgang.launcher.scheduler.preemption import within_queue_allows
from labgang.launcher.scheduler.quota import CohortTree
from labgang.launcher.scheduler.snapshot import PendingJob, RunningJob, victim_order
from labgang.launcher.scheduler.state import CycleState, RawPlacement

TenantScore = Callable[[RunningJob], float]
"""A running job's tenant score (admission fair sharing); None where that is off (every score 0)."""


def _order(score: TenantScore | None) -> Callable[[RunningJob], tuple[float, int, float, int, str]]:
    if score is None:

        def plain(v: RunningJob) -> tuple[float, int, float, int, str]:
            prio, admitted, seq, ident = victim_order(v)
            return (0.0, prio, admitted, seq, ident)

        return plain

    def key(v: RunningJob) -> tuple[float, int, float, int, str]:
        prio, admitted, seq, ident = victim_order(v)
        return (-score(v), prio, admitted, seq, ident)

    return key


def contested(state: CycleState, spec: QueueSpec, job: PendingJob) -> tuple[str, ...]:
    """The resources ``job`` is short of in its queue's quota now: of its devices and the ``cpu`` /
    ``memory`` it counts, those it needs more of than its queue may take; its device resource
    alone when none is (its devices, not its quota, are short)."""
    q = spec.name
    demand = state.pending_share_demand(q, job.request)
    short = tuple(res for res, n in demand.items() if n > state.quota.available(q, res))
    return short or (job.request.resource,)


def fair_candidates(
    state: CycleState,
    spec: QueueSpec,
    job: PendingJob,
    excluded: set[str],
    score: TenantScore | None,
    short: tuple[str, ...] | None = None,
) -> dict[int, list[RunningJob]]:
    """Candidates per queue node (each list in eviction order: highest tenant score, then
    :func:`victim_order`): ``Q``'s own per ``within_queue``; every other queue of ``Q``'s tree
    above its nominal in a resource of ``short`` (default: the job's device resource; see
    :func:`contested`), per ``reclaim_within_cohort``. Terminating jobs, ``excluded`` ones and
    those the cycle already removed are never candidates."""
    book = state.shares
    assert book is not None
    tree = book.tree
    res = job.request.resource
    qn = tree.queue_id[spec.name]
    out: dict[int, list[RunningJob]] = {}
    removed = state.removed
    # state.victims_in is already in victim_order and holds only non-terminating jobs of ``res``;
    # filtering keeps that order, and a stable sort by score alone then gives the full key's order
    if spec.within_queue is not WithinQueue.NEVER:
        own = [
            v
            for v in state.victims_in(spec.name, res)
            if v.id not in excluded and v.id not in removed and within_queue_allows(spec.within_queue, job, v)
        ]
        if own:
            out[qn] = own if score is None else sorted(own, key=lambda v: -score(v))
    policy = spec.reclaim_within_cohort
    if policy is not ReclaimWithinCohort.NEVER and tree.parent[qn] >= 0:
        root = tree.root[qn]
        lower_only = policy is ReclaimWithinCohort.LOWER_PRIORITY
        prio = job.priority
        for n, name in enumerate(tree.names):
            if not tree.is_queue[n] or n == qn or tree.root[n] != root:
                continue
            if not any(book.borrows(n, r) for r in short or (res,)):
                continue
            mine = []
            for v in state.victims_in(name, res):
                if lower_only and v.priority >= prio:
                    break  # victim_order puts the lowest priorities first: the rest are not lower
                if v.id not in excluded and v.id not in removed:
                    mine.append(v)
            if mine:
                out[n] = mine if score is None else sorted(mine, key=lambda v: -score(v))
    return out


def _queues_under(tree: CohortTree, n: int) -> list[int]:
    """The queues of ``n``'s subtree (``n`` itself when it is a queue)."""
    out, todo = [], [n]
    while todo:
        m = todo.pop()
        if tree.is_queue[m]:
            out.append(m)
        else:
            todo.extend(tree.children[m])
    return out


class _Search:
    def __init__(
        self, state: CycleState, spec: QueueSpec, job: PendingJob, excluded: set[str], score: TenantScore | None
    ) -> None:
        self.state = state
        book = state.shares
        assert book is not None
        self.book = book
        self.tree = book.tree
        self.spec = spec
        self.job = job
        self.res = job.request.resource
        self.qn = self.tree.queue_id[spec.name]
        self.short = contested(state, spec, job)  # resources whose borrowers are targets
        self.cands = fair_candidates(state, spec, job, excluded, score, self.short)
        self.ptr: dict[int, int] = {n: 0 for n in self.cands}
        self.aside: dict[int, list[RunningJob]] = {}
        self.victims: list[str] = []
        self.taken: list[RunningJob] = []
        self.second: set[str] = set()  # victims taken by less-than-initial-share
        self.key = _order(score)
        self.own_path = set(self.tree.ancestors(self.qn))

    # --- shares -------------------------------------------------------------------------------

    def pt(self, target: int) -> tuple[Share, int]:
        """``(P, T's branch node)`` for target queue ``target``."""
        lca = lowest_common(self.book, self.qn, target)
        return share(self.book, branch(self.book, self.qn, lca)), branch(self.book, target, lca)

    def lets_a_victim_return(self, v: RunningJob, p: Share, target: int) -> bool:
        """Whether removing ``v`` as well leaves ``target``'s branch so low that a victim already
        taken from that branch, put back alone, gives the branch a share below ``p``: that victim,
        requeued, could then evict the preemptor back by less-than-initial-share."""
        book = self.book
        lca = lowest_common(book, self.qn, target)
        tb = branch(book, target, lca)
        tree = self.tree
        mine = [w for w in self.taken if (n := tree.queue_id[w.queue]) == tb or tb in tree.ancestors(n)]
        if not mine:
            return False
        demand = self.state.share_demand
        add_demand(book, v.queue, demand(v), -1)
        try:
            for w in mine:
                add_demand(book, w.queue, demand(w))
                try:
                    if share(book, tb) < p:
                        return True
                finally:
                    add_demand(book, w.queue, demand(w), -1)
        finally:
            add_demand(book, v.queue, demand(v))
        return False

    def share_without(self, node: int, v: RunningJob) -> Share:
        book = self.book
        demand = self.state.share_demand(v)
        add_demand(book, v.queue, demand, -1)
        try:
            return share(book, node)
        finally:
            add_demand(book, v.queue, demand)

    # --- step 1 --------------------------------------------------------------------------------

    def _borrows(self, n: int) -> bool:
        """True when queue or cohort ``n`` borrows a resource the preemptor is short of."""
        return any(self.book.borrows(n, r) for r in self.short)

    def _next_of(self, n: int, pool: dict[int, list[RunningJob]], from_ptr: bool) -> RunningJob | None:
        lst = pool.get(n)
        if not lst:
            return None
        i = self.ptr.get(n, 0) if from_ptr else 0
        return lst[i] if i < len(lst) else None

    def pick_target(self, pool: dict[int, list[RunningJob]], from_ptr: bool, dropped: set[int]) -> int | None:
        tree = self.tree
        if tree.parent[self.qn] < 0:
            return self.qn if self._next_of(self.qn, pool, from_ptr) is not None else None
        return self._walk(tree.root[self.qn], pool, from_ptr, dropped)

    def _walk(self, cohort: int, pool: dict[int, list[RunningJob]], from_ptr: bool, dropped: set[int]) -> int | None:
        tree, book = self.tree, self.book
        gone: set[int] = set()
        while True:
            best_q: tuple[tuple[Share, tuple[int, float, int, float, int, str]], int] | None = None
            best_c: tuple[tuple[Share, int], int] | None = None
            for c in tree.children[cohort]:
                if c in gone or c in dropped:
                    continue
                if tree.is_queue[c]:
                    nxt = self._next_of(c, pool, from_ptr)
                    if nxt is None or (c != self.qn and not self._borrows(c)):
                        continue
                    tie = (1 if c == self.qn else 0, *self.key(nxt))
                    s = share(book, c)
                    # highest share first; ties: the queue whose next candidate comes first
                    k = ((-s[0], -s[1]), tie)
                    if best_q is None or k < best_q[0]:
                        best_q = (k, c)
                else:
                    if c not in self.own_path and not self._borrows(c):
                        continue
                    s = share(book, c)
                    kc = ((-s[0], -s[1]), c)
                    if best_c is None or kc < best_c[0]:
                        best_c = (kc, c)
            if best_c is not None and (best_q is None or best_c[0][0] <= best_q[0][0]):
                found = self._walk(best_c[1], pool, from_ptr, dropped)
                if found is not None:
                    return found
                gone.add(best_c[1])
                continue
            return None if best_q is None else best_q[1]

    # --- the search ----------------------------------------------------------------------------

    def fits(self) -> RawPlacement | None:
        return self.state.place_within_quota(self.spec.name, self.job.request, job=self.job)

    def take(self, v: RunningJob) -> bool:
        self.state.remove(v.id)
        self.victims.append(v.id)
        self.taken.append(v)
        return self.fits() is not None

    def run(self, rules: tuple[FairPreemption, ...]) -> tuple[list[str], RawPlacement] | None:
        book, req = self.book, self.job.request
        own = self.state.pending_share_demand(self.spec.name, req)
        add_demand(book, self.spec.name, own)
        try:
            fitted = self._steps(rules)
        finally:
            add_demand(book, self.spec.name, own, -1)
        if not fitted:
            for v in reversed(self.victims):
                self.state.restore(v)
            return None
        found = self._trim()
        if found is not None and self.second.intersection(found[0]) and self._undone(*found):
            return None
        return found

    def _undone(self, kept: list[str], raw: RawPlacement) -> bool:
        """Whether a job of the branch of a less-than-initial-share victim would evict ``j`` back
        at once: after the preemption (``kept`` gone, ``j`` holding ``raw``), a victim or a pending
        job of that branch (relative to ``L``) that, added alone, leaves the branch's share below
        ``P`` and does not fit without taking ``j``'s room."""
        state, book, tree, res, qn = self.state, self.book, self.tree, self.res, self.qn
        req, q = self.job.request, self.spec.name
        gone = [state.running[v] for v in kept]
        targets = {tree.queue_id[v.queue] for v in gone if v.id in self.second}
        with state.without(kept):
            state.quota.add(q, res, req.total)
            own = state.pending_share_demand(q, req)
            add_demand(book, q, own)
            held = state.devices.reserve([d for _, ds in raw for d in ds], self.job.id)
            try:
                for t in targets:
                    lca = lowest_common(book, qn, t)
                    tb = branch(book, t, lca)
                    p = share(book, branch(book, qn, lca))
                    for n in _queues_under(tree, tb):
                        name = tree.names[n]
                        back = {w.request for w in gone if w.queue == name}
                        back.update(
                            w.request.floor()
                            for w in state.pending_in(name)
                            if w.request.resource == res and not w.nominated and w.id not in state.placed
                        )
                        for r in back:
                            theirs = state.pending_share_demand(name, r)
                            add_demand(book, name, theirs)
                            try:
                                low = share(book, tb) < p
                            finally:
                                add_demand(book, name, theirs, -1)
                            if low and not (state.quota_fits(name, r) and state.place(r) is not None):
                                return True
            finally:
                state.devices.unreserve(held, self.job.id)
                add_demand(book, q, own, -1)
                state.quota.add(q, res, -req.total)
        return False

    def _steps(self, rules: tuple[FairPreemption, ...]) -> bool:
        book, qn = self.book, self.qn
        # within its nominal quota in every resource it counts (cpu/memory too, where listed)
        own = self.state.pending_share_demand(self.spec.name, self.job.request)
        within = all(book.node_usage(qn, r) <= self.tree.quota(qn, r) for r in own)
        first = rules[0]
        while True:
            target = self.pick_target(self.cands, True, set())
            if target is None:
                break
            lst = self.cands[target]
            if target == qn or within:
                v = lst[self.ptr[target]]
                self.ptr[target] += 1
                if self.take(v):
                    return True
                continue
            p, tb = self.pt(target)
            t0 = share(book, tb)
            if p[0] and not t0[0]:
                self.aside.setdefault(target, []).extend(lst[self.ptr[target] :])
                self.ptr[target] = len(lst)
                continue
            # T1 depends only on the candidate's size (all of target's candidates use ``res``; with
            # cpu/memory in quotas, its size is its devices and host resources together), and
            # the book does not change until a candidate is taken: judge each size once
            final: dict[tuple[tuple[str, int], ...], bool] = {}
            while self.ptr[target] < len(lst):
                v = lst[self.ptr[target]]
                self.ptr[target] += 1
                if first is FairPreemption.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE:
                    size = tuple(sorted(self.state.share_demand(v).items()))
                    ok_size = final.get(size)
                    if ok_size is None:
                        ok_size = final[size] = p <= self.share_without(tb, v)
                    ok = ok_size
                else:
                    ok = p < t0 and not self.lets_a_victim_return(v, p, target)
                if ok:
                    if first is FairPreemption.LESS_THAN_INITIAL_SHARE:
                        self.second.add(v.id)
                    if self.take(v):
                        return True
                    break
                self.aside.setdefault(target, []).append(v)
        if len(rules) > 1 and rules[1] is FairPreemption.LESS_THAN_INITIAL_SHARE:
            dropped: set[int] = set()
            while True:
                target = self.pick_target(self.aside, False, dropped)
                if target is None:
                    break
                dropped.add(target)
                p, tb = self.pt(target)
                v = self.aside[target][0]
                # P < T0 alone only keeps v itself from coming back. After victims of the first rule
                # (each judged with v still running), removing v can take the branch below P, and
                # an earlier victim, requeued, would then win by this same rule: an eviction cycle
                # (tests/scheduler/test_properties.py, test_known_eviction_cycle_counterexample).
                if p < share(book, tb) and not self.lets_a_victim_return(v, p, target):
                    self.second.add(v.id)
                    if self.take(v):
                        return True
        return False

    def _trim(self) -> tuple[list[str], RawPlacement] | None:
        state, victims = self.state, self.victims
        try:
            for i in range(len(victims) - 2, -1, -1):
                state.restore(victims[i])
                if self.fits() is not None:
                    victims[i] = ""
                else:
                    state.remove(victims[i])
            kept = [v for v in victims if v]
            raw = self.fits()
        finally:
            for v in reversed(victims):
                if v:
                    state.restore(v)
        if raw is None:
            return None
        return kept, raw


def find_fair_victims(
    state: CycleState,
    spec: QueueSpec,
    job: PendingJob,
    excluded: set[str],
    rules: tuple[FairPreemption, ...],
    score: TenantScore | None,
) -> tuple[list[str], RawPlacement] | None:
    """The victims fair sharing allows for ``job`` (trimmed), or None when none make it fit.

    Args:
        state: the cycle's copy, with fair-sharing usage (``state.shares``); restored on return.
        spec: the preemptor's queue.
        job: the preemptor.
        excluded: running jobs claimed by other preemptors this cycle.
        rules: the ``fair_preemption`` strategies, in the order tried.
        score: tenant score of a running job (victims of higher-score tenants go first); None
            when admission fair sharing is off.

    Returns:
        ``(victim ids in the order chosen, the placement once they are gone)`` or None.
    """
    search = _Search(state, spec, job, excluded, score)
    if not search.cands:
        return None
    return search.run(rules)
