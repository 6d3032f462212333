"""The quota reason of a waiting job of groups names the sum over its groups (issue 27): a
person sees which group asks for what of the queue's quota."""

from __future__ import annotations

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import ReasonCode, run_cycle
from sched_builders import Cluster, job, queue


def test_the_quota_reason_of_a_job_of_groups_names_each_groups_part_of_the_sum() -> None:
    six = queue("q").nominal(gpu=6).build()
    c = Cluster().node("n1", gpus=8).run(job("one").queue("q").gpus(1))
    launcher = ("launcher", JobRequest(workers=1, per_worker=0))
    rl = job("rl").groups(launcher, ("learner", JobRequest(workers=1, per_worker=2)), ("actor", JobRequest(workers=4)))
    [p] = run_cycle(c.snapshot([six], [rl])).pending
    assert p.reason.code is ReasonCode.OVER_QUOTA
    assert p.reason.message == (
        "q uses 1 of 6 gpu; job needs 6 (groups launcher 1 x 0 + learner 1 x 2 + actor 4 x 1 = 0 + 2 + 4)"
    ), p.reason.message
