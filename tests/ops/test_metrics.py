"""/metrics for a simulated 2-node cluster with running and pending jobs, scraped over real HTTP
and parsed with prometheus_client's own parser."""

from __future__ import annotations

import os

import pytest
from aiohttp import web
from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.agent.nvml.simulated import SCOPE_VARIABLE, SimulatedNvml
from labgang.launcher.coordinator.metrics import CoordinatorMetrics, metrics_handler
from labgang.launcher.pitfalls import ClusterSnapshot
from prometheus_client.parser import text_string_to_metric_families

NOW = 1_800_000_000.0
MiB = 1024 * 1024


def _inventory(repo_root, machine: str, hostname: str, busy: dict[int, tuple[float, float]] | None = None):
    backend = open_backend(
        simulate=repo_root / "config" / "sim" / machine, scope=os.environ[SCOPE_VARIABLE]
    )  # this run's scope (tests/conftest.py)
    assert isinstance(backend, SimulatedNvml)
    try:
        if busy:
            for index, (util, sm) in busy.items():
                uuid = backend.nvmlDeviceGetUUID(backend.nvmlDeviceGetHandleByIndex(index))
                backend.set_utilization(uuid, util, sm)
        return read_inventory(backend, hostname=hostname, now=NOW)
    finally:
        backend.nvmlShutdown()


def _job(id, user, queue, state, *, reason=None, ranks=(), workers=1, per=1, resource="gpu"):
    return {
        "id": id,
        "name": id,
        "user": user,
        "queue": queue,
        "state": state,
        "workers": workers,
        "gpus_per_worker": per,
        "resource": resource,
        "priority": 0,
        "submit_time": NOW - 300,
        "admit_time": NOW - 200 if ranks else None,
        "start_time": NOW - 190 if ranks else None,
        "end_time": None,
        "reason": reason,
        "nodes": sorted({r["node"] for r in ranks}),
        "exit_status": None,
        "restart_count": 0,
        "ranks": list(ranks),
        "history": [],
    }


@pytest.fixture
def cluster(repo_root):
    """n1: 4×H100 (GPM), GPUs 0-1 held by alice's 2-rank gang, GPU 0 kernel-busy but SM-idle.
    m1: 8×A100 with MIG (no GPM), one 1g.10gb MIG device held by bob's inference job."""
    n1 = _inventory(repo_root, "n1-4gpu.toml", "n1", busy={0: (97.0, 4.0), 1: (90.0, 70.0)})
    m1 = _inventory(repo_root, "a100x8-mig.toml", "m1")
    g0, g1 = n1.gpus[0].uuid, n1.gpus[1].uuid
    mig = m1.gpus[0].mig_devices[0]
    held = {g0: ("j-1", "alice", "team-a"), g1: ("j-1", "alice", "team-a"), mig.uuid: ("j-2", "bob", "inference")}

    def devices(inv):
        out = []
        for d in inv.allocatable():
            job, user, queue = held.get(d.uuid, (None, None, None))
            out.append(
                {
                    "uuid": d.uuid,
                    "resource": d.resource,
                    "model": d.model,
                    "job": job,
                    "user": user,
                    "queue": queue,
                    "state": "allocated" if job else "free",
                }
            )
        return out

    nodes = {
        "nodes": [
            {"name": "n1", "connected": True, "last_seen": NOW - 1, "inventory": n1.to_dict(), "devices": devices(n1)},
            {"name": "m1", "connected": True, "last_seen": NOW - 2, "inventory": m1.to_dict(), "devices": devices(m1)},
        ]
    }
    jobs = {
        "jobs": [
            _job(
                "j-1",
                "alice",
                "team-a",
                "running",
                workers=2,
                ranks=[
                    {"rank": 0, "node": "n1", "devices": [g0], "state": "running", "pid": 4242, "exit_status": None},
                    {"rank": 1, "node": "n1", "devices": [g1], "state": "running", "pid": 4243, "exit_status": None},
                ],
            ),
            _job(
                "j-2",
                "bob",
                "inference",
                "running",
                resource="mig-1g.10gb",
                ranks=[
                    {"rank": 0, "node": "m1", "devices": [mig.uuid], "state": "running", "pid": 77, "exit_status": None}
                ],
            ),
            _job(
                "j-3",
                "alice",
                "team-a",
                "pending",
                workers=4,
                per=8,
                reason={"code": "over_quota", "message": "needs 32 gpu, team-a may use 16"},
            ),
            _job("j-4", "carol", "team-b", "pending", reason={"code": "no_capacity", "message": "12 free, needs 16"}),
            _job("j-5", "carol", "team-b", "pending", reason={"code": "no_capacity", "message": "12 free, needs 16"}),
            _job("j-6", "carol", "team-b", "succeeded"),
        ]
    }
    queues = {
        "queues": [
            {
                "name": "team-a",
                "cohort": "lab",
                "nominal": {"gpu": 8},
                "used": {"gpu": 2},
                "borrowed": {},
                "lent": {},
                "pending": 1,
                "running": 1,
            },
            {
                "name": "team-b",
                "cohort": "lab",
                "nominal": {"gpu": 4},
                "used": {"gpu": 6},
                "borrowed": {"gpu": 2},
                "lent": {},
                "pending": 2,
                "running": 0,
            },
            {
                "name": "inference",
                "cohort": None,
                "nominal": {"mig-1g.10gb": 14},
                "used": {"mig-1g.10gb": 1},
                "borrowed": {},
                "lent": {},
                "pending": 0,
                "running": 1,
            },
        ]
    }
    return ClusterSnapshot.from_api(NOW, nodes, jobs, queues), n1, m1


async def _scrape(aiohttp_client, metrics: CoordinatorMetrics) -> tuple[dict, str]:
    app = web.Application()
    app.router.add_get("/metrics", metrics_handler(metrics.registry))
    client = await aiohttp_client(app)
    resp = await client.get("/metrics")
    assert resp.status == 200
    assert resp.headers["Content-Type"].startswith("text/plain; version=")
    text = await resp.text()
    return {f.name: f for f in text_string_to_metric_families(text)}, text


def _value(families, name, sample=None, **labels):
    family = families[name]
    matches = [
        s for s in family.samples if s.name == (sample or name) and all(s.labels.get(k) == v for k, v in labels.items())
    ]
    assert len(matches) == 1, f"{sample or name} {labels}: {len(matches)} samples in {family.samples[:5]}"
    return matches[0].value


def _absent(families, name, **labels):
    family = families.get(name)
    return family is None or not any(all(s.labels.get(k) == v for k, v in labels.items()) for s in family.samples)


async def test_device_series_with_holder_labels(aiohttp_client, cluster):
    snapshot, n1, _m1 = cluster
    fam, _ = await _scrape(aiohttp_client, CoordinatorMetrics(lambda: snapshot, version="0.1.0"))
    g0 = n1.gpus[0]
    held = dict(node="n1", gpu="0", uuid=g0.uuid, mig_profile="", job="j-1", user="alice", queue="team-a")
    assert _value(fam, "labgang_device_gpu_utilization_ratio", **held) == pytest.approx(0.97)
    assert _value(fam, "labgang_device_sm_active_ratio", **held) == pytest.approx(0.04)
    assert _value(fam, "labgang_device_memory_total_bytes", **held) == g0.memory_total_bytes
    assert _value(fam, "labgang_device_memory_used_bytes", **held) == g0.memory_used_bytes
    assert _value(fam, "labgang_device_temperature_celsius", **held) == g0.temperature_c == 31
    assert _value(fam, "labgang_device_power_watts", **held) == pytest.approx(70.0)
    assert _value(fam, "labgang_device_state", state="allocated", **held) == 1
    free = dict(node="n1", gpu="3", uuid=n1.gpus[3].uuid, job="", user="", queue="")
    assert _value(fam, "labgang_device_state", state="free", **free) == 1
    assert _value(fam, "labgang_device_temperature_celsius", **free) == 34


async def test_mig_devices_and_unsupported_fields(aiohttp_client, cluster):
    snapshot, _, m1 = cluster
    fam, _ = await _scrape(aiohttp_client, CoordinatorMetrics(lambda: snapshot))
    parent, mig = m1.gpus[0], m1.gpus[0].mig_devices[0]
    on_mig = dict(node="m1", gpu="0", uuid=mig.uuid, mig_profile="1g.10gb", job="j-2", user="bob", queue="inference")
    assert _value(fam, "labgang_device_memory_total_bytes", **on_mig) == mig.memory_total_bytes
    assert _value(fam, "labgang_device_state", state="allocated", **on_mig) == 1
    # The physical GPU carries temperature and power once; the MIG device does not repeat them.
    assert (
        _value(fam, "labgang_device_temperature_celsius", node="m1", uuid=parent.uuid, mig_profile="", job="")
        == parent.temperature_c
    )
    assert _absent(fam, "labgang_device_temperature_celsius", uuid=mig.uuid)
    # A100 has no GPM: SM activity is unsupported, so there is no series (never a 0).
    assert _absent(fam, "labgang_device_sm_active_ratio", node="m1")


async def test_queue_job_and_pending_reason_series(aiohttp_client, cluster):
    snapshot, _, _ = cluster
    fam, _ = await _scrape(aiohttp_client, CoordinatorMetrics(lambda: snapshot))
    assert _value(fam, "labgang_queue_nominal_devices", queue="team-a", cohort="lab", resource="gpu") == 8
    assert _value(fam, "labgang_queue_used_devices", queue="team-b", resource="gpu") == 6
    assert _value(fam, "labgang_queue_borrowed_devices", queue="team-b", resource="gpu") == 2
    assert _value(fam, "labgang_queue_borrowed_devices", queue="team-a", resource="gpu") == 0
    assert _value(fam, "labgang_queue_lent_devices", queue="team-a", resource="gpu") == 0
    assert _value(fam, "labgang_queue_nominal_devices", queue="inference", cohort="", resource="mig-1g.10gb") == 14
    assert _value(fam, "labgang_queue_pending_jobs", queue="team-b", reason="no_capacity") == 2
    assert _value(fam, "labgang_queue_pending_jobs", queue="team-a", reason="over_quota") == 1
    assert _value(fam, "labgang_jobs", queue="team-a", state="running") == 1
    assert _value(fam, "labgang_jobs", queue="team-b", state="pending") == 2
    assert _value(fam, "labgang_jobs", queue="team-b", state="succeeded") == 1
    assert _value(fam, "labgang_jobs", queue="inference", state="failed") == 0
    assert _value(fam, "labgang_node_connected", node="m1") == 1
    assert _value(fam, "labgang_node_last_seen_timestamp_seconds", node="n1") == NOW - 1


async def test_queue_fair_share_gauge(aiohttp_client, cluster):
    """labgang_queue_fair_share carries each queue's share; +Inf for weight 0 while borrowing."""
    from dataclasses import replace

    from labgang.launcher.pitfalls import QueueView

    snapshot, _, _ = cluster
    queues = (
        QueueView.from_api({"name": "a", "cohort": "lab", "fair_share": 250.0, "fair_weight": 2.0}),
        QueueView.from_api(
            {"name": "z", "cohort": "lab", "borrowed": {"gpu": 1}, "fair_share": None, "fair_weight": 0.0}
        ),
        QueueView.from_api({"name": "solo", "fair_share": 0.0}),
    )
    fam, _ = await _scrape(aiohttp_client, CoordinatorMetrics(lambda: replace(snapshot, queues=queues)))
    assert _value(fam, "labgang_queue_fair_share", queue="a", cohort="lab") == 250.0
    assert _value(fam, "labgang_queue_fair_share", queue="z", cohort="lab") == float("inf")
    assert _value(fam, "labgang_queue_fair_share", queue="solo", cohort="") == 0.0


async def test_pitfalls_as_gauges(aiohttp_client, cluster):
    snapshot, n1, _ = cluster
    fam, _ = await _scrape(aiohttp_client, CoordinatorMetrics(lambda: snapshot))
    assert _value(fam, "labgang_pitfall_findings", kind="kernel-busy-sm-idle") == 1
    assert _value(fam, "labgang_pitfall_active", kind="kernel-busy-sm-idle", uuid=n1.gpus[0].uuid, node="n1") == 1
    assert _value(fam, "labgang_pitfall_findings", kind="foreign-process") == 0
    kinds = {s.labels["kind"] for s in fam["labgang_pitfall_findings"].samples}
    assert "mig-pending-reset" in kinds and "allocated-idle" in kinds


async def test_scheduler_histograms_and_preemption_counter(aiohttp_client, cluster):
    snapshot, _, _ = cluster
    metrics = CoordinatorMetrics(lambda: snapshot, version="0.1.0")
    metrics.scheduler.observe_admission("team-a", 0.03)
    metrics.scheduler.observe_admission("team-a", 42.0)
    metrics.scheduler.observe_cycle(0.0007)
    metrics.scheduler.count_preemption("team-b", "reclaim", victims=2)
    metrics.scheduler.count_preemption("team-a", "priority")
    fam, text = await _scrape(aiohttp_client, metrics)
    assert fam["labgang_admission_latency_seconds"].type == "histogram"
    assert (
        _value(fam, "labgang_admission_latency_seconds", "labgang_admission_latency_seconds_count", queue="team-a") == 2
    )
    assert (
        _value(
            fam,
            "labgang_admission_latency_seconds",
            "labgang_admission_latency_seconds_bucket",
            queue="team-a",
            le="0.05",
        )
        == 1
    )
    assert _value(
        fam, "labgang_admission_latency_seconds", "labgang_admission_latency_seconds_sum", queue="team-a"
    ) == pytest.approx(42.03)
    assert (
        _value(
            fam,
            "labgang_scheduling_cycle_duration_seconds",
            "labgang_scheduling_cycle_duration_seconds_bucket",
            le="0.001",
        )
        == 1
    )
    assert fam["labgang_preemptions"].type == "counter"
    assert _value(fam, "labgang_preemptions", "labgang_preemptions_total", queue="team-b", reason="reclaim") == 2
    assert _value(fam, "labgang_build_info", version="0.1.0") == 1
    assert "# TYPE labgang_preemptions_total counter" in text


def test_bad_preemption_count_is_refused(cluster):
    snapshot, _, _ = cluster
    with pytest.raises(ValueError, match="victims"):
        CoordinatorMetrics(lambda: snapshot).scheduler.count_preemption("q", "r", victims=-1)


async def test_every_family_follows_naming_conventions(aiohttp_client, cluster):
    snapshot, _, _ = cluster
    fam, _ = await _scrape(aiohttp_client, CoordinatorMetrics(lambda: snapshot))
    units = (
        "_ratio",
        "_bytes",
        "_celsius",
        "_watts",
        "_seconds",
        "_devices",
        "_shards",
        "_ranks",
        "_jobs",
        "_total",
        "_info",
    )
    for family in fam.values():
        assert family.name.startswith("labgang_"), family.name
        if family.name.endswith("_created"):  # prometheus_client's creation-time companions
            continue
        for sample in family.samples:
            if family.type in ("counter",):
                assert sample.name.endswith(("_total", "_created")), sample.name
        if family.type == "gauge" and family.name not in (
            "labgang_jobs",
            "labgang_device_state",
            "labgang_node_connected",
            "labgang_pitfall_findings",
            "labgang_pitfall_active",
            "labgang_queue_fair_share",  # dimensionless (x 1000 / weight); the name the fair-sharing issue asks for
        ):
            assert family.name.endswith(units), family.name


async def test_a_job_of_groups_holding_devices_has_its_groups_devices(aiohttp_client, cluster):
    import dataclasses

    from labgang.launcher.pitfalls import JobView

    snapshot, _, _ = cluster
    het = _job("9", "alice", "team-a", "running", workers=5, per=0)
    het["groups"] = [
        {"name": "launcher", "workers": 1, "gpus_per_worker": 0, "resource": "gpu"},
        {"name": "worker", "workers": 4, "gpus_per_worker": 2, "resource": "gpu"},
    ]
    waiting = _job("10", "alice", "team-a", "pending", workers=3, per=0)
    waiting["groups"] = [{"name": "g0", "workers": 1, "gpus_per_worker": 0}, {"name": "g1", "workers": 2}]
    jobs = (*snapshot.jobs, JobView.from_api(het), JobView.from_api(waiting))
    with_groups = dataclasses.replace(snapshot, jobs=jobs)
    fam, _ = await _scrape(aiohttp_client, CoordinatorMetrics(lambda: with_groups))
    assert _value(fam, "labgang_job_group_devices", queue="team-a", job="9", group="worker") == 8
    assert _value(fam, "labgang_job_group_devices", queue="team-a", job="9", group="launcher") == 0
    assert _absent(fam, "labgang_job_group_devices", job="10")  # pending: holds nothing
    assert JobView.from_api(het).total_devices == 8 and JobView.from_api(het).shape == "1×0+4×2"
