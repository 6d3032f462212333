"""Gang lifecycle rules on a simulated clock: the coordinator's state machine driven directly
(real SQLite store; agents represented by their registry records, no processes)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.store import Store
from labgang.launcher.model import JobState
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Preempt
from labgang.launcher.scheduler.snapshot import RankPlacement
from lifecycle_driver import (
    ROOT,
    Clock,
    admit,
    advance,
    clock_of,
    decide,
    event,
    make_coord,
    node_inventory,
    node_uuids,
    start,
    submit,
)


@pytest.fixture
def coord(tmp_path: Path):
    yield from make_coord(tmp_path)


async def test_runs_only_when_every_rank_started(coord: Coordinator) -> None:
    job_id = await submit(coord)
    admit(coord, job_id)
    event(coord, "n1", job_id, 0, "started")
    assert coord.jobs[job_id].status.state == JobState.ADMITTED
    event(coord, "n2", job_id, 1, "started")
    assert coord.jobs[job_id].status.state == JobState.RUNNING


async def test_success_waits_until_every_rank_is_gone(coord: Coordinator) -> None:
    job_id = await submit(coord)
    start(coord, job_id)
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "exited", 0)
    assert coord.jobs[job_id].status.state == JobState.RUNNING  # devices still in use
    event(coord, "n1", job_id, 0, "gone", 0)
    event(coord, "n2", job_id, 1, "gone", 0)
    assert (coord.jobs[job_id].status.state, coord.jobs[job_id].status.exit_status) == (JobState.SUCCEEDED, 0)


async def test_one_failing_rank_stops_the_rest_and_fails_with_its_status(coord: Coordinator) -> None:
    job_id = await submit(coord)
    start(coord, job_id)
    event(coord, "n2", job_id, 1, "exited", 7)
    st = coord.jobs[job_id].status
    assert (st.state, st.end_intent) == (JobState.TERMINATING, "fail")
    event(coord, "n2", job_id, 1, "gone", 7)
    event(coord, "n1", job_id, 0, "exited", 143)
    event(coord, "n1", job_id, 0, "gone", 143)
    assert (st.state, st.exit_status) == (JobState.FAILED, 7)


async def test_preempted_victim_requeues_with_submit_time_and_restart_count(coord: Coordinator) -> None:
    victim = await submit(coord)
    start(coord, victim)
    submitted = coord.jobs[victim].status.submit_time
    clock_of(coord).now += 50
    urgent = await submit(coord, priority=10)
    decide(coord, CycleResult(admitted=(), preempted=(Preempt(urgent, (victim,), "priority 10 > 0"),), pending=()))
    assert coord.jobs[victim].status.state == JobState.TERMINATING
    assert coord.jobs[urgent].status.nominated == (victim,)
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, victim, rank, "exited", 143)
        event(coord, node, victim, rank, "gone", 143)
    st = coord.jobs[victim].status
    assert (st.state, st.restart_count, st.submit_time) == (JobState.PENDING, 1, submitted)
    assert coord.jobs[victim].run_id == f"{victim}.1" and coord.jobs[victim].ranks == {}
    coord.store.commit()
    assert [d[1] for d in coord.store.decisions(victim)] == ["admit", "victim"]


async def test_startup_timeout_requeues_with_backoff_then_fails(coord: Coordinator) -> None:
    job_id = await submit(coord)
    admit(coord, job_id)
    event(coord, "n1", job_id, 0, "started")  # rank 1 on n2 never starts
    advance(coord, 31)
    coord.node_events.check_timers()
    st = coord.jobs[job_id].status
    assert st.state == JobState.TERMINATING and "rank 1 on n2" in (st.reason_message or "")
    event(coord, "n1", job_id, 0, "exited", 143)
    event(coord, "n1", job_id, 0, "gone", 143)
    coord.node_events.reconcile(coord.agents.nodes["n2"], [])  # n2 never had it
    assert (st.state, st.restart_count, st.not_before) == (JobState.PENDING, 1, coord.clock() + 4)
    # Second failed start: max_start_failures = 2, so the job fails.
    advance(coord, 5)
    admit(coord, job_id)
    advance(coord, 31)
    coord.node_events.check_timers()
    coord.node_events.reconcile(coord.agents.nodes["n1"], [])
    coord.node_events.reconcile(coord.agents.nodes["n2"], [])
    assert st.state == JobState.FAILED and "could not start after 2 attempts" in (st.reason_message or "")


async def test_lost_node_requeues_or_fails_by_the_jobs_requeue_flag(coord: Coordinator) -> None:
    keep = await submit(coord)
    drop = await submit(coord, requeue=False)
    start(coord, keep)
    placement = (RankPlacement(0, "n1", ("GPU-c",)), RankPlacement(1, "n2", ("GPU-d",)))
    decide(coord, CycleResult(admitted=(Admit(drop, placement),), preempted=(), pending=()))
    event(coord, "n1", drop, 0, "started")
    event(coord, "n2", drop, 1, "started")
    coord.agents.nodes["n2"].detach_link("its link closed")  # n2 falls silent; n1 keeps reporting
    last_word = coord.agents.nodes["n2"].last_seen
    advance(coord, 11)
    coord.node_events.check_timers()
    assert coord.agents.nodes["n2"].lost
    for job_id in (keep, drop):
        event(coord, "n1", job_id, 0, "exited", 143)
        event(coord, "n1", job_id, 0, "gone", 143)
    # n2's ranks are fenced: they count as stopped only node_timeout_s + grace after n2's last word.
    fence = last_word + 10 + coord.jobs[keep].spec.grace_s
    advance(coord, fence - 0.01 - clock_of(coord).now)
    coord.node_events.check_timers()
    assert {coord.jobs[j].status.state for j in (keep, drop)} == {JobState.TERMINATING}
    advance(coord, 0.01)
    coord.node_events.check_timers()
    assert coord.jobs[keep].status.state == JobState.PENDING and coord.jobs[keep].status.restart_count == 1
    assert coord.jobs[drop].status.state == JobState.NODE_FAIL
    assert "node n2 lost" in (coord.jobs[drop].status.reason_message or "")


async def test_cancel_rules(coord: Coordinator) -> None:
    from labgang.launcher.coordinator.errors import Forbidden

    job_id = await submit(coord)
    stranger = Caller(uid=4242, user="mallory")
    with pytest.raises(Forbidden, match="belongs to root"):
        await coord.desk.cancel(stranger, job_id)
    start(coord, job_id)
    await coord.desk.cancel(ROOT, job_id)
    st = coord.jobs[job_id].status
    assert (st.state, st.end_intent) == (JobState.TERMINATING, "cancel")
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "gone", 143)
    assert st.state == JobState.CANCELLED


async def test_admission_is_committed_before_dispatch(coord: Coordinator, tmp_path: Path) -> None:
    """What a crash right after the cycle would leave: the admission is on disk."""
    job_id = await submit(coord)
    admit(coord, job_id)
    await coord.flush()
    reopened = {j.id: j for j in Store(tmp_path / "db").load_jobs()}
    assert reopened[job_id].status.state == JobState.ADMITTED
    assert sorted((r.rank, r.node) for r in reopened[job_id].ranks.values()) == [(0, "n1"), (1, "n2")]
    await asyncio.sleep(0)


async def test_time_limit_stops_the_job_and_ends_it_timeout(coord: Coordinator) -> None:
    job_id = await submit(coord, time_limit_s=60)
    start(coord, job_id)
    advance(coord, 59)
    coord.node_events.check_timers()
    assert coord.jobs[job_id].status.state == JobState.RUNNING
    advance(coord, 1)
    coord.node_events.check_timers()
    st = coord.jobs[job_id].status
    assert (st.state, st.end_intent) == (JobState.TERMINATING, "timeout")
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "gone", 143)
    assert st.state == JobState.TIMEOUT and "time limit of 60 s" in (st.reason_message or "")


async def test_signal_is_sent_before_the_time_limit_and_the_job_runs_until_it(coord: Coordinator) -> None:
    """Slurm's --signal USR1@10 with a 60 s limit: USR1 at 50 s (the job keeps running and may
    still finish on its own), SIGTERM at 60 s (an unwarned stop: the warning was sent)."""
    job_id = await submit(coord, time_limit_s=60, signal="SIGUSR1@10")
    start(coord, job_id)
    st = coord.jobs[job_id].status
    advance(coord, 49)
    coord.node_events.check_timers()
    assert st.state == JobState.RUNNING and not st.warned
    advance(coord, 1)
    coord.node_events.check_timers()
    assert st.state == JobState.RUNNING and st.warned
    coord.node_events.check_timers()  # sent once
    signals = [h.message for h in coord.jobs[job_id].history if h.event == "signal"]
    assert len(signals) == 1 and signals[0].startswith("signal SIGUSR1 sent")
    advance(coord, 9)
    coord.node_events.check_timers()
    assert st.state == JobState.RUNNING
    advance(coord, 1)
    coord.node_events.check_timers()
    assert (st.state, st.end_intent) == (JobState.TERMINATING, "timeout")


async def test_a_job_that_ends_on_its_warning_signal_succeeds(coord: Coordinator) -> None:
    job_id = await submit(coord, time_limit_s=60, signal="USR1@10")
    start(coord, job_id)
    advance(coord, 55)
    coord.node_events.check_timers()
    for node, rank in (("n1", 0), ("n2", 1)):  # checkpointed and quit on USR1
        event(coord, node, job_id, rank, "exited", 0)
        event(coord, node, job_id, rank, "gone", 0)
    assert coord.jobs[job_id].status.state == JobState.SUCCEEDED


async def test_a_cancel_stop_is_warned_and_the_warning_recorded(coord: Coordinator) -> None:
    job_id = await submit(coord, signal="USR1@10")
    start(coord, job_id)
    await coord.desk.cancel(ROOT, job_id)
    signals = [h.message for h in coord.jobs[job_id].history if h.event == "signal"]
    assert signals == ["signal SIGUSR1 sent to every rank, 10 s before SIGTERM"]


async def test_queue_usage_counts_borrowed_and_lent(tmp_path: Path) -> None:

    config = parse_config(
        {
            "queues": [
                {"name": "a", "cohort": "lab", "nominal": {"gpu": 2}},
                {"name": "b", "cohort": "lab", "nominal": {"gpu": 6}, "lending_limit": {"gpu": 4}},
            ],
            "default_queue": "a",
        }
    )
    c = Coordinator(config, Store(tmp_path / "db"), clock=Clock())
    job = await c.desk.submit(ROOT, {"argv": ["x"], "workers": 1, "gpus_per_worker": 5, "queue": "a", "grace_s": 7})
    placement = (RankPlacement(0, "n1", tuple(f"GPU-{i}" for i in range(5))),)
    decide(c, CycleResult(admitted=(Admit(job.id, placement),), preempted=(), pending=()))
    views = {q["name"]: q for q in c.queue_views()}
    assert (views["a"]["used"], views["a"]["borrowed"], views["a"]["lent"]) == ({"gpu": 5}, {"gpu": 3}, {})
    assert (views["b"]["used"], views["b"]["borrowed"], views["b"]["lent"]) == ({}, {}, {"gpu": 3})
    assert views["a"]["reclaim_time_s"] == 7 and views["a"]["running"] == 1
    c.store.close()


# ----- a finished gang never runs twice; a gang never evicted by the cycle that admits it --------


async def test_a_gang_whose_ranks_all_exited_is_never_a_victim_and_never_requeued(coord: Coordinator) -> None:
    """Every rank exited 0 but a leftover process keeps the ranks from being gone: a
    higher-priority job arrives. The gang's outcome comes from its exits (issue 15)."""
    from labgang.launcher.coordinator.scheduling import build_snapshot

    low = await submit(coord)
    start(coord, low)
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, low, rank, "exited", 0)  # main process exited; leftovers not gone yet
    [running] = build_snapshot(coord.driver, coord.clock()).running
    assert running.id == low and running.terminating  # its devices are leaving on their own
    clock_of(coord).now += 5
    high = await submit(coord, priority=10)
    decide(coord, CycleResult(admitted=(), preempted=(Preempt(high, (low,), "priority 10 > 0"),), pending=()))
    st = coord.jobs[low].status
    assert st.end_intent is None  # no requeue intent: the exits decide
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, low, rank, "gone", 0)
    assert (st.state, st.exit_status, st.restart_count) == (JobState.SUCCEEDED, 0, 0)
    assert not any(h.event == "requeued" for h in coord.jobs[low].history)
    coord.store.commit()
    assert [d[1] for d in coord.store.decisions(low)] == ["admit"]


async def test_a_gang_is_not_admitted_by_the_cycle_that_chooses_it_as_a_victim(coord: Coordinator) -> None:
    low = await submit(coord)
    high = await submit(coord, priority=10)
    placement = (RankPlacement(0, "n1", ("GPU-a",)), RankPlacement(1, "n2", ("GPU-b",)))
    decide(
        coord,
        CycleResult(
            admitted=(Admit(low, placement),), preempted=(Preempt(high, (low,), "priority 10 > 0"),), pending=()
        ),
    )
    st = coord.jobs[low].status
    assert (st.state, st.restart_count) == (JobState.PENDING, 0)
    assert coord.jobs[low].ranks == {} and st.admit_time is None
    coord.store.commit()
    assert coord.store.decisions(low) == []  # neither admitted nor preempted


async def test_an_attempt_evicted_before_it_started_is_not_counted_as_a_restart(coord: Coordinator) -> None:
    low = await submit(coord)
    admit(coord, low)  # admitted; its ranks never started
    clock_of(coord).now += 1
    high = await submit(coord, priority=10)
    decide(coord, CycleResult(admitted=(), preempted=(Preempt(high, (low,), "priority 10 > 0"),), pending=()))
    job = coord.jobs[low]
    assert (job.status.state, job.status.restart_count) == (JobState.PENDING, 0)
    assert job.run_id == f"{low}.1"  # a new attempt all the same: its ranks never collide with the old ones
    [requeued] = [h.message for h in job.history if h.event == "requeued"]
    assert "never ran" in requeued


async def test_most_recently_admitted_is_admission_order_not_submission_order(coord: Coordinator) -> None:
    """Two gangs admitted at one instant, the later-submitted first: the one admitted last is
    the most recently admitted (the order the simulator uses too)."""
    from labgang.launcher.coordinator.scheduling import build_snapshot
    from labgang.launcher.scheduler.snapshot import victim_order

    first, second = await submit(coord, workers=1), await submit(coord, workers=1)
    placements = {first: (RankPlacement(0, "n1", ("GPU-a",)),), second: (RankPlacement(0, "n2", ("GPU-b",)),)}
    decide(coord, CycleResult(admitted=(Admit(second, placements[second]),), preempted=(), pending=()))
    decide(coord, CycleResult(admitted=(Admit(first, placements[first]),), preempted=(), pending=()))
    running = build_snapshot(coord.driver, coord.clock()).running
    assert [j.id for j in sorted(running, key=victim_order)] == [first, second]  # evicted first: admitted last


async def test_the_scheduler_wakes_exactly_when_a_pending_job_starts_starving(tmp_path: Path) -> None:
    """Time alone changes a decision only when a job starts starving: the coordinator runs a cycle
    then (as ``labgang simulate`` does), without any other event and without a periodic timer."""
    from labgang.launcher.coordinator.scheduling import scheduling_loop

    config = parse_config(
        {"cycle_coalesce_s": 0, "queues": [{"name": "default", "nominal": {"gpu": 8}, "starvation_after": 0.3}]}
    )
    c = Coordinator(config, Store(tmp_path / "db"))
    conn = c.agents.join("n1", c.clock())
    # Every GPU shows a process labgang did not start: nothing is offered, the job waits.
    await c.node_events.on_inventory(
        conn, {"inventory": node_inventory("n1", {u: [777] for u in node_uuids("n1")}), "ranks": []}
    )
    loop_task = asyncio.create_task(scheduling_loop(c.kicks, c.commits, c.driver, c.admissions, c.store, c.config))
    try:
        waiter = await c.desk.submit(ROOT, {"argv": ["x"], "workers": 1, "gpus_per_worker": 4})

        async def cycles_above(n: int) -> None:
            while c.cycles <= n:
                await asyncio.sleep(0.01)

        await asyncio.wait_for(cycles_above(0), 5)
        assert c.jobs[waiter.id].status.state == JobState.PENDING
        cycles, since = c.cycles, c.jobs[waiter.id].status.pending_since
        await asyncio.wait_for(cycles_above(cycles), 5)
        assert c.clock() >= since + 0.3  # woken by its starvation, not before
    finally:
        loop_task.cancel()
        await asyncio.gather(loop_task, return_exceptions=True)
        await c.close()
        c.store.close()


async def test_a_completing_gang_whose_node_is_lost_is_still_decided_by_its_exits(coord: Coordinator) -> None:
    job_id = await submit(coord)
    start(coord, job_id)
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "exited", 0)
    coord.agents.nodes["n2"].detach_link("its link closed")  # n2 falls silent before its rank is gone
    last_word = coord.agents.nodes["n2"].last_seen
    advance(coord, 11)
    coord.node_events.check_timers()
    event(coord, "n1", job_id, 0, "gone", 0)
    assert coord.jobs[job_id].status.state == JobState.TERMINATING  # rank 1's leftovers may still run on n2
    advance(coord, last_word + 10 + coord.jobs[job_id].spec.grace_s - clock_of(coord).now)
    coord.node_events.check_timers()  # its fence expired: the exits decide
    st = coord.jobs[job_id].status
    assert (st.state, st.exit_status, st.restart_count) == (JobState.SUCCEEDED, 0, 0)


async def test_cycles_at_one_wake_continue_after_a_preemption_frees_devices_at_once(tmp_path: Path) -> None:
    """A victim admitted earlier but never launched leaves its devices the moment it is evicted:
    the next cycle of the same wake admits the preemptor (``labgang simulate`` runs cycles at an
    instant until nothing new is decided; the coordinator used to stop at the first cycle that
    admitted nothing)."""
    from labgang.launcher.coordinator.requests import build_spec
    from labgang.launcher.coordinator.scheduling import run_cycles
    from labgang.launcher.lifecycle.events import JobSubmitted
    from labgang.launcher.lifecycle.records import JobStatus

    clock = Clock()
    config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 4}, "within_queue": "lower-priority"}]})
    c = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    conn = c.agents.join("n1", clock.now)
    await c.node_events.on_inventory(conn, {"inventory": node_inventory("n1", {}), "ranks": []})

    def submit_now(priority: int) -> str:  # recorded without a commit: no dispatch runs in this test
        spec = build_spec({"argv": ["x"], "workers": 1, "gpus_per_worker": 4, "priority": priority}, ROOT, config)
        job = c.store.insert_job(spec, JobStatus(submit_time=clock.now, pending_since=clock.now))
        c.apply(JobSubmitted(clock.now, job))
        return job.id

    low = submit_now(0)
    run_cycles(c.driver, c.admissions)
    assert c.jobs[low].status.state == JobState.ADMITTED
    clock.now += 1
    high = submit_now(10)
    run_cycles(c.driver, c.admissions)
    assert c.jobs[high].status.state == JobState.ADMITTED
    assert (c.jobs[low].status.state, c.jobs[low].status.restart_count) == (JobState.PENDING, 0)
    c.store.close()


async def test_a_rank_that_exits_before_its_start_is_reported_says_running_first(coord: Coordinator) -> None:
    """A one-rank job whose rank ends before the agent reported it started: the history reads in
    order (running, then rank-exited) and counts one rank, not "1 ranks"."""
    job_id = (await coord.desk.submit(ROOT, {"argv": ["true"], "workers": 1, "gpus_per_worker": 1})).id
    placement = (RankPlacement(0, "n1", ("GPU-a",)),)
    decide(coord, CycleResult(admitted=(Admit(job_id, placement),), preempted=(), pending=()))
    event(coord, "n1", job_id, 0, "exited", 0)
    event(coord, "n1", job_id, 0, "gone", 0)
    history = [(h.event, h.message) for h in coord.jobs[job_id].history]
    events = [e for e, _ in history]
    assert events.index("running") < events.index("rank-exited"), history
    assert ("admitted", "1 rank on n1") in history
    assert ("running", "1 rank started on n1") in history
    assert "1 ranks" not in " ".join(m for _, m in history)


def rank_status(
    coord: Coordinator, node: str, job_id: str, rank: int, state: str, pid: int, status: int | None
) -> None:
    """What the agent's launch answer (or a status report) says of one rank: a ``RankStatus`` dict."""
    run_id = coord.jobs[job_id].run_id
    coord.node_events.apply_rank_status(
        node,
        {"job_id": run_id, "rank": rank, "state": state, "pid": pid, "pgid": pid, "exit_status": status},
    )


async def test_a_rank_exit_is_recorded_once_even_when_a_later_report_adds_its_pid(coord: Coordinator) -> None:
    job_id = (await coord.desk.submit(ROOT, {"argv": ["true"], "workers": 1, "gpus_per_worker": 1})).id
    decide(
        coord, CycleResult(admitted=(Admit(job_id, (RankPlacement(0, "n1", ("GPU-a",)),)),), preempted=(), pending=())
    )
    event(coord, "n1", job_id, 0, "started")
    event(coord, "n1", job_id, 0, "exited", 0)
    rank_status(coord, "n1", job_id, 0, "releasing", 4242, 0)  # the launch answer, late, with the pid
    event(coord, "n1", job_id, 0, "gone", 0)
    events = [h.event for h in coord.jobs[job_id].history]
    assert events == ["submitted", "admitted", "running", "rank-exited", "succeeded"], events
    assert coord.jobs[job_id].ranks[0].pid == 4242


async def test_a_rank_exiting_before_the_other_starts_is_recorded_after_running(coord: Coordinator) -> None:
    """`submit -n 2 -- true`: rank 1 exits before rank 0's start is reported; causally every rank
    started first, so "running" comes before either "rank-exited", each exactly once."""
    job_id = await submit(coord)
    admit(coord, job_id)
    event(coord, "n2", job_id, 1, "started")
    event(coord, "n2", job_id, 1, "exited", 0)
    event(coord, "n1", job_id, 0, "started")
    event(coord, "n1", job_id, 0, "exited", 0)
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "gone", 0)
    history = [(h.event, h.message) for h in coord.jobs[job_id].history]
    assert [e for e, _ in history] == [
        "submitted", "admitted", "running", "rank-exited", "rank-exited", "succeeded",
    ], history  # fmt: skip
    assert history[3][1] == "rank 1 on n2 exited with status 0" and history[4][1].startswith("rank 0 on n1")


async def test_a_rank_that_fails_while_the_gang_starts_is_recorded_before_stopping(coord: Coordinator) -> None:
    """The gang did start (a rank ran): its history says so, and which rank never reported running,
    before that rank's exit and the stop."""
    job_id = await submit(coord)
    admit(coord, job_id)
    event(coord, "n2", job_id, 1, "started")
    event(coord, "n2", job_id, 1, "exited", 3)
    history = [(h.event, h.message) for h in coord.jobs[job_id].history]
    assert [e for e, _ in history] == ["submitted", "admitted", "running", "rank-exited", "stopping"], history
    assert history[2][1] == "1 of 2 ranks started on n2; rank 0 never reported running"


async def test_the_pid_of_a_rank_that_ends_before_any_status_comes_from_its_events(coord: Coordinator) -> None:
    job_id = (await coord.desk.submit(ROOT, {"argv": ["true"], "workers": 1, "gpus_per_worker": 1})).id
    decide(
        coord, CycleResult(admitted=(Admit(job_id, (RankPlacement(0, "n1", ("GPU-a",)),)),), preempted=(), pending=())
    )
    run_id = coord.jobs[job_id].run_id
    for kind, status in (("started", None), ("exited", 0), ("gone", 0)):
        event_dict = {"job_id": run_id, "rank": 0, "kind": kind, "exit_status": status, "time": 1.0, "pid": 777}
        coord.node_events.apply_rank_event("n1", event_dict)
    record = coord.jobs[job_id]
    assert record.status.state == JobState.SUCCEEDED and record.ranks[0].pid == 777
    await coord.flush()
    stored = coord.store.load_job(job_id)
    assert stored is not None and [h.event for h in stored.history] == [h.event for h in record.history]
    assert stored.ranks[0].pid == 777


async def test_logs_of_an_attempt_the_job_never_had_say_which_attempts_it_has(coord: Coordinator) -> None:
    from labgang.launcher.coordinator.errors import BadRequest

    job_id = await submit(coord)
    admit(coord, job_id)
    await coord.flush()
    with pytest.raises(BadRequest) as err:
        await coord.desk.read_log(ROOT, job_id, 0, 0, attempt=1)
    assert str(err.value) == f"no attempt 1: job {job_id} has attempt 0 only" and err.value.field == "attempt"
