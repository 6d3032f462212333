"""The lifecycle model keeps one accounting record per start attempt: opened at admission, started
when every rank started, closed with its outcome when its ranks are all gone (no coordinator, no
store: the records and the SaveAttempt effects only)."""

from __future__ import annotations

import pytest
from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.attempts import AttemptRecord, job_wait_s
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState, RankPhase
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Preempt
from labgang.launcher.scheduler.snapshot import RankPlacement

POLICY = LifecyclePolicy(
    startup_timeout_s=30,
    requeue_backoff_s=4,
    requeue_backoff_max_s=60,
    max_start_failures=3,
    default_grace_s=5,
    node_timeout_s=10,
)
PLACEMENT = (RankPlacement(0, "n1", ("GPU-a", "GPU-b")), RankPlacement(1, "n2", ("GPU-c",)))


def job(job_id: str, *, requeue: bool = True, time_limit_s: float | None = None) -> JobRecord:
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="vision", priority=0, workers=2, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0,
        time_limit_s=time_limit_s, requeue=requeue, signal=None,
    )  # fmt: skip
    return JobRecord(id=job_id, seq=int(job_id), spec=spec, status=JobStatus(submit_time=0.0))


def admit(model: Lifecycle, job_id: str, now: float) -> list[fx.Effect]:
    result = CycleResult(admitted=(Admit(job_id, PLACEMENT),), preempted=(), pending=())
    return model.apply(ev.CycleDecided(now, result))


def start(model: Lifecycle, record: JobRecord, now: float) -> None:
    for rank, node in ((0, "n1"), (1, "n2")):
        model.apply(ev.RankObserved(now, node, record.run_id, rank, RankPhase.RUNNING, pid=100 + rank))


def gone(model: Lifecycle, record: JobRecord, now: float, status: int = 143) -> list[fx.Effect]:
    out: list[fx.Effect] = []
    for rank, node in ((0, "n1"), (1, "n2")):
        out += model.apply(ev.RankObserved(now, node, record.run_id, rank, RankPhase.GONE, exit_status=status))
    return out


def saved(effects: list[fx.Effect]) -> list[AttemptRecord]:
    return [e.record for e in effects if isinstance(e, fx.SaveAttempt)]


def test_an_admission_opens_the_attempts_record_with_its_devices_and_pending_period() -> None:
    record = job("1")
    model = Lifecycle(POLICY, [record])
    [rec] = saved(admit(model, "1", 5.0))
    assert (rec.job_id, rec.attempt, rec.user, rec.queue) == ("1", 0, "alice", "vision")
    assert (rec.pending_since, rec.admit_time, rec.start_time, rec.end_time) == (0.0, 5.0, None, None)
    assert (rec.nodes, rec.devices, rec.gpus) == (("n1", "n2"), ("n1/GPU-a", "n1/GPU-b", "n2/GPU-c"), 3)
    assert rec is record.attempt_record and rec.outcome == "running"
    start(model, record, 6.0)
    assert rec.start_time == 6.0


def test_a_preempted_attempt_is_closed_preempted_and_the_next_one_opens_at_its_admission() -> None:
    record = job("1")
    model = Lifecycle(POLICY, [record, job("2")])
    admit(model, "1", 5.0)
    start(model, record, 6.0)
    model.apply(ev.CycleDecided(15.0, CycleResult(admitted=(), preempted=(Preempt("2", ("1",), "p"),), pending=())))
    [first] = saved(gone(model, record, 17.0))
    assert (first.attempt, first.outcome, first.end_time) == (0, "preempted", 17.0)
    assert "preempted by job 2" in first.reason
    assert first.gpu_seconds(100.0) == 3 * 12.0  # held from admission (5) until every rank was gone (17)
    assert record.status.state == JobState.PENDING
    [second] = saved(admit(model, "1", 30.0))
    assert (second.attempt, second.pending_since, second.wait_s) == (1, 17.0, 13.0)
    assert job_wait_s([first, second], record.status.pending_since, None, 40.0) == 5.0 + 13.0


@pytest.mark.parametrize(
    "attached, told",
    [
        (False, " (not requeued: the job asked for no requeue)"),
        (True, "; a `labgang run` job is not requeued, as srun's is not"),
    ],
)
def test_a_preempted_job_that_is_not_requeued_ends_cancelled_its_attempt_preempted(attached: bool, told: str) -> None:
    """Slurm's PreemptMode=CANCEL ends it PREEMPTED, which labgang has not: CANCELLED, not FAILED (its
    command did not fail); the attempt says preempted. A `labgang run` job's reason is srun's rule,
    not that its client is gone (it is right there)."""
    record = job("1", requeue=False)
    record.spec.attached = attached
    model = Lifecycle(POLICY, [record, job("2")])
    admit(model, "1", 5.0)
    start(model, record, 6.0)
    model.apply(ev.CycleDecided(15.0, CycleResult(admitted=(), preempted=(Preempt("2", ("1",), "p"),), pending=())))
    [attempt] = saved(gone(model, record, 17.0))
    st = record.status
    assert (st.state, attempt.outcome) == (JobState.CANCELLED, "preempted")
    assert st.reason_message == f"preempted by job 2: p{told}", st.reason_message
    assert "client is gone" not in (st.reason_message or "")


def test_a_time_limit_ends_the_job_timeout_and_its_attempt_timeout() -> None:
    record = job("1", time_limit_s=10.0)
    model = Lifecycle(POLICY, [record])
    admit(model, "1", 1.0)
    start(model, record, 2.0)
    model.apply(ev.Tick(12.0, 0.0, frozenset({"n1", "n2"})))
    [rec] = saved(gone(model, record, 13.0, status=0))  # even ranks exiting 0 in the grace period
    assert (record.status.state, record.status.reason_code) == (JobState.TIMEOUT, "timeout")
    assert (rec.outcome, rec.end_time) == ("timeout", 13.0)


def test_a_lost_node_without_requeue_ends_node_fail_and_with_requeue_closes_the_attempt_node_fail() -> None:
    for requeue, final in ((False, JobState.NODE_FAIL), (True, JobState.PENDING)):
        record = job("1", requeue=requeue)
        model = Lifecycle(POLICY, [record])
        admit(model, "1", 1.0)
        start(model, record, 2.0)
        model.apply(ev.NodeLost(20.0, "n2", "silent", 10.0))
        model.apply(ev.RankObserved(20.5, "n1", record.run_id, 0, RankPhase.GONE, exit_status=143))
        [rec] = saved(model.apply(ev.Tick(27.0, 0.0, frozenset({"n1"}))))  # fence: 10 + 10 + grace 7
        assert record.status.state == final
        assert (rec.outcome, rec.end_time) == ("node_fail", 27.0)


def test_a_job_cancelled_while_pending_has_no_attempt_and_waited_until_the_cancel() -> None:
    record = job("1")
    model = Lifecycle(POLICY, [record])
    effects = model.apply(ev.CancelRequested(9.0, "1", "alice"))
    assert saved(effects) == [] and record.attempt_record is None
    assert job_wait_s([], record.status.pending_since, record.status.end_time, 50.0) == 9.0
