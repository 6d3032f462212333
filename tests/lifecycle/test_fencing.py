"""Fencing a lost node in the lifecycle model, on a simulated clock (docs/queue-semantics.md §A5).

Node n2 is last heard from at t = 10; ``node_timeout_s`` is 10 and the job's grace 7, so its
ranks there count as stopped at 27, unless n2 comes back sooner and reports their exits.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.coordinator.store import Store
from labgang.launcher.coordinator.views import history_view, job_view
from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.context import RuleContext
from labgang.launcher.lifecycle.fencing import FenceRules
from labgang.launcher.lifecycle.gang import GangRules
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import EndIntent, JobState, RankPhase
from labgang.launcher.scheduler.decisions import Admit, CycleResult
from labgang.launcher.scheduler.snapshot import RankPlacement

POLICY = LifecyclePolicy(
    startup_timeout_s=30,
    requeue_backoff_s=4,
    requeue_backoff_max_s=60,
    max_start_failures=3,
    default_grace_s=5,
    node_timeout_s=10,
)
LAST_CONTACT = 10.0
LOST_AT = 20.5  # the driver noticed 10.5 s of silence
DEADLINE = LAST_CONTACT + 10 + 7  # node_timeout_s + the job's grace
CONNECTED = frozenset({"n1"})


def job(job_id: str, *, requeue: bool = True, attached: bool = False) -> JobRecord:
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="default", priority=0, workers=2, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=7.0, time_limit_s=None,
        requeue=requeue, signal=None, attached=attached,
    )  # fmt: skip
    return JobRecord(id=job_id, seq=int(job_id), spec=spec, status=JobStatus(submit_time=0.0))


def running(*, requeue: bool = True, attached: bool = False) -> tuple[Lifecycle, JobRecord]:
    """A model with job 1 running as rank 0 on n1 and rank 1 on n2 since t = 2."""
    model = Lifecycle(POLICY, [job("1", requeue=requeue, attached=attached)])
    placement = (RankPlacement(0, "n1", ("GPU-a",)), RankPlacement(1, "n2", ("GPU-b",)))
    model.apply(ev.CycleDecided(1.0, CycleResult(admitted=(Admit("1", placement),), preempted=(), pending=())))
    for rank, node in ((0, "n1"), (1, "n2")):
        model.apply(ev.RankObserved(2.0, node, "1.0", rank, RankPhase.RUNNING, pid=100 + rank))
    record = model.jobs["1"]
    assert record.status.state == JobState.RUNNING
    return model, record


def lose_n2(model: Lifecycle) -> list[fx.Effect]:
    out = model.apply(ev.NodeLost(LOST_AT, "n2", "silent for 10.5 s", LAST_CONTACT))
    # rank 0 on n1 is stopped at once and goes
    model.apply(ev.RankObserved(LOST_AT + 1, "n1", "1.0", 0, RankPhase.GONE, exit_status=143))
    return out


def tick(model: Lifecycle, now: float) -> list[fx.Effect]:
    return model.apply(ev.Tick(now, 0.0, CONNECTED))


def test_a_lost_nodes_gang_is_requeued_only_after_node_timeout_plus_grace() -> None:
    model, record = running()
    out = lose_n2(model)
    assert fx.Stop("n1", "1.0", 7.0, False, "1") in out  # the rest of the gang stops now
    assert fx.WakeAt(DEADLINE) in out  # the driver wakes exactly when the fence expires
    assert (record.status.state, record.status.end_intent) == (JobState.TERMINATING, EndIntent.LOST)
    assert record.ranks[1].state == RankPhase.RUNNING  # not lost yet: its agent may still be stopping it
    fenced = [h.message for h in record.history if h.event == "fenced"]
    assert fenced and "rank 1 on n2 counts as stopped in 6.5 s" in fenced[0]
    for now in (LOST_AT + 2, 25.0, DEADLINE - 0.001):
        tick(model, now)
        assert (record.status.state, record.run_id) == (JobState.TERMINATING, "1.0"), now
    tick(model, DEADLINE)
    st = record.status
    assert (st.state, st.attempt, st.restart_count) == (JobState.PENDING, 1, 1)
    assert [h.event for h in record.history][-2:] == ["fence-expired", "requeued"]
    assert "node n2 lost" in (st.reason_message or "")


def test_exits_reported_when_the_node_comes_back_end_the_wait() -> None:
    model, record = running()
    lose_n2(model)
    gone = ev.RankObserved(22.0, "n2", "1.0", 1, RankPhase.GONE, exit_status=143)
    model.apply(ev.NodeJoined(22.0, "n2", (gone,), frozenset({"n1", "n2"})))
    st = record.status
    assert (st.state, st.attempt, st.restart_count) == (JobState.PENDING, 1, 1)  # at 22, not 27
    assert record.history[-1].time == 22.0
    assert tick(model, DEADLINE) == []  # the expired fence changes nothing any more


def test_a_node_back_with_its_rank_still_stopping_is_waited_for_not_timed_out() -> None:
    model, record = running()
    lose_n2(model)
    still = ev.RankObserved(22.0, "n2", "1.0", 1, RankPhase.RUNNING, pid=101)
    out = model.apply(ev.NodeJoined(22.0, "n2", (still,), frozenset({"n1", "n2"})))
    assert fx.Stop("n2", "1.0", 7.0, False, "1") in out  # the coordinator's own stop reaches it now
    tick(model, DEADLINE + 5)  # the node answers: its real exit decides, not the clock
    assert (record.status.state, record.ranks[1].state) == (JobState.TERMINATING, RankPhase.RUNNING)
    model.apply(ev.RankObserved(33.0, "n2", "1.0", 1, RankPhase.GONE, exit_status=137))
    assert (record.status.state, record.status.restart_count) == (JobState.PENDING, 1)


def test_a_job_that_asked_for_no_requeue_fails_at_the_fence_not_before() -> None:
    model, record = running(requeue=False)
    lose_n2(model)
    tick(model, DEADLINE - 1)
    assert record.status.state == JobState.TERMINATING
    tick(model, DEADLINE)
    assert record.status.state == JobState.NODE_FAIL and "1" not in model.jobs


def test_a_labgang_run_job_on_a_lost_node_ends_saying_run_jobs_are_not_requeued() -> None:
    """`labgang run` submits with requeue off and ``attached``: nobody would be attached to a rerun."""
    model, record = running(requeue=False, attached=True)
    lose_n2(model)
    tick(model, DEADLINE)
    st = record.status
    assert (st.state, st.restart_count) == (JobState.NODE_FAIL, 0)
    assert "node n2 lost" in (st.reason_message or "")
    assert (st.reason_message or "").endswith("; a `labgang run` job is not requeued, as srun's is not"), (
        st.reason_message
    )


def test_a_completing_gang_on_a_lost_node_is_decided_by_its_exits_once_fenced() -> None:
    model, record = running()
    for rank, node in ((0, "n1"), (1, "n2")):
        model.apply(ev.RankObserved(5.0, node, "1.0", rank, RankPhase.EXITED, exit_status=0))
    lose_n2(model)
    tick(model, DEADLINE - 1)
    assert record.status.state == JobState.TERMINATING  # rank 1's leftovers may still run on n2
    tick(model, DEADLINE)
    assert (record.status.state, record.status.exit_status, record.status.restart_count) == (
        JobState.SUCCEEDED,
        0,
        0,
    )


@pytest.mark.parametrize("lost_at", [DEADLINE, DEADLINE + 60], ids=["at-deadline", "long-after"])
def test_a_fence_already_over_when_the_loss_is_noticed_requeues_at_once(lost_at: float) -> None:
    """E.g. a coordinator restarted long after it last heard from the node."""
    model, record = running()
    model.apply(ev.NodeLost(lost_at, "n2", "did not reconnect", LAST_CONTACT))
    model.apply(ev.RankObserved(lost_at + 1, "n1", "1.0", 0, RankPhase.GONE, exit_status=143))
    assert (record.status.state, record.status.restart_count) == (JobState.PENDING, 1)


def test_a_gang_not_on_the_lost_node_is_untouched() -> None:
    model, record = running()
    out = model.apply(ev.NodeLost(LOST_AT, "n3", "silent", LAST_CONTACT))
    assert record.status.state == JobState.RUNNING
    assert [e for e in out if not isinstance(e, fx.WakeScheduler)] == []


def test_a_rank_its_agent_stopped_on_its_lease_requeues_the_job_rather_than_failing_it() -> None:
    """The coordinator did not notice the node's silence (it restarted, say), but the agent did
    and stopped its rank: the exit it reports is the node's loss, not the job's failure."""
    model, record = running()
    stopped = ev.RankObserved(9.0, "n2", "1.0", 1, RankPhase.EXITED, exit_status=143, fenced=True)
    out = model.apply(ev.NodeJoined(9.0, "n2", (stopped,), frozenset({"n1", "n2"})))
    assert (record.status.state, record.status.end_intent) == (JobState.TERMINATING, EndIntent.LOST)
    assert fx.Stop("n1", "1.0", 7.0, False, "1") in out
    for rank, node in ((0, "n1"), (1, "n2")):
        model.apply(ev.RankObserved(10.0, node, "1.0", rank, RankPhase.GONE, exit_status=143))
    assert (record.status.state, record.status.restart_count) == (JobState.PENDING, 1)


def test_the_same_exit_without_the_fence_fails_the_job() -> None:
    model, record = running()
    model.apply(ev.RankObserved(9.0, "n2", "1.0", 1, RankPhase.EXITED, exit_status=143))
    assert (record.status.state, record.status.end_intent) == (JobState.TERMINATING, EndIntent.FAIL)


def test_a_loss_without_a_known_last_contact_is_fenced_from_the_moment_it_is_noticed() -> None:
    model, record = running()
    out = model.apply(ev.NodeLost(LOST_AT, "n2", "silent"))
    assert fx.WakeAt(LOST_AT + 10 + 7) in out
    model.apply(ev.RankObserved(LOST_AT + 1, "n1", "1.0", 0, RankPhase.GONE, exit_status=143))
    tick(model, DEADLINE)  # the deadline counted from the last contact would have passed
    assert record.status.state == JobState.TERMINATING
    tick(model, LOST_AT + 17)
    assert record.status.state == JobState.PENDING


def test_a_fenced_ranks_lines_are_dated_when_the_fence_stopped_it_not_when_the_report_arrived() -> None:
    """E.g. ``labgang up`` killed with SIGKILL: its ranks' small parents fence them when the lease runs
    out, and the next ``labgang up`` hears of it only when it starts, long after."""
    model, record = running()
    stopped = ev.RankObserved(60.0, "n2", "1.0", 1, RankPhase.EXITED, exit_status=143, fenced=True, fenced_at=8.5)
    model.apply(ev.NodeJoined(60.0, "n2", (stopped,), frozenset({"n1", "n2"})))
    for rank, node in ((0, "n1"), (1, "n2")):
        model.apply(ev.RankObserved(61.0, node, "1.0", rank, RankPhase.GONE, exit_status=143))
    lines = [(h.time, h.event, h.message.split(":")[0]) for h in record.history[2:]]
    assert lines == [
        (8.5, "stopping", "node n2 stopped rank 1 itself"),
        (8.5, "rank-exited", "rank 1 on n2 exited with status 143"),
        (61.0, "rank-exited", "rank 0 on n1 exited with status 143"),  # stopped once the coordinator knew
        (61.0, "requeued", "node n2 stopped rank 1 itself"),  # the requeue happens then too
    ], record.history
    assert [h.time for h in record.history] == sorted(h.time for h in record.history)


@pytest.mark.parametrize("fenced_at", [1.0, 75.0], ids=["before-its-last-line", "after-now"])
def test_a_fence_time_that_would_reorder_the_history_is_not_used(fenced_at: float) -> None:
    model, record = running()  # its last line, "running", at t = 2
    stopped = ev.RankObserved(60.0, "n2", "1.0", 1, RankPhase.EXITED, exit_status=143, fenced=True, fenced_at=fenced_at)
    model.apply(ev.NodeJoined(60.0, "n2", (stopped,), frozenset({"n1", "n2"})))
    assert {h.time for h in record.history if h.event in ("stopping", "rank-exited")} == {60.0}


def test_the_active_jobs_are_listed_for_the_fences_only_while_a_node_is_lost() -> None:
    """Listing the active jobs sorts every job (10,000 pending ones in a busy lab), and the model
    ticks every second: with no node lost the fence rules must not ask for the list at all."""
    model, _ = running()
    fences = FenceRules(POLICY, RuleContext(), GangRules(POLICY, model.jobs, RuleContext(), lambda job: None))
    asked: list[int] = []

    def active() -> list[JobRecord]:
        asked.append(1)
        return model.active()

    fences.expire_all(active)
    assert asked == []
    fences.node_lost(ev.NodeLost(LOST_AT, "n2", "silent", LAST_CONTACT), model.active())
    fences.expire_all(active)
    assert asked == [1]


def requeued_after_rank_0_exited_0() -> tuple[Lifecycle, JobRecord]:
    """Job 1's rank 0 on n1 exited 0 on its own; n2, with rank 1, was lost and its fence ran out: requeued."""
    model, record = running()
    model.apply(ev.RankObserved(5.0, "n1", "1.0", 0, RankPhase.GONE, exit_status=0))
    model.apply(ev.NodeLost(LOST_AT, "n2", "silent for 10.5 s", LAST_CONTACT))
    tick(model, DEADLINE)
    assert (record.status.state, record.status.attempt) == (JobState.PENDING, 1)
    assert record.status.unheard_exits == (("1.0", 1, "n2"),)
    return model, record


def test_a_requeued_gangs_unheard_rank_reported_exited_0_later_ends_the_job_succeeded() -> None:
    """Its agent comes back after the fence ran out (restarted after a kill -9) and reports that rank 1
    had exited 0 on its own: that attempt had finished, so the job, not admitted again, never runs again
    (docs/queue-semantics.md §A3.6)."""
    model, record = requeued_after_rank_0_exited_0()
    # what the coordinator reads back after a restart still says which exits are awaited
    assert JobStatus.from_json(record.status.to_json()).unheard_exits == (("1.0", 1, "n2"),)
    gone = ev.RankObserved(30.0, "n2", "1.0", 1, RankPhase.GONE, exit_status=0)
    out = model.apply(ev.NodeJoined(30.0, "n2", (gone,), frozenset({"n1", "n2"})))
    st = record.status
    assert (st.state, st.exit_status, st.unheard_exits) == (JobState.SUCCEEDED, 0, ())
    assert (st.admit_time, st.start_time) == (1.0, 2.0)  # the attempt that ran, not the requeue's reset
    assert "1" not in model.jobs and any(isinstance(e, fx.Finished) for e in out)
    assert [h.event for h in record.history][-2:] == ["rank-exited", "succeeded"]
    assert record.attempt_record is not None and (record.attempt_record.attempt, record.attempt_record.outcome) == (
        0,
        "succeeded",
    )
    # the rank's own events, sent after the hello, change nothing more
    assert model.apply(ev.RankObserved(30.1, "n2", "1.0", 1, RankPhase.GONE, exit_status=0)) == []


@pytest.mark.parametrize(
    ("exit_status", "fenced"), [(1, False), (0, True)], ids=["exited-non-zero", "stopped-on-its-lease"]
)
def test_a_late_exit_that_is_not_0_on_its_own_leaves_the_requeue_standing(exit_status: int, fenced: bool) -> None:
    model, record = requeued_after_rank_0_exited_0()
    late = ev.RankObserved(30.0, "n2", "1.0", 1, RankPhase.GONE, exit_status=exit_status, fenced=fenced)
    model.apply(late)
    st = record.status
    assert (st.state, st.attempt, st.unheard_exits) == (JobState.PENDING, 1, ())
    assert record.history[-1].message.endswith("so the requeue stands")


def test_a_late_exit_of_a_gang_whose_other_rank_was_killed_by_the_stop_changes_nothing() -> None:
    model, record = running()
    lose_n2(model)  # rank 0 on n1 stopped: 143, not its own exit
    tick(model, DEADLINE)
    assert (record.status.state, record.status.unheard_exits) == (JobState.PENDING, ())
    model.apply(ev.RankObserved(30.0, "n2", "1.0", 1, RankPhase.GONE, exit_status=0))
    assert (record.status.state, record.status.attempt) == (JobState.PENDING, 1)


def test_a_late_exit_after_the_next_attempt_was_admitted_changes_nothing() -> None:
    model, record = requeued_after_rank_0_exited_0()
    placement = (RankPlacement(0, "n1", ("GPU-a",)), RankPlacement(1, "n3", ("GPU-c",)))
    model.apply(ev.CycleDecided(40.0, CycleResult(admitted=(Admit("1", placement),), preempted=(), pending=())))
    assert (record.status.state, record.status.unheard_exits) == (JobState.ADMITTED, ())
    model.apply(ev.RankObserved(41.0, "n2", "1.0", 1, RankPhase.GONE, exit_status=0))
    assert (record.status.state, record.run_id) == (JobState.ADMITTED, "1.1")


def ended_by_a_late_exit_at_6() -> tuple[Lifecycle, JobRecord, list[fx.Effect]]:
    """Job 1 requeued as above; its rank 1 had really exited 0 at t = 6 (its agent's clock), which n2's
    agent, restarted at t = 30, reports as it rejoins."""
    model, record = requeued_after_rank_0_exited_0()
    gone = ev.RankObserved(30.0, "n2", "1.0", 1, RankPhase.GONE, exit_status=0, ended_at=6.0)
    out = model.apply(ev.NodeJoined(30.0, "n2", (gone,), frozenset({"n1", "n2"})))
    assert record.status.state == JobState.SUCCEEDED
    return model, record, out


def test_a_job_ended_by_a_late_exit_ended_when_its_last_rank_really_did() -> None:
    """Its end is the latest real end of its ranks (rank 0 at 5, heard then; rank 1 at 6, heard at 30),
    not the late report's arrival: ELAPSED and GPU-hours run from its admission (1) to 6, in its status
    and in its attempt's accounting record (README: a job whose ranks ended while labgang was down ended
    when its last rank ended)."""
    _, record, _ = ended_by_a_late_exit_at_6()
    rec = record.attempt_record
    assert (record.status.start_time, record.status.end_time) == (2.0, 6.0)
    assert rec is not None and (rec.start_time, rec.end_time) == (2.0, 6.0)
    row = history_view(record, 30.0, [rec])
    assert (row["elapsed_s"], row["end_time"], row["gpu_hours"]) == (5.0, 6.0, 2 * 5.0 / 3600)


def test_a_job_ended_by_a_late_exit_counts_no_restart_for_the_requeue_that_never_ran() -> None:
    """The requeue counted restart 1 and attempt 1; the job ended before attempt 1 was admitted, so
    attempt 0 was its last and it restarted 0 times: `history` (RESTARTS, attempts) and its single
    attempt record agree."""
    _, record, _ = ended_by_a_late_exit_at_6()
    st = record.status
    assert (st.restart_count, st.attempt, record.run_id) == (0, 0, "1.0")
    rec = record.attempt_record
    assert rec is not None and (rec.attempt, rec.outcome) == (0, "succeeded")
    row = history_view(record, 30.0, [rec])
    assert (row["restart_count"], row["attempts"], row["admitted_attempts"]) == (0, 1, 1)


def test_a_job_ended_by_a_late_exit_shows_the_attempt_that_ran_with_its_ranks_real_exits() -> None:
    """`show`: the nodes and ranks of attempt 0, rank 1 with the exit its agent reported late (not the
    "lost" of its fence) and its real end; the late rank row is saved under attempt 0, the job's
    attempt, which is what the store reads back for a finished job."""
    _, record, out = ended_by_a_late_exit_at_6()
    view = job_view(record)
    assert view["nodes"] == ["n1", "n2"]
    ranks = [(r["rank"], r["node"], r["state"], r["exit_status"], r["end_time"]) for r in view["ranks"]]
    assert ranks == [(0, "n1", RankPhase.GONE, 0, 5.0), (1, "n2", RankPhase.GONE, 0, 6.0)]
    saved = [(e.attempt, e.rank.rank, e.rank.state, e.rank.exit_status) for e in out if isinstance(e, fx.SaveRank)]
    assert saved == [(0, 1, RankPhase.GONE, 0)]
    assert record.requeued_ranks == {}


def test_a_coordinator_restarted_while_the_exits_are_awaited_ends_the_job_the_same(tmp_path: Path) -> None:
    """The store reads back, with the pending job, the requeued attempt's ranks and accounting record
    (attempt 0, not the current 1, which was never admitted): the late exit then ends it as without
    the restart, at rank 1's real end, with no restart counted and attempt 0's ranks."""
    _, record = requeued_after_rank_0_exited_0()
    store = Store(tmp_path / "db")
    try:
        saved = store.insert_job(record.spec, record.status, record.id)
        for rank in record.requeued_ranks.values():
            store.save_rank(saved, rank, attempt=0)
        assert record.attempt_record is not None
        store.save_attempt(record.attempt_record)
        store.commit()
        [loaded] = Store(tmp_path / "db").load_jobs(active_only=True)
    finally:
        store.close()
    assert sorted(loaded.requeued_ranks) == [0, 1] and loaded.ranks == {}
    assert loaded.attempt_record is not None and loaded.attempt_record.attempt == 0
    model = Lifecycle(POLICY, [loaded])
    gone = ev.RankObserved(30.0, "n2", "1.0", 1, RankPhase.GONE, exit_status=0, ended_at=6.0)
    model.apply(ev.NodeJoined(30.0, "n2", (gone,), frozenset({"n1", "n2"})))
    st = loaded.status
    assert (st.state, st.end_time, st.restart_count, st.attempt) == (JobState.SUCCEEDED, 6.0, 0, 0)
    assert job_view(loaded)["nodes"] == ["n1", "n2"]
