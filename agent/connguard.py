"""Connection limits for the coordinator's listeners and the agent's user socket: timeouts
and caps on every connection.

aiohttp never times out a connection that has not finished sending its request headers,
and accepts connections until the process runs out of file descriptors; a client that
opens many connections and sends nothing (or one byte at a time) locks everyone out.
:class:`ConnectionGuard` wraps each connection's protocol and

- refuses a connection over the per-peer cap (a TCP peer is its IP address, a Unix-socket
  peer its uid from ``SO_PEERCRED``; root on the Unix socket is exempt so that an admin
  can always get in) or the global cap, with a ``503`` and ``Connection: close``;
- closes a connection whose request headers are not complete ``header_timeout_s`` after it
  opened (or after the first byte of the next request), or that sits idle between requests
  longer than ``idle_timeout_s``.

The request body is bounded by ``body_timeout_s`` where the coordinator's handler reads
it (:mod:`labgang.launcher.coordinator.routes`). A request whose headers arrived is "in
flight" (the middleware :meth:`ConnectionGuard.middleware` marks it) and no timer runs
while its handler does: a websocket agent link stays open for as long as it lives.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

_UCRED = struct.Struct("3i")

#: A peer: ``("ip", address)`` or ``("uid", uid)``.
Peer = tuple[str, str | int | None]

_REFUSAL = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n"
    b"Content-Length: %d\r\n\r\n%s"
)


@dataclass(frozen=True)
class ConnectionLimits:
    """What :class:`ConnectionGuard` enforces (seconds; counts of open connections)."""

    max_connections: int = 2048
    max_connections_per_peer: int = 64
    header_timeout_s: float = 10.0
    idle_timeout_s: float = 60.0


def peer_of(transport: asyncio.BaseTransport) -> Peer:
    """Who is at the other end: ``("ip", address)`` for TCP, ``("uid", uid)`` for a Unix socket."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        try:
            _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
        except OSError:
            return ("uid", None)
        return ("uid", uid)
    peer = transport.get_extra_info("peername")
    return ("ip", str(peer[0]) if isinstance(peer, tuple) else None)


@dataclass
class _State:
    peer: Peer
    timer: asyncio.TimerHandle | None = None
    in_flight: int = 0
    waiting_for_headers: bool = True


@dataclass
class ConnectionGuard:
    """Counts open connections by peer and runs each connection's header/idle timer.

    Args:
        limits: the caps and timeouts.
        on_refused: called with ``(peer, reason)`` for each refused or timed-out connection
            (the coordinator logs it through its rate-limited logger).
    """

    limits: ConnectionLimits
    on_refused: Callable[[Peer, str], None] = lambda peer, reason: None
    open_by_peer: Counter[Peer] = field(default_factory=Counter)
    _states: dict[asyncio.BaseTransport, _State] = field(default_factory=dict)

    @property
    def open_connections(self) -> int:
        """Connections open through this guard now."""
        return sum(self.open_by_peer.values())

    def factory(self, inner: Callable[[], asyncio.Protocol]) -> Callable[[], asyncio.Protocol]:
        """A protocol factory for ``loop.create_server`` that guards what ``inner`` makes."""
        return lambda: _GuardedProtocol(self, inner)

    # -- called by the protocol -------------------------------------------------------------

    def admit(self, transport: asyncio.BaseTransport) -> str | None:
        """Count a new connection in, or say why it is refused."""
        peer = peer_of(transport)
        if self.open_connections >= self.limits.max_connections:
            return f"over the coordinator's cap of {self.limits.max_connections} open connections"
        exempt = peer == ("uid", 0)
        if not exempt and self.open_by_peer[peer] >= self.limits.max_connections_per_peer:
            return f"over the cap of {self.limits.max_connections_per_peer} open connections per peer"
        self.open_by_peer[peer] += 1
        state = self._states[transport] = _State(peer)
        self._arm(transport, state, self.limits.header_timeout_s, "request headers not complete")
        return None

    def release(self, transport: asyncio.BaseTransport) -> None:
        """Count a closed connection out."""
        state = self._states.pop(transport, None)
        if state is None:
            return
        if state.timer is not None:
            state.timer.cancel()
        self.open_by_peer[state.peer] -= 1
        if self.open_by_peer[state.peer] <= 0:
            del self.open_by_peer[state.peer]

    def data(self, transport: asyncio.BaseTransport) -> None:
        """Bytes arrived: the first byte of a new request starts its header timer."""
        state = self._states.get(transport)
        if state is not None and not state.in_flight and not state.waiting_for_headers:
            state.waiting_for_headers = True
            self._arm(transport, state, self.limits.header_timeout_s, "request headers not complete")

    def _arm(self, transport: asyncio.BaseTransport, state: _State, delay: float, reason: str) -> None:
        if state.timer is not None:
            state.timer.cancel()

        def expire() -> None:
            state.timer = None
            if not state.in_flight and not transport.is_closing():
                self.on_refused(state.peer, f"closed: {reason} within {delay:g} s")
                transport.close()

        state.timer = asyncio.get_running_loop().call_later(delay, expire)

    @web.middleware
    async def middleware(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        """Mark the connection busy while a request is handled; idle timer after it."""
        transport = request.transport
        state = self._states.get(transport) if transport is not None else None
        if state is None or transport is None:
            return await handler(request)
        state.in_flight += 1
        state.waiting_for_headers = False
        if state.timer is not None:
            state.timer.cancel()
            state.timer = None
        try:
            return await handler(request)
        finally:
            state.in_flight -= 1
            if not state.in_flight and transport in self._states:
                self._arm(transport, state, self.limits.idle_timeout_s, "idle between requests")


class _GuardedProtocol(asyncio.Protocol):
    """Delegates to aiohttp's request handler; counts the connection and feeds the timers."""

    def __init__(self, guard: ConnectionGuard, inner: Callable[[], asyncio.Protocol]) -> None:
        self._guard = guard
        self._inner_factory = inner
        self._inner: Any = None
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        reason = self._guard.admit(transport)
        if reason is not None:
            self._guard.on_refused(peer_of(transport), f"refused: {reason}")
            body = b'{"error": {"message": "%s; try again later", "field": null, "allowed": null}}' % reason.encode()
            if isinstance(transport, asyncio.WriteTransport):
                transport.write(_REFUSAL % (len(body), body))
            transport.close()
            return
        self._transport = transport
        self._inner = self._inner_factory()
        self._inner.connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._transport is not None:
            self._guard.release(self._transport)
        if self._inner is not None:
            self._inner.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._inner is None:
            return
        if self._transport is not None:
            self._guard.data(self._transport)
        self._inner.data_received(data)

    def eof_received(self) -> bool | None:
        return self._inner.eof_received() if self._inner is not None else None

    def pause_writing(self) -> None:
        if self._inner is not None:
            self._inner.pause_writing()

    def resume_writing(self) -> None:
        if self._inner is not None:
            self._inner.resume_writing()


class GuardedTCPSite(web.TCPSite):
    """A :class:`aiohttp.web.TCPSite` whose connections pass through ``guard``."""

    def __init__(self, runner: web.BaseRunner, host: str, port: int, *, guard: ConnectionGuard) -> None:
        super().__init__(runner, host, port)
        self._guard = guard

    async def start(self) -> None:
        """Listen (as aiohttp's TCPSite does) with the guarded protocol factory."""
        self._runner._reg_site(self)
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_server(
            self._guard.factory(server), self._host, self._port, backlog=self._backlog, reuse_address=True
        )
        self._bound_port = self._server.sockets[0].getsockname()[1] if self._server.sockets else self._port

    @property
    def bound(self) -> tuple[str, int]:
        """The address actually bound (port 0 resolved)."""
        assert isinstance(self._server, asyncio.Server) and self._server.sockets
        host, port = self._server.sockets[0].getsockname()[:2]
        return host, port


class GuardedUnixSite(web.UnixSite):
    """A :class:`aiohttp.web.UnixSite` whose connections pass through ``guard``."""

    def __init__(self, runner: web.BaseRunner, path: str, *, guard: ConnectionGuard) -> None:
        super().__init__(runner, path)
        self._guard = guard

    async def start(self) -> None:
        """Listen (as aiohttp's UnixSite does) with the guarded protocol factory."""
        self._runner._reg_site(self)
        server = self._runner.server
        assert server is not None
        self._server = await asyncio.get_running_loop().create_unix_server(
            self._guard.factory(server), self._path, backlog=self._backlog
        )
