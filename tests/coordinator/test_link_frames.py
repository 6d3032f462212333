"""Frames of the wrong shape on the agent link, sent to a real coordinator process: each is one
protocol-error line in its log and a closed link (4400), never a traceback, and the coordinator
goes on serving (docs/architecture.md, launcher/coordinator/frames.py)."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from harness import Cluster

TOKEN = "s3cret-cluster-token"


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    c = Cluster({})
    try:
        c.start_coordinator()
        yield c
    finally:
        c.stop()


def hello(node: str, version: str) -> dict[str, Any]:
    return {"type": "hello", "node": node, "version": version, "address": "127.0.0.1", "ranks": []}


async def closed_with(cluster: Cluster, frames: list[Any], *, after_hello: bool) -> tuple[int | None, str]:
    """Open a link, send a valid hello first when ``after_hello``, then ``frames`` (objects sent
    as JSON, strings as raw text); the close code and reason the coordinator gives."""
    url = f"http://127.0.0.1:{cluster.port}/v1/agent/link"
    async with (
        aiohttp.ClientSession() as s,
        s.ws_connect(url, headers={"Authorization": f"Bearer {TOKEN}"}) as ws,
    ):
        if after_hello:
            with cluster.client() as c:
                version = c.version()["version"]
            await ws.send_json(hello("hostile", version))
            assert (await ws.receive_json(timeout=30))["type"] == "welcome"
        for frame in frames:
            await ws.send_str(frame if isinstance(frame, str) else json.dumps(frame))
        while True:
            msg = await ws.receive(timeout=30)
            if msg.type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED, aiohttp.WSMsgType.CLOSING):
                return ws.close_code, str(msg.extra or "")
            # anything else the coordinator sends first (a command to the node) is skipped


BAD_HELLOS = {  # frame, what the one-line reason names
    "hello-list": (["hello"], "must be a JSON object, got a list"),
    "hello-string": ("just text", "not JSON"),
    "hello-not-json": ("{nope", "not JSON"),
    "hello-no-node": ({"type": "hello", "version": "1"}, "hello.node"),
    "hello-ranks-string": ({"type": "hello", "node": "n9", "ranks": "all"}, "hello.ranks"),
}
API = {"type": "api", "id": 1, "method": "GET", "path": "/v1/jobs", "query": {}, "body": ""}
BAD_FRAMES = {
    "frame-list": ([1, 2, 3], "must be a JSON object, got a list"),
    "frame-string": ('"a string"', "must be a JSON object, got a string"),
    "api-without-uid": (API, "api.uid"),
    "api-uid-string": ({**API, "uid": "0"}, "api.uid"),
    "api-body-not-base64": ({**API, "uid": 0, "body": "%%%"}, "api.body"),
    "api-query-list": ({**API, "uid": 0, "query": [1]}, "api.query"),
    "rank-events-string": ({"type": "rank_events", "seq": 1, "events": "x"}, "rank_events.events"),
    "rank-events-of-lists": ({"type": "rank_events", "seq": 1, "events": [[1]]}, "rank_events.events"),
    "inventory-list": ({"type": "inventory", "inventory": [1]}, "inventory.inventory"),
}


@pytest.mark.parametrize("frame, named", list(BAD_HELLOS.values()), ids=list(BAD_HELLOS))
def test_a_malformed_hello_closes_the_link_with_one_line(cluster: Cluster, frame: Any, named: str) -> None:
    code, reason = asyncio.run(closed_with(cluster, [frame], after_hello=False))
    assert code == 4400 and reason.startswith("protocol error: ") and named in reason, reason
    assert "Traceback" not in cluster.log_text("coordinator")


@pytest.mark.parametrize("frame, named", list(BAD_FRAMES.values()), ids=list(BAD_FRAMES))
def test_a_malformed_frame_closes_the_link_with_one_line(cluster: Cluster, frame: Any, named: str) -> None:
    code, reason = asyncio.run(closed_with(cluster, [frame], after_hello=True))
    assert code == 4400 and reason.startswith("protocol error: ") and named in reason, reason
    assert "Traceback" not in cluster.log_text("coordinator")
    with cluster.client() as c:
        assert c.version()["version"]  # still serving


def test_the_log_has_one_warning_line_per_protocol_error_and_no_traceback(cluster: Cluster) -> None:
    """Each malformed frame is one warning line (the coordinator's repeat filter lets the first
    five of one kind through per minute, launcher/coordinator/ratelog.py, so a flood stays small), never a traceback."""
    asyncio.run(closed_with(cluster, [[1]], after_hello=True))
    log = cluster.log_text("coordinator")
    lines = [line for line in log.splitlines() if "protocol error from " in line]
    assert 1 <= len(lines) <= 5, lines
    assert all(" WARNING labgang.coordinator.link: protocol error from " in line for line in lines)
    assert "Traceback" not in log


def test_a_compressed_body_that_does_not_inflate_is_a_400_without_a_traceback(cluster: Cluster) -> None:
    good = gzip.compress(b'{"argv": ["true"]}')
    bad = good[:10] + b"\x00garbage" + good[10:]

    async def post(url: str, unix: bool) -> int:
        headers = {"Content-Type": "application/json", "Content-Encoding": "gzip", "Authorization": f"Bearer {TOKEN}"}
        connector = aiohttp.UnixConnector(path=str(cluster.socket)) if unix else None
        async with aiohttp.ClientSession(connector=connector) as s, s.post(url, data=bad, headers=headers) as r:
            await r.read()
            return r.status

    assert asyncio.run(post("http://labgang/v1/jobs", True)) == 400
    # TCP is read-only for users: refused before or while reading the body
    assert asyncio.run(post(f"http://127.0.0.1:{cluster.port}/v1/jobs", False)) in (400, 403)
    with cluster.client() as c:
        assert c.version()["version"]
    log = cluster.log_text("coordinator")
    assert "Traceback" not in log
    assert " WARNING aiohttp.server: a request body could not be read (400, message: Can not decode" in log


def test_a_well_formed_forwarded_request_is_still_served(cluster: Cluster) -> None:
    """The parsed frame carries what the old dict did: a forwarded GET is answered."""

    async def run() -> dict[str, Any]:
        url = f"http://127.0.0.1:{cluster.port}/v1/agent/link"
        async with (
            aiohttp.ClientSession() as s,
            s.ws_connect(url, headers={"Authorization": f"Bearer {TOKEN}"}) as ws,
        ):
            with cluster.client() as c:
                version = c.version()["version"]
            await ws.send_json(hello("friendly", version))
            assert (await ws.receive_json(timeout=30))["type"] == "welcome"
            body = base64.b64encode(b"").decode()
            await ws.send_json(
                {"type": "api", "id": 5, "uid": 0, "method": "GET", "path": "/v1/version", "query": {}, "body": body}
            )
            while True:
                msg = await ws.receive_json(timeout=30)
                if msg.get("type") == "api_reply":
                    return msg

    reply = asyncio.run(run())
    assert reply["id"] == 5 and reply["status"] == 200
    assert json.loads(base64.b64decode(reply["body"]))["uid"] == 0
