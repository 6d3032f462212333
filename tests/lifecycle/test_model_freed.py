"""A lifecycle model that is dropped is freed at once, with its jobs, by reference counting: none
of its rule objects holds the model (a job leaves through ``DependencyRules.retire``), so it waits
for no pass of the cyclic collector (each ``labgang simulate`` run and each replay drops one;
bench/dependencies.py drops four of up to 10,000 jobs)."""

from __future__ import annotations

import gc
import weakref

from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState, RankPhase
from labgang.launcher.scheduler.decisions import Admit, CycleResult
from labgang.launcher.scheduler.snapshot import RankPlacement

POLICY = LifecyclePolicy(
    startup_timeout_s=30, requeue_backoff_s=4, requeue_backoff_max_s=60, max_start_failures=3, default_grace_s=5
)


def job(job_id: str, dependency: str | None = None) -> JobRecord:
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="default", priority=0, workers=1, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0, time_limit_s=None,
        requeue=True, signal=None, dependency=dependency,
    )  # fmt: skip
    return JobRecord(id=job_id, seq=int(job_id), spec=spec, status=JobStatus(submit_time=0.0))


def used_model() -> tuple[weakref.ref[Lifecycle], list[weakref.ref[JobRecord]]]:
    """A model whose jobs left through each rule (a gang that ended, a dependency that can never
    hold, a cancel) or are still in it (held, pending); weak references to it and its jobs."""
    model = Lifecycle(POLICY)
    jobs = [job("1"), job("2", "afterok:1"), job("3", "afternotok:1"), job("4"), job("5")]
    for record in jobs:
        model.apply(ev.JobSubmitted(1.0, record))
    place = (RankPlacement(0, "n1", ("GPU-1",)),)
    model.apply(ev.CycleDecided(2.0, CycleResult(admitted=(Admit("1", place),), preempted=(), pending=())))
    model.apply(ev.RankObserved(2.0, "n1", "1.0", 0, RankPhase.RUNNING, pid=100))
    model.apply(ev.RankObserved(3.0, "n1", "1.0", 0, RankPhase.GONE, exit_status=0))
    model.apply(ev.CancelRequested(4.0, "4", "alice"))
    assert jobs[0].status.state == JobState.SUCCEEDED  # left through the gang rules
    assert jobs[2].status.state == JobState.CANCELLED  # afternotok on a success: left through the dependency rules
    assert jobs[3].status.state == JobState.CANCELLED  # left through the model's cancel
    assert set(model.jobs) == {"2", "5"}
    return weakref.ref(model), [weakref.ref(record) for record in jobs]


def test_a_dropped_model_is_freed_at_once_with_its_jobs() -> None:
    gc.collect()
    gc.disable()  # only reference counting frees anything below
    try:
        model, jobs = used_model()
        assert model() is None, "the model is kept by a reference cycle"
        assert [ref() for ref in jobs] == [None] * len(jobs)
    finally:
        gc.enable()
