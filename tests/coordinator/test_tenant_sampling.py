"""Admission fair sharing in the coordinator samples what was held up to each event, before the
event changes it (as ``labgang simulate`` does at each instant; docs/scenarios.md)."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.scheduling import build_snapshot
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.events import CycleDecided
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.scheduler.decisions import Admit, CycleResult
from labgang.launcher.scheduler.snapshot import RankPlacement

ROOT = Caller(uid=0, user="root", admin=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_a_gang_ending_between_samples_counts_until_it_ends(tmp_path: Path) -> None:
    """half_life 10 s, a sample every 10 s. root's 2-GPU gang runs from t=1000 to t=1020 with no
    cycle in between. The samples at 1010 and 1020 (taken as the exit at 1020 arrives, before it
    is applied) both count 2 GPUs: 0 -> 1 -> 1.5. Sampling only when a cycle builds its snapshot,
    after the exit, would count 0 for both."""
    clock = Clock()
    config = parse_config(
        {
            "admission_fair_sharing": {"half_life": 10.0, "sampling_interval": 10.0},
            "queues": [{"name": "default", "nominal": {"gpu": 2}}],
            "tenants": [{"name": "root", "queue": "default"}, {"name": "alice", "queue": "default"}],
        }
    )
    coord = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    try:
        conn = coord.agents.join("n1", clock.now)
        job = await coord.desk.submit(ROOT, {"argv": ["train"], "gpus_per_worker": 2})
        placement = (RankPlacement(0, "n1", ("GPU-a", "GPU-b")),)
        coord.apply(
            CycleDecided(clock.now, CycleResult(admitted=(Admit(job.id, placement),), preempted=(), pending=()))
        )
        run_id = job.run_id
        coord.node_events.apply_rank_event("n1", {"job_id": run_id, "rank": 0, "kind": "started"})
        assert job.status.state == JobState.RUNNING
        clock.now = 1020.0
        conn.heard(clock.now)
        await coord.node_events.on_rank_events(
            conn,
            [
                {"job_id": run_id, "rank": 0, "kind": "exited", "exit_status": 0},
                {"job_id": run_id, "rank": 0, "kind": "gone", "exit_status": 0},
            ],
        )
        assert job.status.state == JobState.SUCCEEDED
        build_snapshot(coord.driver, clock.now)  # what the next cycle sees: no sample left to take
        usage = {t.name: t.history for t in coord.sharing.snapshot_tenants()}
        assert usage["root"] == pytest.approx(1.5)
        assert usage["alice"] == pytest.approx(0.0)
        assert coord.sharing.last_sample == 1020.0
    finally:
        coord.store.close()
