"""Victim selection, table-driven: who is evicted (whole gangs, minimal set) and who is not."""

from dataclasses import dataclass, field
from typing import Any

import pytest
from labgang.launcher.scheduler import run_cycle
from sched_builders import Cluster, job, queue

STANDALONE = queue("solo").nominal(gpu=6).within_queue("lower-priority").build()
C1 = (
    queue("c1")
    .cohort("lab")
    .nominal(gpu=6)
    .borrowing_limit(gpu=6)
    .within_queue("lower-priority")
    .reclaim("lower-priority")
    .build()
)
C2 = queue("c2").cohort("lab").nominal(gpu=6).borrowing_limit(gpu=6).reclaim("any").build()
LEND1 = (
    queue("lend1")
    .cohort("lend")
    .nominal(gpu=6)
    .lending_limit(gpu=4)
    .within_queue("lower-priority")
    .reclaim("lower-priority")
    .build()
)
LEND2 = (
    queue("lend2")
    .cohort("lend")
    .nominal(gpu=6)
    .lending_limit(gpu=2)
    .within_queue("lower-priority")
    .reclaim("lower-priority")
    .build()
)
BWC: dict[str, Any] = dict(policy="lower-priority", threshold=0)
A_STD = (
    queue("a_std")
    .cohort("s")
    .nominal(gpu=1)
    .borrowing_limit(gpu=12)
    .reclaim("lower-priority")
    .borrow_within_cohort(**BWC)
    .build()
)
B_STD = (
    queue("b_std")
    .cohort("s")
    .nominal(gpu=1)
    .borrowing_limit(gpu=12)
    .within_queue("lower-priority")
    .reclaim("any")
    .borrow_within_cohort(**BWC)
    .build()
)
A_BE = (
    queue("a_be")
    .cohort("s")
    .nominal(gpu=1)
    .borrowing_limit(gpu=12)
    .reclaim("lower-priority")
    .borrow_within_cohort(**BWC)
    .build()
)
SHARED = queue("shared").cohort("s").nominal(gpu=10).build()


@dataclass
class Case:
    queues: list
    gpus: int
    running: list  # (id, queue, gpus, priority)
    incoming: tuple  # (queue, gpus, priority)
    victims: set = field(default_factory=set)


CASES = {
    "lowest-priority-first": Case(
        [STANDALONE],
        6,
        [("low", "solo", 2, -1), ("mid", "solo", 2, 0), ("high", "solo", 2, 1)],
        ("solo", 2, 1),
        {"low"},
    ),
    "several-victims-when-one-is-not-enough": Case(
        [STANDALONE],
        6,
        [("low", "solo", 2, -1), ("mid", "solo", 2, 0), ("high", "solo", 2, 1)],
        ("solo", 3, 1),
        {"low", "mid"},
    ),
    "never-equal-or-higher-priority": Case(
        [STANDALONE], 6, [("a", "solo", 3, -1), ("b", "solo", 3, 0)], ("solo", 1, -1), set()
    ),
    "nothing-when-victims-cannot-make-room": Case(
        [STANDALONE], 6, [("low", "solo", 3, -1), ("mid", "solo", 3, 0)], ("solo", 4, 0), set()
    ),
    "free-room-counts-so-one-small-victim-suffices": Case(
        [STANDALONE],
        6,
        [("low", "solo", 1, -1), ("mid", "solo", 1, 0), ("high", "solo", 3, 1)],
        ("solo", 2, 1),
        {"low"},
    ),
    "minimal-set-puts-back-unneeded-victim": Case(
        [STANDALONE],
        6,
        [("low", "solo", 1, -1), ("mid", "solo", 2, 0), ("high", "solo", 3, 1)],
        ("solo", 2, 1),
        {"mid"},
    ),
    "reclaim-from-borrower-before-own-queue": Case(
        [C1, C2],
        12,
        [("c1-low", "c1", 3, -1), ("c2-mid", "c2", 3, 0), ("c2-high", "c2", 6, 1)],
        ("c1", 3, 1),
        {"c2-mid"},
    ),
    "no-reclaim-when-preemptor-would-still-borrow": Case(
        [C1, C2],
        12,
        [("c1-high", "c1", 4, 1), ("c2-low-1", "c2", 4, -1), ("c2-low-2", "c2", 4, -1)],
        ("c1", 4, 1),
        set(),
    ),
    "no-reclaim-from-queue-within-nominal": Case(
        [C1, C2], 12, [("c1-high", "c1", 4, 1), ("c2-low-1", "c2", 4, -1)], ("c1", 6, 1), set()
    ),
    "lower-priority-reclaim-spares-equal-priority": Case(
        [C1, C2], 12, [("c1", "c1", 2, 0), ("c2-1", "c2", 4, 0), ("c2-2", "c2", 4, 0)], ("c1", 4, 0), set()
    ),
    "reclaim-any-ignores-priority": Case(
        [C1, C2], 12, [("c1-1", "c1", 4, 0), ("c1-2", "c1", 4, 1), ("c2", "c2", 2, 0)], ("c2", 4, 0), {"c1-1"}
    ),
    "own-queue-and-borrower-when-must-end-within-nominal": Case(
        [C1, C2],
        12,
        [("c1-low", "c1", 3, -1), ("c1-mid", "c1", 2, 0), ("c2-low", "c2", 3, -1), ("c2-mid", "c2", 4, 0)],
        ("c1", 4, 0),
        {"c1-low", "c2-low"},
    ),
    "reclaim-from-lender-above-nominal": Case(
        [LEND1, LEND2],
        12,
        [("l1-low", "lend1", 3, -1), ("l2-mid", "lend2", 3, 0), ("l2-high", "lend2", 4, 1)],
        ("lend1", 3, 1),
        {"l2-mid"},
    ),
    "request-above-lending-limit-maximum-never-preempts": Case(
        [LEND1, LEND2], 12, [("l2-low", "lend2", 10, -1)], ("lend1", 9, 0), set()
    ),
    "borrow-within-cohort-below-threshold": Case(
        [A_STD, B_STD, A_BE, SHARED],
        13,
        [("a_be_low", "a_be", 10, -1), ("b_be_low", "a_be", 1, -1)],
        ("a_std", 10, 0),
        {"a_be_low"},
    ),
    "borrow-within-cohort-not-above-threshold": Case(
        [A_STD, B_STD, A_BE, SHARED], 13, [("b_std", "b_std", 10, 1)], ("a_std", 10, 2), set()
    ),
    "above-threshold-ok-when-ending-within-nominal": Case(
        [A_STD, B_STD, A_BE, SHARED], 13, [("b_std", "b_std", 13, 1)], ("a_std", 1, 2), {"b_std"}
    ),
    "own-queue-and-below-threshold-borrower": Case(
        [A_STD, B_STD, A_BE, SHARED],
        13,
        [("b-high", "b_std", 10, 2), ("b-mid", "b_std", 1, 1), ("a-low", "a_be", 1, -1), ("a-lower", "a_be", 1, -2)],
        ("b_std", 2, 2),
        {"b-mid", "a-lower"},
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_victims(case: Case):
    c = Cluster().node("n1", case.gpus)
    for i, (jid, q, gpus, prio) in enumerate(case.running):
        c.run(job(jid).queue(q).gpus(gpus).priority(prio).submitted(-100.0 + i))
    q, gpus, prio = case.incoming
    result = run_cycle(c.snapshot(case.queues, [job("in").queue(q).gpus(gpus).priority(prio)]))
    assert not result.admitted
    got = set(result.preempted[0].victims) if result.preempted else set()
    assert got == case.victims
    if case.victims:
        assert result.pending[0].reason.code.value == "waiting_for_victims"


def test_newer_equal_priority_only_with_that_policy():
    q = queue("q").nominal(gpu=4).within_queue("lower-or-newer-equal-priority").build()
    c = Cluster().node("n1", 4)
    c.run(job("older").queue("q").gpus(2).submitted(-20.0))
    c.run(job("newer").queue("q").gpus(2).submitted(-5.0))
    result = run_cycle(c.snapshot([q], [job("in").queue("q").gpus(2).submitted(-10.0)]))
    assert result.preempted[0].victims == ("newer",)
    # a job newer than both evicts nobody
    result = run_cycle(c.snapshot([q], [job("late").queue("q").gpus(2).submitted(0.0)]))
    assert result.preempted == ()


def test_victims_must_make_room_for_placement_not_only_quota():
    # quota 4 on two 2-GPU nodes: a 1x4 job can never be placed, so it is unschedulable, no eviction
    q = queue("q").nominal(gpu=4).within_queue("lower-priority").build()
    c = Cluster().node("n1", 2).node("n2", 2)
    c.run(job("low").queue("q").gpus(1).priority(-1))
    result = run_cycle(c.snapshot([q], [job("big").queue("q").gpus(4).priority(5)]))
    assert result.preempted == ()
    assert result.pending[0].reason.code.value == "unschedulable"


def test_victim_on_the_wrong_node_is_not_taken():
    # n1: low (2 GPUs, prio -1); n2: mid (1 GPU, prio 0) leaving 1 free; a 1x2 job (prio 5)
    # Removing only `low` makes room on n1; taking `mid` alone would not -> exactly {low}
    q = queue("q").nominal(gpu=6).within_queue("lower-priority").build()
    c = Cluster().node("n1", 2).node("n2", 2)
    c.run(job("low").queue("q").gpus(2).priority(-1))
    c.run(job("mid").queue("q").gpus(1).priority(0))
    result = run_cycle(c.snapshot([q], [job("x").queue("q").gpus(2).priority(5)]))
    assert result.preempted[0].victims == ("low",)


def test_gang_victims_are_whole_and_minimal():
    q = queue("q").nominal(gpu=4).within_queue("lower-priority").build()
    c = Cluster().node("n1", 1).node("n2", 1).node("n3", 1).node("n4", 1)
    c.run(job("a").queue("q").gang(2, 1).priority(10).submitted(-20.0))
    c.run(job("b").queue("q").gang(2, 1).priority(10).submitted(-10.0))
    result = run_cycle(c.snapshot([q], [job("p").queue("q").gang(2, 1).priority(100)]))
    assert result.preempted[0].victims == ("b",)  # most recently admitted of equal priority


def test_a_job_already_terminating_is_the_first_victim():
    q = queue("q").nominal(gpu=4).within_queue("lower-priority").build()
    c = Cluster().node("n1", 4)
    c.run(job("leaving").queue("q").gpus(2).priority(-1).terminating())
    c.run(job("other").queue("q").gpus(2).priority(-1).submitted(1.0))
    result = run_cycle(c.snapshot([q], [job("x").queue("q").gpus(2).priority(5)]))
    assert [p.victims for p in result.preempted] == [("leaving",)]  # nobody else is evicted


def test_victims_a_waiting_preemptor_counts_on_are_not_shared():
    q = queue("q").nominal(gpu=4).within_queue("lower-priority").build()
    c = Cluster().node("n1", 4)
    c.run(job("leaving").queue("q").gpus(2).priority(-1).terminating())
    c.run(job("other").queue("q").gpus(1).priority(-1).submitted(1.0))
    c.run(job("small").queue("q").gpus(1).priority(-1).submitted(2.0))
    result = run_cycle(
        c.snapshot(
            [q],
            [job("first").queue("q").gpus(2).priority(9).nominated("leaving"), job("x").queue("q").gpus(1).priority(5)],
        )
    )
    # `first` keeps `leaving`, and its usage counts on top of the victims' for the rest of the
    # cycle (as in Kueue), so x finds no room this cycle and evicts nobody
    assert result.preempted == ()
    assert {p.job_id: p.reason.code.value for p in result.pending} == {
        "first": "waiting_for_victims",
        "x": "over_quota",
    }


def test_the_preemption_reason_names_jobs_as_jobs():
    q = queue("q").nominal(gpu=2).within_queue("lower-priority").build()
    c = Cluster().node("n1", 2)
    c.run(job("7").queue("q").gpus(2).priority(-1))
    result = run_cycle(c.snapshot([q], [job("9").queue("q").gpus(2).priority(5)]))
    assert result.preempted[0].victims == ("7",)
    assert result.preempted[0].reason.startswith("job 9 (queue q, priority 5) needs ")
    assert result.preempted[0].reason.endswith("; stopping job 7 (queue q, priority -1)")


def test_reclaim_from_jobs_admitted_at_one_instant_takes_the_last_admitted():
    """§A3.4 "most recently admitted first" among twelve equal jobs admitted at t=0, six of them
    on the other queue's lent quota: six one-GPU preemptors of that queue, decided in one cycle,
    evict exactly the last six admitted, one each (tests/scenarios/cases/victim-order-same-instant)."""
    a = queue("a").cohort("lab").nominal(gpu=6).reclaim("any").build()
    b = queue("b").cohort("lab").nominal(gpu=6).reclaim("any").build()
    c = Cluster().node("n1", 12)
    for i in range(1, 13):  # admitted in this order (seq), all at t=0: ids sort the same way
        c.run(job(f"a{i:02d}").queue("a").gpus(1).submitted(0.0).admitted(0.0))
    pending = [job(f"b{i}").queue("b").gpus(1).submitted(10.0) for i in range(1, 7)]
    result = run_cycle(c.snapshot([a, b], pending, now=10.0))
    assert [(p.job_id, p.victims) for p in result.preempted] == [
        ("b1", ("a12",)),
        ("b2", ("a11",)),
        ("b3", ("a10",)),
        ("b4", ("a09",)),
        ("b5", ("a08",)),
        ("b6", ("a07",)),
    ]
    assert {p.job_id: p.reason.code.value for p in result.pending} == {
        f"b{i}": "waiting_for_victims" for i in range(1, 7)
    }


def test_a_queue_never_reclaims_back_on_the_strength_of_its_own_jobs_evicted_this_cycle():
    """A victim another queue's preemptor claimed this cycle still counts in its own queue until
    it is gone: that queue does not look below its nominal quota and reclaim back, in the same
    cycle, from the queue that just reclaimed from it (with grace 0 the two would evict each
    other's jobs in turn at one instant)."""
    a = queue("a").cohort("lab").nominal(gpu=3).reclaim("any").borrow_within_cohort("lower-priority").build()
    b = queue("b").cohort("lab").nominal(gpu=3).reclaim("lower-priority").borrow_within_cohort("lower-priority")
    c = Cluster().node("n1", 6)
    c.run(job("b1").queue("b").gpus(1).submitted(0.0).admitted(1.0))
    c.run(job("a2").queue("a").gpus(1).priority(5).submitted(0.0).admitted(2.0))
    c.run(job("a3").queue("a").gpus(2).submitted(0.0).admitted(3.0))  # a borrows one GPU
    c.run(job("a4").queue("a").gpus(1).priority(5).submitted(0.0).admitted(4.0))
    c.run(job("b5").queue("b").gpus(1).submitted(0.0).admitted(5.0))
    pending = [job("pb").queue("b").gpus(2).priority(5), job("pa").queue("a").gpus(1)]
    result = run_cycle(c.snapshot([a, b.build()], pending, now=10.0))
    # pb takes a3 (lower priority, a borrowing); a still counts a3 until it is gone, so a is at
    # its nominal with pa and may not reclaim b5 from b
    assert [(p.job_id, p.victims) for p in result.preempted] == [("pb", ("a3",))]
