"""A finished job never runs again: every stop that would requeue a job (shutdown, lost node,
fenced lease, failed start, preemption) ends it as succeeded when every rank of the attempt exited
0 on its own (docs/queue-semantics.md §A3.6), and only then. Stops that never requeue (cancel,
time limit) keep their outcome. The coordinator's lifecycle model driven on a fake clock (real
SQLite store; agents represented by their registry records, no processes)."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.store import Store
from labgang.launcher.coordinator.views import job_view, queue_row
from labgang.launcher.lifecycle.events import LaunchSent, ShutdownRequested
from labgang.launcher.lifecycle.records import RankRecord
from labgang.launcher.lifecycle.states import RankPhase
from labgang.launcher.model import JobState
from labgang.launcher.scheduler.decisions import CycleResult, Preempt
from lifecycle_driver import ROOT, admit, advance, clock_of, decide, event, make_coord, start, submit

SHUTDOWN = "stopped: labgang up shut down"


@pytest.fixture
def coord(tmp_path: Path):
    yield from make_coord(tmp_path)


def both_ranks_end(coord: Coordinator, job_id: str, status: int) -> None:
    """Rank 0 on n1 and rank 1 on n2 exit with ``status`` and are gone."""
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, job_id, rank, "exited", status)
        event(coord, node, job_id, rank, "gone", status)


def events_of(coord: Coordinator, job_id: str) -> list[str]:
    return [h.event for h in coord.jobs[job_id].history]


@pytest.mark.parametrize("requeue", [True, False], ids=["requeue", "no-requeue"])
async def test_a_shutdown_whose_ranks_all_exit_0_within_the_grace_succeeds(coord: Coordinator, requeue: bool) -> None:
    """The user's report: a job that ignores SIGTERM and exits 0 during `labgang up`'s stop ran again."""
    job_id = await submit(coord, requeue=requeue)
    start(coord, job_id)
    coord.apply(ShutdownRequested(coord.clock(), SHUTDOWN))
    st = coord.jobs[job_id].status
    assert (st.state, st.end_intent) == (JobState.TERMINATING, "shutdown")
    both_ranks_end(coord, job_id, 0)
    assert (st.state, st.exit_status, st.reason_code, st.restart_count) == (JobState.SUCCEEDED, 0, "completed", 0)
    assert st.reason_message == f"all ranks exited with status 0 ({SHUTDOWN})"
    assert "requeued" not in events_of(coord, job_id)


async def test_a_shutdown_that_kills_a_rank_requeues_the_job(coord: Coordinator) -> None:
    job_id = await submit(coord)
    start(coord, job_id)
    coord.apply(ShutdownRequested(coord.clock(), SHUTDOWN))
    event(coord, "n1", job_id, 0, "exited", 0)  # rank 0 ends on its own; rank 1 is killed by SIGTERM
    event(coord, "n1", job_id, 0, "gone", 0)
    event(coord, "n2", job_id, 1, "exited", -15)
    event(coord, "n2", job_id, 1, "gone", -15)
    st = coord.jobs[job_id].status
    assert (st.state, st.restart_count) == (JobState.PENDING, 1)
    assert coord.jobs[job_id].history[-1].message == f"{SHUTDOWN}; restart 1"


async def test_a_lost_node_whose_ranks_all_reported_exit_0_succeeds(coord: Coordinator) -> None:
    """n2 is lost, then comes back before the fence expires and reports rank 1's real exit: 0,
    not stopped on its lease. Rank 0 on n1 exited 0 too: the job finished."""
    job_id = await submit(coord)
    start(coord, job_id)
    coord.agents.nodes["n2"].detach_link("its link closed")
    advance(coord, 11)
    coord.node_events.check_timers()
    st = coord.jobs[job_id].status
    assert (st.state, st.end_intent) == (JobState.TERMINATING, "lost")
    event(coord, "n1", job_id, 0, "exited", 0)
    event(coord, "n1", job_id, 0, "gone", 0)
    conn = coord.agents.join("n2", coord.clock())
    run_id = coord.jobs[job_id].run_id
    coord.node_events.reconcile(conn, [{"job_id": run_id, "rank": 1, "state": "gone", "pid": 42, "exit_status": 0}])
    assert (st.state, st.exit_status, st.restart_count) == (JobState.SUCCEEDED, 0, 0)
    assert "requeued" not in events_of(coord, job_id)


async def test_a_lost_node_whose_rank_exit_is_unknown_requeues_even_if_the_others_exited_0(coord: Coordinator) -> None:
    """Rank 1's exit is never heard of (its fence expires): unknown is not success."""
    job_id = await submit(coord)
    start(coord, job_id)
    coord.agents.nodes["n2"].detach_link("its link closed")
    last_word = coord.agents.nodes["n2"].last_seen
    advance(coord, 11)
    coord.node_events.check_timers()
    event(coord, "n1", job_id, 0, "exited", 0)
    event(coord, "n1", job_id, 0, "gone", 0)
    advance(coord, last_word + 10 + coord.jobs[job_id].spec.grace_s - clock_of(coord).now)
    coord.node_events.check_timers()
    st = coord.jobs[job_id].status
    assert (st.state, st.restart_count) == (JobState.PENDING, 1)
    assert "fence-expired" in events_of(coord, job_id)


async def test_a_rank_stopped_on_its_nodes_lease_never_counts_as_exiting_0_on_its_own(coord: Coordinator) -> None:
    """n2's agent lost its lease and stopped rank 1 itself; the rank ignored SIGTERM and exited 0.
    That exit is the node's, not the rank's: the job is requeued, not counted as finished."""
    job_id = await submit(coord)
    start(coord, job_id)
    run_id = coord.jobs[job_id].run_id
    for kind in ("exited", "gone"):
        coord.node_events.apply_rank_event(
            "n2",
            {"job_id": run_id, "rank": 1, "kind": kind, "exit_status": 0, "time": coord.clock(), "fenced": True},
        )
    st = coord.jobs[job_id].status
    assert (st.state, st.end_intent, st.lease_stopped) == (JobState.TERMINATING, "lost", True)
    event(coord, "n1", job_id, 0, "exited", 0)  # rank 0 ignores the stop's SIGTERM and exits 0
    event(coord, "n1", job_id, 0, "gone", 0)
    assert (st.state, st.restart_count, st.lease_stopped) == (JobState.PENDING, 1, False)


async def test_a_failed_start_whose_ranks_all_exited_0_succeeds(coord: Coordinator) -> None:
    """Rank 1's start was never reported within startup_timeout_s, but it ran and exited 0,
    as rank 0 did: the attempt finished; it is not retried."""
    job_id = await submit(coord)
    admit(coord, job_id)
    for node in ("n1", "n2"):
        coord.apply(LaunchSent(coord.clock(), node, coord.jobs[job_id].run_id))
    event(coord, "n1", job_id, 0, "started")
    advance(coord, 31)
    coord.node_events.check_timers()
    st = coord.jobs[job_id].status
    assert (st.state, st.end_intent) == (JobState.TERMINATING, "retry")
    both_ranks_end(coord, job_id, 0)
    assert (st.state, st.exit_status, st.start_failures) == (JobState.SUCCEEDED, 0, 0)


async def test_a_preempted_victim_whose_ranks_all_exit_0_succeeds(coord: Coordinator) -> None:
    victim = await submit(coord)
    start(coord, victim)
    urgent = await submit(coord, priority=10)
    decide(coord, CycleResult(admitted=(), preempted=(Preempt(urgent, (victim,), "priority 10 > 0"),), pending=()))
    both_ranks_end(coord, victim, 0)
    st = coord.jobs[victim].status
    assert (st.state, st.exit_status, st.restart_count) == (JobState.SUCCEEDED, 0, 0)


async def test_a_cancelled_job_whose_ranks_exit_0_stays_cancelled(coord: Coordinator) -> None:
    """A cancel never requeues: the owner asked for the job to end, and it is CANCELLED (Slurm too)."""
    job_id = await submit(coord)
    start(coord, job_id)
    await coord.desk.cancel(ROOT, job_id)
    both_ranks_end(coord, job_id, 0)
    assert coord.jobs[job_id].status.state == JobState.CANCELLED


async def test_a_job_stopped_at_its_time_limit_whose_ranks_exit_0_ends_timeout(coord: Coordinator) -> None:
    """A time limit never requeues: the job ends TIMEOUT, as in Slurm, even on status 0."""
    job_id = await submit(coord, time_limit_s=60)
    start(coord, job_id)
    advance(coord, 61)
    coord.node_events.check_timers()
    both_ranks_end(coord, job_id, 0)
    st = coord.jobs[job_id].status
    assert (st.state, st.reason_code) == (JobState.TIMEOUT, "timeout")


async def test_a_requeued_job_shows_no_nodes_and_keeps_no_ranks_on_disk(coord: Coordinator, tmp_path: Path) -> None:
    """The requeue happens in the event that reports the last rank gone; that event's rank writes
    belong to the attempt that ran, not to the next one (which has no ranks until admitted).
    Read back by a coordinator started later (the next `labgang up`), the pending job has no nodes."""
    job_id = await submit(coord)
    start(coord, job_id)
    coord.apply(ShutdownRequested(coord.clock(), SHUTDOWN))
    both_ranks_end(coord, job_id, 143)
    assert coord.jobs[job_id].status.state == JobState.PENDING
    assert job_view(coord.jobs[job_id])["nodes"] == []
    coord.store.commit()
    assert [(a, r, node, state) for a, r, node, state, _ in coord.store.rank_attempts(job_id)] == [
        (0, 0, "n1", "gone"),
        (0, 1, "n2", "gone"),
    ]
    coord.store.close()
    again = Coordinator(coord.config, Store(tmp_path / "db"), clock=coord.clock)
    try:
        job = again.desk.get_job(job_id)
        assert job.status.state == JobState.PENDING and job.ranks == {}
        assert job_view(job)["nodes"] == [] and job_view(job)["ranks"] == []
        assert queue_row(job)["nodes"] == []
    finally:
        again.store.close()


async def test_a_pending_job_loaded_from_an_older_store_drops_its_stale_ranks(
    coord: Coordinator, tmp_path: Path
) -> None:
    """A store written before the fix holds the last attempt's ranks under the pending attempt:
    the lifecycle model starts the pending job with none, so `show` says `Nodes: -`."""
    job_id = await submit(coord)
    start(coord, job_id)
    coord.apply(ShutdownRequested(coord.clock(), SHUTDOWN))
    both_ranks_end(coord, job_id, 143)
    job = coord.jobs[job_id]
    coord.store.commit()
    stale = RankRecord(0, "n1", ("GPU-a",), RankPhase.GONE, 7, 143)
    coord.store.save_rank(job, stale)  # what the old code wrote: attempt 0's rank under attempt 1
    coord.store.commit()
    assert (1, 0, "n1", "gone", 143) in coord.store.rank_attempts(job_id)
    coord.store.close()
    again = Coordinator(coord.config, Store(tmp_path / "db"), clock=coord.clock)
    try:
        loaded = again.desk.get_job(job_id)
        assert loaded.status.state == JobState.PENDING and loaded.ranks == {}
        assert job_view(loaded)["nodes"] == []
    finally:
        again.store.close()
