"""``labgang queues`` and ``labgang explain QUEUE`` agree on the fair share of a queue whose jobs are
shares of a card (config/sharing.toml's ``students``, ``share_gpus = "user"``): the share is measured on
the scheduler's fair-sharing usage, shares in whole GPUs per queue as the quota charges them (a card a
queue's shares hold alone counts whole: docs/sharing.md), never one GPU per share (docs/queue-semantics.md
§A3.7). Fake clock, real SQLite store."""

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
        # 3 one-shard jobs (shards_per_gpu = 4) of two users: share_gpus = "user" keeps alice's and bob's on
        # two cards, each held alone by students: 2 gpu (not ceil(3/4) = 1, nor 3), 1 beyond the nominal
        assert students["used"] == {"gpu": 2} and students["borrowed"] == {"gpu": 1}
        # the fair share of 1 gpu borrowed of the 7 its cohort can reach, as the scheduler measures it
        assert students["fair_share"] == students["fair_share_ratio"] == 142.857143
        text = " ".join(explain_queue(students, queues))
        assert "students uses gpu=2 of its nominal gpu=1. It borrows 1 gpu beyond its nominal quota" in text
        assert "gives its share 142.86" in text
        # config/sharing.toml has no fair sharing: the share decides nothing between queues, so explain
        # ranks no queue before students by it (nf6-why), though the share is shown as measured
        assert "before students" not in text and "fair_sharing" in students and not students["fair_sharing"]
    finally:
        coord.store.close()
