"""aiohttp routes, the caller's identity, and the one error middleware.

On the Unix socket the caller is the uid the kernel reports for the peer
(``SO_PEERCRED``); nothing in the request can change it. On TCP the API is read-only and
needs a token (:func:`tcp_auth_middleware`); agents reach the coordinator there over the
link, where forwarded requests carry the uid the agent vouches for.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import socket
import struct
from collections.abc import Mapping
from functools import partial
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from labgang.launcher.accounts import primary_gid, user_groups, user_name
from labgang.launcher.api import jsoncodec
from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.coordinator import handlers, keys
from labgang.launcher.coordinator.errors import (
    BadRequest,
    Forbidden,
    PayloadTooLarge,
    RequestTimeout,
    Unauthenticated,
    error_reply,
)
from labgang.launcher.coordinator.link import LinkParts, ServeForwarded, agent_link
from labgang.launcher.coordinator.requests import Caller

log = logging.getLogger("labgang.coordinator.api")

_UCRED = struct.Struct("3i")
#: A TCP client with the cluster token: reads everything, writes nothing (no uid to act as).
CLUSTER_READER = Caller(uid=None, user="cluster-token", read_only=True, admin=True)
#: A TCP client with the read token: reads what any other user would see.
READER = Caller(uid=None, user="read-token", read_only=True)


def peer_uid(request: web.Request) -> int | None:
    """The uid of the process at the other end of a Unix-socket request (``SO_PEERCRED``),
    or None for a TCP request."""
    sock = request.transport.get_extra_info("socket") if request.transport else None
    if sock is None or sock.family != socket.AF_UNIX:
        return None
    _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
    return uid


_CALLERS: dict[tuple[int, int], Caller] = {}


def caller_for_uid(config: ClusterConfig, uid: int) -> Caller:
    """The :class:`Caller` for ``uid``: login name, groups, admin flag (cached per config)."""
    key = (id(config), uid)
    caller = _CALLERS.get(key)
    if caller is None:
        name = user_name(uid)
        groups = user_groups(uid)
        caller = Caller(uid=uid, user=name, groups=groups, gid=primary_gid(uid), admin=config.is_admin(name, groups))
        _CALLERS[key] = caller
    return caller


def reply_to_response(reply: handlers.Reply) -> web.StreamResponse:
    """Turn an operation's :class:`Reply` into an aiohttp response."""
    if reply.body is not None:
        return web.Response(status=reply.status, body=reply.body, headers=reply.headers, content_type="text/plain")
    if reply.encoded is not None:
        return web.Response(
            status=reply.status, body=reply.encoded, headers=reply.headers, content_type="application/json"
        )
    return web.json_response(reply.payload, status=reply.status, headers=reply.headers, dumps=jsoncodec.dumps)


async def send_pieces(request: web.Request, reply: handlers.Reply, pieces: list[bytes]) -> web.StreamResponse:
    """Send an answer already encoded in pieces (``reply.pieces``: a ``GET /v1/jobs`` page), one
    piece after the other, with the status, headers and ``Content-Length`` that
    :func:`reply_to_response` would give their concatenation (the same bytes on the wire), without
    joining them (``view_cache.page_pieces``). A client that hangs up meanwhile gets no more."""
    response = web.StreamResponse(status=reply.status, headers=reply.headers)
    response.content_type = "application/json"
    response.content_length = sum(map(len, pieces))
    await response.prepare(request)
    try:
        for piece in pieces:
            await response.write(piece)
        await response.write_eof()
    except ConnectionResetError:
        log.debug("the client of %s %s hung up before the whole answer was sent", request.method, request.path)
    return response


def _handler(route: handlers.Route):
    key = (route.method, route.path)

    async def handle(request: web.Request) -> web.StreamResponse:
        config = request.app[keys.CONFIG]
        uid = peer_uid(request)
        caller = request.get("tcp_caller", READER) if uid is None else caller_for_uid(config, uid)
        if route.writes and caller.read_only:
            raise Forbidden("this TCP port is read-only; use the labgang Unix socket on a node")
        try:
            async with asyncio.timeout(config.limits.body_timeout_s):
                body = await request.read() if request.can_read_body else b""
        except TimeoutError:
            raise RequestTimeout(
                f"the request body did not arrive within {config.limits.body_timeout_s:g} s (limits.body_timeout_s)"
            ) from None
        except web.HTTPRequestEntityTooLarge:
            limit = config.limits.max_spec_bytes
            raise PayloadTooLarge(
                f"the request body is over {limit} bytes (limits.max_spec_bytes bounds a job spec)"
            ) from None
        except (web.RequestPayloadError, HttpProcessingError):  # e.g. a gzip body that does not inflate
            raise BadRequest(
                "the request body cannot be read (a Content-Encoding that does not decode, or a truncated body)"
            ) from None
        reply = await request.app[keys.ROUTES][key](caller, request.match_info, request.query, body)
        if reply.pieces is not None:
            return await send_pieces(request, reply, reply.pieces)
        return reply_to_response(reply)

    handle.__name__ = route.name
    handle.__doc__ = route.operation.__doc__
    return handle


@web.middleware
async def error_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """Map domain errors (and aiohttp's own 404/405) to the ``{"error": {...}}`` body."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        status, body = error_reply(exc, request.method, request.path)
    except Exception as exc:
        status, body = error_reply(exc, request.method, request.path)
        if status == 500:
            log.exception("internal error on %s %s", request.method, request.path)
    return web.json_response(body, status=status)


def _bearer(request: web.Request) -> str | None:
    header = request.headers.get("Authorization", "")
    return header[len("Bearer ") :].strip() if header.startswith("Bearer ") else None


@web.middleware
async def tcp_auth_middleware(request: web.Request, handler: Any) -> web.StreamResponse:
    """On TCP, answer only a request with the cluster token or the read token (401 otherwise).

    Exempt: the agent link (it checks the cluster token itself, and logs who tried) and
    ``GET /metrics`` while the config says ``metrics_public``. The Unix socket needs no
    token: the kernel says who the caller is.
    """
    if request.transport is None or peer_uid(request) is not None:
        return await handler(request)
    config = request.app[keys.CONFIG]
    if request.path == "/v1/agent/link" or (request.path == "/metrics" and config.metrics_public):
        return await handler(request)
    given = _bearer(request)
    if given is None:
        raise Unauthenticated(
            "this TCP port needs the cluster token or the read token (Authorization: Bearer ...); "
            "on a node, use the labgang Unix socket"
        )
    if hmac.compare_digest(given.encode(), request.app[keys.TOKEN].encode()):
        request["tcp_caller"] = CLUSTER_READER
    elif request.app[keys.READ_TOKEN] and hmac.compare_digest(given.encode(), request.app[keys.READ_TOKEN].encode()):
        request["tcp_caller"] = READER
    else:
        raise Unauthenticated("wrong token (give the cluster token or the read token)")
    return await handler(request)


def setup_routes(app: web.Application) -> None:
    """Register every user API route and the agent link on ``app``, and the startup step that binds
    the routes and the link to the coordinator's parts once (``keys.ROUTES``, ``keys.FORWARDED``,
    ``keys.LINK``): an ``on_startup``
    handler, so it runs after every cleanup context has started (aiohttp starts those first) and
    every part is attached."""
    for route in handlers.ROUTES:
        app.router.add_route(route.method, route.path, _handler(route), name=route.name)
    app.router.add_get("/v1/agent/link", agent_link, name="agent_link")
    app.on_startup.append(_bind_to_parts)


async def _bind_to_parts(app: web.Application) -> None:
    """The routes and the agent link bound to the coordinator's parts, once (see :func:`setup_routes`)."""
    coord = app[keys.COORDINATOR]
    routes = handlers.bind_routes(coord)
    app[keys.ROUTES] = routes
    serve: ServeForwarded = partial(forwarded, routes, app[keys.CONFIG])
    app[keys.FORWARDED] = serve
    app[keys.LINK] = LinkParts(
        coord.version, coord.config.node_timeout_s, coord.agents, coord.node_events, coord.tasks.spawn, serve
    )


async def forwarded(
    routes: handlers.BoundRoutes,
    config: ClusterConfig,
    uid: int,
    method: str,
    path: str,
    query: Mapping[str, str],
    body: bytes,
) -> tuple[int, dict[str, str], bytes]:
    """Serve a request an agent forwarded for a caller on its node (uid vouched by the agent).

    Args:
        routes: the routes bound to the coordinator's parts (``app[keys.ROUTES]``).
        config: the cluster configuration (who the uid is, and whether an admin).
        uid: the caller's uid, as the agent vouches for it.
        method, path, query, body: the request as the agent's client sent it.

    Returns:
        (status, headers, body bytes) for the agent to hand back to its client; a request no
        route serves is a 404 body, an operation's error its status and ``{"error": ...}``.
    """
    caller = caller_for_uid(config, uid)
    try:
        route, params = handlers.match(method, path)
        reply = await routes[(route.method, route.path)](caller, params, query, body)
    except Exception as exc:
        status, err = error_reply(exc, method, path)
        if status == 500:
            log.exception("internal error on forwarded %s %s", method, path)
        return status, {"Content-Type": "application/json"}, json.dumps(err).encode()
    if reply.body is not None:
        return reply.status, {"Content-Type": "text/plain", **reply.headers}, reply.body
    if reply.pieces is not None:
        return reply.status, {"Content-Type": "application/json", **reply.headers}, b"".join(reply.pieces)
    if reply.encoded is not None:
        return reply.status, {"Content-Type": "application/json", **reply.headers}, reply.encoded
    return reply.status, {"Content-Type": "application/json", **reply.headers}, jsoncodec.dumps(reply.payload).encode()
