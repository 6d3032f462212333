"""The coordinator's queue views (``labgang queues``) show a queue's shares as the scheduler charges
them (docs/sharing.md, "Quota in GPU units"): every card its shares hold alone counts a whole gpu,
its shares on cards mixed with another queue's are summed and rounded up. config/sharing.toml's
``serving`` (MPS, one server per user) and ``team`` (which shares cards with serving). Fake clock,
real SQLite store."""

from __future__ import annotations

from pathlib import Path

from labgang.agent.inventory import NodeInventory
from labgang.launcher.config.cluster import load_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.scheduling import build_snapshot
from labgang.launcher.coordinator.store import Store
from labgang.launcher.model import GPU
from labgang.launcher.scheduler.cycle import run_cycle
from labgang.launcher.scheduler.state import CycleState
from lifecycle_driver import Clock, decide, node_inventory

REPO = Path(__file__).resolve().parents[2]
USERS = [Caller(uid=1000 + i, user=name) for i, name in enumerate(("ann", "bob", "cat"))]


async def test_three_users_mps_shares_show_as_the_three_cards_they_hold(tmp_path: Path) -> None:
    config = load_config(REPO / "config" / "sharing.toml")
    clock = Clock()
    coord = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    try:
        coord.agents.join("n1", clock.now)
        inv = NodeInventory.from_dict(node_inventory("n1", {}))
        await coord.node_events.on_inventory(coord.agents.nodes["n1"], {"inventory": inv.to_dict(), "ranks": []})
        for caller in USERS:  # one MPS server per user: a card each
            await coord.desk.submit(caller, {"argv": ["sleep", "60"], "queue": "serving", "mps": 10})
        result = run_cycle(build_snapshot(coord.driver, coord.clock()))
        assert len(result.admitted) == 3
        assert len({a.placement[0].devices[0] for a in result.admitted}) == 3
        decide(coord, result)
        # ann's team share joins her MPS card (team and serving name each other): that card is mixed now
        await coord.desk.submit(USERS[0], {"argv": ["sleep", "60"], "queue": "team", "mps": 10})
        result = run_cycle(build_snapshot(coord.driver, coord.clock()))
        assert len(result.admitted) == 1
        decide(coord, result)
        views = {q["name"]: q for q in coord.queue_views()}
        # serving: 2 cards held alone + ceil(0.1 on the mixed card) = 3 gpu, 1 beyond its nominal 2 (was
        # ceil(0.3) = 1); team: ceil(0.1) = 1
        assert views["serving"]["used"] == {"gpu": 3} and views["serving"]["borrowed"] == {"gpu": 1}
        assert views["team"]["used"] == {"gpu": 1}
        state = CycleState(build_snapshot(coord.driver, coord.clock()))  # the scheduler's own count
        assert (state.quota.usage("serving", GPU), state.quota.usage("team", GPU)) == (3, 1)
    finally:
        coord.store.close()
