"""Against a real coordinator and two real agents (simulated 4-GPU nodes n1, n2) on loopback:
/metrics on the TCP port with a running gang and a pending job, and the version handshake."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request

import aiohttp
import pytest
from harness import SIM, Cluster, rank_script, wait_for
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.slow

WAIT_GO = rank_script(
    "import os, time\nwhile not os.path.exists(os.path.join(os.environ['TEST_BASE'], 'go')):\n    time.sleep(0.05)\n"
)


@pytest.fixture
def cluster():
    c = Cluster({"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"})
    try:
        yield c.start()
    finally:
        (c.base / "go").write_text("go")
        c.stop()


def scrape(cluster: Cluster) -> tuple[dict, str]:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.port}/metrics", timeout=10) as resp:
        assert resp.status == 200
        ctype = resp.headers["Content-Type"]
        text = resp.read().decode()
    assert ctype.startswith("text/plain; version="), ctype
    return {f.name: f for f in text_string_to_metric_families(text)}, text


def samples(families: dict, name: str, sample: str | None = None, **labels: str) -> list:
    return [
        s
        for s in families[name].samples
        if s.name == (sample or name) and all(s.labels.get(k) == v for k, v in labels.items())
    ]


def sim_uuids(machine: str) -> list[str]:
    return [line.split('"')[1] for line in (SIM / machine).read_text().splitlines() if line.startswith("uuid = ")]


def test_metrics_of_a_two_node_cluster_with_running_and_pending_jobs(cluster):
    gang = cluster.submit(WAIT_GO, workers=2, gpus_per_worker=4)
    cluster.wait_state(gang["id"], "running")
    waiting = cluster.submit(WAIT_GO, workers=1, gpus_per_worker=1)
    wait_for(lambda: cluster.job(waiting["id"])["reason"], what="a pending reason for the second job")
    reason = cluster.job(waiting["id"])["reason"]["code"].lower()

    def nodes_once_the_ranks_show() -> dict | None:
        # "running" means the ranks were started; their processes show in an agent's inventory
        # only from its next NVML reading on. Until then the inventory and a later scrape differ.
        with cluster.client() as client:
            found = {n["name"]: n for n in client.nodes()}
        gpus = [g for n in ("n1", "n2") for g in found[n]["inventory"]["gpus"]]
        return found if all(g["processes"] for g in gpus) else None

    nodes = wait_for(nodes_once_the_ranks_show, what="the gang's processes in both agents' inventories")
    with cluster.client() as client:
        version = client.version()

    fam, _ = scrape(cluster)

    allocated = samples(fam, "labgang_device_state", state="allocated", job=gang["id"])
    assert {(s.labels["node"], s.labels["uuid"]) for s in allocated} == (
        {("n1", u) for u in sim_uuids("n1-4gpu.toml")} | {("n2", u) for u in sim_uuids("n2-4gpu.toml")}
    )
    for s in allocated:
        assert s.labels["queue"] == "default" and s.labels["user"] and s.labels["mig_profile"] == ""
    n1_gpu0 = dict(node="n1", gpu="0", uuid=sim_uuids("n1-4gpu.toml")[0], job=gang["id"])
    gpu0 = nodes["n1"]["inventory"]["gpus"][0]
    assert samples(fam, "labgang_device_memory_total_bytes", **n1_gpu0)[0].value == gpu0["memory_total_bytes"] > 0
    assert samples(fam, "labgang_device_memory_used_bytes", **n1_gpu0)[0].value == gpu0["memory_used_bytes"]
    assert samples(fam, "labgang_device_temperature_celsius", **n1_gpu0)[0].value == 31
    assert samples(fam, "labgang_device_power_watts", **n1_gpu0)
    assert samples(fam, "labgang_device_gpu_utilization_ratio", **n1_gpu0)
    assert samples(fam, "labgang_device_sm_active_ratio", **n1_gpu0)  # H100: GPM

    assert samples(fam, "labgang_jobs", queue="default", state="running")[0].value == 1
    assert samples(fam, "labgang_jobs", queue="default", state="pending")[0].value == 1
    assert samples(fam, "labgang_queue_pending_jobs", queue="default", reason=reason)[0].value == 1
    assert samples(fam, "labgang_queue_used_devices", queue="default", resource="gpu")[0].value == 8
    assert samples(fam, "labgang_queue_nominal_devices", queue="default", resource="gpu")[0].value == 8
    assert samples(fam, "labgang_queue_borrowed_devices", queue="default", resource="gpu")[0].value == 0
    assert samples(fam, "labgang_queue_lent_devices", queue="default", resource="gpu")[0].value == 0
    assert {s.labels["node"] for s in samples(fam, "labgang_node_connected") if s.value == 1} == {"n1", "n2"}
    assert len(samples(fam, "labgang_pitfall_findings")) == 14  # every detector, firing or not (sharing too)
    assert fam["labgang_admission_latency_seconds"].type == "histogram"
    assert (
        samples(fam, "labgang_admission_latency_seconds", "labgang_admission_latency_seconds_count", queue="default")[
            0
        ].value
        >= 1
    )  # the gang's admission
    assert fam["labgang_scheduling_cycle_duration_seconds"].type == "histogram"
    assert (
        samples(fam, "labgang_scheduling_cycle_duration_seconds", "labgang_scheduling_cycle_duration_seconds_count")[
            0
        ].value
        >= 1
    )
    assert fam["labgang_preemptions"].type == "counter"
    assert samples(fam, "labgang_build_info", version=version["version"])


def test_a_preemption_is_counted_by_queue_and_reason():
    within = Cluster(
        {"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"},
        config_extra=(
            "[priority_classes]\nlow = -10\nhigh = 100\n"
            '[[queues]]\nname = "prio"\nnominal = { gpu = 8 }\nwithin_queue = "lower-priority"\n'
        ),
    )
    try:
        within.start()
        low = within.submit(WAIT_GO, queue="prio", priority="low", workers=2, gpus_per_worker=4)
        within.wait_state(low["id"], "running")
        high = within.submit(WAIT_GO, queue="prio", priority="high", workers=2, gpus_per_worker=4)
        within.wait_state(high["id"], "running", timeout=30)
        fam, _ = scrape(within)
        assert (
            samples(fam, "labgang_preemptions", "labgang_preemptions_total", queue="prio", reason="in_queue")[0].value
            == 1
        )
        assert samples(fam, "labgang_jobs", queue="prio", state="running")[0].value == 1
        assert samples(fam, "labgang_jobs", queue="prio", state="pending")[0].value == 1  # the victim, requeued
    finally:
        (within.base / "go").write_text("go")
        within.stop()


def test_metrics_is_read_only(cluster):
    request = urllib.request.Request(f"http://127.0.0.1:{cluster.port}/metrics", data=b"x", method="POST")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(request, timeout=10)  # noqa: S310 - a fixed http:// URL on loopback
    assert info.value.code == 405


def test_an_agent_of_an_incompatible_version_is_refused_with_a_clear_message(cluster):
    async def hello(version: str) -> dict:
        headers = {"Authorization": "Bearer " + cluster.token_file.read_text().strip()}
        url = f"http://127.0.0.1:{cluster.port}/v1/agent/link"
        async with aiohttp.ClientSession() as session, session.ws_connect(url, headers=headers) as ws:
            await ws.send_json(
                {"type": "hello", "node": "old-node", "version": version, "inventory": None, "ranks": []}
            )
            return await ws.receive_json(timeout=10)

    with cluster.client() as client:
        ours = client.version()["version"]
    major = int(ours.split(".")[0].split("+")[0])
    reply = asyncio.run(hello(f"{major + 1}.0.0"))
    assert reply["type"] == "refused"
    assert f"agent {major + 1}.0.0" in reply["message"] and "upgrade the coordinator" in reply["message"]
    wait_for(lambda: "refused agent old-node" in cluster.log_text("coordinator"), what="the refusal logged")
    assert "old-node" not in cluster.connected_nodes()
