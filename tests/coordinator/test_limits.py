"""Every submission is bounded (argv, env, name, cwd, the whole spec: docs in config/cluster.toml's
``[limits]``) and listings come a page at a time; the CLI's client follows the pages."""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from labgang.launcher.api.async_client import AsyncClient
from labgang.launcher.api.client import Client
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import keys
from labgang.launcher.coordinator.app import create_app
from labgang.launcher.coordinator.routes import forwarded

LIMITS = {
    "max_argv_bytes": 1000,
    "max_env_bytes": 1000,
    "max_name_chars": 10,
    "max_cwd_bytes": 64,
    "max_spec_bytes": 4096,
    "page_size": 3,
}


@pytest.fixture
async def server():
    base = Path(tempfile.mkdtemp(prefix="lgl-", dir="/tmp"))
    config = parse_config({"limits": LIMITS, "queues": [{"name": "default", "nominal": {"gpu": 8}}]})
    app = create_app(config, base, token="t")
    runner = web.AppRunner(app)
    await runner.setup()
    path = base / "labgang.sock"
    await web.UnixSite(runner, str(path)).start()
    try:
        yield app, path
    finally:
        await runner.cleanup()


async def call(sock: Path, method: str, path: str, body: object = None, data: bytes | None = None):
    async with (
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(sock))) as s,
        s.request(method, "http://labgang" + path, json=body if data is None else None, data=data) as r,
    ):
        return r.status, json.loads(await r.text())


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"argv": ["x" * 1000]}, "argv"),
        ({"argv": ["x"] * 501}, "argv"),
        ({"argv": ["x"], "env": {"A": "b" * 1000}}, "env"),
        ({"argv": ["x"], "name": "n" * 11}, "name"),
        ({"argv": ["x"], "cwd": "/" + "d" * 64}, "cwd"),
    ],
    ids=["argv-word", "argv-words", "env", "name", "cwd"],
)
async def test_an_oversized_field_is_refused_by_name(server, fields: dict, field: str) -> None:
    _, sock = server
    status, reply = await call(sock, "POST", "/v1/jobs", fields)
    assert status == 400, reply
    assert reply["error"]["field"] == field
    assert f"limits.max_{field}_" in reply["error"]["message"]
    assert (await call(sock, "GET", "/v1/jobs?all=1"))[1]["jobs"] == []


async def test_a_spec_over_the_limit_is_a_413_on_the_socket_and_through_an_agent(server) -> None:
    app, sock = server
    big = json.dumps({"argv": ["x"], "gpu_model": "g" * 5000}).encode()
    status, reply = await call(sock, "POST", "/v1/jobs", data=big)
    assert status == 413, reply
    assert "limits.max_spec_bytes" in reply["error"]["message"]
    from labgang.launcher.coordinator import keys

    status, _, body = await forwarded(app[keys.ROUTES], app[keys.CONFIG], 0, "POST", "/v1/jobs", {}, big)
    assert status == 413 and "limits.max_spec_bytes" in json.loads(body)["error"]["message"]


async def test_the_default_limits_refuse_a_10_mb_argv() -> None:
    config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})
    assert config.limits.max_argv_bytes == 128 * 1024 and config.limits.max_spec_bytes == 512 * 1024
    from labgang.launcher.coordinator.errors import BadRequest
    from labgang.launcher.coordinator.requests import Caller, build_spec

    with pytest.raises(BadRequest) as caught:
        build_spec({"argv": ["x" * (10 << 20)]}, Caller(uid=0, user="root"), config)
    assert caught.value.field == "argv"


async def test_listings_come_in_pages_and_the_client_follows_them(server) -> None:
    _, sock = server
    ids = []
    for i in range(7):
        status, reply = await call(sock, "POST", "/v1/jobs", {"argv": ["true"], "name": f"j{i}"})
        assert status == 201, reply
        ids.append(reply["job"]["id"])
    status, first = await call(sock, "GET", "/v1/jobs?all=1")
    assert status == 200 and [j["id"] for j in first["jobs"]] == ids[:3]
    status, second = await call(sock, "GET", f"/v1/jobs?all=1&limit=2&cursor={first['next_cursor']}")
    assert [j["id"] for j in second["jobs"]] == ids[3:5]
    status, last = await call(sock, "GET", f"/v1/jobs?all=1&cursor={ids[4]}")
    assert [j["id"] for j in last["jobs"]] == ids[5:] and last["next_cursor"] is None
    for bad in ("limit=0", "limit=4", "limit=x", "cursor=x"):
        status, reply = await call(sock, "GET", f"/v1/jobs?{bad}")
        assert status == 400 and reply["error"]["field"] == bad.split("=")[0], reply

    assert [j["id"] for j in await asyncio.to_thread(lambda: Client(sock).jobs(all_users=True))] == ids
    async with AsyncClient(sock) as client:
        assert [j["id"] for j in await client.jobs(all_users=True)] == ids


def test_openapi_documents_the_page_parameters(repo_root: Path) -> None:
    spec = json.loads((repo_root / "docs" / "openapi.json").read_text())
    op = spec["paths"]["/v1/jobs"]["get"]
    assert {p["name"] for p in op["parameters"]} == {"all", "user", "queue", "state", "limit", "cursor", "view"}
    page, table = op["responses"]["200"]["content"]["application/json"]["schema"]["oneOf"]
    assert "next_cursor" in page["required"] and table["required"] == ["table", "jobs"]
    assert "413" in spec["paths"]["/v1/jobs"]["post"]["responses"]


async def test_a_page_of_big_jobs_ends_at_the_byte_budget() -> None:
    base = Path(tempfile.mkdtemp(prefix="lgp-", dir="/tmp"))
    config = parse_config(
        {"limits": {"max_page_bytes": 4096, "page_size": 100}, "queues": [{"name": "default", "nominal": {"gpu": 8}}]}
    )
    runner = web.AppRunner(create_app(config, base, token="t"))
    await runner.setup()
    sock = base / "labgang.sock"
    await web.UnixSite(runner, str(sock)).start()
    try:
        ids = []
        for _ in range(5):
            status, reply = await call(sock, "POST", "/v1/jobs", {"argv": ["echo", "a" * 1500]})
            assert status == 201, reply
            ids.append(reply["job"]["id"])
        status, first = await call(sock, "GET", "/v1/jobs?all=1")
        assert 1 <= len(first["jobs"]) < 5 and first["next_cursor"] == first["jobs"][-1]["id"]
        assert len(json.dumps(first)) < 4096 + 2500  # the budget, plus at most the job that crossed it
        assert [j["id"] for j in await asyncio.to_thread(lambda: Client(sock).jobs(all_users=True))] == ids
    finally:
        await runner.cleanup()


def _raw_get(sock: Path, target: str) -> tuple[bytes, bytes]:
    """The head and body of ``GET target`` as they come off the Unix socket (the server closes after)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(sock))
        s.sendall(f"GET {target} HTTP/1.1\r\nHost: labgang\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


async def test_a_page_sent_in_pieces_is_one_answer_of_its_length_and_the_json_of_the_page() -> None:
    base = Path(tempfile.mkdtemp(prefix="lgq-", dir="/tmp"))
    config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})
    app = create_app(config, base, token="t")
    runner = web.AppRunner(app)
    await runner.setup()
    sock = base / "labgang.sock"
    await web.UnixSite(runner, str(sock)).start()
    try:
        for _ in range(60):  # about 150 KiB of JobViews: three pieces of 64 KiB (view_cache.page_pieces)
            status, reply = await call(sock, "POST", "/v1/jobs", {"argv": ["echo", "a" * 1500]})
            assert status == 201, reply
        # every job judged once (no node: each unschedulable for good), so the two reads below see one
        # state: a cycle between them would change a reason and the bytes with it
        for _ in range(400):
            _, listing = await call(sock, "GET", "/v1/jobs?all=1")
            if all(j["reason"] is not None for j in listing["jobs"]):
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the jobs never got their pending reasons")
        head, body = await asyncio.to_thread(_raw_get, sock, "/v1/jobs?all=1")
        lines = head.split(b"\r\n")
        assert lines[0] == b"HTTP/1.1 200 OK"
        fields = dict(line.split(b": ", 1) for line in lines[1:])
        assert fields[b"Content-Type"] == b"application/json" and b"Transfer-Encoding" not in fields
        assert int(fields[b"Content-Length"]) == len(body) > 128 * 1024
        page = json.loads(body)
        assert len(page["jobs"]) == 60 and page["next_cursor"] is None
        assert body == json.dumps(page).encode()  # what one json.dumps of the whole page writes, byte for byte
        status, _, forwarded_body = await forwarded(app[keys.ROUTES], config, 0, "GET", "/v1/jobs", {"all": "1"}, b"")
        assert (status, forwarded_body) == (200, body)  # a request an agent forwards gets the same bytes
    finally:
        await runner.cleanup()
