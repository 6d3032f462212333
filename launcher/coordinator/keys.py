"""Typed ``web.AppKey``s of the coordinator application, all in one place."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from aiohttp import web
from labgang.launcher.config.cluster import ClusterConfig

if TYPE_CHECKING:
    from labgang.agent.connguard import ConnectionGuard
    from labgang.launcher.coordinator.core import Coordinator
    from labgang.launcher.coordinator.handlers import BoundRoutes
    from labgang.launcher.coordinator.link import LinkParts, ServeForwarded
    from labgang.launcher.coordinator.metrics import CoordinatorMetrics
    from labgang.launcher.coordinator.store import Store

CONFIG = web.AppKey("config", ClusterConfig)
"""The validated cluster configuration."""

STATE_DIR = web.AppKey("state_dir", Path)
"""The coordinator's state directory (database, socket)."""

TOKEN = web.AppKey("token", str)
"""The cluster token agents must present on the link."""

READ_TOKEN = web.AppKey("read_token", str)
"""A token that lets a TCP client read (jobs without their argv, queues, nodes); "" when none."""

STORE: web.AppKey[Store] = web.AppKey("store")
"""The open SQLite store (set up and closed in a cleanup context)."""

COORDINATOR: web.AppKey[Coordinator] = web.AppKey("coordinator")
"""Jobs, agents and the scheduling loop (set up and stopped in a cleanup context)."""

AGENT_SOCKETS: web.AppKey[set[web.WebSocketResponse]] = web.AppKey("agent_sockets")
"""Open agent websockets, closed with GOING_AWAY on shutdown."""

GUARD: web.AppKey[ConnectionGuard] = web.AppKey("connection_guard")
"""Connection caps and timeouts of the listeners (see :mod:`labgang.agent.connguard`)."""

METRICS: web.AppKey[CoordinatorMetrics] = web.AppKey("metrics")
"""The coordinator's /metrics collectors; the scheduling loop reports admissions, cycles and
preemptions to ``app[METRICS].scheduler``."""

ROUTES: web.AppKey[BoundRoutes] = web.AppKey("routes")
"""Every user API route bound to the coordinator's parts (``handlers.bind_routes``), built once at
startup, after every cleanup context (the coordinator, the pitfall watch) has started."""

FORWARDED: web.AppKey[ServeForwarded] = web.AppKey("forwarded")
"""Serves a request an agent forwarded over its link (``routes.forwarded`` bound to :data:`ROUTES`
and the configuration), built with it."""

LINK: web.AppKey[LinkParts] = web.AppKey("link")
"""What the agent link serves through (the coordinator's parts it uses), built with :data:`ROUTES`."""
