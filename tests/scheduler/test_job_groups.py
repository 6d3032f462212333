"""Jobs of groups in the pure cycle: all or nothing across groups (docs/job-groups.md).

Quota is the sum over groups; placement finds room for every group at once or none; a group
with no device rides with the job's other ranks; ``colocate`` shares a node; a job of groups is
one victim; the pending reason names the group that does not fit; a job that could never fit
names its group at submission."""

from __future__ import annotations

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import ReasonCode, run_cycle
from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.groups import group_sizes, place_groups
from labgang.launcher.scheduler.unschedulable import never_schedulable
from sched_builders import Cluster, job, queue

Q = queue("q").nominal(gpu=16).within_queue("lower-priority").build()
LAUNCHER = ("launcher", JobRequest(workers=1, per_worker=0))


def workers(n: int, per: int, **kw: object) -> tuple[str, JobRequest]:
    return ("worker", JobRequest(workers=n, per_worker=per, **kw))  # type: ignore[arg-type]


def test_launcher_and_workers_start_together_with_global_ranks_in_group_order() -> None:
    c = Cluster().node("n1", gpus=4).node("n2", gpus=4)
    mpi = job("mpi").groups(LAUNCHER, workers(4, 2))
    result = run_cycle(c.snapshot([Q], [mpi]))
    [adm] = result.admitted
    assert [r.rank for r in adm.placement] == [0, 1, 2, 3, 4]
    assert adm.placement[0].devices == ()  # the launcher: no device
    assert [len(r.devices) for r in adm.placement[1:]] == [2, 2, 2, 2]
    assert adm.placement[0].node in {r.node for r in adm.placement[1:]}  # beside its workers
    assert len({u for r in adm.placement for u in r.devices}) == 8


def test_a_job_of_groups_waits_whole_when_one_group_does_not_fit_and_says_which() -> None:
    c = Cluster().node("n1", gpus=8).run(job("busy").queue("q").gang(3, 2).priority(5))
    # 2 GPUs free: the learner (1 x 2) alone would fit, the actors (4 x 1) do not
    rl = job("rl").groups(("learner", JobRequest(workers=1, per_worker=2)), ("actor", JobRequest(workers=4)))
    result = run_cycle(c.snapshot([Q], [rl]))
    assert result.admitted == () and result.preempted == ()
    [p] = result.pending
    assert p.reason.code is ReasonCode.NO_CAPACITY
    assert p.reason.message == (
        "2 gpu free; the job's groups need 6 together (groups learner 1 x 2 + actor 4 x 1 gpu)"
    ), p.reason.message
    # enough devices in all, but the actors' 2 ranks of 3 find no node with room: named
    c = Cluster().node("n1", gpus=4).node("n2", gpus=4).run(job("b1").queue("q").gpus(2).priority(5))
    rl = job("rl").groups(LAUNCHER, ("actor", JobRequest(workers=2, per_worker=3)))
    [p] = run_cycle(c.snapshot([Q], [rl])).pending
    assert p.reason.code is ReasonCode.FRAGMENTED
    assert p.reason.message == ("group actor (2 x 3 gpu): 6 gpu free, largest node has 4; the group needs 2 x 3 gpu"), (
        p.reason.message
    )


def test_quota_is_the_sum_over_groups() -> None:
    six = queue("q").nominal(gpu=6).build()
    c = Cluster().node("n1", gpus=8).run(job("one").queue("q").gpus(1))
    rl = job("rl").groups(("learner", JobRequest(workers=1, per_worker=2)), ("actor", JobRequest(workers=4)))
    result = run_cycle(c.snapshot([six], [rl]))
    assert result.admitted == ()
    [p] = result.pending
    assert p.reason.code is ReasonCode.OVER_QUOTA and "job needs 6" in p.reason.message, p.reason.message
    fits = run_cycle(Cluster().node("n1", gpus=8).snapshot([six], [rl]))
    assert [a.job_id for a in fits.admitted] == ["rl"]
    never = run_cycle(Cluster().node("n1", gpus=8).snapshot([queue("q").nominal(gpu=5).build()], [rl]))
    assert never.pending[0].reason.message == "job needs 6 gpu but queue q can hold at most 5"


def test_colocate_keeps_the_groups_on_one_node_or_waits() -> None:
    c = Cluster().node("n1", gpus=4).node("n2", gpus=8)
    c.run(job("b1").queue("q").gpus(1)).run(job("b2").queue("q").gpus(6))  # free: n1 3, n2 2
    leader = ("leader", JobRequest(workers=1, per_worker=2))
    follower = ("follower", JobRequest(workers=2))
    apart = run_cycle(c.snapshot([Q], [job("lws").groups(leader, follower)]))
    assert [a.job_id for a in apart.admitted] == ["lws"]  # without --colocate: spread over both
    together = job("lws").groups(leader, follower, colocate=(("leader", "follower"),))
    waits = run_cycle(c.snapshot([Q], [together]))
    assert waits.admitted == ()
    assert "groups leader, follower must share one node" in waits.pending[0].reason.message
    roomy = Cluster().node("n1", gpus=4).node("n2", gpus=8).run(job("b1").queue("q").gpus(1))
    [adm] = run_cycle(roomy.snapshot([Q], [together])).admitted
    assert len({r.node for r in adm.placement}) == 1


def test_preemption_takes_a_job_of_groups_as_one_victim() -> None:
    c = Cluster().node("n1", gpus=8)
    c.run(job("het").queue("q").groups(LAUNCHER, workers(4, 2)).priority(0))
    result = run_cycle(c.snapshot([Q], [job("urgent").gpus(4).priority(10)]))
    [pre] = result.preempted
    assert pre.job_id == "urgent" and pre.victims == ("het",)


def test_a_preemptor_of_groups_finds_victims_for_all_its_groups() -> None:
    c = Cluster().node("n1", gpus=8).run(job("low").queue("q").gang(4, 2).priority(0))
    het = job("het").groups(LAUNCHER, workers(2, 2)).priority(10)
    [pre] = run_cycle(c.snapshot([Q], [het])).preempted
    assert pre.job_id == "het" and pre.victims == ("low",)


def test_the_device_book_is_left_as_it_was_found() -> None:
    c = Cluster().node("n1", gpus=4).node("n2", gpus=4)
    book = DeviceBook(c.snapshot([Q], []))
    before = (list(book.owner), list(book.reserved_for), book.index("gpu").total)
    fits = job("a").groups(LAUNCHER, workers(2, 2), ("more", JobRequest(workers=2, per_worker=2))).request
    assert place_groups(book, fits) is not None
    too_big = job("b").groups(LAUNCHER, workers(3, 2), ("more", JobRequest(workers=2, per_worker=2))).request
    assert place_groups(book, too_big) is None
    assert (list(book.owner), list(book.reserved_for), book.index("gpu").total) == before


def test_elastic_groups_start_once_every_group_reaches_its_minimum() -> None:
    req = job("e").groups(LAUNCHER, workers(4, 1, min_workers=2)).request
    sizes = [[g.request.workers for g in r.groups] for r in group_sizes(req)]
    assert sizes == [[1, 4], [1, 3], [1, 2]]
    c = Cluster().node("n1", gpus=4).run(job("busy").queue("q").gang(1, 1))
    [adm] = run_cycle(c.snapshot([Q], [job("e").groups(LAUNCHER, workers(4, 1, min_workers=2))])).admitted
    assert len(adm.placement) == 4  # the launcher plus the 3 workers that fit
    tight = Cluster().node("n1", gpus=4).run(job("busy").queue("q").gang(3, 1).priority(9))
    waits = run_cycle(tight.snapshot([Q], [job("e").groups(LAUNCHER, workers(4, 1, min_workers=2))]))
    assert waits.admitted == ()


def test_a_group_that_could_never_fit_is_named_at_submission() -> None:
    nodes = Cluster().node("n1", gpus=4).node("n2", gpus=4).nodes
    big = job("x").groups(LAUNCHER, workers(1, 8)).request
    found = never_schedulable(big, Q, [Q], nodes)
    assert found is not None
    reason, field = found
    assert reason.code is ReasonCode.UNSCHEDULABLE and reason.message.startswith("group worker:"), reason.message
    assert field == "workers"
    together = job("y").groups(("a", JobRequest(workers=1, per_worker=3)), ("b", JobRequest(workers=1, per_worker=3)))
    assert never_schedulable(together.request, Q, [Q], nodes) is None
    colocated = job("z").groups(
        ("a", JobRequest(workers=1, per_worker=3)), ("b", JobRequest(workers=1, per_worker=3)), colocate=(("a", "b"),)
    )
    found = never_schedulable(colocated.request, Q, [Q], nodes)
    assert found is not None and found[1] == "colocate" and "--colocate" in found[0].message
