"""A node's sharing facts in ``GET /v1/nodes``: whether the cluster lets it serve MPS (``mps_allowed``,
from ``[sharing]`` and its per-node override, for ``labgang nodes``' free MPS count), and how its agent
holds ``--gpu-mem`` budgets, updated by an ``inventory`` frame after the hello (a node whose
``dmem.max`` write failed falls back to watching, ``agent/confine/devmem.py``). Fake clock, real SQLite."""

from __future__ import annotations

from pathlib import Path

from labgang.agent.inventory import NodeInventory
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.store import Store
from lifecycle_driver import Clock, node_inventory


async def test_node_views_say_where_mps_is_allowed_and_take_the_sharing_facts_of_an_inventory(tmp_path: Path):
    config = parse_config(
        {
            "sharing": {"shards_per_gpu": 4, "mps": True, "nodes": {"n2": {"mps": False}}},
            "queues": [{"name": "default", "nominal": {"gpu": 8}, "share_gpus": "queue"}],
        }
    )
    clock = Clock()
    coord = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    try:
        for node in ("n1", "n2"):
            coord.agents.join(node, clock.now)
            inv = NodeInventory.from_dict(node_inventory(node, {}))
            await coord.node_events.on_inventory(coord.agents.nodes[node], {"inventory": inv.to_dict(), "ranks": []})
        views = {n["name"]: n for n in coord.node_views()}
        assert (views["n1"]["mps_allowed"], views["n2"]["mps_allowed"]) == (True, False)
        assert views["n1"]["sharing"] is None  # no hello said it

        watched = {"mode": "watched", "reason": "dmem write failed: ...; budgets are watched through NVML from then on"}
        frame = {"inventory": inv.to_dict(), "ranks": [], "sharing": {"mps": None, "gpu_mem": watched}}
        await coord.node_events.on_inventory(coord.agents.nodes["n1"], frame)
        views = {n["name"]: n for n in coord.node_views()}
        assert views["n1"]["sharing"] == {"mps": None, "gpu_mem": watched}
        assert views["n2"]["sharing"] is None
    finally:
        coord.store.close()


async def test_the_sharing_facts_also_travel_with_rank_events(tmp_path: Path):
    """The agent sends a fresh inventory inside a ``rank_events`` frame when events are waiting (a
    rank's exit, say); the sharing facts read with it come in that frame too, and are taken."""
    from labgang.launcher.coordinator import frames

    config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})
    clock = Clock()
    coord = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    try:
        coord.agents.join("n1", clock.now)
        inv = NodeInventory.from_dict(node_inventory("n1", {}))
        watched = {"mode": "watched", "reason": "dmem write failed: ...; budgets are watched through NVML from then on"}
        frame = frames.parse_frame(
            {
                "type": "rank_events",
                "seq": 1,
                "events": [],
                "inventory": inv.to_dict(),
                "sharing": {"mps": None, "gpu_mem": watched},
            }
        )
        assert isinstance(frame, frames.RankEvents)
        await coord.node_events.on_rank_events(
            coord.agents.nodes["n1"], frame.events, inventory=frame.inventory, sharing=frame.sharing
        )
        assert coord.node_views()[0]["sharing"] == {"mps": None, "gpu_mem": watched}
    finally:
        coord.store.close()


def test_a_cluster_without_a_sharing_table_allows_no_mps(tmp_path: Path):
    coord = Coordinator(parse_config({"queues": [{"name": "default"}]}), Store(tmp_path / "db"), clock=Clock())
    try:
        coord.agents.join("n1", 0.0)
        assert coord.node_views()[0]["mps_allowed"] is False
    finally:
        coord.store.close()
