"""The pitfall snapshot that keeps unchanged jobs' views gives the same snapshot, the same pitfall
findings and the same /metrics text as the one that built every job's view anew, on the same
coordinator state, sample after sample while the state changes."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.metrics import CoordinatorMetrics, coordinator_job_counts
from labgang.launcher.coordinator.pitfall_watch import PitfallWatch
from labgang.launcher.model import JobState
from labgang.launcher.pitfalls import ClusterSnapshot, PitfallKind
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Pending, PendingReason, ReasonCode
from labgang.launcher.scheduler.snapshot import RankPlacement
from lifecycle_driver import ROOT, advance, decide, event, make_coord, node_inventory, node_uuids, submit
from prometheus_client import generate_latest
from uncached_views import snapshot_built_now


@pytest.fixture
def coord(tmp_path: Path):
    yield from make_coord(tmp_path)


class Exporter:
    """A pitfall watch and a /metrics registry fed by one way of building the snapshot."""

    def __init__(self, coord: Coordinator, build: object) -> None:
        assert callable(build)
        thresholds = coord.config.pitfall_thresholds()
        self.watch = PitfallWatch(lambda: build(coord), thresholds)
        self.metrics = CoordinatorMetrics(
            lambda: self.watch.with_findings(build(coord)),
            version="test",
            thresholds=thresholds,
            job_counts=lambda: coordinator_job_counts(coord.finished_counts, coord.model.jobs.values()),
        )

    def sample(self) -> tuple[ClusterSnapshot, dict, list[str]]:
        """A pitfall sample: its snapshot, the ``GET /v1/pitfalls`` body, and the /metrics text
        without the ``_created`` series (when each registry's histograms were made, not the state)."""
        snapshot = self.watch.sample()
        text = generate_latest(self.metrics.registry).decode().splitlines()
        return snapshot, self.watch.view(), [line for line in text if "_created" not in line.split(" ")[0]]


async def test_snapshot_findings_and_metrics_are_those_of_views_built_anew(coord: Coordinator) -> None:
    n1 = coord.agents.nodes["n1"]
    uuids = node_uuids("n1")
    # GPU 3 shows a process labgang did not start (a foreign-process finding)
    await coord.node_events.on_inventory(n1, {"inventory": node_inventory("n1", {uuids[3]: [777]}), "ranks": []})
    kept, anew = Exporter(coord, Coordinator.pitfall_snapshot), Exporter(coord, snapshot_built_now)

    running = await submit(coord, workers=2, gpus_per_worker=1)
    placement = (RankPlacement(0, "n1", (uuids[0],)), RankPlacement(1, "n1", (uuids[1],)))
    fragmented, waiting, done = [await submit(coord, workers=2, gpus_per_worker=2) for _ in range(3)]
    decide(
        coord,
        CycleResult(
            admitted=(Admit(running, placement),),
            preempted=(),
            pending=(
                Pending(fragmented, PendingReason(ReasonCode.FRAGMENTED, "no node set holds 2 x 2 gpu")),
                Pending(waiting, PendingReason(ReasonCode.NO_CAPACITY, "needs 8 gpu; 2 free")),
                Pending(done, PendingReason(ReasonCode.NO_CAPACITY, "needs 8 gpu; 2 free")),
            ),
        ),
    )
    await coord.desk.cancel(ROOT, done)
    event(coord, "n1", running, 0, "started")
    event(coord, "n1", running, 1, "started")
    assert coord.jobs[running].status.state == JobState.RUNNING

    kinds = set()
    for step in range(4):
        assert kept.sample() == anew.sample()
        kinds |= {f["kind"] for f in kept.watch.view()["findings"]}
        # time passes and the state changes between samples
        advance(coord, 400)
        await coord.node_events.on_inventory(n1, {"inventory": node_inventory("n1", {uuids[3]: [777]}), "ranks": []})
        message = f"needs 8 gpu; {step} free"
        decide(coord, CycleResult((), (), (Pending(waiting, PendingReason(ReasonCode.NO_CAPACITY, message)),)))
        if step == 1:
            event(coord, "n1", running, 0, "exited", 1)
    assert kept.sample() == anew.sample()
    assert done in {j.id for j in kept.sample()[0].jobs}  # cancelled 1,600 s ago: still in the snapshot
    advance(coord, 2100)
    assert kept.sample() == anew.sample()
    assert done not in {j.id for j in kept.sample()[0].jobs}  # ended over an hour ago: left out of both
    # the findings compared cover a pending job (fragmented), a running one (no process on its GPUs) and a
    # device with a process labgang did not start
    assert {PitfallKind.FRAGMENTED_GANG.value, PitfallKind.ALLOCATED_NO_PROCESS.value} <= kinds
    assert PitfallKind.FOREIGN_PROCESS.value in kinds
    assert 'labgang_queue_pending_jobs{queue="default",reason="fragmented"} 1.0' in kept.sample()[2]
