"""``labgang queues`` and ``labgang explain QUEUE`` agree on the fair share of a queue whose jobs are
shares of a card (config/sharing.toml's ``students``, ``share_gpus = "user"``): the share is measured on
the scheduler's fair-sharing usage, shares rounded up to whole GPUs per queue, never one GPU per share
(docs/queue-semantics.md §A3.7). Fake clock, real SQLite store."""

from __future__ import annotations

from pathlib import Path

from labgang.agent.inventory import NodeInventory
from labgang.launcher.cli.explain import explain_queue
from labgang.launcher.config.cluster import load_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.scheduling import build_snapshot
from labgang.launcher.coordinator.store import Store
from labgang.launcher.scheduler.cycle import run_cycle
from lifecycle_driver import Clock, decide, node_inventory

REPO = Path(__file__).resolve().parents[2]
ALICE = Caller(uid=1000, user="alice")
BOB = Caller(uid=1001, user="bob")


async def test_students_shares_count_as_whole_gpus_in_queues_and_explain_alike(tmp_path: Path) -> None:
    config = load_config(REPO / "config" / "sharing.toml")
    clock = Clock()
    coord = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    try:
        coord.agents.join("n1", clock.now)
        inv = NodeInventory.from_dict(node_inventory("n1", {}))
        await coord.node_events.on_inventory(coord.agents.nodes["n1"], {"inventory": inv.to_dict(), "ranks": []})
        body = {"argv": ["sleep", "60"], "queue": "students", "shards": 1}
        for caller in (ALICE, BOB, BOB):
            await coord.desk.submit(caller, dict(body))
        result = run_cycle(build_snapshot(coord.driver, coord.clock()))
        assert len(result.admitted) == 3
        decide(coord, result)
        queues = coord.queue_views()
        students = next(q for q in queues if q["name"] == "students")
        # 3 one-shard jobs (shards_per_gpu = 4) held within the nominal gpu=1, as the scheduler counts them
        assert students["used"] == {"gpu": 1} and students["borrowed"] == {}
        assert students["fair_share"] == 0 and students["fair_share_ratio"] == 0
        text = " ".join(explain_queue(students, queues))
        assert "It borrows nothing, so its share is 0" in text
        assert "before students" not in text  # no queue of the cohort ranks below a share of 0
    finally:
        coord.store.close()
