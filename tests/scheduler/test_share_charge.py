"""What a queue's shares are charged in quota (``shares.ShareBook``): every card its shares hold
alone counts a whole gpu, its units on cards mixed with other queues' (``share_with``) are summed
and rounded up; what a share's placement adds (``charge``), what taking one off frees (``leave``)
and puts back (``back``), the quota book and the coordinator's queue views (``quota_usage``) alike.
A random walk of admissions, removals and restores is checked against the charge counted afresh."""

from __future__ import annotations

import random
from math import ceil

import pytest
from labgang.launcher.model import GPU, GpuSharing, JobRequest, QueueSpec
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.shares import ShareBook, quota_usage
from labgang.launcher.scheduler.snapshot import Device, Node, PendingJob, RankPlacement, RunningJob, Snapshot
from labgang.launcher.scheduler.state import CycleState
from share_backlogs import backlog

SHARING = GpuSharing(shards_per_gpu=4, mps=True)
NODE = Node("n1", tuple(Device(f"GPU-n1-{i}", "n1", GPU) for i in range(8)))
QUEUES = (
    QueueSpec("x", nominal={GPU: 2}, share_gpus="queue", cohort="lab"),
    QueueSpec("y", nominal={GPU: 6}, cohort="lab"),
    QueueSpec("a", nominal={GPU: 4}, share_gpus="queue", share_with=("b",), cohort="lab"),
    QueueSpec("b", nominal={GPU: 4}, share_gpus="queue", share_with=("a",), cohort="lab"),
)


def share(job_id: str, queue: str, card: int, user: str = "u", shards: int = 0, mps: int = 0) -> RunningJob:
    req = JobRequest(shards=shards, mps=mps)
    return RunningJob(job_id, queue, req, 0, 0.0, 0.0, (RankPlacement(0, "n1", (f"GPU-n1-{card}",)),), user=user)


def state_of(*running: RunningJob) -> CycleState:
    return CycleState(Snapshot(1.0, (NODE,), QUEUES, tuple(running), (), gpu_sharing=SHARING))


def pending(job_id: str, queue: str, user: str = "u", shards: int = 0, mps: int = 0) -> PendingJob:
    return PendingJob(job_id, queue, JobRequest(shards=shards, mps=mps), 0, 1.0, 1, 1.0, user=user)


def test_three_users_mps_shares_are_charged_the_three_cards_they_hold_alone():
    # one MPS server per user: three users' --mps 10 jobs hold three cards, 0.3 gpu used
    jobs = [share(f"j{i}", "x", i, user=u, mps=10) for i, u in enumerate(("ann", "bob", "cat"))]
    state = state_of(*jobs)
    assert state.cards is not None
    assert state.cards.charged("x") == 3  # was ceil(0.3) = 1
    assert state.quota.usage("x", GPU) == 3
    assert quota_usage(SHARING, jobs) == {("x", GPU): 3}  # the coordinator's queue views say the same


def test_packed_cards_cost_what_their_sum_rounds_to():
    four = [share(f"j{i}", "x", 0, shards=1) for i in range(4)]
    assert state_of(*four).quota.usage("x", GPU) == 1
    full = [share(f"j{i}", "x", i // 4, shards=1) for i in range(32)]
    assert state_of(*full).quota.usage("x", GPU) == 8
    one = [share("j", "x", 0, shards=1)]  # one shard on a card of its own: 1 gpu, as before
    assert state_of(*one).quota.usage("x", GPU) == 1


def test_shares_on_mixed_cards_are_summed_and_rounded_up():
    # a and b name each other: cards 0 and 1 hold a shard of each; card 2 is a's alone
    jobs = [
        share("a0", "a", 0, shards=1),
        share("b0", "b", 0, shards=1),
        share("a1", "a", 1, shards=1),
        share("b1", "b", 1, shards=2),
        share("a2", "a", 2, shards=1),
    ]
    state = state_of(*jobs)
    assert state.cards is not None
    assert (state.cards.alone.get("a", 0), state.cards.mixed["a"]) == (1, 2 * state.cards.denom // 4)
    assert state.quota.usage("a", GPU) == 1 + 1  # card 2 held alone, ceil(2/4) on the mixed ones
    assert state.quota.usage("b", GPU) == 1  # ceil(3/4)
    assert quota_usage(SHARING, jobs) == {("a", GPU): 2, ("b", GPU): 1}


def test_a_share_is_charged_what_its_placement_adds():
    state = state_of(share("ann1", "x", 0, user="ann", mps=10))
    assert state.cards is not None
    # ann's MPS server card has room: joining a card x holds alone adds nothing
    assert state.charge("x", JobRequest(mps=10), pending("p1", "x", user="ann", mps=10)) == 0
    # bob needs a card of his own (one MPS server per user): a whole card
    assert state.charge("x", JobRequest(mps=10), pending("p2", "x", user="bob", mps=10)) == 1
    # at its nominal 2 (x holds 2 cards), ann's share still fits within nominal, bob's would borrow
    state.assume("bob1", "x", JobRequest(mps=10), [(0, [1])], "bob")
    assert state.quota.usage("x", GPU) == 2
    ann = pending("p3", "x", user="ann", mps=10)
    assert state.quota_fits("x", ann.request, within_nominal=True, job=ann)
    cat = pending("p4", "x", user="cat", mps=10)
    assert not state.quota_fits("x", cat.request, within_nominal=True, job=cat)
    assert state.quota_fits("x", cat.request, job=cat)  # by borrowing from y's unused nominal


def test_joining_another_queues_card_can_lower_its_charge():
    # b: cards 0 and 1 alone (a shard each), card 2 mixed with a: 2 + ceil(1/4) = 3
    state = state_of(
        share("b0", "b", 0, shards=1),
        share("b1", "b", 1, shards=1),
        share("b2", "b", 2, shards=1),
        share("a2", "a", 2, shards=1),
    )
    assert state.cards is not None
    assert (state.quota.usage("a", GPU), state.quota.usage("b", GPU)) == (1, 3)
    # a's shard joins card 0 (best fit: the least room; ties in device order): card 0 is mixed now,
    # b's charge 1 + ceil(2/4) = 2, a's ceil(2/4) = 1 as before
    got = state.cards.take("a0", "a", "u", JobRequest(shards=1), 0)
    assert got == [("b", -1)]
    assert (state.cards.charged("a"), state.cards.charged("b")) == (1, 2)


def test_leave_frees_a_gpu_only_for_the_last_sharer_of_a_card_held_alone_and_back_undoes_it():
    jobs = [share("x0", "x", 0, shards=1), share("x1", "x", 0, shards=1), share("x2", "x", 1, shards=1)]
    state = state_of(*jobs)
    assert state.quota.usage("x", GPU) == 2
    assert state.remove("x0") is False  # x1 still holds card 0 alone: nothing changes a whole-device job
    assert (state.quota.usage("x", GPU), state.last_removal) == (2, (False, False))
    assert state.remove("x1") is True  # card 0's last sharer: the card and a gpu of quota are free
    assert (state.quota.usage("x", GPU), state.last_removal) == (1, (True, True))
    state.restore("x1")
    state.restore("x0")
    assert state.quota.usage("x", GPU) == 2
    assert state.cards is not None and state.cards.charged("x") == 2


def test_leaving_a_mixed_card_can_leave_it_to_the_other_queue_alone():
    # card 0: a and b; card 1: a and b; a's shards sum to 2/4: 1 gpu; b's the same
    jobs = [
        share("a0", "a", 0, shards=1),
        share("b0", "b", 0, shards=1),
        share("a1", "a", 1, shards=1),
        share("b1", "b", 1, shards=1),
    ]
    state = state_of(*jobs)
    assert (state.quota.usage("a", GPU), state.quota.usage("b", GPU)) == (1, 1)
    # b0 taken off: card 0 is a's alone now (1) and a's other shard is still mixed (ceil(1/4) = 1)
    assert state.remove("b0") is True
    assert (state.quota.usage("a", GPU), state.quota.usage("b", GPU)) == (2, 1)
    assert state.last_removal == (True, False)
    state.restore("b0")
    assert (state.quota.usage("a", GPU), state.quota.usage("b", GPU)) == (1, 1)


def test_the_quota_note_says_what_the_shares_are_charged_and_why():
    jobs = [share(f"j{i}", "x", i, user=u, mps=10) for i, u in enumerate(("ann", "bob", "cat"))]
    state = state_of(*jobs)
    assert state.cards is not None
    note = state.cards.quota_note("x", JobRequest(mps=10))
    assert note == (
        "the job is mps 10% of a gpu (1/10 gpu); x's shares are charged 3 gpu: 3 cards held alone by x's "
        "shares: 3 gpu (they use 3/10 gpu; a card a queue's shares hold alone counts whole: no other queue "
        "can use the rest of it)"
    )
    mixed = state_of(share("a0", "a", 0, shards=1), share("b0", "b", 0, shards=1), share("a1", "a", 1, shards=2))
    assert mixed.cards is not None
    assert "a's shares are charged 2 gpu: 1 card held alone by a's shares: 1 gpu, 1/4 gpu on cards shared " in (
        mixed.cards.quota_note("a", JobRequest(shards=1))
    )


def fresh_charges(state: CycleState) -> dict[str, int]:
    """Each queue's share charge counted afresh from the cards' sharers (the rule, written plainly)."""
    cards = state.cards
    assert cards is not None
    on_card: dict[int, dict[str, int]] = {}
    for d, sharers in cards.cards.items():
        for s in sharers:
            on_card.setdefault(d, {})
            on_card[d][s.queue] = on_card[d].get(s.queue, 0) + s.units
    alone: dict[str, int] = {}
    mixed: dict[str, int] = {}
    for comp in on_card.values():
        if len(comp) == 1:
            (q,) = comp
            alone[q] = alone.get(q, 0) + 1
        else:
            for q, u in comp.items():
                mixed[q] = mixed.get(q, 0) + u
    return {q: alone.get(q, 0) + ceil(mixed.get(q, 0) / cards.denom) for q in ("x", "a", "b")}


@pytest.mark.parametrize("seed", range(40))
def test_charges_kept_along_admissions_removals_and_restores_equal_the_rule(seed: int):
    """A random walk: shares admitted where the cycle would place them (after a charge check that
    must equal what the admission adds), running shares taken off and put back; after every step
    each queue's charge and quota usage equal the charge counted afresh."""
    rng = random.Random(seed)
    running: list[RunningJob] = []
    for i in range(rng.randint(0, 10)):
        q = rng.choice("xab")
        running.append(share(f"r{i}", q, rng.randrange(8) if q != "x" else i % 8, shards=rng.randint(1, 2)))
    # a card holds one queue's or both a and b's shards, within 4 shards a card
    per_card: dict[str, int] = {}
    ok: list[RunningJob] = []
    for j in running:
        c = j.placement[0].devices[0]
        queues = {o.queue for o in ok if o.placement[0].devices[0] == c}
        if per_card.get(c, 0) + j.request.shards <= 4 and (
            not queues or queues | {j.queue} <= {"a", "b"} or queues == {j.queue}
        ):
            per_card[c] = per_card.get(c, 0) + j.request.shards
            ok.append(j)
    state = state_of(*ok)
    cards = state.cards
    assert cards is not None
    base = {q: state.quota.usage(q, GPU) for q in "xyab"}

    def check() -> None:
        fresh = fresh_charges(state)
        for q in ("x", "a", "b"):
            assert cards.charged(q) == fresh[q]

    check()
    assert {q: base[q] for q in "xab"} == fresh_charges(state)
    removed: list[str] = []
    for step in range(30):
        move = rng.random()
        if move < 0.4 and not removed:  # the cycle admits nothing while it has victims off on paper
            q = rng.choice("xab")
            user = rng.choice(("ann", "bob"))
            job = pending(f"p{step}", q, user=user, shards=rng.randint(1, 3))
            raw = state.place(job.request, job)
            want = state.charge(q, job.request, job)
            before = state.quota.usage(q, GPU)
            if raw is not None:
                state.assume(job.id, q, job.request, raw, user)
                assert state.quota.usage(q, GPU) - before == want
        elif move < 0.7:
            left = [j.id for j in ok if j.id not in removed]
            if left:
                v = rng.choice(left)
                state.remove(v)
                removed.append(v)
        elif removed:
            state.restore(removed.pop())
        check()
        fresh = fresh_charges(state)
        for q in ("x", "a", "b"):
            assert state.quota.usage(q, GPU) == fresh[q]


@pytest.mark.parametrize("seed", range(100))
def test_remembering_a_share_placement_changes_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch):
    """A share's quota check and its placement ask ``ShareBook.place`` alike; its remembered answer
    (and the trust reads it logs again) changes no decision: checked against the cycle that places
    every time, over random backlogs of shares of many users (``share_backlogs.backlog``)."""
    snap = backlog(seed)
    fast = run_cycle(snap)
    monkeypatch.setattr(ShareBook, "remember_placement", False)
    assert run_cycle(snap) == fast


def test_a_share_placement_is_remembered(monkeypatch: pytest.MonkeyPatch):
    """Not vacuous: over the same backlogs, many placements are answered from the remembered one
    (a share's quota check, then its placement)."""
    asked = computed = 0
    place, now = ShareBook.place, ShareBook._place_now

    def counting_place(self: ShareBook, *args):
        nonlocal asked
        asked += 1
        return place(self, *args)

    def counting_now(self: ShareBook, *args):
        nonlocal computed
        computed += 1
        return now(self, *args)

    monkeypatch.setattr(ShareBook, "place", counting_place)
    monkeypatch.setattr(ShareBook, "_place_now", counting_now)
    for seed in range(20):
        run_cycle(backlog(seed))
    assert 0 < computed < asked * 3 // 4


def test_a_share_joining_another_queues_card_held_alone_counts_the_room_that_frees_in_the_cohort():
    """b holds card 0 alone (1 shard) and shares card 1 with a (b 1 shard, a 2): b is charged
    1 + ceil(1/4) = 2, a ceil(2/4) = 1, their cohort (nominal 2 + 1) is full. a's 3-shard share fits
    only card 0 (best fit): a's charge grows by 1 (ceil(5/4) = 2) and b's falls by 1 (card 0 mixed:
    ceil(2/4) = 1), so the cohort stays at 3 and the share is admitted."""
    node = Node("n1", tuple(Device(f"GPU-n1-{i}", "n1", GPU) for i in range(2)))
    queues = (
        QueueSpec("a", nominal={GPU: 2}, share_gpus="queue", share_with=("b",), cohort="lab"),
        QueueSpec("b", nominal={GPU: 1}, share_gpus="queue", share_with=("a",), cohort="lab"),
    )
    running = (share("b0", "b", 0, shards=1), share("b1", "b", 1, shards=1), share("a1", "a", 1, shards=2))
    job = pending("a2", "a", shards=3)
    snap = Snapshot(1.0, (node,), queues, running, (job,), gpu_sharing=SHARING)
    state = CycleState(snap)
    assert (state.quota.usage("a", GPU), state.quota.usage("b", GPU), state.quota.pool_usage("lab", GPU)) == (1, 2, 3)
    assert state.charge("a", job.request, job) == 1
    assert state.quota_fits("a", job.request, job=job)
    assert (state.quota.usage("b", GPU), state.quota.pool_usage("lab", GPU)) == (2, 3)  # put back after the check
    result = run_cycle(snap)
    assert [(a.job_id, a.placement[0].devices) for a in result.admitted] == [("a2", ("GPU-n1-0",))]
