"""The key under which a cycle shares a failed victim search among jobs of groups (issue 27,
speed): a *plain* job of groups (one device size per rank, no placement constraints) searches
like one gang of its device ranks, whatever its group names and however its ranks are cut."""

from __future__ import annotations

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler.groups import plain_size
from sched_builders import job


def test_plain_jobs_of_groups_share_one_size_whatever_their_cut_and_names() -> None:
    def of(*groups: tuple[str, JobRequest], colocate: tuple[tuple[str, ...], ...] = ()) -> JobRequest:
        return job("j").groups(*groups, colocate=colocate).request

    launcher = ("launcher", JobRequest(workers=1, per_worker=0))
    a = of(launcher, ("g0", JobRequest(workers=2, per_worker=2)), ("g1", JobRequest(workers=3, per_worker=2)))
    b = of(("x", JobRequest(workers=1, per_worker=0)), ("y", JobRequest(workers=5, per_worker=2)))
    assert plain_size(a) == plain_size(b) == (2, 5, 1)
    assert (
        plain_size(of(("p", JobRequest(workers=2, per_worker=1)), ("q", JobRequest(workers=2, per_worker=2)))) is None
    )
    assert plain_size(of(launcher, ("w", JobRequest(workers=2, per_worker=2, topology="nvlink")))) is None
    assert plain_size(of(("a", JobRequest(workers=1)), ("b", JobRequest(workers=1)), colocate=(("a", "b"),))) is None
    assert plain_size(of(("a", JobRequest(workers=1, cpus_per_task=4)), ("b", JobRequest(workers=1)))) is None
    assert plain_size(JobRequest(workers=4, per_worker=2)) is None  # one shape: not a job of groups
