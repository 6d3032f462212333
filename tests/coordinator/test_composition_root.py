"""Issue 23 item 2: the coordinator is a composition root whose parts are read-only from outside:
nothing can rebind its store, model, registry, views or shutdown state (each part changes only
through its own methods), the read side is one ``JobViews`` part, an ``AgentConn``'s fields are
read-only, and each user API operation is bound to the parts it uses."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from aiohttp import web
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import keys
from labgang.launcher.coordinator.agents import AgentRegistry
from labgang.launcher.coordinator.app import create_app
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.handlers import ROUTES
from labgang.launcher.coordinator.job_views import JobViews
from labgang.launcher.coordinator.pitfall_watch import add_pitfall_watch
from labgang.launcher.coordinator.routes import forwarded
from labgang.launcher.coordinator.store import Store
from lifecycle_driver import ROOT, Clock

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
    "desk",
    "commits",
    "kicks",
    "admissions",
    "tasks",
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


def test_an_agent_conn_changes_only_through_its_own_methods() -> None:
    conn = AgentRegistry().join("n1", 5.0)
    for name in ("address", "version", "inventory", "ranks", "last_seen", "connected", "lost", "ws", "policy"):
        with pytest.raises(AttributeError):
            setattr(conn, name, getattr(conn, name))
    assert conn.connected and conn.last_seen == 5.0 and not conn.lost
    conn.heard(9.0)
    assert conn.last_seen == 9.0
    assert conn.mark_lost() and conn.lost
    assert not conn.mark_lost()  # already lost
    assert conn.mark_back() and not conn.lost
    conn.detach_link("gone")
    assert not conn.connected


async def test_each_route_is_bound_to_the_coordinators_parts(tmp_path: Path) -> None:
    config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 1}}]})
    coord = Coordinator(config, Store(tmp_path / "db"), clock=Clock())
    try:
        bound = {route.name: route.bind(coord) for route in ROUTES}
        assert set(bound) == {route.name for route in ROUTES}
        version = await bound["get_version"](ROOT, {}, {}, b"")
        assert version.payload["version"] == coord.version
        submitted = await bound["submit"](ROOT, {}, {}, b'{"argv": ["x"], "workers": 1, "gpus_per_worker": 1}')
        job_id = submitted.payload["job"]["id"]
        assert coord.desk.get_job(job_id).spec.argv == ["x"]
        found = await bound["get_job"](ROOT, {"id": job_id}, {}, b"")
        assert found.payload["job"]["id"] == job_id
    finally:
        await coord.close()
        coord.store.close()


async def test_the_route_table_is_bound_once_at_startup_after_every_part_is_attached(tmp_path: Path) -> None:
    """Requests (socket, TCP, forwarded) are served from ``app[keys.ROUTES]``, each route bound to the
    coordinator's parts once at startup; the pitfall watch, attached by a later cleanup context,
    is bound too (an unattached watch answers empty thresholds), and a forwarded request takes the
    table and the configuration, never the coordinator."""
    config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 1}}]})
    app = create_app(config, tmp_path / "state", token="t0ken")
    add_pitfall_watch(app)
    runner = web.AppRunner(app)
    await runner.setup()
    try:
        table = app[keys.ROUTES]
        assert set(table) == {(route.method, route.path) for route in ROUTES}
        status, _, data = await app[keys.FORWARDED](0, "GET", "/v1/pitfalls", {}, b"")
        assert status == 200 and json.loads(data)["thresholds"], data  # the watch attached after the coordinator
        status, _, data = await forwarded(table, config, 0, "GET", "/v1/version", {}, b"")
        assert status == 200 and json.loads(data)["uid"] == 0
        assert app[keys.ROUTES] is table  # not rebuilt per request
        status, _, data = await forwarded(table, config, 0, "GET", "/v1/nope", {}, b"")
        assert status == 404 and "no route GET /v1/nope" in json.loads(data)["error"]["message"]
    finally:
        await runner.cleanup()


COORDINATOR_PACKAGE = Path(__file__).resolve().parents[2] / "launcher" / "coordinator"
COORDINATOR = re.compile(r"\bCoordinator\b")


def test_no_part_is_handed_the_coordinator() -> None:
    """``Coordinator.__init__`` hands no part ``self`` (a part gets the other parts it uses, or a
    bound method of its own), and no function of the coordinator package takes a ``Coordinator``
    but the startup step that binds the routes to its parts (``Route.bind``, ``bind_routes``)."""
    core = ast.parse((COORDINATOR_PACKAGE / "core.py").read_text())
    [init] = [
        f
        for c in core.body
        if isinstance(c, ast.ClassDef) and c.name == "Coordinator"
        for f in c.body
        if isinstance(f, ast.FunctionDef) and f.name == "__init__"
    ]
    handed_self = [
        ast.unparse(call)
        for call in ast.walk(init)
        if isinstance(call, ast.Call)
        for arg in (*call.args, *(k.value for k in call.keywords))
        if isinstance(arg, ast.Name) and arg.id == "self"
    ]
    assert handed_self == []
    takers = set()
    for path in sorted(COORDINATOR_PACKAGE.glob("*.py")):
        for fn in ast.walk(ast.parse(path.read_text())):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
                if any(a.annotation is not None and COORDINATOR.search(ast.unparse(a.annotation)) for a in args):
                    takers.add(f"{path.stem}.{fn.name}")
    assert takers == {"handlers.bind", "handlers.bind_routes"}, takers
