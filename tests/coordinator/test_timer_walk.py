"""The coordinator's timer check walks the jobs holding devices once (``NodeEvents.check_timers``
hands its list to the model's ``Tick``; an idle coordinator ticks twice a second over every job):
the walk for nodes gone since a restart and the model's time limits both still act on that list.
(A node found lost walks the jobs again for its fences: that is no idle tick.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.model import JobState
from lifecycle_driver import Clock, advance, clock_of, make_coord, start, submit


@pytest.fixture
def coord(tmp_path: Path):
    yield from make_coord(tmp_path)


def count_walks(coord: Coordinator, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Count the calls of the model's ``active()`` (each one walks every job)."""
    walks: list[int] = []
    active = coord.model.active

    def counted() -> list[JobRecord]:
        walks.append(1)
        return active()

    monkeypatch.setattr(coord.model, "active", counted)
    return walks


async def test_a_tick_walks_the_jobs_once_and_still_ends_a_job_at_its_time_limit(
    coord: Coordinator, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id = await submit(coord, time_limit_s=60)
    for _ in range(3):
        await submit(coord)  # pending: walked over, never holding devices
    start(coord, job_id)
    walks = count_walks(coord, monkeypatch)
    advance(coord, 59)
    coord.node_events.check_timers()
    assert coord.jobs[job_id].status.state == JobState.RUNNING and len(walks) == 1
    advance(coord, 1)  # past node_timeout_s (10 s) since the start: the walk for lost nodes runs too
    coord.node_events.check_timers()
    st = coord.jobs[job_id].status
    assert (st.state, st.end_intent) == (JobState.TERMINATING, "timeout") and len(walks) == 2


async def test_nodes_gone_since_a_restart_are_found_on_the_tick_s_list(coord: Coordinator, tmp_path: Path) -> None:
    job_id = await submit(coord)
    start(coord, job_id)
    await coord.flush()
    clock = Clock()
    clock.now = clock_of(coord).now
    again = Coordinator(coord.config, Store(tmp_path / "db"), clock=clock)  # n1 and n2 never come back
    try:
        clock.now += 11  # node_timeout_s is 10
        again.node_events.check_timers()
        assert all(again.agents.nodes[n].lost for n in ("n1", "n2"))
        history = [h.message for h in again.jobs[job_id].history]
        assert any("did not reconnect within 10 s of a restart" in m for m in history)
    finally:
        again.store.close()
