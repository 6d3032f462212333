"""Issue 23 item 2: the coordinator is a composition root whose parts are read-only from outside:
nothing can rebind its store, model, registry, views or shutdown state (each part changes only
through its own methods), and the read side is one ``JobViews`` part."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.config import parse_config
from labgang.launcher.coordinator.agents import AgentRegistry
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.job_views import JobViews
from labgang.launcher.store import Store
from lifecycle_driver import Clock

PARTS = (
    "config",
    "store",
    "clock",
    "version",
    "agents",
    "model",
    "sharing",
    "driver",
    "usage",
    "notifier",
    "views",
    "node_events",
)


def test_the_coordinators_parts_cannot_be_rebound_from_outside(tmp_path: Path) -> None:
    coord = Coordinator(parse_config({"queues": [{"name": "default", "nominal": {"gpu": 1}}]}), Store(tmp_path / "db"))
    try:
        for name in (*PARTS, "shutting_down"):
            before = getattr(coord, name)
            with pytest.raises(AttributeError):
                setattr(coord, name, before)
        assert coord.shutting_down is False
        assert isinstance(coord.views, JobViews)
    finally:
        coord.store.close()


def test_the_agent_registry_and_clock_are_the_ones_handed_in(tmp_path: Path) -> None:
    agents, clock = AgentRegistry(), Clock()
    coord = Coordinator(
        parse_config({"queues": [{"name": "default", "nominal": {"gpu": 1}}]}),
        Store(tmp_path / "db"),
        clock=clock,
        agents=agents,
    )
    try:
        assert coord.agents is agents and coord.clock is clock
        agents.join("n1", clock.now)
        assert coord.node_views()[0]["name"] == "n1"  # the views read the registry handed in
    finally:
        coord.store.close()
