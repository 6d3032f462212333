"""The lifecycle model alone: typed events in, typed effects out (no coordinator, no store); and
``update Partition=``'s rules: a pending job's queue changes with a history line and a SaveSpec (the
store writes its queue column from it); a job past pending and a share of a GPU keep their queue."""

from __future__ import annotations

from dataclasses import replace

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import EndIntent, JobState, RankPhase
from labgang.launcher.lifecycle.verbs import JobUpdate, update_refusal
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Preempt
from labgang.launcher.scheduler.snapshot import RankPlacement

POLICY = LifecyclePolicy(
    startup_timeout_s=30, requeue_backoff_s=4, requeue_backoff_max_s=60, max_start_failures=3, default_grace_s=5
)


def job(job_id: str, *, signal: str | None = None, priority: int = 0) -> JobRecord:
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="default", priority=priority, workers=2, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0, time_limit_s=None,
        requeue=True, signal=signal,
    )  # fmt: skip
    return JobRecord(id=job_id, seq=int(job_id), spec=spec, status=JobStatus(submit_time=0.0))


PLACEMENT = (RankPlacement(0, "n1", ("GPU-a",)), RankPlacement(1, "n2", ("GPU-b",)))


def admitted(model: Lifecycle, job_id: str, now: float) -> list[fx.Effect]:
    return model.apply(
        ev.CycleDecided(now, CycleResult(admitted=(Admit(job_id, PLACEMENT),), preempted=(), pending=()))
    )


def start(model: Lifecycle, record: JobRecord, now: float) -> None:
    for rank, node in ((0, "n1"), (1, "n2")):
        model.apply(ev.RankObserved(now, node, record.run_id, rank, RankPhase.RUNNING, pid=100 + rank))


def test_an_admission_persists_first_then_dispatches() -> None:
    model = Lifecycle(POLICY)
    record = job("1")
    assert [type(e) for e in model.apply(ev.JobSubmitted(1.0, record))] == [fx.AddHistory, fx.WakeScheduler]
    kinds = [type(e) for e in admitted(model, "1", 2.0)]
    assert kinds == [
        fx.SaveStatus, fx.SaveAttempt, fx.SaveRank, fx.SaveRank, fx.RecordDecision, fx.AddHistory,
        fx.AdmissionObserved, fx.Dispatch,
    ]  # fmt: skip
    assert (record.status.state, record.status.admit_seq) == (JobState.ADMITTED, 1)


def test_a_preempted_gang_is_stopped_with_its_warning_and_requeued_as_a_new_attempt() -> None:
    model = Lifecycle(POLICY, [job("1", signal="USR1@10"), job("2", priority=5)])
    victim = model.jobs["1"]
    admitted(model, "1", 1.0)
    start(model, victim, 1.5)
    out = model.apply(
        ev.CycleDecided(2.0, CycleResult(admitted=(), preempted=(Preempt("2", ("1",), "p"),), pending=()))
    )
    assert [e for e in out if isinstance(e, fx.Stop)] == [
        fx.Stop("n1", "1.0", 7.0, True, "1"),
        fx.Stop("n2", "1.0", 7.0, True, "1"),
    ]
    assert victim.status.end_intent == EndIntent.PREEMPT
    for rank, node in ((0, "n1"), (1, "n2")):
        out = model.apply(ev.RankObserved(9.0, node, "1.0", rank, RankPhase.GONE, exit_status=143))
    assert (victim.status.state, victim.status.restart_count, victim.run_id) == (JobState.PENDING, 1, "1.1")
    assert fx.WakeScheduler() in out  # its only victim is gone: the preemptor can start now


def test_a_failed_start_is_retried_at_the_end_of_its_backoff() -> None:
    model = Lifecycle(POLICY, [job("1")])
    admitted(model, "1", 0.0)
    out = model.apply(ev.LaunchFailed(1.0, "n1", "1.0", "connection refused"))
    assert model.jobs["1"].status.state == JobState.PENDING  # nothing was launched: every rank gone at once
    assert fx.WakeAt(5.0) in out  # backoff 4 s from the requeue at 1.0
    assert model.jobs["1"].status.restart_count == 0  # it never ran


def test_a_finished_job_leaves_the_model() -> None:
    model = Lifecycle(POLICY, [job("1")])
    record = model.jobs["1"]
    admitted(model, "1", 0.0)
    start(model, record, 0.5)
    for rank, node in ((0, "n1"), (1, "n2")):
        out = model.apply(ev.RankObserved(3.0, node, "1.0", rank, RankPhase.GONE, exit_status=0))
    assert fx.Finished(record) in out and "1" not in model.jobs
    assert record.status.state == JobState.SUCCEEDED
    assert model.apply(ev.CancelRequested(4.0, "1", "alice")) == []  # nothing left to cancel


# ----- a gang admitted by a burst of cycles is never a victim of a later cycle of that burst


def preempt(model: Lifecycle, now: float, admitted_before: frozenset[str] = frozenset()) -> list[fx.Effect]:
    return model.apply(ev.CycleDecided(now, CycleResult((), (Preempt("2", ("1",), "p"),), ()), admitted_before))


def test_not_a_victim_of_a_later_cycle_of_the_burst_that_admitted_it() -> None:
    model = Lifecycle(POLICY, [job("1"), job("2", priority=5)])
    victim = model.jobs["1"]
    model.apply(ev.CycleDecided(3.0, CycleResult((Admit("1", PLACEMENT),), (), ())))
    out = preempt(model, 3.0, frozenset({"1"}))  # the next cycle of the same burst
    assert victim.status.state == JobState.ADMITTED and victim.attempt == 0
    assert not any(isinstance(e, (fx.Stop, fx.PreemptionCounted, fx.Dispatch)) for e in out)
    assert model.jobs["2"].status.nominated == ("1",)  # the preemptor still names it


def test_its_start_wakes_the_preemptor_and_then_it_is_stopped() -> None:
    model = Lifecycle(POLICY, [job("1"), job("2", priority=5)])
    victim = model.jobs["1"]
    model.apply(ev.CycleDecided(3.0, CycleResult((Admit("1", PLACEMENT),), (), ())))
    preempt(model, 3.0, frozenset({"1"}))
    woken: list[fx.Effect] = []
    for rank, node in ((0, "n1"), (1, "n2")):
        woken += model.apply(ev.RankObserved(3.5, node, victim.run_id, rank, RankPhase.RUNNING))
    assert fx.WakeScheduler() in woken
    out = preempt(model, 3.5)  # a new burst
    assert victim.status.state == JobState.TERMINATING
    assert [e for e in out if isinstance(e, fx.Stop)] == [
        fx.Stop("n1", "1.0", 7.0, True, "1"),
        fx.Stop("n2", "1.0", 7.0, True, "1"),
    ]


def test_in_a_later_burst_an_unlaunched_gang_is_evicted_at_once() -> None:
    model = Lifecycle(POLICY, [job("1"), job("2", priority=5)])
    victim = model.jobs["1"]
    model.apply(ev.CycleDecided(3.0, CycleResult((Admit("1", PLACEMENT),), (), ())))
    out = preempt(model, 3.0)  # its dispatch never went out: nothing to stop, requeued now
    assert (victim.status.state, victim.attempt, victim.status.restart_count) == (JobState.PENDING, 1, 0)
    assert not any(isinstance(e, fx.Stop) for e in out)


# ----- the preemptors that name a job are found among the jobs naming victims (Lifecycle.preemptors),
# not by scanning every active job; the answers stay a scan's


def test_a_preemptor_loaded_from_the_store_still_holds_back_its_requeued_victim() -> None:
    preemptor = job("2", priority=5)
    preemptor.status.nominated = ("1", "3")  # as the store gives it back
    model = Lifecycle(POLICY, [job("1"), preemptor, job("3")])
    model.apply(ev.CycleDecided(1.0, CycleResult((Admit("3", PLACEMENT),), (), ())))
    victim = model.jobs["1"]  # pending (requeued): its preemptor waits for victim 3
    assert model.awaited_by_waiting_preemptor(victim)
    model.apply(ev.HoldRequested(2.0, "2", "alice"))  # a held preemptor names no victim
    assert preemptor.status.nominated == ()
    assert not model.awaited_by_waiting_preemptor(victim)
    assert "2" not in model.preemptors  # forgotten once it names no victim


def test_a_preemptor_named_by_a_cycle_is_found_and_forgotten_when_it_finishes() -> None:
    model = Lifecycle(POLICY, [job("1"), job("2", priority=5), job("3")])
    model.apply(ev.CycleDecided(1.0, CycleResult((Admit("3", PLACEMENT),), (), ())))
    start(model, model.jobs["3"], 1.5)
    model.apply(ev.CycleDecided(2.0, CycleResult((), (Preempt("2", ("1", "3"), "p"),), ())))
    assert model.jobs["2"].status.nominated == ("1", "3")
    assert model.jobs["3"].status.state == JobState.TERMINATING  # stopped, still holding its devices
    assert model.awaited_by_waiting_preemptor(model.jobs["1"])
    model.apply(ev.CancelRequested(3.0, "2", "alice"))
    assert model.jobs.get("2") is None and model.jobs["1"].status.state == JobState.PENDING
    assert not model.awaited_by_waiting_preemptor(model.jobs["1"])
    assert "2" not in model.preemptors


def test_a_rank_failing_before_the_others_report_running_still_started_the_job() -> None:
    model = Lifecycle(POLICY, [job("1")])
    record = model.jobs["1"]
    admitted(model, "1", 0.0)
    out = model.apply(ev.RankObserved(2.0, "n2", "1.0", 1, RankPhase.EXITED, exit_status=7))
    assert record.status.state == JobState.TERMINATING  # never RUNNING: the gang stops
    assert record.status.start_time == 2.0  # yet a rank ran: the job started (sacct's Start)
    attempt = record.attempt_record
    assert attempt is not None and attempt.start_time == 2.0
    assert fx.SaveAttempt(attempt) in out
    model.apply(ev.RankObserved(3.0, "n1", "1.0", 0, RankPhase.RUNNING, pid=100))
    for rank, node in ((0, "n1"), (1, "n2")):
        model.apply(ev.RankObserved(9.0, node, "1.0", rank, RankPhase.GONE, exit_status=143 if rank == 0 else 7))
    assert record.status.state == JobState.FAILED
    assert (record.status.start_time, record.status.end_time) == (2.0, 9.0)  # 7 s accounted
    assert (attempt.start_time, attempt.end_time) == (2.0, 9.0)


def test_a_gang_cancelled_before_any_rank_started_has_no_start() -> None:
    model = Lifecycle(POLICY, [job("1")])
    record = model.jobs["1"]
    admitted(model, "1", 0.0)
    model.apply(ev.CancelRequested(1.0, "1", "alice"))
    assert record.status.start_time is None


def test_an_admin_hold_says_an_admin_must_release_it() -> None:
    from labgang.launcher.lifecycle.view import pending_job
    from labgang.launcher.scheduler.reasons import held_reason

    model = Lifecycle(POLICY, [job("1"), job("2")])
    model.apply(ev.HoldRequested(1.0, "1", "root", admin=True))
    model.apply(ev.HoldRequested(1.0, "2", "alice"))
    admin_held, own = model.jobs["1"].status, model.jobs["2"].status
    assert admin_held.reason_message == "held by the admin root; only an admin may release it (`labgang release 1`)"
    assert own.reason_message == "held by alice; `labgang release 2` lets it be scheduled"
    # each cycle words it again from the scheduler's view: the same words
    view = pending_job(model.jobs["1"], None, False)
    assert view.hold_admin and held_reason("1", "root", view.hold_admin).message == admin_held.reason_message
    assert held_reason("12_3", "root", True).message == (
        "held by the admin root; only an admin may release array 12 (`labgang release 12`)"
    )


def test_an_admin_hold_over_the_owners_is_in_the_history_and_a_second_one_is_not() -> None:
    """``bob: submit -H``, then ``root: hold``: the job is now admin-held, which its history must say
    (only ``held by bob`` was there, though bob could no longer release it)."""
    model = Lifecycle(POLICY, [job("1")])
    model.apply(ev.HoldRequested(1.0, "1", "bob"))
    model.apply(ev.HoldRequested(2.0, "1", "root", admin=True))
    model.apply(ev.HoldRequested(3.0, "1", "root", admin=True))  # nothing new: no line
    model.apply(ev.HoldRequested(4.0, "1", "bob"))  # nor a user's over an admin's
    held = [(h.time, h.message) for h in model.jobs["1"].history if h.event == "held"]
    assert held == [(1.0, "by bob"), (2.0, "by root (an admin hold: only an admin may release it)")]
    st = model.jobs["1"].status
    assert (st.hold, st.hold_admin) == ("root", True)  # bob's second hold did not make it "the admin bob's"
    assert st.reason_message == "held by the admin root; only an admin may release it (`labgang release 1`)"


def test_failure_policy_restart_restarts_a_job_whose_every_rank_already_exited() -> None:
    """A 1-rank job's only rank fails (or every rank fails at once): nothing is left to stop, but
    --failure-policy restart still starts the job again, up to --max-restarts, then fails it."""
    one = job("1")
    one.spec = replace(one.spec, workers=1, failure_policy="restart", max_restarts=1)
    model = Lifecycle(POLICY, [one])
    placement = (RankPlacement(0, "n1", ("GPU-a",)),)
    for attempt, now in ((0, 1.0), (1, 10.0)):
        model.apply(ev.CycleDecided(now, CycleResult(admitted=(Admit("1", placement),), preempted=(), pending=())))
        model.apply(ev.RankObserved(now + 0.5, "n1", one.run_id, 0, RankPhase.RUNNING, pid=100))
        model.apply(ev.RankObserved(now + 1.5, "n1", one.run_id, 0, RankPhase.EXITED, exit_status=3))
        model.apply(ev.RankObserved(now + 1.6, "n1", one.run_id, 0, RankPhase.GONE, exit_status=3))
        if attempt == 0:
            assert (one.status.state, one.status.failure_restarts, one.status.restart_count) == (JobState.PENDING, 1, 1)
            assert (
                one.status.reason_message
                == "rank 0 on n1 exited with status 3; restart 1 of 1 (--failure-policy restart)"
            )
    assert (one.status.state, one.status.exit_status, one.status.failure_restarts) == (JobState.FAILED, 3, 1)
    assert (
        one.status.reason_message
        == "rank 0 on n1 exited with status 3 (--failure-policy restart: 1 of 1 restarts used)"
    )


# ----- update Partition= (lifecycle/verbs.update_refusal, Lifecycle._update) ----------------------

MOVE = JobUpdate(queue="nlp")


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
