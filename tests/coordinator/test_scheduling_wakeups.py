"""What wakes the coordinator's scheduling loop, on a simulated clock: rank events, inventories,
kicks and the coalescing window (real SQLite store; agents represented by their registry records)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.store import Store
from labgang.launcher.model import JobState
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Preempt
from labgang.launcher.scheduler.snapshot import RankPlacement
from lifecycle_driver import (
    ROOT,
    admit,
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


# ----- what wakes the scheduling loop ----------------------------------------------------------


async def test_rank_events_wake_the_scheduler_only_when_a_job_changes_for_it(coord: Coordinator) -> None:
    job_id = await submit(coord)
    admit(coord, job_id)
    run_id = coord.jobs[job_id].run_id
    conn = coord.agents.nodes["n1"]

    def ev(rank: int, kind: str, status: int | None = None) -> dict:
        return {"job_id": run_id, "rank": rank, "kind": kind, "exit_status": status, "time": coord.clock()}

    coord.wake.clear()
    await coord.node_events.on_rank_events(conn, [ev(0, "started")])
    await coord.node_events.on_rank_events(coord.agents.nodes["n2"], [ev(1, "started")])
    assert coord.jobs[job_id].status.state == JobState.RUNNING
    assert not coord.wake.is_set()  # admitted -> running: nothing the scheduler decides on
    await coord.node_events.on_rank_events(conn, [ev(0, "exited", 0), ev(0, "gone", 0)])
    assert not coord.wake.is_set()  # one rank done, the gang still holds every device
    await coord.node_events.on_rank_events(coord.agents.nodes["n2"], [ev(1, "exited", 0), ev(1, "gone", 0)])
    assert coord.jobs[job_id].status.state == JobState.SUCCEEDED
    assert coord.wake.is_set()  # its devices are free


async def test_a_failing_rank_wakes_the_scheduler_as_its_gang_starts_stopping(coord: Coordinator) -> None:
    job_id = await submit(coord)
    start(coord, job_id)
    coord.wake.clear()
    run_id = coord.jobs[job_id].run_id
    await coord.node_events.on_rank_events(
        coord.agents.nodes["n2"],
        [{"job_id": run_id, "rank": 1, "kind": "exited", "exit_status": 3, "time": coord.clock()}],
    )
    assert coord.jobs[job_id].status.state == JobState.TERMINATING
    assert coord.wake.is_set()


async def test_inventory_wakes_the_scheduler_for_free_devices_only(coord: Coordinator) -> None:
    conn = coord.agents.nodes["n1"]
    uuids = node_uuids("n1")
    await coord.node_events.on_inventory(conn, {"inventory": node_inventory("n1", {}), "ranks": []})
    assert coord.wake.is_set()  # the first inventory: devices to offer
    job_id = await submit(coord, workers=1, gpus_per_worker=1)
    placement = (RankPlacement(0, "n1", (uuids[0],)),)
    decide(coord, CycleResult(admitted=(Admit(job_id, placement),), preempted=(), pending=()))
    coord.wake.clear()
    await coord.node_events.on_inventory(conn, {"inventory": node_inventory("n1", {uuids[0]: [4242]}), "ranks": []})
    assert not coord.wake.is_set()  # the job's own process on its own device
    await coord.node_events.on_inventory(
        conn, {"inventory": node_inventory("n1", {uuids[0]: [4242], uuids[1]: [777]}), "ranks": []}
    )
    assert coord.wake.is_set()  # a process outside labgang took a free device
    coord.wake.clear()
    await coord.node_events.on_inventory(conn, {"inventory": node_inventory("n1", {uuids[0]: [4242]}), "ranks": []})
    assert coord.wake.is_set()  # and gave it back


async def test_inventory_sent_with_rank_events_is_applied_before_them(coord: Coordinator) -> None:
    conn = coord.agents.nodes["n1"]
    uuids = node_uuids("n1")
    job_id = await submit(coord, workers=1, gpus_per_worker=1)
    placement = (RankPlacement(0, "n1", (uuids[0],)),)
    decide(coord, CycleResult(admitted=(Admit(job_id, placement),), preempted=(), pending=()))
    await coord.node_events.on_inventory(conn, {"inventory": node_inventory("n1", {uuids[0]: [4242]}), "ranks": []})
    run_id = coord.jobs[job_id].run_id
    events = [
        {"job_id": run_id, "rank": 0, "kind": k, "exit_status": s, "time": coord.clock()}
        for k, s in (("started", None), ("exited", 0), ("gone", 0))
    ]
    await coord.node_events.on_rank_events(conn, events, inventory=node_inventory("n1", {}))
    assert coord.jobs[job_id].status.state == JobState.SUCCEEDED
    assert conn.inventory is not None
    assert conn.inventory.device_pids().get(uuids[0], frozenset()) == frozenset()
    from labgang.launcher.coordinator.scheduling import unavailable_devices

    assert uuids[0] not in unavailable_devices(coord.agents, coord.held_devices())  # free, not blocked by stale pids


async def test_a_kick_after_a_quiet_spell_runs_a_cycle_without_waiting_for_the_window(tmp_path: Path) -> None:
    from labgang.launcher.coordinator.scheduling import scheduling_loop

    config = parse_config(
        {"cycle_coalesce_s": 5, "cycle_coalesce_max_s": 30, "queues": [{"name": "default", "nominal": {"gpu": 8}}]}
    )
    c = Coordinator(config, Store(tmp_path / "db"))
    conn = c.agents.join("n1", c.clock())
    await c.node_events.on_inventory(conn, {"inventory": node_inventory("n1", {}), "ranks": []})
    loop_task = asyncio.create_task(scheduling_loop(c.kicks, c.commits, c.driver, c.admissions, c.store, c.config))
    try:
        job = await c.desk.submit(ROOT, {"argv": ["x"], "workers": 1, "gpus_per_worker": 1})

        async def admitted() -> None:
            while c.jobs[job.id].status.state == JobState.PENDING:
                await asyncio.sleep(0.01)

        # Far less than the 5 s window: a trailing debounce would still be waiting.
        await asyncio.wait_for(admitted(), 2.5)
        assert c.cycles >= 1
    finally:
        loop_task.cancel()
        await asyncio.gather(loop_task, return_exceptions=True)
        await c.close()
        c.store.close()


def test_the_coalescing_window_is_a_multiple_of_the_last_cycle_cost_capped_by_the_settings() -> None:
    from labgang.launcher.coordinator.scheduling import COALESCE_COST_FACTOR, coalescing_window

    assert coalescing_window(0.01, 0.25, 0.0005) == pytest.approx(COALESCE_COST_FACTOR * 0.0005)
    assert coalescing_window(0.01, 0.25, 0.5) == 0.01  # an expensive cycle: the configured window
    assert coalescing_window(5.0, 0.25, 0.5) == 0.25  # never longer than cycle_coalesce_max_s
    assert coalescing_window(0.0, 0.25, 0.5) == 0.0  # coalescing off


async def test_a_kick_right_after_a_cheap_cycle_does_not_wait_for_the_whole_window(tmp_path: Path) -> None:
    from labgang.launcher.coordinator.scheduling import scheduling_loop

    config = parse_config(
        {"cycle_coalesce_s": 5, "cycle_coalesce_max_s": 30, "queues": [{"name": "default", "nominal": {"gpu": 8}}]}
    )
    c = Coordinator(config, Store(tmp_path / "db"))
    conn = c.agents.join("n1", c.clock())
    await c.node_events.on_inventory(conn, {"inventory": node_inventory("n1", {}), "ranks": []})
    loop_task = asyncio.create_task(scheduling_loop(c.kicks, c.commits, c.driver, c.admissions, c.store, c.config))

    async def admitted(job_id: str) -> None:
        while c.jobs[job_id].status.state == JobState.PENDING:
            await asyncio.sleep(0.01)

    try:
        first = await c.desk.submit(ROOT, {"argv": ["x"], "workers": 1, "gpus_per_worker": 1})
        await asyncio.wait_for(admitted(first.id), 2.5)
        cycles = c.cycles
        # Inside the configured 5 s window of that cycle: a fixed window would hold it for 5 s.
        second = await c.desk.submit(ROOT, {"argv": ["x"], "workers": 1, "gpus_per_worker": 1})
        await asyncio.wait_for(admitted(second.id), 2.5)
        assert c.cycles > cycles
    finally:
        loop_task.cancel()
        await asyncio.gather(loop_task, return_exceptions=True)
        await c.close()
        c.store.close()


async def test_only_the_last_victim_to_go_wakes_the_scheduler_for_its_preemptor(coord: Coordinator) -> None:
    victims = [await submit(coord, workers=1, gpus_per_worker=1) for _ in range(3)]
    for k, victim in enumerate(victims):
        placement = (RankPlacement(0, "n1", (f"GPU-{k}",)),)
        decide(coord, CycleResult(admitted=(Admit(victim, placement),), preempted=(), pending=()))
        event(coord, "n1", victim, 0, "started")
    urgent = await submit(coord, workers=1, gpus_per_worker=3, priority=10)
    decide(coord, CycleResult(admitted=(), preempted=(Preempt(urgent, tuple(victims), "priority"),), pending=()))
    conn = coord.agents.nodes["n1"]
    for k, victim in enumerate(victims):
        coord.wake.clear()
        run_id = coord.jobs[victim].run_id
        await coord.node_events.on_rank_events(
            conn,
            [
                {"job_id": run_id, "rank": 0, "kind": kind, "exit_status": 143, "time": coord.clock()}
                for kind in ("exited", "gone")
            ],
        )
        assert coord.jobs[victim].status.state == JobState.PENDING  # requeued
        last = k == len(victims) - 1
        assert coord.wake.is_set() == last, f"victim {k}: the preemptor still waits for the others"


async def test_the_timer_loop_kicks_once_a_pending_jobs_real_backoff_ends(coord: Coordinator) -> None:
    """``scheduling.timer_loop`` kicks at the check where a pending job's ``not_before`` passed, when
    it is a real backoff (after the job went back to pending); not for a ``not_before`` from before
    that, nor for a job that holds devices."""
    from labgang.launcher.coordinator.scheduling import timer_loop

    backoff, stale, holding = await submit(coord), await submit(coord), await submit(coord)
    admit(coord, holding)
    for job_id, since, until in ((backoff, 1000.0, 1002.0), (stale, 1001.5, 1001.0), (holding, 1000.0, 1003.0)):
        coord.jobs[job_id].status.pending_since, coord.jobs[job_id].status.not_before = since, until
    instants = iter([1000.0, 1001.0, 1002.0, 1003.0, 1004.0])  # the loop's clock: its start, then each check
    now, done = 1000.0, asyncio.Event()

    def loop_clock() -> float:
        nonlocal now
        now = next(instants, now)
        if now == 1004.0:
            done.set()
        return now

    class Recorder:
        def __init__(self) -> None:
            self.at: list[float] = []

        def kick(self) -> None:
            self.at.append(now)

    kicks = Recorder()
    task = asyncio.create_task(timer_loop(coord.node_events, coord.model, coord.commits, kicks, loop_clock, 0))  # type: ignore[arg-type]
    await done.wait()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert kicks.at == [1002.0]
