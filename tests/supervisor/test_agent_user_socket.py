"""The agent's 0666 user socket has the coordinator's connection fences: a silent or half-sent
connection is closed, so idle clients cannot take every descriptor of the agent."""

from __future__ import annotations

import asyncio
from pathlib import Path

from aiohttp import web
from labgang.agent import userproxy as userproxy_mod
from labgang.agent.config import AgentConfig
from labgang.agent.connguard import ConnectionLimits
from labgang.agent.nvml import open_backend
from labgang.agent.service import AgentService

REPO = Path(__file__).resolve().parents[2]


async def test_a_silent_connection_to_the_agent_socket_is_closed(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(userproxy_mod, "USER_SOCKET_LIMITS", ConnectionLimits(header_timeout_s=0.3), raising=False)
    linked = asyncio.Event()

    async def link(request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        hello = await ws.receive_json()
        await ws.send_json({"type": "welcome", "version": hello.get("version")})
        linked.set()
        async for _ in ws:
            pass
        return ws

    app = web.Application()
    app.router.add_get("/v1/agent/link", link)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    state = tmp_path / "agent"
    config = AgentConfig(
        node="t1", coordinator=f"http://127.0.0.1:{port}", state_dir=str(state), supervisor={"allow_root": True}
    )
    agent = AgentService(config, backend=open_backend(REPO / "config" / "sim" / "h100x8.toml"), token="t")
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    try:
        await asyncio.wait_for(linked.wait(), 30)
        sock = state / "labgang.sock"
        for _ in range(500):
            if sock.exists():
                break
            await asyncio.sleep(0.02)
        reader, writer = await asyncio.open_unix_connection(str(sock))
        writer.write(b"GET /v1/version HTTP/1.1\r\n")  # and never the rest
        await asyncio.wait_for(reader.read(), 10)
        assert reader.at_eof()
        writer.close()
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await runner.cleanup()
