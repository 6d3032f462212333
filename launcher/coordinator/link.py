"""The coordinator's end of the agent link: ``GET /v1/agent/link`` upgraded to a websocket.

The agent authenticates with ``Authorization: Bearer <cluster token>``; a missing or
wrong token is refused with 401 before the upgrade and logged with the peer address.
The first message must be ``hello``; versions are checked with
:func:`labgang.launcher.coordinator.version_compat.check`. See :mod:`.agents` for the messages. Every
frame is parsed into a typed value (:mod:`.frames`) before it is acted on; one that breaks
the contract is one warning line and a closed link (4400), never a traceback; so is a frame
aiohttp cannot read (a compressed frame that does not inflate), which aiohttp closes itself.
"""

from __future__ import annotations

import base64
import hmac
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import WSMsgType, web
from labgang.launcher.coordinator import frames, keys, version_compat
from labgang.launcher.coordinator.errors import Unauthenticated
from labgang.launcher.coordinator.frames import ProtocolError

if TYPE_CHECKING:
    from labgang.launcher.coordinator.agents import AgentConn, AgentRegistry
    from labgang.launcher.coordinator.node_events import NodeEvents

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


ServeForwarded = Callable[[int, str, str, Mapping[str, str], bytes], Awaitable[tuple[int, dict[str, str], bytes]]]
"""Serves a user request an agent forwarded: ``(uid, method, path, query, body) -> (status, headers, body)``
(``routes.forwarded`` bound to the route table and the configuration at startup: ``keys.FORWARDED``)."""


@dataclass(frozen=True, slots=True)
class LinkParts:
    """What the agent link serves through, the coordinator's parts bound once at startup
    (``app[keys.LINK]``, built with the route table: ``routes.setup_routes``).

    Attributes:
        version: the coordinator's labgang version (checked against the agent's at hello).
        node_timeout_s: sent in the welcome: the agent stops its own ranks when it cannot renew
            its lease for about that long.
        agents: the agent registry (a link attaches to its node's ``AgentConn``; replies resolve there).
        nodes: the ``NodeEvents`` part (hello, violations, inventories, rank events, disconnects).
        spawn: runs a forwarded request as a background task (``BackgroundTasks.spawn``).
        serve: serves a forwarded request (``routes.forwarded`` bound to the route table).
    """

    version: str
    node_timeout_s: float
    agents: AgentRegistry
    nodes: NodeEvents
    spawn: Callable[[Awaitable[None]], object]
    serve: ServeForwarded


async def agent_link(request: web.Request) -> web.StreamResponse:
    """Serve one agent's websocket until it closes (through ``app[keys.LINK]``, never the coordinator)."""
    check_token(request)
    parts = request.app[keys.LINK]
    ws = web.WebSocketResponse(max_msg_size=MAX_MESSAGE_BYTES)
    await ws.prepare(request)
    sockets = request.app[keys.AGENT_SOCKETS]
    sockets.add(ws)
    conn = None
    try:
        try:
            msg = await ws.receive(timeout=HELLO_TIMEOUT_S)
            if msg.type == WSMsgType.ERROR:
                raise unreadable(msg.data)
            if msg.type != WSMsgType.TEXT:
                raise ProtocolError("expected a hello frame")
            hello = frames.parse_hello(frames.decode(msg.data))
        except TimeoutError:
            await ws.close(code=4400, message=b"expected a hello message")
            return ws
        except ProtocolError as exc:
            await _protocol_error(ws, request.remote, None, exc)
            return ws
        problem = version_compat.check(parts.version, hello.version)
        if problem is not None:
            log.warning("refused agent %s from %s: %s", hello.node, request.remote, problem)
            await ws.send_json({"type": "refused", "message": problem})
            await ws.close(code=4426, message=problem.encode()[:120])
            return ws
        conn = parts.agents.attach(hello.node)
        old = conn.ws
        if old is not None and old is not ws and not old.closed:
            clash = _another_machine(conn, hello)
            if clash is not None:  # a second agent under a name in use: never let it take the node's jobs
                log.warning("refused agent %s from %s: %s", hello.node, request.remote, clash)
                await ws.send_json({"type": "refused", "message": clash})
                await ws.close(code=4409, message=b"node name in use by another machine")
                return ws
            await old.close(code=4409, message=b"replaced by a newer connection of the same node")
        conn.attach_link(ws, hello, request.remote)
        nodes = parts.nodes
        nodes.take_violations(conn, hello.violations)
        log.info("node %s connected from %s (agent %s)", conn.node, request.remote, conn.version)
        # node_timeout_s: the agent stops its own ranks when it cannot renew its lease for about that long.
        await ws.send_json({"type": "welcome", "version": parts.version, "node_timeout_s": parts.node_timeout_s})
        await nodes.on_hello(conn, hello.message)
        async for msg in ws:
            if msg.type not in (WSMsgType.TEXT, WSMsgType.ERROR):
                continue
            try:
                if msg.type == WSMsgType.ERROR:
                    raise unreadable(msg.data)
                frame = frames.parse_frame(frames.decode(msg.data))
            except ProtocolError as exc:
                await _protocol_error(ws, request.remote, conn.node, exc)
                break
            await _on_frame(parts.agents, nodes, parts.spawn, parts.serve, conn, ws, frame)
    finally:
        sockets.discard(ws)
        if conn is not None and conn.ws is ws:
            parts.nodes.on_disconnect(conn)
    return ws


def _gpu_uuids(inventory: object) -> frozenset[str]:
    """The GPU UUIDs an inventory (``NodeInventory.to_dict()``) names; empty when it names none."""
    gpus = inventory.get("gpus") if isinstance(inventory, dict) else None
    if not isinstance(gpus, list):
        return frozenset()
    return frozenset(g["uuid"] for g in gpus if isinstance(g, dict) and isinstance(g.get("uuid"), str))


def _another_machine(conn: AgentConn, hello: frames.Hello) -> str | None:
    """Why a hello naming a node whose agent is connected comes from another machine, or None when
    it may be that agent again (restarted before its old link closed): its GPUs are not the
    connected agent's (by NVML UUID). A second agent copied with the same ``node`` name would
    otherwise replace the first, and every rank it does not know would be lost."""
    known, told = _gpu_uuids(conn.inventory_dict), _gpu_uuids(hello.message.get("inventory"))
    if not known or not told or known == told:
        return None
    return (
        f"node {hello.node} is connected from {conn.address} with other GPUs ({len(known)} of them, "
        f"none or not all of these {len(told)}): an agent's node name must be its own; set another "
        "node = ... in this agent's config (agent.toml), or stop the other agent first"
    )


def unreadable(exc: object) -> ProtocolError:
    """The protocol error for a frame aiohttp could not read (``WSMsgType.ERROR``: a compressed
    frame that does not inflate, text that is not UTF-8, a frame over the size limit), ``exc``
    being aiohttp's exception. aiohttp has already closed the link then (with its own code)."""
    return ProtocolError(f"a frame that cannot be read: {exc}")


async def _protocol_error(ws: web.WebSocketResponse, peer: str | None, node: str | None, exc: ProtocolError) -> None:
    """One warning line for a frame that breaks the link's contract, then the link is closed (4400;
    a frame aiohttp could not read was closed by aiohttp already, :func:`unreadable`)."""
    who = f"node {node}" if node else "an agent"
    log.warning("protocol error from %s (%s): %s; closing its link", who, peer or "unknown peer", exc)
    await ws.close(code=4400, message=f"protocol error: {exc}".encode()[:120])


async def _on_frame(
    agents: AgentRegistry,
    nodes: NodeEvents,
    spawn: Callable[[Awaitable[None]], object],
    serve: ServeForwarded,
    conn: AgentConn,
    ws: web.WebSocketResponse,
    frame: frames.Frame,
) -> None:
    """Act on one parsed frame from ``conn``'s agent: a reply goes to ``agents``, violations,
    inventories and rank events to ``nodes``, a forwarded request to ``serve`` (as a background
    task, through ``spawn``); pings and leases renew the node's lease."""
    if isinstance(frame, frames.Reply):
        agents.resolve(conn, frame.message)
    elif isinstance(frame, frames.Inventory):
        nodes.take_violations(conn, frame.violations)
        await nodes.on_inventory(conn, frame.message)
    elif isinstance(frame, frames.RankEvents):
        nodes.take_violations(conn, frame.violations)
        await nodes.on_rank_events(conn, frame.events, inventory=frame.inventory, sharing=frame.sharing)
        if not ws.closed:
            await ws.send_json({"type": "ack", "seq": frame.seq})
    elif isinstance(frame, frames.ApiRequest):
        spawn(_serve_forwarded(serve, ws, frame))
    elif isinstance(frame, frames.Ping):
        nodes.heard(conn)
    elif isinstance(frame, frames.Lease):
        # The agent renews its lease: the answer proves we heard it (docs/queue-semantics.md §A5).
        # A node marked lost is not renewed: it must reconcile first (its next inventory does).
        if not conn.lost:
            nodes.heard(conn)
            if not ws.closed:
                await ws.send_json({"type": "lease", "id": frame.id})
    else:
        log.warning("node %s sent an unknown message type %r", conn.node, frame.kind)


async def _serve_forwarded(serve: ServeForwarded, ws: web.WebSocketResponse, request: frames.ApiRequest) -> None:
    status, headers, data = await serve(request.uid, request.method, request.path, dict(request.query), request.body)
    if not ws.closed:
        await ws.send_json(
            {
                "type": "api_reply",
                "id": request.id,
                "status": status,
                "headers": headers,
                "body": base64.b64encode(data).decode(),
            }
        )
