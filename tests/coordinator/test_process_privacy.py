"""Device processes in ``GET /v1/nodes`` under ``private_data`` (another user's command line only for
admins and the cluster token), and ``GET /v1/series`` (the graphs' samples), on a real coordinator
app with a real agent link on loopback."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from labgang.agent.inventory import GpuInfo, NodeInventory, ProcessInfo
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import keys
from labgang.launcher.coordinator.app import create_app
from labgang.launcher.coordinator.pitfall_watch import add_pitfall_watch
from labgang.launcher.coordinator.private_processes import hide_commands
from labgang.launcher.coordinator.routes import forwarded

TOKEN = "cluster-secret"
READ = "read-secret-0123456789"
NOBODY, DAEMON = 65534, 1
GiB = 1024**3


def node_inventory() -> dict[str, Any]:
    procs = (
        ProcessInfo(101, 2 * GiB, user="nobody", command="python mine.py", alive=True, job="1", rank=0),
        ProcessInfo(202, GiB, user="root", command="python theirs.py --secret", alive=True),
    )
    gpu = GpuInfo(
        index=0, uuid="GPU-1", name="NVIDIA H100", pci_bus_id="0", memory_total_bytes=80 * GiB,
        memory_used_bytes=3 * GiB, memory_free_bytes=77 * GiB, utilization_gpu_pct=55.0,
        utilization_memory_pct=1.0, sm_active_pct=40.0, sm_occupancy_pct=1.0, temperature_c=30.0,
        power_w=70.0, power_limit_w=700.0, clock_event_reasons=(), ecc_volatile_uncorrected=0,
        mig_mode_current=False, mig_mode_pending=False, processes=procs,
    )  # fmt: skip
    return NodeInventory("n1", 0.0, "565", "12", 12070, (gpu,)).to_dict()


async def start(extra: dict[str, Any]):
    base = Path(tempfile.mkdtemp(prefix="lgp-", dir="/tmp"))
    read_file = base / "read.token"
    read_file.write_text(READ + "\n")
    read_file.chmod(0o600)
    config = parse_config(
        {"read_token_file": str(read_file), "queues": [{"name": "default", "nominal": {"gpu": 8}}], **extra}
    )
    app = create_app(config, base / "state", token=TOKEN)
    add_pitfall_watch(app)  # as serve() does: GET /v1/series reads its samples
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    return runner, tcp._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]


async def with_agent(extra: dict[str, Any], check) -> None:
    """Run ``check(app, port)`` while an agent for n1 (the inventory above) is linked."""
    runner, port = await start(extra)
    try:
        async with aiohttp.ClientSession() as s:
            ws = await s.ws_connect(
                f"http://127.0.0.1:{port}/v1/agent/link", headers={"Authorization": f"Bearer {TOKEN}"}
            )
            hello = {
                "type": "hello", "node": "n1", "version": runner.app[keys.COORDINATOR].version,
                "address": "127.0.0.1", "inventory": node_inventory(), "ranks": [],
            }  # fmt: skip
            await ws.send_json(hello)
            assert (await ws.receive_json(timeout=5))["type"] == "welcome"
            await check(runner.app, port)
            await ws.close()
    finally:
        await runner.cleanup()


async def tcp_get(port: int, path: str, token: str) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as s,
        s.get(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"Bearer {token}"}) as r,
    ):
        return r.status, await r.json()


async def commands_seen_by_uid(app: web.Application, uid: int) -> dict[int, str | None]:
    status, _, data = await forwarded(app[keys.ROUTES], app[keys.CONFIG], uid, "GET", "/v1/nodes", {}, b"")
    assert status == 200
    return commands(json.loads(data))


def commands(body: dict[str, Any]) -> dict[int, str | None]:
    (node,) = body["nodes"]
    return {p["pid"]: p["command"] for g in node["inventory"]["gpus"] for p in g["processes"]}


async def test_another_users_command_is_for_admins_and_the_cluster_token_only() -> None:
    async def check(app: web.Application, port: int) -> None:
        assert await commands_seen_by_uid(app, NOBODY) == {101: "python mine.py", 202: None}
        assert await commands_seen_by_uid(app, DAEMON) == {101: None, 202: None}
        assert await commands_seen_by_uid(app, 0) == {101: "python mine.py", 202: "python theirs.py --secret"}
        status, body = await tcp_get(port, "/v1/nodes", READ)
        assert status == 200 and commands(body) == {101: None, 202: None}
        status, body = await tcp_get(port, "/v1/nodes", TOKEN)
        assert commands(body) == {101: "python mine.py", 202: "python theirs.py --secret"}
        (proc, _) = body["nodes"][0]["inventory"]["gpus"][0]["processes"]
        assert (proc["user"], proc["job"], proc["rank"], proc["alive"]) == ("nobody", "1", 0, True)

    await with_agent({}, check)


async def test_private_data_off_shows_every_command() -> None:
    async def check(app: web.Application, port: int) -> None:
        assert await commands_seen_by_uid(app, DAEMON) == {101: "python mine.py", 202: "python theirs.py --secret"}

    await with_agent({"private_data": False}, check)


def test_hide_commands_copies_only_what_it_changes() -> None:
    node = {"name": "n1", "inventory": node_inventory()}
    before = json.dumps(node, sort_keys=True)
    hidden = hide_commands(node, "nobody")
    assert json.dumps(node, sort_keys=True) == before  # the cached view is not modified
    assert [p["command"] for p in hidden["inventory"]["gpus"][0]["processes"]] == ["python mine.py", None]
    mine_only = {"name": "n1", "inventory": {"gpus": [{"processes": [{"user": "u", "command": "x"}]}]}}
    assert hide_commands(mine_only, "u") is mine_only
    assert hide_commands({"name": "n2", "inventory": None}, "u")["inventory"] is None


async def test_series_serves_the_watch_samples_and_refuses_a_bad_window() -> None:
    async def check(app: web.Application, port: int) -> None:
        watch = app[keys.COORDINATOR].pitfalls
        assert watch is not None  # the app runs one
        watch.sample()  # the watch's loop does this every 2 s
        status, body = await tcp_get(port, "/v1/series?seconds=60", READ)
        assert status == 200 and body["window_s"] == 60
        (dev,) = body["devices"]
        assert (dev["node"], dev["uuid"], dev["label"]) == ("n1", "GPU-1", "GPU 0")
        assert (dev["util_pct"], dev["sm_pct"], dev["mem_used_bytes"]) == ([55.0], [40.0], [3.0 * GiB])
        assert (await tcp_get(port, "/v1/series?device=GPU-other", READ))[1]["devices"] == []
        for bad in ("0", "-5", "nan", "1e9", "soon"):
            status, body = await tcp_get(port, f"/v1/series?seconds={bad}", READ)
            assert status == 400 and body["error"]["field"] == "seconds", bad
            assert "seconds must be a number of seconds in (0, 86400]" in body["error"]["message"]

    await with_agent({}, check)


@pytest.mark.parametrize("uid", [NOBODY])
async def test_series_is_open_to_any_user_on_the_socket(uid: int) -> None:
    async def check(app: web.Application, port: int) -> None:
        status, _, data = await forwarded(app[keys.ROUTES], app[keys.CONFIG], uid, "GET", "/v1/series", {}, b"")
        assert status == 200 and "devices" in json.loads(data)

    await with_agent({}, check)


def test_another_users_mps_client_command_is_hidden_too() -> None:
    client = {"pid": 7, "used_memory_bytes": 1, "user": "mallory", "command": "python secret.py --token x"}
    mine = {"pid": 8, "used_memory_bytes": 1, "user": "alice", "command": "python eval.py"}
    gpu: dict[str, Any] = {"uuid": "GPU-a", "processes": [], "mps_processes": [client, mine]}
    node: dict[str, Any] = {"name": "n1", "inventory": {"gpus": [gpu]}}
    hidden = hide_commands(node, "alice")
    assert [p["command"] for p in hidden["inventory"]["gpus"][0]["mps_processes"]] == [None, "python eval.py"]
    assert gpu["mps_processes"][0]["command"] == "python secret.py --token x"  # the cached view is not modified
