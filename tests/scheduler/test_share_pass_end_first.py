"""A greedy victim pass that first checks its last state (every usable candidate taken off) and fails
at once when that does not fit (``preemption.end_first``: ``_share_pass_fails`` for a share,
``_whole_pass_fails`` for whole devices) changes no decision, and a share's logs the same readers
(``ShareBook.readers``: the users a failed search met, which decide whom its verdict answers) as the
pass that checks its fit after each victim. Checked against the cycle with it switched off over
random backlogs of shares of many users, whole jobs and preemptors (``share_backlogs.backlog``: a
derandomized hypothesis run over seeds, and every search's answer and readers compared one by one),
and over every cycle of the property tests' random scenarios (gangs over nodes, exact node counts,
MIG, GPU models, cohort trees), where whole-device placements are richer."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import preemption, run_cycle
from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.shares import ShareBook
from labgang.launcher.scheduler.snapshot import Placement, RankPlacement, RunningJob, Snapshot
from share_backlogs import NODES, SHARING, USERS, backlog, queues
from test_properties import run_to_end, scenarios, tree_scenarios  # type: ignore[import-not-found]


@given(st.integers(0, 100_000))
@settings(derandomize=True, max_examples=150, deadline=None)
def test_checking_the_last_state_first_changes_no_decision(seed: int) -> None:
    snap = backlog(seed, mixing=seed % 2 == 0)  # with queues sharing cards the shortcut stays off
    fast = run_cycle(snap)
    with end_first(False):
        assert run_cycle(snap) == fast


def same_without(snap: Snapshot, result: object) -> None:
    """A cycle hook: the cycle with ``end_first`` off decides as the one that ran."""
    with end_first(False):
        assert run_cycle(snap) == result


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(scenarios())
def test_whole_device_passes_decide_alike_over_random_scenarios(data: dict) -> None:
    run_to_end(data, [same_without], until=300.0)


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(tree_scenarios())
def test_whole_device_passes_decide_alike_over_cohort_trees(data: dict) -> None:
    run_to_end(data, [same_without], until=300.0)


@contextmanager
def end_first(on: bool) -> Iterator[None]:
    saved = preemption.end_first
    preemption.end_first = on
    try:
        yield
    finally:
        preemption.end_first = saved


def searches(monkeypatch: pytest.MonkeyPatch, seed: int) -> list[tuple[str, object, frozenset[str] | None]]:
    """Every victim search of ``seed``'s cycle: the preemptor, its answer, and the readers its
    placements logged."""
    seen: list[tuple[str, object, frozenset[str] | None]] = []
    real = preemption.find_victims

    def recording(state, spec, job, excluded):
        cards = state.cards
        mark = cards.mark() if cards is not None else None
        found = real(state, spec, job, excluded)
        seen.append((job.id, found, cards.readers(mark) if cards is not None and mark is not None else None))
        return found

    monkeypatch.setattr(cycle_module, "find_victims", recording)
    run_cycle(backlog(seed, mixing=seed % 2 == 0))
    monkeypatch.undo()
    return seen


@pytest.mark.parametrize("seed", range(100))
def test_each_search_logs_the_same_readers(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = searches(monkeypatch, seed)
    with end_first(False):
        slow = searches(monkeypatch, seed)
    assert fast == slow


def test_the_last_state_answers_share_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: over the same backlogs share passes fail at once, some after logging readers
    (a state whose quota fits, a card met), and some go on to the usual pass (their last state fits)."""
    outcomes = {"failed": 0, "read": 0, "ran": 0}
    real = preemption._share_pass_fails

    def counting(state, spec, job, cands, allow_borrow):
        mark = state.cards.mark()
        got = real(state, spec, job, cands, allow_borrow)
        outcomes["failed" if got else "ran"] += 1
        outcomes["read"] += got and state.cards.readers(mark) != frozenset()
        return got

    monkeypatch.setattr(preemption, "_share_pass_fails", counting)
    for seed in range(60):
        run_cycle(backlog(seed, mixing=False))
    assert all(outcomes.values()), outcomes


# --- the share book: what a placement reads after one sharer is taken off ------------------------

SPECS = queues()[:4]


@st.composite
def books_and_a_leaver(draw: st.DrawFn) -> tuple[list[RunningJob], int, str, JobRequest]:
    """Running shares on a few cards, each sharer of its own drawn user (so a card's first sharer, whose
    user the open-card index reads, changes when it leaves), one of them to take off, and a share
    request of a queue."""
    devices = [d.uuid for n in NODES for d in n.devices]
    running: list[RunningJob] = []
    for c in range(draw(st.integers(1, 10))):
        uuid = devices[c]
        mps = draw(st.booleans())
        spec = draw(st.sampled_from(SPECS))
        room = 100
        for k in range(draw(st.integers(1, 3))):
            want = draw(st.sampled_from([25, 50])) if mps else 25 * draw(st.integers(1, 3))
            if want > room:
                break
            room -= want
            req = JobRequest(mps=want) if mps else JobRequest(shards=want // 25)
            placement: Placement = (RankPlacement(0, uuid.split("-")[1], (uuid,)),)
            user = draw(st.sampled_from(USERS[:4]))
            running.append(RunningJob(f"r{c}.{k}", spec.name, req, 0, 0.0, 0.0, placement, user=user))
    leaver = draw(st.integers(0, len(running) - 1))
    mps = draw(st.booleans())
    req = JobRequest(mps=draw(st.sampled_from([25, 50]))) if mps else JobRequest(shards=draw(st.integers(1, 3)))
    return running, leaver, draw(st.sampled_from(SPECS)).name, req


def _logged(book: ShareBook, note: Callable[[], None]) -> frozenset[str] | None:
    mark = book.mark()
    note()
    return book.readers(mark)


def _within(a: frozenset[str] | None, b: frozenset[str] | None) -> bool:
    """``a`` a subset of ``b``, None standing for everyone."""
    return b is None or (a is not None and a <= b)


@settings(max_examples=400, deadline=None, derandomize=True, database=None)
@given(books_and_a_leaver())
def test_a_placement_after_a_sharer_leaves_reads_what_it_read_before_and_that_card(case) -> None:
    """What ``_share_pass_fails`` relies on (``ShareBook.note_card``): once a sharer of card ``d`` is
    taken off, a placement reads at most what one before read and what ``note_card(d)`` logs, and
    ``note_card(d)`` logs nothing it does not read."""
    running, leaver, queue, req = case
    book = ShareBook(SHARING, SPECS, running)
    book.attach(DeviceBook(Snapshot(0.0, NODES, SPECS, tuple(running), (), gpu_sharing=SHARING)))
    kind, units = ("mps" if req.mps else "shard"), book.units(req)
    before = _logged(book, lambda: book.note_placement(kind, queue, units))
    job = running[leaver]
    d = book.card_of[job.id]
    book.leave(job)
    after = _logged(book, lambda: book.note_placement(kind, queue, units))
    card = _logged(book, lambda: book.note_card(d, kind, queue, units))
    assert _within(card, after)
    both = None if before is None or card is None else before | card
    assert _within(after, both)


# --- the premise: fits only get easier as victims go (but a share's quota after its own queue's) ---


def _fits_along(state, spec, job, cands, allow_borrow) -> list[tuple[str, bool, bool]]:
    """Each state of a greedy pass that takes every usable candidate off, in order: the victim taken
    off, and whether the preemptor's quota fits, and its placement, then (the copy put back after)."""
    req, q, res = job.request, spec.name, job.request.resource
    steps, victims = [], []
    try:
        for c in cands:
            if c.kind is preemption.Kind.NOMINAL_ONLY and allow_borrow:
                continue
            if c.cross and not preemption.still_reclaimable(state, c, c.res or res):
                continue
            victims.append(c.job.id)
            state.remove(c.job.id)
            mark = state.cards.mark() if state.cards is not None else None
            quota = state.quota_fits(q, req, within_nominal=not allow_borrow)
            placed = state.place(req, job) is not None
            if mark is not None:
                state.cards.forget(mark)
            own = c.job.request.shared and c.job.queue == q
            steps.append(("own share" if own else c.job.id, quota, placed))
    finally:
        for v in reversed(victims):
            state.restore(v)
    return steps


def test_the_premise_holds_over_the_backlogs(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the shortcut rests on, checked directly (a charge rule that makes a victim raise a queue's
    usage would break it; the passes above would then differ only where a backlog shows it): over
    every pass of the backlogs, a placement that fits keeps fitting as victims go, and so does the
    quota, except a share preemptor's after a share of its own queue; and both are seen to change."""
    seen = {"placed": 0, "quota": 0, "own drop": 0}
    real = preemption._greedy_pass

    def checking(state, spec, job, cands, allow_borrow):
        req = job.request
        mixing = state.cards is not None and state.cards.mixing  # the shortcut is off there (see end_first)
        if not (req.exclusive or (state.host_quota and req.host) or req.groups or req.topology or mixing):
            steps = _fits_along(state, spec, job, cands, allow_borrow)
            for (_, q0, p0), (victim, q1, p1) in itertools.pairwise(steps):
                assert p1 or not p0, (job.id, steps)
                if q0 and not q1:
                    assert req.shared and victim == "own share", (job.id, steps)
                    seen["own drop"] += 1
                seen["placed"] += p1 and not p0
                seen["quota"] += q1 and not q0
        return real(state, spec, job, cands, allow_borrow)

    monkeypatch.setattr(preemption, "_greedy_pass", checking)
    for seed in range(150):
        run_cycle(backlog(seed, mixing=False))
    # fits are seen to change; a quota fit dropping after an own share is allowed but not seen since
    # cards held alone are charged whole (the card such a share leaves empty was charged the gpu the
    # preemptor would now open), so no drop is asserted
    assert seen["placed"] > 0 and seen["quota"] > 0, seen
