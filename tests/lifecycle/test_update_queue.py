"""``update Partition=`` in the lifecycle model alone: a pending job's queue changes with a history
line and a SaveSpec (the store writes its queue column from it); a job past pending and a share of
a GPU keep their queue (``lifecycle/verbs.update_refusal``)."""

from __future__ import annotations

from dataclasses import replace

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.lifecycle.verbs import JobUpdate, update_refusal

POLICY = LifecyclePolicy(
    startup_timeout_s=30, requeue_backoff_s=4, requeue_backoff_max_s=60, max_start_failures=3, default_grace_s=5
)
MOVE = JobUpdate(queue="nlp")


def job(job_id: str) -> JobRecord:
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="default", priority=0, workers=2, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0, time_limit_s=None,
        requeue=True, signal=None,
    )  # fmt: skip
    return JobRecord(id=job_id, seq=int(job_id), spec=spec, status=JobStatus(submit_time=0.0))


def test_a_pending_job_moves_with_a_history_line_and_its_old_spec_untouched() -> None:
    model = Lifecycle(POLICY, [job("1")])
    record = model.jobs["1"]
    before = record.spec
    assert update_refusal(record, MOVE, admin=False) is None
    assert MOVE.changes(before) == {"queue": "nlp"}
    out = model.apply(ev.UpdateRequested(5.0, "1", "alice", MOVE))
    assert record.spec.queue == "nlp" and before.queue == "default"  # caches compare specs by identity
    assert any(isinstance(e, fx.SaveSpec) and e.job is record for e in out)
    said = [e for e in out if isinstance(e, fx.AddHistory)]
    assert [(e.entry.event, e.entry.message) for e in said] == [("updated", "by alice: queue default -> nlp")]
    assert any(isinstance(e, fx.WakeScheduler) for e in out)
    assert JobUpdate(queue="nlp").changes(record.spec) == {}  # moving it there again changes nothing


def test_a_job_past_pending_or_a_share_keeps_its_queue() -> None:
    running = job("1")
    running.status.state = JobState.RUNNING
    refusal = update_refusal(running, MOVE, admin=True)
    assert refusal is not None and (refusal.field, refusal.kind) == ("queue", "state")
    assert refusal.message == "job 1 is running: its queue can only be changed while the job is pending"
    shared = job("2")
    shared.spec = replace(shared.spec, workers=1, shards=2)
    assert shared.spec.request.shared
    refusal = update_refusal(shared, MOVE, admin=True)
    assert refusal is not None and refusal.field == "queue" and "a share of a GPU" in refusal.message
    assert update_refusal(shared, JobUpdate(queue="default"), admin=False) is None  # its own queue: no move
