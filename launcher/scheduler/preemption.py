"""Victim search: Kueue's classical preemption, with gangs evicted whole and placement checked.

For one pending job (the preemptor) that does not fit now (docs/queue-semantics.md §A3):

1. Candidates: running jobs using the contested resource that the preemptor's queue
   policies allow (jobs already terminating first: they are leaving anyway): its own queue
   per ``within_queue``; other queues of its cohort per ``reclaim_within_cohort``, and only
   while that queue is above its nominal.
   Cross-queue candidates are tagged: *reclaim* (the preemptor fits its own nominal, usable
   always), *borrow* (``borrow_within_cohort`` allows them: lower priority than the
   preemptor and <= its threshold), or *nominal-only* (usable only in a pass where the
   preemptor must end within its nominal quota).
2. Order: other queues first, then lowest priority, then most recently admitted, then id.
3. Up to two greedy passes (borrowing allowed / must end within nominal, in Kueue's order):
   remove candidates one by one in the cycle's copy until the preemptor fits quota **and**
   placement; then put back victims from the second-to-last to the first, keeping each one
   back whenever the preemptor still fits (minimal set). A pass that never fits is undone
   entirely: nobody is evicted "part of the way".
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from labgang.launcher.host_quota import HOST_RESOURCES
from labgang.launcher.model import GPU, BorrowPolicy, QueueSpec, ReclaimWithinCohort, WithinQueue
from labgang.launcher.scheduler import hostquota
from labgang.launcher.scheduler.decisions import NoPreemption, NoPreemptionCode
from labgang.launcher.scheduler.shares import QuietLeaves
from labgang.launcher.scheduler.snapshot import PendingJob, RunningJob, victim_order
from labgang.launcher.scheduler.state import CycleState, RawPlacement


class Kind(enum.Enum):
    """How a candidate may be used (Kueue's preemption variants)."""

    SAME_QUEUE = "same-queue"
    RECLAIM = "reclaim"  # preemptor fits its own nominal: always usable
    BORROW = "borrow"  # borrow_within_cohort allows it while borrowing
    NOMINAL_ONLY = "nominal-only"  # only when the preemptor ends within nominal


@dataclass(slots=True, unsafe_hash=True)
class Candidate:
    """A running job that may be evicted for the preemptor, and how.

    A value, not changed after construction; equality and hash by fields (not ``frozen`` only for
    its cheaper ``__init__``).
    """

    job: RunningJob
    kind: Kind
    found_at: int = -1  # tree node (cohort) at which a cross-queue candidate was found
    res: str | None = None  # the host resource (cpu, memory) it borrows, when found for that (hostquota.py)

    @property
    def cross(self) -> bool:
        """True for a job of another queue."""
        return self.kind is not Kind.SAME_QUEUE


def within_queue_allows(policy: WithinQueue, preemptor: PendingJob, victim: RunningJob) -> bool:
    """``within_queue``: may ``preemptor`` evict ``victim`` of its own queue?"""
    if policy is WithinQueue.LOWER_PRIORITY:
        return victim.priority < preemptor.priority
    if policy is WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY:
        return victim.priority < preemptor.priority or (
            victim.priority == preemptor.priority and victim.submit_time > preemptor.submit_time
        )
    return False


def search_refusal(state: CycleState, spec: QueueSpec, job: PendingJob) -> NoPreemption | None:
    """docs/queue-semantics.md §A3.1: may ``job`` look for victims? None when it may; else the
    rule that forbids it, with its numbers (``labgang explain`` shows it).

    A job may look when its request fits the queue's own nominal quota, when its queue has a
    cohort and ``borrow_within_cohort`` is on, with fair sharing whenever the queue may reclaim
    within its cohort, or when the job's fitting subtree is a cohort below the root. Otherwise
    it could only start by borrowing, and a job that would borrow may not preempt.
    """
    req = job.request
    res, need = req.resource, req.total
    quota = state.quota
    nominal = quota.nominal(spec.name, res)
    if need <= nominal:
        return None
    if spec.cohort is not None:
        if spec.borrow_within_cohort.policy is not BorrowPolicy.NEVER:
            return None
        if state.shares is not None and spec.reclaim_within_cohort is not ReclaimWithinCohort.NEVER:
            return None
        a = quota.fitting_subtree(spec.name, res, need)
        if not quota.tree.is_queue[a] and quota.tree.parent[a] >= 0:
            return None
    return would_borrow(spec, res, need, nominal, fair=state.shares is not None)


def would_borrow(spec: QueueSpec, res: str, need: int, nominal: int, *, fair: bool = False) -> NoPreemption:
    """The WOULD_BORROW refusal for a job of ``spec`` that needs ``need`` devices of ``res``,
    above the queue's ``nominal`` quota (``fair``: fair sharing is on, where a queue that may
    reclaim within its cohort may also look)."""
    policy = spec.borrow_within_cohort.policy.value
    head = (
        f"no preemption: the job needs {need} {res}, {need - nominal} above queue {spec.name}'s nominal quota "
        f"of {nominal}, so it could only start by borrowing"
    )
    if spec.cohort is None:
        rule = f"queue {spec.name} has no cohort to borrow from"
    elif fair:
        rule = (
            "a job that would borrow may preempt only when its queue's borrow_within_cohort allows it or, "
            f"with fair sharing, its reclaim_within_cohort is not never; {spec.name}'s are {policy} and "
            f"{spec.reclaim_within_cohort.value}"
        )
    else:
        rule = (
            f"a job that would borrow may preempt only when its queue's borrow_within_cohort allows it, "
            f"and {spec.name}'s is {policy}"
        )
    return NoPreemption(
        NoPreemptionCode.WOULD_BORROW,
        spec.name,
        res,
        need,
        nominal,
        spec.cohort,
        policy,
        f"{head}; {rule} (docs/queue-semantics.md §A3.1)",
    )


def candidates(
    state: CycleState, spec: QueueSpec, job: PendingJob, excluded: set[str], nominal_only: bool = True
) -> list[Candidate]:
    """Every usable victim for ``job``, in eviction order (Kueue's grouping): jobs already
    terminating first (they are leaving anyway), then other queues' jobs, then its own queue's;
    each group in :func:`victim_order`. Jobs in ``excluded`` (claimed by another preemptor in
    this cycle) are skipped. ``nominal_only`` False: without the *nominal-only* candidates of a
    queue whose ``borrow_within_cohort`` is off (for a search that never uses them)."""
    leaving_cross, leaving_same = _collect(state, spec, job, excluded, True, nominal_only)
    cross, same = _collect(state, spec, job, excluded, False, nominal_only)
    return leaving_cross + leaving_same + cross + same


def no_candidates(state: CycleState, spec: QueueSpec, job: PendingJob) -> bool:
    """True when :func:`candidates` surely finds no victim for ``job``, whatever the cycle has done
    so far: its queue reclaims nothing within a cohort (no cross-queue candidate) and no running
    job of its own queue using its resource, terminating or not, has a priority ``within_queue``
    lets it evict (the snapshot's jobs, before any is claimed or taken off: those only take
    candidates away): :meth:`.CycleState.lowest_priority`, no list built; False when a candidate
    may exist (:func:`candidates` then says)."""
    if spec.cohort is not None and spec.reclaim_within_cohort is not ReclaimWithinCohort.NEVER:
        return False
    policy = spec.within_queue
    if policy is WithinQueue.NEVER:
        return True
    low = state.lowest_priority(spec.name, job.request.resource)
    if low is None:
        return True
    p = job.priority
    return low > p or (low == p and policy is not WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY)


def _collect(
    state: CycleState, spec: QueueSpec, job: PendingJob, excluded: set[str], terminating: bool, nominal_only: bool
) -> tuple[list[Candidate], list[Candidate]]:
    req = job.request
    res, need, q = req.resource, req.total, spec.name
    quota = state.quota
    p = job.priority
    removed = state.removed
    same: list[Candidate] = []
    if spec.within_queue is not WithinQueue.NEVER:
        newer_equal = spec.within_queue is WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY
        for v in state.victims_in(q, res, terminating):  # sorted by priority: stop at the first too high
            if v.priority >= p and not (newer_equal and v.priority == p):
                break
            if v.id in excluded or v.id in removed:
                continue
            if within_queue_allows(spec.within_queue, job, v):
                same.append(Candidate(v, Kind.SAME_QUEUE))
    cross: list[Candidate] = []
    if spec.cohort is not None and spec.reclaim_within_cohort is not ReclaimWithinCohort.NEVER:
        bwc = spec.borrow_within_cohort
        # found while the preemptor does not fit the subtree yet, a candidate is nominal-only unless
        # borrow_within_cohort allows it: without it, and not asked for, such candidates are not looked at
        skip_behind = not nominal_only and bwc.policy is BorrowPolicy.NEVER and not (state.host_quota and req.host)
        any_priority = spec.reclaim_within_cohort is ReclaimWithinCohort.ANY
        tree = quota.tree
        qn = tree.queue_id[q]
        u = quota.node_usage(qn, res)
        advantage = u + need <= quota.nominal(q, res)
        x = need - max(0, tree.private(qn, res) - u)
        prev = qn
        ahead: list[tuple[tuple[int, float, int, str], RunningJob, int]] = []
        behind: list[tuple[tuple[int, float, int, str], RunningJob, int]] = []
        for anc in tree.ancestors(qn):
            found = ahead if advantage else behind
            for other in () if skip_behind and not advantage else _borrowing_queues(state, anc, prev, res):
                if other == qn:
                    continue
                for v in state.victims_in(tree.names[other], res, terminating):
                    if not any_priority and v.priority >= p:
                        break
                    if v.id in excluded or v.id in removed:
                        continue
                    found.append((victim_order(v), v, anc))
            ua = quota.node_usage(anc, res)
            if ua + x <= tree.quota(anc, res):
                advantage = True
            x -= max(0, tree.private(anc, res) - ua)
            prev = anc
        ahead.sort(key=lambda t: t[0])
        behind.sort(key=lambda t: t[0])
        for _, v, anc in ahead:
            cross.append(Candidate(v, Kind.RECLAIM, anc))
        for _, v, anc in behind:
            if (
                bwc.policy is not BorrowPolicy.NEVER
                and v.priority < p
                and (bwc.max_priority_threshold is None or v.priority <= bwc.max_priority_threshold)
            ):
                kind = Kind.BORROW
            else:
                kind = Kind.NOMINAL_ONLY
            cross.append(Candidate(v, kind, anc))
        if state.host_quota and req.host:  # a queue short of its own CPUs or memory reclaims them too
            cross += _host_reclaim(state, spec, job, excluded, terminating, {c.job.id for c in cross})
    if state.tenant_score is not None and len(same) > 1:
        score = state.tenant_score  # admission fair sharing: higher tenant score first
        same.sort(key=lambda c: (-score(c.job), *victim_order(c.job)))
    return cross, same


def _host_reclaim(
    state: CycleState, spec: QueueSpec, job: PendingJob, excluded: set[str], terminating: bool, seen: set[str]
) -> list[Candidate]:
    """Candidates for the host resources (``cpu``, ``memory``) ``job``'s queue lacks now: jobs of
    other queues that borrow that resource, found as :func:`_collect` finds device borrowers, in
    eviction order, after the device candidates. Where the preemptor stays within its own nominal
    quota of the resource they are *reclaim* candidates; where it would borrow it, only those its
    queue's ``borrow_within_cohort`` allows (lower priority than the preemptor, at or below
    ``max_priority_threshold``), as *borrow* candidates. ``seen``: jobs already candidates."""
    quota, tree, q, p = state.quota, state.quota.tree, spec.name, job.priority
    any_priority = spec.reclaim_within_cohort is ReclaimWithinCohort.ANY
    bwc = spec.borrow_within_cohort
    demand = hostquota.demand_before_placement(quota, q, job.request, True)
    qn = tree.queue_id[q]
    found: list[tuple[tuple[int, float, int, str], RunningJob, int, str, Kind]] = []
    for res in HOST_RESOURCES:
        need = demand.get(res, 0)
        if not need or need <= quota.available(q, res):
            continue
        kind = Kind.RECLAIM
        if quota.usage(q, res) + need > quota.nominal(q, res):  # it would borrow: borrow_within_cohort
            if bwc.policy is BorrowPolicy.NEVER:
                continue
            kind = Kind.BORROW
        prev = qn
        for anc in tree.ancestors(qn):
            for other in _borrowing_queues(state, anc, prev, res):
                if other == qn:
                    continue
                holders = [
                    v
                    for v in state.running_in(tree.names[other])
                    if v.terminating == terminating and state.demand.get(v.id, {}).get(res)
                ]
                for v in sorted(holders, key=victim_order):
                    if (kind is Kind.BORROW or not any_priority) and v.priority >= p:
                        break
                    limit = bwc.max_priority_threshold
                    if kind is Kind.BORROW and limit is not None and v.priority > limit:
                        break  # victim_order goes up in priority: the rest are above it too
                    if v.id in excluded or v.id in state.removed or v.id in seen:
                        continue
                    seen.add(v.id)
                    found.append((victim_order(v), v, anc, res, kind))
            prev = anc
    found.sort(key=lambda t: t[0])
    return [Candidate(v, kind, anc, res) for _, v, anc, res, kind in found]


def _borrowing_queues(state: CycleState, anc: int, skip: int, res: str) -> list[int]:
    """Queues above their nominal in ``anc``'s subtree minus ``skip``'s subtree, reached
    through child cohorts that borrow (tree order)."""
    tree, quota = state.quota.tree, state.quota
    out: list[int] = []
    stack = [c for c in reversed(tree.children[anc]) if c != skip]
    while stack:
        c = stack.pop()
        if not quota.borrows(c, res):
            continue
        if tree.is_queue[c]:
            out.append(c)
        else:
            stack.extend(reversed(tree.children[c]))
    return out


def still_reclaimable(state: CycleState, victim: Candidate, res: str) -> bool:
    """A cross-queue candidate stays usable while its queue, and every cohort between it and
    the ancestor it was found at (that one excluded), still borrows."""
    quota = state.quota
    tree = quota.tree
    n = tree.queue_id[victim.job.queue]
    while n >= 0 and n != victim.found_at:
        if not quota.borrows(n, res):
            return False
        n = tree.parent[n]
    return True


def usable(state: CycleState, c: Candidate, res: str, allow_borrow: bool) -> bool:
    """Whether a greedy pass (borrowing allowed: ``allow_borrow``) may take candidate ``c`` now, for a
    preemptor of resource ``res``: a job of its own queue always; a *nominal-only* one only in a pass
    that must end within nominal; any other cross-queue one while :func:`still_reclaimable` (its queue,
    or a cohort on its way, is not back within quota), for the host resource it was found for if any.
    Every pass filters its candidates by this, in order, as each is reached (earlier victims change
    what is still reclaimable)."""
    kind = c.kind
    if kind is Kind.SAME_QUEUE:
        return True
    if kind is Kind.NOMINAL_ONLY and allow_borrow:
        return False
    return still_reclaimable(state, c, c.res or res)


def find_victims(
    state: CycleState, spec: QueueSpec, job: PendingJob, excluded: set[str]
) -> tuple[list[str], RawPlacement] | None:
    """The minimal victim set that lets ``job`` fit quota and placement, or None.

    Args:
        state: the cycle's copy; restored before returning.
        spec: the preemptor's queue.
        job: the preemptor.
        excluded: running jobs that may not be chosen (victims of other preemptors this cycle).

    Returns:
        ``(victim ids in the order chosen, the placement the job gets once they are gone)``.
    """
    req = job.request
    res, q = req.resource, spec.name
    quota = state.quota
    bwc_on = spec.borrow_within_cohort.policy is not BorrowPolicy.NEVER
    over_nominal = not bwc_on and quota.usage(q, res) >= quota.nominal(q, res)
    cands = candidates(state, spec, job, excluded, nominal_only=not over_nominal)  # one pass then: none used
    if not cands:
        return None
    has_cross = any(c.cross for c in cands)
    if not has_cross or over_nominal:
        passes = [True]
    elif not bwc_on and not any(c.kind is Kind.RECLAIM for c in cands):
        passes = [False, True]
    else:
        passes = [True, False]
    for allow_borrow in passes:
        found = _greedy_pass(state, spec, job, cands, allow_borrow)
        if found is not None:
            return found
    return None


def _fits(state: CycleState, q: str, job: PendingJob, allow_borrow: bool) -> RawPlacement | None:
    return state.place_within_quota(q, job.request, within_nominal=not allow_borrow, job=job)


skip_unchanged_fits = True
"""Tests turn it off to build the reference: every step of a greedy pass checks the fit again."""

QUOTA, PLACE = 1, 2
"""Why a fit check failed (:func:`_fit_why`): the quota (pure in the quota book and, for a share,
its queue's share use), or the placement (pure in the device book, for whole devices)."""


def _fit_why(state: CycleState, q: str, job: PendingJob, allow_borrow: bool) -> tuple[RawPlacement | None, int]:
    """:func:`_fits`, and when it fails, why: :data:`QUOTA` or :data:`PLACE`; 0 where the two cannot
    be told apart (host CPUs and memory or ``--exclusive`` counted on the nodes placement chose)."""
    req = job.request
    if req.exclusive or (state.host_quota and req.host):
        return _fits(state, q, job, allow_borrow), 0
    if not state.quota_fits(q, req, within_nominal=not allow_borrow, job=job):
        return None, QUOTA
    return state.place(req, job), PLACE


def _same_answer(state: CycleState, q: str, job: PendingJob, victim: RunningJob, why: int) -> bool:
    """After a failed fit check that failed for ``why``, and ``victim`` taken off since: True when
    that check would fail again for the same reason, because nothing it reads changed
    (:attr:`CycleState.last_removal`): the quota book's usage (and, for a share preemptor, the card
    it would take: a share of its queue or of one it shares with taken off), or for a whole-device preemptor the device
    book (a share's placement also reads the shared cards' room, which any share victim changes)."""
    quota_changed, devices_changed = state.last_removal
    if why == QUOTA:
        if quota_changed or not (job.request.shared and victim.request.shared):
            return not quota_changed
        # a share's charge reads the card it would take (:meth:`.shares.ShareBook.charge`): a share of
        # its queue or of one it may share with taken off changes the room of a card it may join
        cards = state.cards
        spec = None if cards is None else cards.specs.get(q)
        return victim.queue != q and spec is not None and victim.queue not in spec.share_with
    return why == PLACE and not job.request.shared and not devices_changed


defer_quiet_shares = True
"""Tests turn it off to build the reference: a whole-device search takes every share victim off at
once (:class:`.shares.QuietLeaves`)."""


skip_unjoinable_cards = True
"""Tests turn it off to build the reference: a share pass (:func:`_share_pass_fails`) checks the quota
again after a share of its own queue is taken off that changed no queue's charge, also where the card
it left is not one the preemptor may join (:meth:`.shares.ShareBook.may_join`)."""


end_first = True
"""Tests turn it off to build the reference: a greedy pass checks its fit after each victim even
where taking off every candidate would not make it fit (:func:`_share_pass_fails`,
:func:`_whole_pass_fails`). Never where queues share cards (``share_with``, :attr:`.shares.ShareBook.mixing`):
a share taken off a mixed card can leave the card to one queue, charged whole, so a victim can raise a
queue's usage, which the shortcut rests on never happening."""

whole_end_after = 8
"""Where no share book is kept, a whole-device pass checks its last state only after this many of its
fit checks failed, over the candidates left (:func:`_greedy_pass`); 0: before its first step, as a
share pass does. Most passes that are made fit within a few victims (in the replay bench every
priority-10 preemptor's did: 91 % within 8 checks, each a victim taken off and a fit checked, against
about 77 candidates taken off and put back by the end-first test), so the test is made only for the
long ones, where a pass that can only fail saves its remaining checks. Either way the pass decides
alike: the test only stops a pass that would have found nothing."""


def _share_pass_fails(
    state: CycleState, spec: QueueSpec, job: PendingJob, cands: list[Candidate], allow_borrow: bool
) -> bool:
    """For share preemptor ``job`` (its fit pure in the quota book, its queue's share use and the
    share book: no host quotas, not ``--exclusive``): True when a greedy pass over ``cands`` can
    only fail, having logged in the share book whom its placements would have read; False, with
    the cycle's copy and the log as they were, when the pass may succeed (then it runs as usual).

    A share's placement only gets easier as victims go (taking sharers off a card adds room and
    trust; a card freed is a whole free one; a whole job frees its devices), so when it fails in the
    last state whose quota fits, it failed in every earlier one: one placement answers for the pass,
    which tries one after each victim. Its quota fit is not monotone: a share of its own queue taken
    off can raise what the preemptor would add to its queue's rounded-up share use while the room it
    has does not grow (``available`` is clamped at 0 where held quota overfills a root), so the quota
    is checked as the pass checks it, again after each such victim and otherwise while it fails;
    where such a victim ends a stretch of states whose quota fits, the placement is tried in the
    state before it (the last of the stretch answers for the stretch). While the quota fails, a share of its own
    queue taken off that changed no charge leaves it failing unless the preemptor may join the card it left
    (:data:`skip_unjoinable_cards`: its charge drops only by joining a card, and no other card changed). What
    the pass's placements would have logged
    (``ShareBook.readers``, the users a failed search met) is logged as they would: in a state whose
    quota fits after one that did not, what a placement reads then; after each later victim, what it
    reads of that victim's card (the only card changed). Rests on no victim raising a queue's quota
    usage (no share is taken off a card mixed with another queue's: not used where queues share cards),
    checked by the premise test in ``test_share_pass_end_first.py``.
    """
    cards = state.cards
    assert cards is not None
    q, res, req = spec.name, job.request.resource, job.request
    kind, units = "mps" if req.mps else "shard", cards.units(req)
    mark = cards.mark()
    victims: list[str] = []
    quota_fit = False  # the last state fits the quota
    try:
        for c in cands:
            if not usable(state, c, res, allow_borrow):
                continue
            v = c.job
            own = v.request.shared and v.queue == q  # may raise the preemptor's charge
            victims.append(v.id)
            d = cards.card_of.get(v.id)
            state.remove(v.id)
            if quota_fit and not own:
                if d is not None:
                    cards.note_card(d, kind, q, units)  # what the pass's placement here logs anew
                continue
            if not quota_fit and victims[1:] and skip_unchanged_fits and _same_answer(state, q, job, v, QUOTA):
                continue  # the pass skips this check too: the quota still does not fit
            if (
                not quota_fit
                and victims[1:]
                and skip_unjoinable_cards
                and own
                and not state.last_removal[0]
                and (d is None or not cards.may_join(d, req, q, job.user))
            ):
                # no charge changed and the one card changed is not one it may join: its charge and
                # room are as before, so the quota still does not fit; log what the check would read
                if d is not None:
                    cards.note_card(d, kind, q, units)
                continue
            fit = state.quota_fits(q, req, within_nominal=not allow_borrow, job=job)
            if quota_fit and not fit:  # the end of a stretch whose quota fits: its placement answers for it
                state.restore(v.id)
                placed = state.place(req, job) is not None
                state.remove(v.id)
                if placed:
                    cards.forget(mark)  # the pass may succeed: it runs and logs for itself
                    return False
            elif fit and quota_fit:
                if d is not None:
                    cards.note_card(d, kind, q, units)
            elif fit:
                cards.note_placement(kind, q, units)  # the placement the pass tries here
            quota_fit = fit
        if quota_fit and state.place(req, job) is not None:
            cards.forget(mark)
            return False
        return True
    finally:
        for v_id in reversed(victims):
            state.restore(v_id)


def _whole_pass_fails(
    state: CycleState, spec: QueueSpec, job: PendingJob, cands: list[Candidate], allow_borrow: bool
) -> bool:
    """For whole-device preemptor ``job`` whose fit only gets easier as victims go (no host
    resources, groups, ``--exclusive`` or required topology level: its quota charge is its device
    count, and :func:`.placement.choose_nodes` finds a placement wherever one exists for as few
    nodes as fit or an exact node count, so more free devices never lose one): True when a greedy
    pass over ``cands`` can only fail from the cycle's copy as it is (a pass may ask mid-way, its
    victims so far taken off: :data:`whole_end_after`). The last state (every usable candidate
    taken off, in order, as the pass takes them: shares that leave a sharer on their card on paper,
    :class:`.shares.QuietLeaves`) answers for every earlier one: one fit check instead of one per
    victim that changed something. Its checks log nothing (a whole-device placement reads
    no shared card). Rests on no victim raising a queue's quota usage, as :func:`_share_pass_fails`."""
    q, res = spec.name, job.request.resource
    if per_card_whole_passes and defer_quiet_shares and state.cards is not None:
        return _whole_pass_fails_per_card(state, spec, job, cands, allow_borrow)
    quiet = QuietLeaves(state.cards) if defer_quiet_shares and state.cards is not None else None
    victims: list[str] = []
    try:
        for c in cands:
            if not usable(state, c, res, allow_borrow):
                continue
            victims.append(c.job.id)
            if quiet is not None and c.job.request.shared:
                delta = quiet.hold(c.job)
                if delta is None:
                    _take_off_held(state, quiet)
                    state.remove(c.job.id)
                else:
                    _count_share(state, c.job, -delta)
            else:
                state.remove(c.job.id)
        return not victims or _fits(state, q, job, allow_borrow) is None
    finally:
        held: set[str] = set()
        for share, delta in quiet.drain() if quiet is not None else ():
            _count_share(state, share, delta)
            held.add(share.id)
        for v in reversed(victims):
            if v not in held:
                state.restore(v)


per_card_whole_passes = True
"""Tests turn it off to build the reference: :func:`_whole_pass_fails` takes the shares it holds on
paper (:class:`.shares.QuietLeaves`) off for real, all of them, before one that frees its card."""


def _whole_pass_fails_per_card(
    state: CycleState, spec: QueueSpec, job: PendingJob, cands: list[Candidate], allow_borrow: bool
) -> bool:
    """:func:`_whole_pass_fails` where a share book is kept, asking per card which sharers to take off:
    a share victim that leaves a sharer on its card, held alone by its queue, changes neither the quota
    book nor the device book (no charge, no card freed), so it stays on its card; when the card's last
    sharer is reached, the card's sharers taken so far are taken off for real, in order (the card is
    freed, its queue's charge drops). The quota and device books are then, after each candidate, as
    :func:`_whole_pass_fails` has them (its cross-queue candidates' ``still_reclaimable`` reads the same
    usage), and so in the last state, which alone is checked: a whole-device fit reads no shared card.
    A share on a card mixed with other queues' or not in the device book is taken off for real at once."""
    cards = state.cards
    assert cards is not None
    q, res = spec.name, job.request.resource
    removed: list[str] = []  # taken off for real, in order
    on_card: dict[int, list[str]] = {}  # per card: the sharers taken so far, still on it
    walked = False
    try:
        for c in cands:
            if not usable(state, c, res, allow_borrow):
                continue
            walked = True
            v = c.job
            if v.request.shared:
                d = cards.card_of.get(v.id)
                if d is not None and cards.card_alone(d) is not None:
                    taken = on_card.setdefault(d, [])
                    taken.append(v.id)
                    if len(taken) < len(cards.cards[d]):
                        continue  # a sharer stays: nothing a whole-device fit reads changed
                    del on_card[d]
                    for share in taken:
                        state.remove(share)
                        removed.append(share)
                    continue
            state.remove(v.id)
            removed.append(v.id)
        return not walked or _fits(state, q, job, allow_borrow) is None
    finally:
        for v_id in reversed(removed):
            state.restore(v_id)


def _greedy_pass(
    state: CycleState, spec: QueueSpec, job: PendingJob, cands: list[Candidate], allow_borrow: bool
) -> tuple[list[str], RawPlacement] | None:
    q, res, req = spec.name, job.request.resource, job.request
    whole = not req.shared
    end_after = 0  # the whole-device end-first test, when made later in the pass (:data:`whole_end_after`)
    if end_first and not (req.exclusive or (state.host_quota and req.host) or (state.cards and state.cards.mixing)):
        if whole:
            if not (req.host or req.groups or req.topology):
                if state.cards is None and whole_end_after > 0:
                    end_after = whole_end_after
                elif _whole_pass_fails(state, spec, job, cands, allow_borrow):
                    return None
        elif state.cards is not None and _share_pass_fails(state, spec, job, cands, allow_borrow):
            return None
    victims: list[str] = []
    unfit = False  # the last state tried did not fit
    why = 0  # and why (_fit_why)
    # a whole-device request's fit reads the quota and device books only (not with host quotas or
    # --exclusive, counted on the nodes chosen): shares that change neither are taken off on paper
    quiet = None
    if (
        whole
        and defer_quiet_shares
        and state.cards is not None
        and not (req.exclusive or (state.host_quota and req.host))
    ):
        quiet = QuietLeaves(state.cards)
    failed_checks = 0
    try:
        for i, c in enumerate(cands):
            if not usable(state, c, res, allow_borrow):
                continue
            victims.append(c.job.id)
            if quiet is not None and c.job.request.shared:
                delta = quiet.hold(c.job)
                if delta is None:
                    _take_off_held(state, quiet)  # first, as they came: whether this one frees its card reads them
                    seen = state.remove(c.job.id)
                else:
                    _count_share(state, c.job, -delta)
                    seen = bool(delta)  # what state.remove would say
                    state.last_removal = (seen, False)
            else:  # a job of whole devices: what it frees reads no share
                seen = state.remove(c.job.id)
            if unfit and whole and not seen:
                continue  # only a shared card's room changed: a whole-device job still does not fit
            if unfit and skip_unchanged_fits and _same_answer(state, q, job, c.job, why):
                continue  # what the last check failed on did not change: it fails again
            raw, why = _fit_why(state, q, job, allow_borrow)
            unfit = raw is None
            if unfit:
                failed_checks += 1
                # this state does not fit: if it does not once every candidate left is taken off
                # too, no later one does (a whole-device fit only gets easier as victims go)
                if failed_checks == end_after and _whole_pass_fails(state, spec, job, cands[i + 1 :], allow_borrow):
                    return None
                continue
            if quiet is not None:
                _take_off_held(state, quiet)
            # fill-back: from the second-to-last victim to the first, keep any that is not needed
            for i in range(len(victims) - 2, -1, -1):
                state.restore(victims[i])
                if _fits(state, q, job, allow_borrow) is not None:
                    victims[i] = ""
                else:
                    state.remove(victims[i])
            victims = [v for v in victims if v]
            raw = _fits(state, q, job, allow_borrow)
            if raw is None:  # cannot happen: every step of the fill-back kept a fitting state
                return None
            return list(victims), raw
        return None
    finally:
        held: set[str] = set()
        for share, delta in quiet.drain() if quiet is not None else ():
            _count_share(state, share, delta)  # on paper only: its count back, nothing else to put back
            held.add(share.id)
        for v in reversed(victims):
            if v and v not in held:
                state.restore(v)


def _count_share(state: CycleState, share: RunningJob, delta: int) -> None:
    """Change running ``share``'s queue's usage by ``delta`` whole GPUs in the quota book (and the
    fair-sharing share of a share not terminating), as :meth:`CycleState.remove` does for a share."""
    if delta:
        state.quota.add(share.queue, GPU, delta)
        if state.shares is not None and not share.terminating:
            state.shares.add(share.queue, GPU, delta)


def _take_off_held(state: CycleState, quiet: QuietLeaves) -> None:
    """Take the shares ``quiet`` holds off the cycle's copy for real, in the order held (each one's
    count put back first: :meth:`CycleState.remove` takes it off again, the same whole GPUs)."""
    for share, delta in quiet.drain():
        _count_share(state, share, delta)
        state.remove(share.id)
