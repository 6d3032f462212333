"""A job whose ranks ended while nobody could hear of it (``labgang up`` killed, or their agent down)
ends, and is accounted, when they ended, as its agent reports at its rejoin, not when the report came
(README: GPU-H and ELAPSED run from admission until the ranks were all gone). Simulated clock: nodes
n1 and n2 join at t = 0.5, job 1 is admitted at 1 and runs from 2; the agents come back at 30."""

from __future__ import annotations

from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState, RankPhase
from labgang.launcher.scheduler.decisions import Admit, CycleResult
from labgang.launcher.scheduler.snapshot import RankPlacement

POLICY = LifecyclePolicy(
    startup_timeout_s=30, requeue_backoff_s=4, requeue_backoff_max_s=60, max_start_failures=3, default_grace_s=5
)
NODES = frozenset({"n1", "n2"})
BACK = 30.0


def running() -> tuple[Lifecycle, JobRecord]:
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="default", priority=0, workers=2, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0, time_limit_s=None,
        requeue=True, signal=None,
    )  # fmt: skip
    model = Lifecycle(POLICY, [JobRecord(id="1", seq=1, spec=spec, status=JobStatus(submit_time=0.0))])
    for node in sorted(NODES):
        model.apply(ev.NodeJoined(0.5, node, (), NODES))
    placement = (RankPlacement(0, "n1", ("GPU-a",)), RankPlacement(1, "n2", ("GPU-b",)))
    model.apply(ev.CycleDecided(1.0, CycleResult(admitted=(Admit("1", placement),), preempted=(), pending=())))
    for rank, node in ((0, "n1"), (1, "n2")):
        model.apply(ev.RankObserved(2.0, node, "1.0", rank, RankPhase.RUNNING, pid=100 + rank, started_at=2.0))
    record = model.jobs["1"]
    assert record.status.state == JobState.RUNNING
    return model, record


def exited(node: str, rank: int, ended_at: float) -> ev.RankObserved:
    return ev.RankObserved(BACK, node, "1.0", rank, RankPhase.EXITED, exit_status=0, ended_at=ended_at)


def gone(now: float, node: str, rank: int) -> ev.RankObserved:
    return ev.RankObserved(now, node, "1.0", rank, RankPhase.GONE, exit_status=0)


def test_ranks_that_ended_while_the_agents_were_away_end_the_job_when_the_last_one_ended() -> None:
    model, record = running()
    model.apply(ev.NodeJoined(BACK, "n1", (exited("n1", 0, 5.0),), NODES))
    model.apply(ev.NodeJoined(BACK, "n2", (exited("n2", 1, 6.5),), NODES))
    model.apply(gone(BACK + 0.1, "n1", 0))
    model.apply(gone(BACK + 0.2, "n2", 1))
    assert record.status.state == JobState.SUCCEEDED
    assert record.status.end_time == 6.5  # the later rank's end, not BACK + 0.2
    assert record.attempt_record is not None and record.attempt_record.end_time == 6.5
    # its history says when: each rank's exit when it happened, and the end with the last one
    lines = [(h.time, h.event) for h in record.history if h.event in ("rank-exited", "succeeded")]
    assert lines == [(5.0, "rank-exited"), (6.5, "rank-exited"), (6.5, "succeeded")], record.history


def test_an_end_reported_before_the_admission_counts_from_the_admission() -> None:
    model, record = running()  # the agent's clock is behind the coordinator's
    for node, rank in (("n1", 0), ("n2", 1)):
        model.apply(ev.NodeJoined(BACK, node, (exited(node, rank, 0.25),), NODES))
        model.apply(gone(BACK + 0.1, node, rank))
    assert record.status.end_time == 1.0  # never before its admission
    assert record.attempt_record is not None and record.attempt_record.end_time == 1.0


def test_a_rank_heard_ending_as_it_happened_keeps_the_job_until_it_is_gone() -> None:
    model, record = running()
    model.apply(ev.NodeJoined(BACK, "n1", (exited("n1", 0, 5.0),), NODES))
    model.apply(gone(BACK + 0.1, "n1", 0))
    # rank 1's agent never went away: it ends later, heard as it happens, and goes at 41
    model.apply(ev.RankObserved(40.0, "n2", "1.0", 1, RankPhase.EXITED, exit_status=0, ended_at=40.0))
    model.apply(gone(41.0, "n2", 1))
    assert (record.status.state, record.status.end_time) == (JobState.SUCCEEDED, 41.0)
    assert record.attempt_record is not None and record.attempt_record.end_time == 41.0
    lines = [(h.time, h.event) for h in record.history if h.event in ("rank-exited", "succeeded")]
    assert lines == [(5.0, "rank-exited"), (40.0, "rank-exited"), (41.0, "succeeded")], record.history
