"""An elastic job of groups that started smaller (issue 27, ``--min-workers`` per group): what it
holds is each group at its started size (the scheduler's view, ``lifecycle/view.py``), read back
from the attempt's stored rank count through the sizes the scheduler tries (``group_sizes``),
which never repeat a total."""

from __future__ import annotations

import itertools

from labgang.launcher.jobgroups import GroupSpec
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus, RankRecord
from labgang.launcher.lifecycle.rules import elastic_sizes, started_group_sizes
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.lifecycle.view import running_job
from labgang.launcher.scheduler.groups import group_sizes

LAUNCHER = GroupSpec("launcher", workers=1, per_worker=0, argv=("mpirun",))


def job_of(groups: tuple[GroupSpec, ...], ranks: int) -> JobRecord:
    spec = JobSpec(
        name="e", user="ann", uid=1000, gid=None, queue="q", priority=0, workers=sum(g.workers for g in groups),
        per_worker=0, resource="gpu", gpu_model=None, nodes=None, argv=["mpirun"], env={}, cwd="/tmp",
        grace_s=5.0, time_limit_s=None, requeue=True, signal=None, groups=groups,
    )  # fmt: skip
    job = JobRecord(id="1", seq=1, spec=spec, status=JobStatus(state=JobState.RUNNING))
    for rank in range(ranks):
        job.ranks[rank] = RankRecord(rank, "n1", ())
    return job


def test_a_job_of_groups_that_started_smaller_holds_each_group_at_its_started_size() -> None:
    workers = GroupSpec("worker", workers=4, per_worker=2, min_workers=2, argv=("w",))
    job = job_of((LAUNCHER, workers), ranks=3)  # the launcher and 2 of the 4 workers
    held = running_job(job, None).request
    assert [g.request.workers for g in held.groups] == [1, 2]
    assert held.total == 4 and held.workers == 3 and not held.elastic  # not the 8 devices it asked for
    assert elastic_sizes(job) == "launcher 1 of 1, worker 2 of 4 (min 2)"
    full = running_job(job_of((LAUNCHER, workers), ranks=5), None).request
    assert full.total == 8 and [g.request.workers for g in full.groups] == [1, 4]


def test_two_elastic_groups_shrink_together_and_each_total_names_one_set_of_sizes() -> None:
    for a, b, low_a, low_b in itertools.product((2, 3, 5), (1, 4, 6), (1, 2), (1, 3)):
        groups = (
            GroupSpec("a", workers=a, per_worker=1, min_workers=min(low_a, a), argv=("a",)),
            GroupSpec("b", workers=b, per_worker=2, min_workers=min(low_b, b), argv=("b",)),
        )
        tried = [[g.request.workers for g in r.groups] for r in group_sizes(job_of(groups, 0).spec.request)]
        totals = [sum(sizes) for sizes in tried]
        assert totals == sorted(set(totals), reverse=True), (groups, tried)  # one total, one set of sizes
        for sizes in tried:
            assert started_group_sizes(job_of(groups, sum(sizes))) == sizes
    workers = GroupSpec("worker", workers=4, per_worker=1, min_workers=2, argv=("w",))
    assert started_group_sizes(job_of((LAUNCHER, workers), ranks=2)) is None  # below every group's floor
