"""Per-user limits of a queue (max_gpus_per_user, max_running_jobs_per_user) in the pure cycle.

Table-driven: each case states the queues, what runs, what waits, and the decisions wanted: which
jobs start, which are preempted, and each waiting job's reason code and message with numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pytest
from labgang.launcher.model import SharingPolicy
from labgang.launcher.scheduler import ReasonCode, run_cycle
from sched_builders import Cluster, JobBuilder, job, queue

USER = ReasonCode.USER_LIMIT


@dataclass
class Case:
    """One table row: ``running`` is placed first (in order), ``pending`` is the snapshot's queue."""

    queues: list
    running: list[JobBuilder]
    pending: list[JobBuilder]
    admitted: list[str]
    waiting: dict[str, tuple[ReasonCode, str]] = field(default_factory=dict)
    preempted: list[str] = field(default_factory=list)
    gpus: int = 8
    now: float = 0.0
    fair: bool = False


def vision(**kw):
    q = queue("vision").nominal(gpu=8).user_limits(**kw)
    return q


CASES = {
    "gpu limit holds with numbers; another user starts": Case(
        queues=[vision(gpus=4).build()],
        running=[job("r1").queue("vision").user("lab1").gpus(4)],
        pending=[
            job("a").queue("vision").user("lab1").gpus(1).submitted(1),
            job("b").queue("vision").user("lab2").gpus(2).submitted(2),
        ],
        admitted=["b"],
        waiting={"a": (USER, "user lab1 runs 4 of 4 gpu allowed in queue vision (max_gpus_per_user); job needs 1")},
    ),
    "admissions of one cycle count": Case(
        queues=[vision(gpus=4).build()],
        running=[],
        pending=[job(f"a{i}").queue("vision").user("lab1").gpus(2).submitted(i) for i in range(3)],
        admitted=["a0", "a1"],
        waiting={"a2": (USER, "user lab1 runs 4 of 4 gpu allowed in queue vision (max_gpus_per_user); job needs 2")},
    ),
    "a smaller later job of the same user fits under the limit (best-effort-fifo)": Case(
        queues=[vision(gpus=4).build()],
        running=[job("r1").queue("vision").user("lab1").gpus(2)],
        pending=[
            job("big").queue("vision").user("lab1").gpus(3).submitted(1),
            job("small").queue("vision").user("lab1").gpus(2).submitted(2),
        ],
        admitted=["small"],
        waiting={"big": (USER, "user lab1 runs 2 of 4 gpu allowed in queue vision (max_gpus_per_user); job needs 3")},
    ),
    "running jobs limit": Case(
        queues=[vision(jobs=2).build()],
        running=[job("r1").queue("vision").user("lab1").gpus(1), job("r2").queue("vision").user("lab1").gpus(1)],
        pending=[
            job("a").queue("vision").user("lab1").gpus(1).submitted(1),
            job("b").queue("vision").user("lab2").gpus(1).submitted(2),
        ],
        admitted=["b"],
        waiting={
            "a": (USER, "user lab1 runs 2 of 2 jobs allowed in queue vision (max_running_jobs_per_user); job needs 1")
        },
    ),
    "terminating jobs still count": Case(
        queues=[vision(gpus=2).build()],
        running=[job("r1").queue("vision").user("lab1").gpus(2).terminating()],
        pending=[job("a").queue("vision").user("lab1").gpus(1)],
        admitted=[],
        waiting={"a": (USER, "user lab1 runs 2 of 2 gpu allowed in queue vision (max_gpus_per_user); job needs 1")},
    ),
    "a limit never causes preemption": Case(
        queues=[vision(gpus=4).within_queue("lower-priority").build()],
        gpus=6,
        running=[
            job("r1").queue("vision").user("lab1").gpus(4),
            job("low").queue("vision").user("lab2").gpus(2).priority(-10),
        ],
        pending=[job("hi").queue("vision").user("lab1").gpus(2).priority(100)],
        admitted=[],
        preempted=[],
        waiting={"hi": (USER, "user lab1 runs 4 of 4 gpu allowed in queue vision (max_gpus_per_user); job needs 2")},
    ),
    "under the limit a job preempts as before": Case(
        queues=[vision(gpus=4).within_queue("lower-priority").build()],
        gpus=6,
        running=[
            job("r1").queue("vision").user("lab1").gpus(2),
            job("low").queue("vision").user("lab2").gpus(4).priority(-10),
        ],
        pending=[job("hi").queue("vision").user("lab1").gpus(2).priority(100)],
        admitted=[],
        preempted=["hi"],
        waiting={"hi": (ReasonCode.WAITING_FOR_VICTIMS, "waiting for 1 preempted job(s) to exit: low")},
    ),
    "a waiting preemptor counts towards its user's limit": Case(
        queues=[vision(gpus=4).within_queue("lower-priority").build()],
        gpus=6,
        running=[
            job("r1").queue("vision").user("lab1").gpus(2),
            job("low").queue("vision").user("lab2").gpus(4).priority(-10),
        ],
        pending=[
            job("hi").queue("vision").user("lab1").gpus(2).priority(100).submitted(1),
            job("more").queue("vision").user("lab1").gpus(1).priority(100).submitted(2),
        ],
        admitted=[],
        preempted=["hi"],
        waiting={
            "hi": (ReasonCode.WAITING_FOR_VICTIMS, "waiting for 1 preempted job(s) to exit: low"),
            "more": (USER, "user lab1 runs 4 of 4 gpu allowed in queue vision (max_gpus_per_user); job needs 1"),
        },
    ),
    "strict-fifo: a held head does not block other users; its user's later jobs keep their order": Case(
        queues=[vision(gpus=4).strict().build()],
        running=[job("r1").queue("vision").user("lab1").gpus(3)],
        pending=[
            job("head").queue("vision").user("lab1").gpus(2).submitted(1),
            job("later").queue("vision").user("lab1").gpus(1).submitted(2),
            job("other").queue("vision").user("lab2").gpus(2).submitted(3),
        ],
        admitted=["other"],
        waiting={
            "head": (USER, "user lab1 runs 3 of 4 gpu allowed in queue vision (max_gpus_per_user); job needs 2"),
            "later": (USER, "user lab1's earlier job head in strict-fifo queue vision waits for the user's limit"),
        },
    ),
    "strict-fifo with fair sharing (head by head) alike": Case(
        queues=[vision(gpus=4).strict().cohort("lab").build(), queue("nlp").nominal(gpu=0).cohort("lab").build()],
        fair=True,
        running=[job("r1").queue("vision").user("lab1").gpus(3)],
        pending=[
            job("head").queue("vision").user("lab1").gpus(2).submitted(1),
            job("later").queue("vision").user("lab1").gpus(1).submitted(2),
            job("other").queue("vision").user("lab2").gpus(2).submitted(3),
        ],
        admitted=["other"],
        waiting={
            "head": (USER, "user lab1 runs 3 of 4 gpu allowed in queue vision (max_gpus_per_user); job needs 2"),
            "later": (USER, "user lab1's earlier job head in strict-fifo queue vision waits for the user's limit"),
        },
    ),
    "strict-fifo: a head that does not fit still blocks (the limit changes nothing there)": Case(
        queues=[vision(gpus=8).strict().build()],
        gpus=4,
        running=[job("r1").queue("vision").user("lab1").gpus(3)],
        pending=[
            job("head").queue("vision").user("lab2").gpus(2).submitted(1),
            job("other").queue("vision").user("lab3").gpus(1).submitted(2),
        ],
        admitted=[],
        waiting={
            "head": (ReasonCode.NO_CAPACITY, "1 gpu free; job needs 1 x 2 gpu"),
            "other": (ReasonCode.BLOCKED_BY_HEAD, "strict-fifo queue vision waits for its head head"),
        },
    ),
    "limits are per queue": Case(
        queues=[vision(gpus=2).build(), queue("nlp").nominal(gpu=4).user_limits(gpus=2).build()],
        running=[job("r1").queue("vision").user("lab1").gpus(2)],
        pending=[job("a").queue("nlp").user("lab1").gpus(2)],
        admitted=["a"],
    ),
    "a queue without limits ignores users": Case(
        queues=[queue("vision").nominal(gpu=8).build()],
        running=[job("r1").queue("vision").user("lab1").gpus(6)],
        pending=[job("a").queue("vision").user("lab1").gpus(2)],
        admitted=["a"],
    ),
    "a job bigger than the per-user limit is unschedulable": Case(
        queues=[vision(gpus=4).build()],
        running=[],
        pending=[job("a").queue("vision").user("lab1").gpus(6)],
        admitted=[],
        waiting={
            "a": (
                ReasonCode.UNSCHEDULABLE,
                "job needs 6 gpu but queue vision allows 4 per user (max_gpus_per_user)",
            )
        },
    ),
    "an elastic gang starts at the size its user's limit leaves": Case(
        queues=[vision(gpus=4).build()],
        running=[job("r1").queue("vision").user("lab1").gpus(1)],
        pending=[job("e").queue("vision").user("lab1").gang(4, 1).elastic(2)],
        admitted=["e"],
    ),
    "a starving job over its user's limit reserves nothing": Case(
        queues=[vision(gpus=4).starvation_after(10).build()],
        gpus=6,
        now=100.0,
        running=[job("r1").queue("vision").user("lab1").gpus(4)],
        pending=[
            job("starving").queue("vision").user("lab1").gpus(2).submitted(0).priority(5),
            job("b").queue("vision").user("lab2").gpus(2).submitted(50),
        ],
        admitted=["b"],
        waiting={
            "starving": (USER, "user lab1 runs 4 of 4 gpu allowed in queue vision (max_gpus_per_user); job needs 2")
        },
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_user_limits(name: str) -> None:
    case = CASES[name]
    cluster = Cluster().node("n1", case.gpus)
    for r in case.running:
        cluster.run(r)
    snap = cluster.snapshot(case.queues, case.pending, now=case.now)
    if case.fair:
        snap = replace(snap, sharing=SharingPolicy(fair_sharing=True))
    result = run_cycle(snap)
    assert [a.job_id for a in result.admitted] == case.admitted
    assert [p.job_id for p in result.preempted] == case.preempted
    got = {p.job_id: (p.reason.code, p.reason.message) for p in result.pending}
    assert set(got) == set(case.waiting)
    for job_id, (code, text) in case.waiting.items():
        assert got[job_id][0] is code, (job_id, got[job_id])
        assert got[job_id][1].startswith(text), (job_id, got[job_id][1])


def test_elastic_size_is_capped_by_the_user_limit() -> None:
    cluster = Cluster().node("n1", 8).run(job("r1").queue("vision").user("lab1").gpus(1))
    snap = cluster.snapshot([vision(gpus=4).build()], [job("e").queue("vision").user("lab1").gang(4, 1).elastic(2)])
    (admit,) = run_cycle(snap).admitted
    assert len(admit.placement) == 3  # 1 held + 3 = the limit of 4, not the 4 workers asked for


def test_same_snapshot_same_decisions() -> None:
    case = CASES["strict-fifo: a held head does not block other users; its user's later jobs keep their order"]
    cluster = Cluster().node("n1", 8)
    for r in case.running:
        cluster.run(r)
    snap = cluster.snapshot(case.queues, case.pending)
    assert run_cycle(snap) == run_cycle(snap)
