"""The agent's end of the link: a websocket it dials to the coordinator, kept up with backoff.

Messages are JSON objects (see ``labgang.launcher.coordinator.agents`` for the list).
The link knows nothing about ranks or NVML: the service gives it a ``hello`` builder,
a command handler and callbacks, and uses :meth:`CoordinatorLink.send` and
:meth:`CoordinatorLink.forward`. It keeps the node's lease renewed (``agent/lease.py``); what
to do when the lease runs out is the service's business.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
from labgang.agent.lease import NodeLease

log = logging.getLogger("labgang.agent.link")

LINK_PATH = "/v1/agent/link"
HEARTBEAT_S = 10.0


class LinkDown(Exception):
    """The link is not connected (a forwarded request cannot be served now)."""


class CoordinatorLink:
    """A reconnecting websocket client to the coordinator.

    Args:
        url: the coordinator's base URL (``http://host:port``).
        token: the cluster token, sent as ``Authorization: Bearer``.
        hello: builds the ``hello`` message (called on every connect, so it carries fresh state).
        on_command: ``async (op, args) -> result``; raising makes an error reply.
        on_connected: called after the coordinator's ``welcome`` (resend unacknowledged events).
        on_ack: called with the ``seq`` of each ``ack``.
        reconnect_max_s: cap of the exponential reconnect backoff (seconds).
        lease: the node's lease, armed by each ``welcome`` that names ``node_timeout_s`` and
            renewed while the link is up (``agent/lease.py``); None: no lease is kept.
    """

    def __init__(
        self,
        url: str,
        token: str,
        *,
        hello: Callable[[], dict[str, Any]],
        on_command: Callable[[str, dict[str, Any]], Awaitable[Any]],
        on_connected: Callable[[], Awaitable[None]] | None = None,
        on_ack: Callable[[int], None] | None = None,
        reconnect_max_s: float = 10.0,
        lease: NodeLease | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self._hello = hello
        self._on_command = on_command
        self._on_connected = on_connected
        self._on_ack = on_ack
        self.reconnect_max_s = reconnect_max_s
        self.lease = lease
        self._renewals: dict[int, float] = {}  # renewal id -> monotonic send time, until answered
        self._renewal_ids = itertools.count(1)
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._forward_ids = itertools.count(1)
        self._forwards: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        self.connected = asyncio.Event()
        self.refused: str | None = None

    @property
    def is_up(self) -> bool:
        """True while the websocket is open and welcomed."""
        return self._ws is not None and not self._ws.closed and self.connected.is_set()

    async def send(self, message: dict[str, Any]) -> bool:
        """Send one message; False (nothing sent) when the link is down."""
        ws = self._ws
        if ws is None or ws.closed or not self.connected.is_set():
            return False
        try:
            await ws.send_json(message)
            return True
        except (ConnectionError, RuntimeError, aiohttp.ClientError):
            return False

    async def forward(
        self, uid: int, method: str, path: str, query: Mapping[str, str], body: bytes, *, timeout: float = 60.0
    ) -> dict[str, Any]:
        """Forward a user request to the coordinator, vouching for ``uid``.

        Returns:
            ``{"status": int, "headers": {...}, "body": bytes}``.

        Raises:
            LinkDown: not connected, or the link dropped before the answer came.
        """
        if not self.is_up:
            raise LinkDown("this node's agent is not connected to the coordinator")
        req_id = next(self._forward_ids)
        fut: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._forwards[req_id] = fut
        try:
            sent = await self.send(
                {
                    "type": "api",
                    "id": req_id,
                    "uid": uid,
                    "method": method,
                    "path": path,
                    "query": dict(query),
                    "body": base64.b64encode(body).decode(),
                }
            )
            if not sent:
                raise LinkDown("this node's agent is not connected to the coordinator")
            reply = await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise LinkDown(f"no answer from the coordinator within {timeout:g} s") from None
        finally:
            self._forwards.pop(req_id, None)
        return {
            "status": int(reply["status"]),
            "headers": dict(reply.get("headers") or {}),
            "body": base64.b64decode(reply.get("body") or ""),
        }

    async def run(self, stop: asyncio.Event) -> None:
        """Connect, serve, and reconnect with jittered exponential backoff until ``stop`` is set."""
        delay = 0.2
        async with aiohttp.ClientSession() as session:
            while not stop.is_set():
                try:
                    await self._session(session, stop)
                    delay = 0.2
                except aiohttp.WSServerHandshakeError as exc:
                    if exc.status == 401:
                        log.error("the coordinator at %s refused the cluster token", self.url)
                    else:
                        log.warning("link handshake to %s failed: %s", self.url, exc)
                except (TimeoutError, aiohttp.ClientError, ConnectionError, OSError) as exc:
                    log.info("link to %s down: %s", self.url, exc)
                finally:
                    self._drop()
                if stop.is_set():
                    break
                wait = delay * (0.75 + random.random() / 2)
                try:
                    await asyncio.wait_for(stop.wait(), wait)
                except TimeoutError:
                    pass
                delay = min(delay * 2, self.reconnect_max_s)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _drop(self) -> None:
        self.connected.clear()
        self._ws = None
        for fut in self._forwards.values():
            if not fut.done():
                fut.set_exception(LinkDown("the link to the coordinator dropped"))

    async def _session(self, session: aiohttp.ClientSession, stop: asyncio.Event) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        # The heartbeat notices a coordinator that vanished without closing the connection.
        async with session.ws_connect(
            self.url + LINK_PATH, headers=headers, heartbeat=HEARTBEAT_S, max_msg_size=64 << 20
        ) as ws:
            self._ws = ws
            hello_sent = time.monotonic()
            await ws.send_json(self._hello())
            first = await ws.receive_json(timeout=15)
            if first.get("type") == "refused":
                self.refused = str(first.get("message"))
                log.error("coordinator refused this agent: %s", self.refused)
                await ws.close()
                return
            if first.get("type") != "welcome":
                raise ConnectionError(f"expected welcome, got {first.get('type')!r}")
            self.refused = None
            timeout = first.get("node_timeout_s")
            if self.lease is not None and isinstance(timeout, (int, float)) and timeout > 0:
                self.lease.arm(float(timeout), hello_sent)  # the welcome answers the hello
            self.connected.set()
            log.info("link to %s up", self.url)
            if self._on_connected is not None:
                await self._on_connected()
            stopper = asyncio.ensure_future(stop.wait())
            renewer = asyncio.ensure_future(self._renew(ws))
            try:
                while True:
                    receiver = asyncio.ensure_future(ws.receive())
                    done, _ = await asyncio.wait({receiver, stopper}, return_when=asyncio.FIRST_COMPLETED)
                    if stopper in done:
                        receiver.cancel()
                        await ws.close()
                        return
                    msg = receiver.result()
                    if msg.type != aiohttp.WSMsgType.TEXT:
                        return
                    self._dispatch(msg.json())
            finally:
                stopper.cancel()
                renewer.cancel()
                self._renewals.clear()

    async def _renew(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        """Send a lease renewal every ``lease.renew_every`` seconds while this websocket is open."""
        lease = self.lease
        if lease is None:
            return
        while not ws.closed:
            every = lease.renew_every
            if every is None:
                return
            await asyncio.sleep(every)
            renewal = next(self._renewal_ids)
            self._renewals[renewal] = time.monotonic()
            try:
                await ws.send_json({"type": "lease", "id": renewal})
            except (ConnectionError, RuntimeError, aiohttp.ClientError):
                return

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message.get("type")
        if kind == "command":
            task = asyncio.ensure_future(self._run_command(message))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        elif kind == "ack":
            if self._on_ack is not None and message.get("seq") is not None:
                self._on_ack(int(message["seq"]))
        elif kind == "lease":
            renewal = message.get("id")
            sent = self._renewals.pop(renewal, None) if isinstance(renewal, int) else None
            if sent is not None and self.lease is not None:
                self.lease.confirm(sent)
                self._renewals = {i: t for i, t in self._renewals.items() if t > sent}
        elif kind == "api_reply":
            request_id = message.get("id")
            fut = self._forwards.get(request_id) if isinstance(request_id, int) else None
            if fut is not None and not fut.done():
                fut.set_result(message)
        else:
            log.warning("unknown message from the coordinator: %r", kind)

    async def _run_command(self, message: dict[str, Any]) -> None:
        try:
            result = await self._on_command(str(message.get("op")), dict(message.get("args") or {}))
            reply = {"type": "reply", "id": message.get("id"), "ok": True, "result": result}
        except Exception as exc:  # every failure goes back to the coordinator as an error reply
            log.warning("command %s failed: %s", message.get("op"), exc)
            reply = {"type": "reply", "id": message.get("id"), "ok": False, "error": str(exc)}
        await self.send(reply)
