"""The user API served by the real application on a real Unix socket and a loopback TCP port,
with a websocket 'agent' driven by the test (real link protocol, simulated NVML inventory)."""

from __future__ import annotations

import base64
import json
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from harness import inventory_dict
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import keys
from labgang.launcher.coordinator.app import create_app

TOKEN = "test-token"


class Server:
    def __init__(self, runner: web.AppRunner, sock: Path, port: int) -> None:
        self.runner, self.sock, self.port = runner, sock, port
        self.app = runner.app

    def unix(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(self.sock)))

    async def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        async with self.unix() as s, s.request(method, "http://labgang" + path, json=body) as r:
            return r.status, await r.json()


@pytest.fixture
async def server():
    base = Path(tempfile.mkdtemp(prefix="lga-", dir="/tmp"))
    config = parse_config(
        {
            "admins": ["admin-nobody-has"],
            "priority_classes": {"high": 100},
            "default_grace_s": 0.5,
            "queues": [
                {"name": "default", "nominal": {"gpu": 8}},
                {"name": "private", "nominal": {"gpu": 4}, "users": ["someone-else"]},
            ],
        }
    )
    app = create_app(config, base, token=TOKEN)
    runner = web.AppRunner(app)
    await runner.setup()
    sock = base / "labgang.sock"
    await web.UnixSite(runner, str(sock)).start()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    port = tcp._server.sockets[0].getsockname()[1]
    try:
        yield Server(runner, sock, port)
    finally:
        await runner.cleanup()


async def test_submit_list_show_cancel_as_the_socket_peer(server: Server) -> None:
    status, body = await server.call(
        "POST", "/v1/jobs", {"argv": ["sleep", "10"], "workers": 2, "gpus_per_worker": 4, "priority": "high"}
    )
    assert status == 201, body
    job = body["job"]
    assert job["user"] == "root" and job["uid"] == 0  # from SO_PEERCRED, not the body
    assert (job["state"], job["priority"], job["queue"], job["resource"]) == ("pending", 100, "default", "gpu")
    status, body = await server.call("GET", "/v1/jobs")
    assert [j["id"] for j in body["jobs"]] == [job["id"]]
    status, body = await server.call("GET", f"/v1/jobs/{job['id']}")
    assert body["job"]["history"][0]["event"] == "submitted"
    status, body = await server.call("POST", f"/v1/jobs/{job['id']}/cancel")
    assert status == 200 and body["job"]["state"] == "cancelled"
    status, body = await server.call("GET", "/v1/queues")
    assert body["queues"][0] == {
        "name": "default",
        "cohort": None,
        "nominal": {"gpu": 8},
        "used": {},
        "borrowed": {},
        "lent": {},
        "borrowing_limit": {},
        "lending_limit": {},
        "pending": 0,
        "running": 0,
        "reclaim_time_s": 0.0,
        "reclaim_within_cohort": "never",
        "fair_sharing": False,
        "borrow_within_cohort": {"policy": "never", "max_priority_threshold": None},
        "fair_share": 0.0,
        "fair_share_basis": {},
        "fair_share_ratio": 0.0,
        "fair_weight": 1.0,
        "tenants": [],
        "priority_classes": {"high": 100},
        "default_priority_class": None,
        "user_limits": {},
        "users": [],
        "at_limits": {},
        "submitters": {"users": None, "groups": None},
        "caller_may_submit": True,
    }


@pytest.mark.parametrize(
    "body, status, field, allowed",
    [
        ({"argv": ["x"], "queue": "nope"}, 400, "queue", ["default", "private"]),
        ({"argv": ["x"], "priority": "urgent"}, 400, "priority", ["high"]),
        ({"argv": ["x"], "priority": 2**31}, 400, "priority", None),
        ({"argv": ["x"], "priority": -(2**31) - 1}, 400, "priority", None),
        ({"argv": ["x"], "bogus": 1}, 400, "bogus", None),
        ({"argv": []}, 400, "argv", None),
        ({"argv": ["x"], "workers": 0}, 400, "workers", None),
        ({"argv": ["x"], "mig": "huge"}, 400, "mig", None),
        ({"argv": ["x"], "signal": "SIGNOPE@10"}, 400, "signal", None),
        ({"argv": ["x"], "cwd": "relative"}, 400, "cwd", None),
        ({"argv": ["x"], "workers": 3, "gpus_per_worker": 4}, 409, "workers", None),
        ({"argv": ["x"], "topology": "rack"}, 400, "topology", ["nvlink", "pcie-switch", "numa", "node"]),
        ({"argv": ["x"], "workers": 2, "nodes": 2, "topology": "nvlink"}, 400, "nodes", [1]),
        ({"argv": ["x"], "cpu_bind": "socket"}, 400, "cpu_bind", ["numa", "none"]),
        ({"argv": ["x"], "name": "a\nb\x1b[31m"}, 400, "name", None),
        ({"argv": ["x"], "queue": ""}, 400, "queue", ["default", "private"]),
        ({"argv": ["x"], "workers": True}, 400, "workers", None),  # JSON true is no integer
        ({"argv": ["x"], "grace_s": True}, 400, "grace_s", None),
        ({"argv": ["x"], "priority": True}, 400, "priority", None),
        ({"argv": ["x"], "groups": [{"argv": ["a"], "workers": True}, {"argv": ["b"]}]}, 400, "groups.0.workers", None),
    ],
    ids=[
        "unknown-queue",
        "unknown-priority-class",
        "priority-above-int32",
        "priority-below-int32",
        "unknown-field",
        "empty-argv",
        "zero-workers",
        "bad-mig",
        "bad-signal",
        "relative-cwd",
        "over-any-quota",
        "unknown-topology-level",
        "topology-over-several-nodes",
        "unknown-cpu-bind",
        "control-characters-in-name",
        "empty-queue",
        "true-as-workers",
        "true-as-grace",
        "true-as-priority",
        "true-as-a-groups-workers",
    ],
)
async def test_bad_submissions_name_the_field_and_change_nothing(
    server: Server, body: dict, status: int, field: str, allowed: list | None
) -> None:
    got, reply = await server.call("POST", "/v1/jobs", body)
    assert got == status, reply
    assert reply["error"]["field"] == field
    if allowed is not None:
        assert reply["error"]["allowed"] == allowed
    _, listing = await server.call("GET", "/v1/jobs?all=1")
    assert listing["jobs"] == []


@pytest.mark.parametrize(
    "fields, field",
    [
        ({"mig": "1g.10gb"}, "mig"),  # the queue has no quota for MIG devices
        ({"gpu_model": "A100"}, "gpu_model"),  # the node has H100s only
        ({"gpus_per_worker": 9}, "gpus_per_worker"),  # more than the queue may ever hold
        ({"gpus_per_worker": 5}, "gpus_per_worker"),  # more than one node has
        ({"workers": 2, "nodes": 2}, "nodes"),  # one node known
        ({"workers": 3, "gpus_per_worker": 2}, "workers"),  # 6 GPUs, the one node has 4
    ],
    ids=["mig", "gpu-model", "gpus-over-quota", "gpus-over-a-node", "nodes", "workers"],
)
async def test_a_job_that_can_never_start_names_the_field_at_fault(server: Server, fields: dict, field: str) -> None:
    async with aiohttp.ClientSession() as s:
        ws = await s.ws_connect(
            f"http://127.0.0.1:{server.port}/v1/agent/link", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        await ws.send_json(
            {
                "type": "hello",
                "node": "n1",
                "version": server.app[keys.COORDINATOR].version,
                "address": "127.0.0.1",
                "inventory": inventory_dict("n1-4gpu.toml"),
                "ranks": [],
            }
        )
        assert (await ws.receive_json(timeout=5))["type"] == "welcome"
        status, reply = await server.call("POST", "/v1/jobs", {"argv": ["x"], **fields})
        await ws.close()
    assert status == 409 and reply["error"]["field"] == field, reply
    assert reply["error"]["message"].startswith("job can never start: ")
    if field == "gpu_model":
        assert "no gpu matches model 'A100'; models here: NVIDIA H100" in reply["error"]["message"], reply


async def test_unknown_job_is_404_and_tcp_is_read_only(server: Server) -> None:
    status, body = await server.call("GET", "/v1/jobs/999")
    assert status == 404 and body["error"]["field"] == "id"
    async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"}) as s:
        async with s.post(f"http://127.0.0.1:{server.port}/v1/jobs", json={"argv": ["x"]}) as r:
            assert r.status == 403
            assert "read-only" in (await r.json())["error"]["message"]
        async with s.get(f"http://127.0.0.1:{server.port}/v1/version") as r:
            assert r.status == 200 and (await r.json())["uid"] is None


async def test_forwarded_requests_act_as_the_vouched_uid(server: Server) -> None:
    """An agent forwards requests from its node's socket; the coordinator trusts its uid."""
    status, root_job = await server.call("POST", "/v1/jobs", {"argv": ["sleep", "1"]})
    assert status == 201
    async with aiohttp.ClientSession() as s:
        ws = await s.ws_connect(
            f"http://127.0.0.1:{server.port}/v1/agent/link", headers={"Authorization": f"Bearer {TOKEN}"}
        )
        await ws.send_json(
            {
                "type": "hello",
                "node": "n1",
                "version": server.app[keys.COORDINATOR].version,
                "address": "127.0.0.1",
                "inventory": inventory_dict("n1-4gpu.toml"),
                "ranks": [],
            }
        )
        assert (await ws.receive_json(timeout=5))["type"] == "welcome"

        async def forward(uid: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
            data = json.dumps(body).encode() if body is not None else b""
            await ws.send_json(
                {
                    "type": "api",
                    "id": 7,
                    "uid": uid,
                    "method": method,
                    "path": path,
                    "query": {},
                    "body": base64.b64encode(data).decode(),
                }
            )
            while True:
                msg = await ws.receive_json(timeout=5)
                if msg["type"] == "api_reply":
                    return msg["status"], json.loads(base64.b64decode(msg["body"]))

        status, reply = await forward(65534, "POST", f"/v1/jobs/{root_job['job']['id']}/cancel")
        assert status == 403
        assert "belongs to root" in reply["error"]["message"]
        status, reply = await forward(65534, "POST", "/v1/jobs", {"argv": ["true"], "queue": "private"})
        assert status == 403 and reply["error"]["field"] == "queue" and reply["error"]["allowed"] == ["default"]
        status, reply = await forward(65534, "POST", "/v1/jobs", {"argv": ["true"]})
        assert status == 201 and reply["job"]["uid"] == 65534
        status, reply = await forward(65534, "GET", "/v1/jobs")
        assert [j["uid"] for j in reply["jobs"]] == [65534]
        status, reply = await forward(65534, "GET", f"/v1/jobs/{root_job['job']['id']}/logs")
        assert status == 403
        await ws.close()
    status, body = await server.call("GET", "/v1/nodes")
    node = body["nodes"][0]
    assert node["name"] == "n1" and len(node["devices"]) == 4
    assert node["inventory"]["hostname"] == "n1"
