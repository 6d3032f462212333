"""Who may read what (docs/security.md): the TCP listener answers only token holders (but
``/metrics`` while public) and binds loopback by default; on the socket, another user's
argv is private (Slurm's ``PrivateData=jobs``) except to admins."""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import keys
from labgang.launcher.coordinator.app import create_app, serve
from labgang.launcher.coordinator.metrics import add_metrics_routes
from labgang.launcher.coordinator.routes import forwarded

TOKEN = "cluster-secret"
READ = "read-secret-0123456789"
NOBODY, DAEMON = 65534, 1


async def start(extra: dict[str, Any]):
    base = Path(tempfile.mkdtemp(prefix="lgs-", dir="/tmp"))
    read_file = base / "read.token"
    read_file.write_text(READ + "\n")
    read_file.chmod(0o600)
    config = parse_config(
        {"read_token_file": str(read_file), "queues": [{"name": "default", "nominal": {"gpu": 8}}], **extra}
    )
    app = create_app(config, base / "state", token=TOKEN)
    add_metrics_routes(app)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    sock = base / "state" / "labgang.sock"
    await web.UnixSite(runner, str(sock)).start()
    return runner, tcp._server.sockets[0].getsockname()[1], sock  # type: ignore[union-attr]


@pytest.fixture
async def cluster():
    runner, port, sock = await start({})
    try:
        yield runner.app, port, sock
    finally:
        await runner.cleanup()


async def tcp_get(port: int, path: str, token: str | None = None) -> tuple[int, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as s, s.get(f"http://127.0.0.1:{port}{path}", headers=headers) as r:
        text = await r.text()
        return r.status, json.loads(text) if r.content_type == "application/json" else text


async def as_uid(app: web.Application, uid: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """A request an agent forwards for ``uid`` on its node (the same path a user's socket takes)."""
    raw = json.dumps(body).encode() if body is not None else b""
    path, _, query = path.partition("?")
    params = dict(kv.split("=", 1) for kv in query.split("&") if kv)
    status, _, data = await forwarded(app[keys.ROUTES], app[keys.CONFIG], uid, method, path, params, raw)
    return status, json.loads(data)


@pytest.mark.parametrize("path", ["/v1/jobs?all=1", "/v1/nodes", "/v1/queues", "/v1/version", "/v1/jobs/1"])
async def test_tcp_without_a_token_gets_nothing_but_metrics(cluster, path: str) -> None:
    _, port, _ = cluster
    status, body = await tcp_get(port, path)
    assert status == 401, body
    assert "token" in body["error"]["message"]
    status, _ = await tcp_get(port, path, "not-the-token")
    assert status == 401
    status, text = await tcp_get(port, "/metrics")
    assert status == 200 and "labgang" in text


async def test_metrics_can_need_a_token_too() -> None:
    runner, port, _ = await start({"metrics_public": False})
    try:
        assert (await tcp_get(port, "/metrics"))[0] == 401
        assert (await tcp_get(port, "/metrics", READ))[0] == 200
    finally:
        await runner.cleanup()


async def test_argv_is_private_to_its_owner_and_admins(cluster) -> None:
    app, port, sock = cluster
    status, reply = await as_uid(app, NOBODY, "POST", "/v1/jobs", {"argv": ["cat", "secret.txt"]})
    assert status == 201, reply
    job_id = reply["job"]["id"]
    assert reply["job"]["argv"] == ["cat", "secret.txt"]  # the owner sees it
    status, other = await as_uid(app, DAEMON, "GET", f"/v1/jobs/{job_id}")
    assert status == 200 and other["job"]["argv"] is None and other["job"]["user"] == "nobody"
    status, listing = await as_uid(app, DAEMON, "GET", "/v1/jobs?all=1")
    assert [j["argv"] for j in listing["jobs"]] == [None]  # the job is listed, its argv is not
    async with (
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(sock))) as s,
        s.get(f"http://labgang/v1/jobs/{job_id}") as r,
    ):
        assert os.geteuid() == 0  # root is an admin
        assert (await r.json())["job"]["argv"] == ["cat", "secret.txt"]
    status, body = await tcp_get(port, f"/v1/jobs/{job_id}", READ)
    assert status == 200 and body["job"]["argv"] is None
    status, body = await tcp_get(port, f"/v1/jobs/{job_id}", TOKEN)
    assert status == 200 and body["job"]["argv"] == ["cat", "secret.txt"]


async def test_private_data_off_shows_argv_to_everyone() -> None:
    runner, _, _ = await start({"private_data": False})
    try:
        app = runner.app
        _, reply = await as_uid(app, NOBODY, "POST", "/v1/jobs", {"argv": ["echo", "hi"]})
        _, other = await as_uid(app, DAEMON, "GET", f"/v1/jobs/{reply['job']['id']}")
        assert other["job"]["argv"] == ["echo", "hi"]
    finally:
        await runner.cleanup()


async def test_the_tcp_listener_binds_loopback_unless_configured(tmp_path: Path) -> None:
    config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 1}}], "tcp_port": 0})
    stop = asyncio.Event()
    seen: dict[str, Any] = {}

    def ready(info: dict[str, Any]) -> None:
        seen.update(info)
        stop.set()

    await asyncio.wait_for(serve(config, tmp_path / "s", stop=stop, ready=ready), 30)
    assert seen["tcp"][0] == "127.0.0.1"
