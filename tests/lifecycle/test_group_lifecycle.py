"""The lifecycle policies of a job of groups on the model alone (simulated clock, no coordinator):
an MPI-style launcher plus workers (--success-policy group:launcher), a rank failure restarting
the whole job (--failure-policy restart, --max-restarts), and --startup-order."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from labgang.launcher.jobgroups import GroupSpec
from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import EndIntent, JobState, RankPhase
from labgang.launcher.scheduler.decisions import Admit, CycleResult
from labgang.launcher.scheduler.snapshot import RankPlacement

POLICY = LifecyclePolicy(
    startup_timeout_s=30, requeue_backoff_s=4, requeue_backoff_max_s=60, max_start_failures=3, default_grace_s=5
)
GROUPS = (
    GroupSpec("launcher", workers=1, per_worker=0, argv=("mpirun",)),
    GroupSpec("workers", workers=2, per_worker=1, argv=("worker",)),
)
# rank 0 (launcher, no device) and rank 1 (worker) on n1, rank 2 (worker) on n2
PLACEMENT = (RankPlacement(0, "n1", ()), RankPlacement(1, "n1", ("GPU-a",)), RankPlacement(2, "n2", ("GPU-b",)))
NODE = {0: "n1", 1: "n1", 2: "n2"}


def mpi_job(**policies: Any) -> JobRecord:
    spec = JobSpec(
        name="mpi", user="alice", uid=1000, gid=None, queue="default", priority=0, workers=3, per_worker=0,
        resource="gpu", gpu_model=None, nodes=None, argv=["mpirun"], env={}, cwd="/tmp", grace_s=7.0,
        time_limit_s=None, requeue=True, signal=None, groups=GROUPS,
    )  # fmt: skip
    return JobRecord(id="1", seq=1, spec=replace(spec, **policies), status=JobStatus(submit_time=0.0))


def admit(model: Lifecycle, now: float) -> list[fx.Effect]:
    return model.apply(ev.CycleDecided(now, CycleResult(admitted=(Admit("1", PLACEMENT),), preempted=(), pending=())))


def report(model: Lifecycle, now: float, rank: int, phase: RankPhase, status: int | None = None) -> list[fx.Effect]:
    job = model.jobs["1"]
    return model.apply(ev.RankObserved(now, NODE[rank], job.run_id, rank, phase, pid=100 + rank, exit_status=status))


def running(model: Lifecycle, now: float) -> JobRecord:
    admit(model, now)
    job = model.jobs["1"]
    for rank in (0, 1, 2):
        report(model, now + 0.5, rank, RankPhase.RUNNING)
    assert job.status.state == JobState.RUNNING
    return job


def exits(model: Lifecycle, now: float, statuses: dict[int, int]) -> list[fx.Effect]:
    out: list[fx.Effect] = []
    for rank, status in statuses.items():
        out += report(model, now, rank, RankPhase.EXITED, status)
    return out


@pytest.mark.parametrize(
    ("success", "exited", "state"),
    [
        ("all", {0: 0}, JobState.RUNNING),  # the workers still run: not done under "all"
        ("group:launcher", {0: 0}, JobState.TERMINATING),  # MPI: the launcher's success is the job's
        ("group:launcher", {1: 0, 2: 0}, JobState.RUNNING),  # the workers alone are not the launcher
        ("group:workers", {1: 0}, JobState.RUNNING),
        ("group:workers", {1: 0, 2: 0}, JobState.TERMINATING),
        ("any", {1: 0, 2: 0}, JobState.TERMINATING),
        ("any", {0: 0}, JobState.TERMINATING),
    ],
)
def test_the_success_policy_decides_when_the_job_is_done(success: str, exited: dict[int, int], state: JobState) -> None:
    model = Lifecycle(POLICY, [mpi_job(success_policy=success)])
    job = running(model, 1.0)
    exits(model, 5.0, exited)
    assert job.status.state == state
    if state == JobState.TERMINATING:
        assert job.status.end_intent == EndIntent.SUCCEED


def test_an_mpi_job_succeeds_when_its_launcher_does_and_its_workers_are_stopped_with_their_grace() -> None:
    model = Lifecycle(POLICY, [mpi_job(success_policy="group:launcher")])
    job = running(model, 1.0)
    out = exits(model, 5.0, {0: 0})
    assert [e for e in out if isinstance(e, fx.Stop)] == [
        fx.Stop("n1", "1.0", 7.0, False, "1"),
        fx.Stop("n2", "1.0", 7.0, False, "1"),
    ]
    report(model, 6.0, 0, RankPhase.GONE, 0)
    for rank in (1, 2):  # SIGTERM'd by the stop: 143, which does not fail the job
        report(model, 6.5, rank, RankPhase.GONE, 143)
    assert job.status.state == JobState.SUCCEEDED
    assert (job.status.exit_status, job.status.reason_code) == (0, "completed")
    assert job.status.reason_message == (
        "group launcher succeeded (--success-policy group:launcher); the other ranks were stopped"
    )
    assert job.attempt_record is not None and job.attempt_record.outcome == "succeeded"


def test_a_worker_failing_before_the_launcher_succeeds_fails_the_job() -> None:
    model = Lifecycle(POLICY, [mpi_job(success_policy="group:launcher")])
    job = running(model, 1.0)
    exits(model, 5.0, {2: 3})
    exits(model, 5.1, {0: 0})  # mpirun exits 0 after a worker failed: too late
    for rank, status in ((0, 0), (1, 143), (2, 3)):
        report(model, 6.0, rank, RankPhase.GONE, status)
    assert (job.status.state, job.status.exit_status) == (JobState.FAILED, 3)


def finish_attempt(model: Lifecycle, now: float, failing: int = 2) -> None:
    """Rank ``failing`` exits 1, the others are stopped (143), every rank gone."""
    report(model, now, failing, RankPhase.EXITED, 1)
    for rank in (0, 1, 2):
        report(model, now + 1, rank, RankPhase.GONE, 1 if rank == failing else 143)


def test_a_rank_failure_restarts_the_whole_job_up_to_max_restarts_then_fails_it() -> None:
    model = Lifecycle(POLICY, [mpi_job(failure_policy="restart", max_restarts=2)])
    job = model.jobs["1"]
    for attempt, now in ((0, 1.0), (1, 10.0)):
        running(model, now)
        report(model, now + 2, 2, RankPhase.EXITED, 1)
        assert (job.status.state, job.status.end_intent) == (JobState.TERMINATING, EndIntent.RESTART)
        for rank in (0, 1, 2):
            out = report(model, now + 3, rank, RankPhase.GONE, 1 if rank == 2 else 143)
        assert job.status.state == JobState.PENDING and fx.WakeScheduler() in out  # at once, no backoff
        assert (job.status.attempt, job.status.failure_restarts, job.status.restart_count) == (
            attempt + 1,
            attempt + 1,
            attempt + 1,
        )
        assert job.status.reason_message == (
            f"rank 2 on n2 exited with status 1; restart {attempt + 1} of 2 (--failure-policy restart)"
        )
    running(model, 20.0)
    finish_attempt(model, 22.0)
    assert (job.status.state, job.status.exit_status) == (JobState.FAILED, 1)
    assert job.status.reason_message == (
        "rank 2 on n2 exited with status 1 (--failure-policy restart: 2 of 2 restarts used)"
    )


def test_the_default_failure_policy_fails_at_the_first_rank_failure() -> None:
    model = Lifecycle(POLICY, [mpi_job()])
    job = running(model, 1.0)
    finish_attempt(model, 3.0)
    assert (job.status.state, job.status.attempt, job.status.failure_restarts) == (JobState.FAILED, 0, 0)


def test_a_restarted_attempt_is_accounted_as_failed() -> None:
    model = Lifecycle(POLICY, [mpi_job(failure_policy="restart", max_restarts=1)])
    out: list[fx.Effect] = []
    running(model, 1.0)
    report(model, 3.0, 2, RankPhase.EXITED, 1)
    for rank in (0, 1, 2):
        out += report(model, 4.0, rank, RankPhase.GONE, 143)
    closed = [e.record for e in out if isinstance(e, fx.SaveAttempt) and e.record.end_time is not None]
    assert [(r.attempt, r.outcome) for r in closed] == [(0, "failed")]


def test_startup_order_launches_the_workers_only_once_the_launcher_started() -> None:
    model = Lifecycle(POLICY, [mpi_job(startup_order=("launcher", "workers"))])
    job = model.jobs["1"]
    admit(model, 1.0)
    model.apply(ev.LaunchSent(1.1, "n1", "1.0", "10.0.0.1"))
    model.apply(ev.LaunchSent(1.1, "n2", "1.0", None))
    assert [job.ranks[r].state for r in (0, 1, 2)] == [RankPhase.LAUNCHING, RankPhase.ASSIGNED, RankPhase.ASSIGNED]
    out = model.apply(ev.LaunchAnswered(1.2, "n1", "1.0", 29500, (), False, ()))
    assert not [e for e in out if isinstance(e, fx.Launch)]  # the launcher has not reported started
    out = report(model, 2.0, 0, RankPhase.RUNNING)
    assert [e for e in out if isinstance(e, fx.Launch)] == [fx.Launch(job, "n1", "1.0"), fx.Launch(job, "n2", "1.0")]
    assert [job.ranks[r].state for r in (1, 2)] == [RankPhase.LAUNCHING, RankPhase.LAUNCHING]
    assert job.history[-1].message == "group workers: the groups before it started; launching on n1, n2"
    out = report(model, 2.5, 1, RankPhase.RUNNING)
    assert not [e for e in out if isinstance(e, fx.Launch)]  # sent once
    report(model, 3.0, 2, RankPhase.RUNNING)
    assert job.status.state == JobState.RUNNING


def test_startup_order_waits_for_the_port_when_the_launcher_reports_first() -> None:
    model = Lifecycle(POLICY, [mpi_job(startup_order=("launcher",))])
    job = model.jobs["1"]
    admit(model, 1.0)
    model.apply(ev.LaunchSent(1.1, "n1", "1.0", "10.0.0.1"))
    assert not [e for e in report(model, 1.5, 0, RankPhase.RUNNING) if isinstance(e, fx.Launch)]
    out = model.apply(ev.LaunchAnswered(1.6, "n1", "1.0", 29500, (), False, ()))
    assert [e for e in out if isinstance(e, fx.Launch)] == [fx.Launch(job, "n1", "1.0"), fx.Launch(job, "n2", "1.0")]


def test_a_job_of_later_groups_not_started_in_time_fails_its_start_naming_them() -> None:
    model = Lifecycle(POLICY, [mpi_job(startup_order=("launcher", "workers"))])
    job = model.jobs["1"]
    admit(model, 1.0)
    model.apply(ev.LaunchSent(1.1, "n1", "1.0", "10.0.0.1"))
    model.apply(ev.Tick(40.0, started_at=0.0, connected=frozenset({"n1", "n2"})))
    assert (job.status.state, job.status.end_intent) == (JobState.TERMINATING, EndIntent.RETRY)
    assert job.status.reason_message == (
        "start failed: not started within startup_timeout_s 30: rank 0 on n1 (launching), "
        "rank 1 on n1 (assigned), rank 2 on n2 (assigned)"
    )
    assert [job.ranks[r].state for r in (1, 2)] == [RankPhase.GONE, RankPhase.GONE]  # never sent: nothing to stop
