"""Each rank's start and end instants (``labgang show``'s START and END, ``ranks[].start_time``),
and the ``running`` line of a gang that stopped before every rank reported running."""

from __future__ import annotations

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState, RankPhase
from labgang.launcher.scheduler.decisions import Admit, CycleResult
from labgang.launcher.scheduler.snapshot import RankPlacement

POLICY = LifecyclePolicy(
    startup_timeout_s=30, requeue_backoff_s=4, requeue_backoff_max_s=60, max_start_failures=3, default_grace_s=5
)
PLACEMENT = (RankPlacement(0, "n1", ("GPU-a",)), RankPlacement(1, "n2", ("GPU-b",)))


def job(job_id: str) -> JobRecord:
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="default", priority=0, workers=2, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0, time_limit_s=None,
        requeue=True, signal=None,
    )  # fmt: skip
    return JobRecord(id=job_id, seq=int(job_id), spec=spec, status=JobStatus(submit_time=0.0))


def admitted(model: Lifecycle, job_id: str, now: float) -> None:
    model.apply(ev.CycleDecided(now, CycleResult(admitted=(Admit(job_id, PLACEMENT),), preempted=(), pending=())))


def test_the_agents_start_and_exit_instants_are_recorded_once_per_rank() -> None:
    model = Lifecycle(POLICY, [job("1")])
    record = model.jobs["1"]
    admitted(model, "1", 0.0)
    out = model.apply(ev.RankObserved(2.0, "n1", "1.0", 0, RankPhase.RUNNING, pid=100, started_at=1.25))
    rank0 = record.ranks[0]
    assert rank0.start_time == 1.25  # the agent's instant, not when the report arrived
    assert fx.SaveRank(record, rank0, record.attempt) in out
    model.apply(ev.RankObserved(2.5, "n2", "1.0", 1, RankPhase.RUNNING, pid=101, started_at=1.5))
    # a later status repeating the rank with another start time changes nothing (set once)
    model.apply(ev.RankObserved(3.0, "n1", "1.0", 0, RankPhase.RUNNING, pid=100, started_at=2.75))
    assert (rank0.start_time, record.ranks[1].start_time) == (1.25, 1.5)
    assert rank0.end_time is None
    model.apply(ev.RankObserved(9.0, "n1", "1.0", 0, RankPhase.EXITED, exit_status=0, ended_at=8.5))
    model.apply(ev.RankObserved(9.0, "n2", "1.0", 1, RankPhase.EXITED, exit_status=0))
    assert rank0.end_time == 8.5
    assert record.ranks[1].end_time == 9.0  # no instant in the report: when it was reported


def test_a_rank_reported_running_without_an_instant_started_when_reported() -> None:
    model = Lifecycle(POLICY, [job("1")])
    record = model.jobs["1"]
    admitted(model, "1", 0.0)
    model.apply(ev.RankObserved(2.0, "n1", "1.0", 0, RankPhase.RUNNING, pid=100))
    assert record.ranks[0].start_time == 2.0
    assert record.ranks[1].start_time is None


def test_a_rank_that_never_started_has_no_instants() -> None:
    model = Lifecycle(POLICY, [job("1")])
    record = model.jobs["1"]
    admitted(model, "1", 0.0)
    model.apply(ev.RankObserved(2.0, "n1", "1.0", 0, RankPhase.RUNNING, pid=100, started_at=1.5))
    # rank 1's command could not be executed (exit 127, no start instant from its agent)
    model.apply(ev.RankObserved(2.0, "n2", "1.0", 1, RankPhase.GONE, exit_status=127))
    assert (record.ranks[1].start_time, record.ranks[1].end_time) == (None, None)


def test_a_gang_stopped_before_every_rank_reported_running_has_its_running_line() -> None:
    model = Lifecycle(POLICY, [job("1")])
    record = model.jobs["1"]
    admitted(model, "1", 0.0)
    model.apply(ev.RankObserved(2.0, "n2", "1.0", 1, RankPhase.RUNNING, pid=101, started_at=1.5))
    model.apply(ev.RankObserved(2.5, "n2", "1.0", 1, RankPhase.EXITED, exit_status=7, ended_at=2.25))
    assert record.status.state == JobState.TERMINATING
    events = [(h.event, h.message) for h in record.history]
    names = [name for name, _ in events]
    assert names[-3:] == ["running", "rank-exited", "stopping"], events
    assert events[-3][1] == "1 of 2 ranks started on n2; rank 0 never reported running"
    assert record.status.start_time == 2.5


def test_a_gang_stopped_before_any_rank_started_has_no_running_line() -> None:
    model = Lifecycle(POLICY, [job("1")])
    record = model.jobs["1"]
    admitted(model, "1", 0.0)
    model.apply(ev.CancelRequested(1.0, "1", "alice"))
    assert "running" not in [h.event for h in record.history]
