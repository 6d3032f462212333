"""A starving job of groups reserves devices (issue 27): every device group of it at once, as
on an otherwise empty cluster, so that small jobs stop overtaking it (docs/job-groups.md)."""

from __future__ import annotations

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import ReasonCode, run_cycle
from sched_builders import Cluster, job, queue

LAUNCHER = ("launcher", JobRequest(workers=1, per_worker=0))


def reasons(result):
    return {p.job_id: (p.reason.code, p.reason.message) for p in result.pending}


def test_a_starving_job_of_groups_reserves_devices_small_jobs_cannot_use() -> None:
    q = queue("q").nominal(gpu=4).starvation_after(20.0).build()
    c = Cluster().node("n1", 4)
    c.run(job("s1").queue("q").gpus(1))
    c.run(job("s2").queue("q").gpus(1))
    big = job("big").queue("q").groups(LAUNCHER, ("worker", JobRequest(workers=2, per_worker=2))).submitted(0.0)
    pending = [big, job("small").queue("q").gpus(1).submitted(25.0)]
    not_yet = run_cycle(c.snapshot([q], pending, now=19.0))
    assert [a.job_id for a in not_yet.admitted] == ["small"]
    starving = run_cycle(c.snapshot([q], pending, now=20.0))
    assert starving.admitted == ()
    code, text = reasons(starving)["small"]
    assert code is ReasonCode.RESERVED_FOR_STARVING and "big" in text, text


def test_a_starving_colocated_set_reserves_room_on_one_node() -> None:
    q = queue("q").nominal(gpu=8).starvation_after(20.0).build()
    c = Cluster().node("n1", 4).node("n2", 4)
    c.run(job("s1").queue("q").gpus(3))
    c.run(job("s2").queue("q").gpus(3))  # one on each node: 1 free on each; big needs 4 on one node
    pair = (("a", JobRequest(workers=1, per_worker=2)), ("b", JobRequest(workers=1, per_worker=2)))
    big = job("big").queue("q").groups(*pair, colocate=(("a", "b"),)).submitted(0.0)
    twos = [job(f"t{i}").queue("q").gpus(1).submitted(25.0 + i) for i in range(2)]
    # a and b reserve n1's 4 devices together: one 1-GPU job starts on n2, the other waits for big
    assert len(run_cycle(c.snapshot([q], [big, *twos], now=19.0)).admitted) == 2  # not starving yet
    result = run_cycle(c.snapshot([q], [big, *twos], now=20.0))
    [t0] = result.admitted
    assert t0.job_id == "t0" and {r.node for r in t0.placement} == {"n2"}
    code, text = reasons(result)["t1"]
    assert code is ReasonCode.RESERVED_FOR_STARVING and "big" in text, text


def test_a_starving_job_of_groups_that_cannot_fit_beside_earlier_reservations_reserves_nothing() -> None:
    q = queue("q").nominal(gpu=8).starvation_after(20.0).build()
    c = Cluster().node("n1", 4)
    c.run(job("s1").queue("q").gpus(1))
    first = job("first").queue("q").gpus(4).priority(5).submitted(0.0)  # reserves the whole node
    groups = job("groups").queue("q").groups(LAUNCHER, ("worker", JobRequest(workers=1, per_worker=2)))
    small = job("small").queue("q").gpus(1).submitted(25.0)
    result = run_cycle(c.snapshot([q], [first, groups.submitted(1.0), small], now=20.0))
    assert result.admitted == ()
    code, text = reasons(result)["small"]
    assert code is ReasonCode.RESERVED_FOR_STARVING and "first" in text and "groups" not in text, text
