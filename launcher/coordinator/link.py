"""The coordinator's end of the agent link: ``GET /v1/agent/link`` upgraded to a websocket.

The agent authenticates with ``Authorization: Bearer <cluster token>``; a missing or
wrong token is refused with 401 before the upgrade and logged with the peer address.
The first message must be ``hello``; versions are checked with
:func:`labgang.launcher.version_compat.check`. See :mod:`.agents` for the messages.
"""

from __future__ import annotations

import base64
import hmac
import json
import logging
from typing import Any

from aiohttp import WSMsgType, web
from labgang.launcher import version_compat
from labgang.launcher.api import keys
from labgang.launcher.coordinator.errors import Unauthenticated
from labgang.launcher.coordinator.violations import take_violations

log = logging.getLogger("labgang.coordinator.link")

HELLO_TIMEOUT_S = 10.0
MAX_MESSAGE_BYTES = 64 << 20


def check_token(request: web.Request) -> None:
    """Refuse (401) a link request without the cluster token, logging who tried.

    Raises:
        Unauthenticated: no ``Authorization: Bearer`` header, or a token that does not match.
    """
    expected = request.app[keys.TOKEN]
    header = request.headers.get("Authorization", "")
    peer = request.remote or "unknown peer"
    if not header.startswith("Bearer "):
        log.warning("refused agent link from %s: no cluster token", peer)
        raise Unauthenticated("the agent link needs the cluster token (Authorization: Bearer ...)")
    given = header[len("Bearer ") :].strip()
    if not hmac.compare_digest(given.encode(), expected.encode()):
        log.warning("refused agent link from %s: wrong cluster token", peer)
        raise Unauthenticated("wrong cluster token")


async def agent_link(request: web.Request) -> web.StreamResponse:
    """Serve one agent's websocket until it closes."""
    check_token(request)
    coord = request.app[keys.COORDINATOR]
    ws = web.WebSocketResponse(max_msg_size=MAX_MESSAGE_BYTES)
    await ws.prepare(request)
    sockets = request.app[keys.AGENT_SOCKETS]
    sockets.add(ws)
    conn = None
    try:
        try:
            hello = await ws.receive_json(timeout=HELLO_TIMEOUT_S)
        except (TimeoutError, TypeError, ValueError):
            await ws.close(code=4400, message=b"expected a hello message")
            return ws
        if hello.get("type") != "hello" or not hello.get("node"):
            await ws.close(code=4400, message=b"expected a hello message with a node name")
            return ws
        problem = version_compat.check(coord.version, str(hello.get("version", "")))
        if problem is not None:
            log.warning("refused agent %s from %s: %s", hello["node"], request.remote, problem)
            await ws.send_json({"type": "refused", "message": problem})
            await ws.close(code=4426, message=problem.encode()[:120])
            return ws
        conn = coord.agents.attach(str(hello["node"]))
        old = conn.ws
        if old is not None and old is not ws and not old.closed:
            await old.close(code=4409, message=b"replaced by a newer connection of the same node")
        conn.ws = ws
        conn.connected = True
        conn.address = str(hello.get("address") or request.remote or conn.node)
        conn.version = str(hello.get("version", ""))
        conn.policy = hello.get("policy") if isinstance(hello.get("policy"), dict) else None
        conn.confinement = hello.get("confinement") if isinstance(hello.get("confinement"), dict) else None
        take_violations(coord, conn, hello.get("violations"))
        log.info("node %s connected from %s (agent %s)", conn.node, request.remote, conn.version)
        # node_timeout_s: the agent stops its own ranks when it cannot renew its lease for about that long.
        await ws.send_json({"type": "welcome", "version": coord.version, "node_timeout_s": coord.config.node_timeout_s})
        await coord.on_hello(conn, hello)
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            await _on_message(coord, conn, ws, json.loads(msg.data))
    finally:
        sockets.discard(ws)
        if conn is not None and conn.ws is ws:
            coord.on_disconnect(conn)
    return ws


async def _on_message(coord: Any, conn: Any, ws: web.WebSocketResponse, message: dict[str, Any]) -> None:
    kind = message.get("type")
    if kind == "reply":
        coord.agents.resolve(conn, message)
    elif kind == "inventory":
        take_violations(coord, conn, message.get("violations"))
        await coord.on_inventory(conn, message)
    elif kind == "rank_events":
        take_violations(coord, conn, message.get("violations"))
        await coord.on_rank_events(conn, message.get("events") or [], inventory=message.get("inventory"))
        if not ws.closed:
            await ws.send_json({"type": "ack", "seq": message.get("seq")})
    elif kind == "api":
        coord.spawn(_serve_forwarded(coord, ws, message))
    elif kind == "ping":
        conn.last_seen = coord.clock()
    elif kind == "lease":
        # The agent renews its lease: the answer proves we heard it (docs/queue-semantics.md §A5).
        # A node marked lost is not renewed: it must reconcile first (its next inventory does).
        if not conn.lost:
            conn.last_seen = coord.clock()
            if not ws.closed:
                await ws.send_json({"type": "lease", "id": message.get("id")})
    else:
        log.warning("node %s sent an unknown message type %r", conn.node, kind)


async def _serve_forwarded(coord: Any, ws: web.WebSocketResponse, message: dict[str, Any]) -> None:
    from labgang.launcher.coordinator.routes import forwarded

    body = base64.b64decode(message.get("body") or "")
    status, headers, data = await forwarded(
        coord,
        int(message["uid"]),
        str(message["method"]),
        str(message["path"]),
        dict(message.get("query") or {}),
        body,
    )
    if not ws.closed:
        await ws.send_json(
            {
                "type": "api_reply",
                "id": message.get("id"),
                "status": status,
                "headers": headers,
                "body": base64.b64encode(data).decode(),
            }
        )
