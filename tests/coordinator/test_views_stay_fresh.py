"""The cached views of a job never go stale: ``GET /v1/jobs`` (whole JobViews and ``queue`` rows) and
the pitfall watch's snapshot, driven through the coordinator's real lifecycle model.

Each step changes a job the way the model does (a pending reason, its message alone, an admission,
rank starts with pids, a rank alone, a history line alone, a preemption and requeue, a startup
timeout, a cancel, a success), and the
next listing and snapshot must be what views built from scratch give, and differ from the last
ones. Nothing here tells a cache that a job changed: the caches see it themselves
(``launcher/coordinator/view_cache.py``, ``launcher/lifecycle/records.py`` ``CountsChanges``).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from labgang.launcher.coordinator import handlers
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.lifecycle.events import DeviceViolationSeen
from labgang.launcher.model import JobState
from labgang.launcher.pitfalls import ClusterSnapshot
from labgang.launcher.scheduler.decisions import CycleResult, Pending, PendingReason, Preempt, ReasonCode
from lifecycle_driver import ROOT, admit, advance, clock_of, decide, event, make_coord, start, submit
from uncached_views import built_now, snapshot_built_now


@pytest.fixture
def coord(tmp_path: Path):
    yield from make_coord(tmp_path)


async def listing(coord: Coordinator, view: str) -> list[dict[str, Any]]:
    """Every job as ``GET /v1/jobs?all=1&view=VIEW`` lists it (the real handler and its cache)."""
    reply = await handlers.list_jobs(coord.config, coord.desk, coord.views, ROOT, {}, {"all": "1", "view": view}, b"")
    assert reply.pieces is not None
    page = json.loads(b"".join(reply.pieces))
    assert page["next_cursor"] is None
    return page["jobs"]


class Seen:
    """What the last check saw, so each step can show that it changed something."""

    def __init__(self) -> None:
        self.full: list[dict[str, Any]] = []
        self.rows: list[dict[str, Any]] = []
        self.snapshot: ClusterSnapshot | None = None

    async def check(self, coord: Coordinator, *, rows_change: bool = True) -> None:
        full, rows, snapshot = await listing(coord, "full"), await listing(coord, "queue"), coord.pitfall_snapshot()
        assert full == built_now(coord, "full")
        assert rows == built_now(coord, "queue")
        assert snapshot == snapshot_built_now(coord)
        assert full != self.full, "the step changed nothing a JobView shows"
        assert snapshot.jobs != (self.snapshot.jobs if self.snapshot else None)
        if rows_change:
            assert rows != self.rows, "the step changed nothing a queue row shows"
        self.full, self.rows, self.snapshot = full, rows, snapshot


async def test_every_change_the_lifecycle_makes_shows_in_the_next_listing_and_snapshot(coord: Coordinator) -> None:
    seen = Seen()
    low = await submit(coord)
    await seen.check(coord)

    # a pending reason (code and message), then a new message alone: the write a cycle makes in memory only
    reason = PendingReason(ReasonCode.NO_CAPACITY, "needs 8 gpu; 0 free")
    decide(coord, CycleResult(admitted=(), preempted=(), pending=(Pending(low, reason),)))
    await seen.check(coord)
    decide(coord, CycleResult(admitted=(), preempted=(), pending=(Pending(low, PendingReason(reason.code, "7 free")),)))
    assert coord.jobs[low].status.reason_message == "7 free"
    await seen.check(coord)

    # admitted (state, admit time, ranks, history), then each rank started with its pid
    admit(coord, low)
    await seen.check(coord)
    coord.node_events.apply_rank_event("n1", {"job_id": f"{low}.0", "rank": 0, "kind": "started", "pid": 4242})
    assert coord.jobs[low].status.state == JobState.ADMITTED  # a rank's phase and pid alone changed
    await seen.check(coord, rows_change=False)  # a queue row shows no rank
    event(coord, "n2", low, 1, "started")
    assert coord.jobs[low].status.state == JobState.RUNNING
    await seen.check(coord)

    # a rank alone: its agent reports it again with another pid (status and history stay as they are)
    job = coord.jobs[low]
    unchanged = (job.status.changes, len(job.history))
    coord.node_events.apply_rank_event("n1", {"job_id": f"{low}.0", "rank": 0, "kind": "started", "pid": 4343})
    assert job.ranks[0].pid == 4343 and (job.status.changes, len(job.history)) == unchanged
    await seen.check(coord, rows_change=False)

    # the history alone: a device violation under violation = "report" adds a line and changes nothing else
    ranks = [(r.state, r.pid, r.changes) for r in job.ranks.values()]
    coord.apply(DeviceViolationSeen(coord.clock(), "n1", f"{low}.0", 0, "GPU-x", 4343, ("GPU-a",)))
    assert job.history[-1].event == "device-violation"
    assert job.status.changes == unchanged[0] and [(r.state, r.pid, r.changes) for r in job.ranks.values()] == ranks
    await seen.check(coord, rows_change=False)

    # preempted by a higher priority job: the victim terminates, its ranks exit, it is requeued
    clock_of(coord).now += 50
    high = await submit(coord, priority=10)
    await seen.check(coord)
    decide(coord, CycleResult(admitted=(), preempted=(Preempt(high, (low,), "priority 10 > 0"),), pending=()))
    assert coord.jobs[low].status.state == JobState.TERMINATING
    await seen.check(coord)
    event(coord, "n1", low, 0, "exited", 143)  # one rank's exit status alone
    await seen.check(coord, rows_change=False)
    event(coord, "n2", low, 1, "exited", 143)
    event(coord, "n1", low, 0, "gone", 143)
    event(coord, "n2", low, 1, "gone", 143)
    st = coord.jobs[low].status
    assert (st.state, st.restart_count, st.attempt) == (JobState.PENDING, 1, 1) and coord.jobs[low].ranks == {}
    await seen.check(coord)

    # the preemptor starts, only one of its ranks comes up, and the startup timeout stops it (a timer arrow)
    admit(coord, high)
    event(coord, "n1", high, 0, "started")
    await seen.check(coord)
    advance(coord, 31)
    coord.node_events.check_timers()
    assert coord.jobs[high].status.state == JobState.TERMINATING
    await seen.check(coord)

    # the requeued victim runs again and succeeds; the preemptor is cancelled
    start(coord, low)
    await seen.check(coord)
    for node, rank in (("n1", 0), ("n2", 1)):
        event(coord, node, low, rank, "exited", 0)
        event(coord, node, low, rank, "gone", 0)
    assert (st.state, st.exit_status) == (JobState.SUCCEEDED, 0)
    await seen.check(coord)
    await coord.desk.cancel(ROOT, high)
    await seen.check(coord)


async def test_an_unchanged_job_is_served_from_the_caches(coord: Coordinator) -> None:
    """Listings and snapshots with nothing changed in between make nothing anew (the point of the caches)."""
    job_id = await submit(coord)
    reason = PendingReason(ReasonCode.NO_CAPACITY, "needs 8 gpu; 0 free")
    decide(coord, CycleResult(admitted=(), preempted=(), pending=(Pending(job_id, reason),)))
    first = coord.pitfall_snapshot()
    before = await listing(coord, "full")
    # the same reason again, as every cycle writes it: not a change
    decide(coord, CycleResult(admitted=(), preempted=(), pending=(Pending(job_id, reason),)))
    assert coord.pitfall_snapshot().jobs[0] is first.jobs[0]
    assert await listing(coord, "full") == before
