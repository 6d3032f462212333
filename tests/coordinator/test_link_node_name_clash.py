"""A second agent that names a node already connected from another machine (a copied
``agent.toml``) is refused, and the node's running job is untouched: a real coordinator and agent
(tests/coordinator harness), the second agent's hello sent over a real websocket on loopback.
It replaced the first agent's link, which lost every rank, failing the node's jobs."""

from __future__ import annotations

import asyncio

import aiohttp
from harness import Cluster, inventory_dict, rank_script, wait_for

TOKEN = "s3cret-cluster-token"  # the harness's cluster token


async def hello_as(port: int, node: str, inventory: dict, version: str) -> dict:
    async with aiohttp.ClientSession() as s:
        ws = await s.ws_connect(f"http://127.0.0.1:{port}/v1/agent/link", headers={"Authorization": f"Bearer {TOKEN}"})
        await ws.send_json(
            {"type": "hello", "node": node, "version": version, "address": "127.0.0.2", "inventory": inventory,
             "ranks": []}
        )  # fmt: skip
        answer = await ws.receive_json(timeout=15)
        await ws.close()
        return answer


def test_a_second_agent_under_a_connected_nodes_name_is_refused_and_its_job_runs_on() -> None:
    cluster = Cluster({"n1": "n1-4gpu.toml"}).start()
    try:
        job = cluster.submit(rank_script("import time\ntime.sleep(600)\n"), gpus_per_worker=1)
        cluster.wait_state(job["id"], "running")
        with cluster.client() as c:
            version = c.version()["version"]
        other = inventory_dict("rtx4090x2.toml")
        answer = asyncio.run(hello_as(cluster.port, "n1", other, version))
        assert answer["type"] == "refused", answer
        assert answer["message"].startswith("node n1 is connected from ") and "node = ..." in answer["message"]
        assert cluster.job(job["id"])["state"] == "running"
        assert wait_for(lambda: "n1" in cluster.connected_nodes(), what="n1 still connected")
        assert "refused agent n1 from 127.0.0.1: node n1 is connected" in cluster.log_text("coordinator")
    finally:
        cluster.stop()
