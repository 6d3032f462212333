"""The coordinator's end of an agent link, played by a real aiohttp websocket on loopback, for tests
that run a real ``AgentService``: it records every message, acknowledges rank events and sends
commands.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

from aiohttp import WSMsgType, web

REPO = Path(__file__).resolve().parents[2]
MACHINE = REPO / "config" / "sim" / "h100x8.toml"


class CoordinatorEnd:
    """The coordinator's end of one agent link: records messages, acks events, sends commands."""

    def __init__(self) -> None:
        self.messages: list[dict[str, Any]] = []
        self.ws: web.WebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._replies: dict[int, asyncio.Future[Any]] = {}
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/agent/link", self._link)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert isinstance(server, asyncio.Server)  # a TCPSite listens through an asyncio.Server
        port = server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.runner is not None:
            await self.runner.cleanup()

    async def _link(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        hello = await ws.receive_json()
        await self._record(hello)
        await ws.send_json({"type": "welcome", "version": hello.get("version")})
        self.ws = ws
        async for msg in ws:
            if msg.type != WSMsgType.TEXT:
                continue
            message = msg.json()
            if message.get("type") == "reply":
                fut = self._replies.pop(message["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(message)
                continue
            await self._record(message)
            if message.get("type") == "rank_events":
                await ws.send_json({"type": "ack", "seq": message["seq"]})
        return ws

    async def _record(self, message: dict[str, Any]) -> None:
        self.messages.append(message)

    async def command(self, op: str, args: dict[str, Any]) -> Any:
        assert self.ws is not None
        cmd_id = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._replies[cmd_id] = fut
        await self.ws.send_json({"type": "command", "id": cmd_id, "op": op, "args": args})
        reply = await asyncio.wait_for(fut, 10)
        assert reply["ok"], reply
        return reply["result"]

    def events(self, kind: str | None = None) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """Every (message, event) of the rank_events messages, first delivery of each event only."""
        seen, out = set(), []
        for message in self.messages:
            if message.get("type") != "rank_events":
                continue
            for ev in message["events"]:
                key = (ev["job_id"], ev["rank"], ev["kind"])
                if key not in seen and (kind is None or ev["kind"] == kind):
                    seen.add(key)
                    out.append((message, ev))
        return out

    async def wait(self, predicate: Any, timeout: float = 10.0) -> Any:
        """Poll ``predicate`` every 10 ms until truthy; its value. Fails after ``timeout`` s."""

        async def until() -> Any:
            while not (found := predicate()):
                await asyncio.sleep(0.01)
            return found

        return await asyncio.wait_for(until(), timeout)
