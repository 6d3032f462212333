"""``labgang queues`` USED counts an ``--exclusive`` job's whole nodes, as the scheduler does: every
GPU of its nodes, and all their CPUs and memory where the queue's quota lists them
(docs/host-resources.md, "Quotas"); ``labgang report`` charges its whole nodes' GPUs; the fair
share ``queues`` shows weighs CPUs as the scheduler's does. Fake clock, real SQLite store,
simulated node inventories."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.agent.inventory import NodeInventory
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.scheduling import build_snapshot
from labgang.launcher.coordinator.store import Store
from labgang.launcher.scheduler.cycle import run_cycle
from labgang.launcher.scheduler.state import CycleState
from lifecycle_driver import ROOT, Clock, clock_of, decide, node_inventory, node_uuids

GIB = 1024**3
NODE_CPUS = 32
NODE_MEMORY = 256 * GIB


@pytest.fixture
def coord(tmp_path: Path):
    config = parse_config(
        {
            "queues": [
                {"name": "default", "nominal": {"gpu": 8, "cpu": 64, "memory": "512G"}},
                {"name": "plain", "nominal": {"gpu": 8}},
            ]
        }
    )
    clock = Clock()
    c = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    for node in ("n1", "n2"):
        c.agents.join(node, clock.now)
    yield c
    c.store.close()


async def with_nodes(coord: Coordinator) -> None:
    """Two simulated 4-GPU nodes, each offering 32 CPUs and 256 GiB to jobs."""
    for node in ("n1", "n2"):
        inv = node_inventory(node, {}) | {"host_cpus": NODE_CPUS, "host_memory": NODE_MEMORY}
        await coord.node_events.on_inventory(
            coord.agents.nodes[node], {"inventory": NodeInventory.from_dict(inv).to_dict(), "ranks": []}
        )


async def test_queues_used_counts_an_exclusive_jobs_whole_nodes_as_the_scheduler(coord: Coordinator) -> None:
    await with_nodes(coord)
    whole = await coord.desk.submit(
        ROOT, {"argv": ["bench"], "gpus_per_worker": 1, "cpus_per_task": 2, "exclusive": True}
    )
    beside = await coord.desk.submit(
        ROOT, {"argv": ["train"], "gpus_per_worker": 1, "cpus_per_task": 3, "mem": 8 * GIB}
    )
    other = await coord.desk.submit(ROOT, {"argv": ["eval"], "queue": "plain", "gpus_per_worker": 1, "exclusive": True})
    result = run_cycle(build_snapshot(coord.driver, coord.clock()))
    assert {a.job_id for a in result.admitted} == {whole.id, beside.id}  # two nodes, both taken
    decide(coord, result)
    used = {q["name"]: q["used"] for q in coord.queue_views()}
    # the exclusive job holds one node whole (4 GPUs, 32 CPUs, 256 GiB), the other job what it asked
    assert used["default"] == {"gpu": 4 + 1, "cpu": NODE_CPUS + 3, "memory": NODE_MEMORY + 8 * GIB}
    assert used["plain"] == {}  # its exclusive job waits: no empty node
    state = CycleState(build_snapshot(coord.driver, coord.clock()))  # what the scheduler counts
    assert {res: state.quota.usage("default", res) for res in used["default"]} == used["default"]
    assert coord.jobs[other.id].status.state.value == "pending"


async def test_report_accounts_an_exclusive_jobs_whole_nodes_gpus(coord: Coordinator) -> None:
    """``labgang report``: an --exclusive job asking 1 GPU on a 4-GPU node holds the node whole, so
    its attempt accounts 4 GPUs (4 GPU-hours in an hour), while a plain 1-GPU job accounts 1."""
    await with_nodes(coord)
    whole = await coord.desk.submit(ROOT, {"argv": ["bench"], "gpus_per_worker": 1, "exclusive": True})
    plain = await coord.desk.submit(ROOT, {"argv": ["eval"], "queue": "plain", "gpus_per_worker": 1})
    result = run_cycle(build_snapshot(coord.driver, coord.clock()))
    admitted = {a.job_id: a for a in result.admitted}
    assert set(admitted) == {whole.id, plain.id}
    node = admitted[whole.id].placement[0].node
    assert admitted[whole.id].whole == tuple(f"{node}/{u}" for u in node_uuids(node))
    assert admitted[plain.id].whole == ()
    decide(coord, result)
    record = coord.jobs[whole.id].attempt_record
    assert record is not None and record.gpus == 4
    assert set(record.devices) == {f"{node}/{u}" for u in node_uuids(node)}
    clock_of(coord).now += 3600.0
    report = await coord.desk.report(group="queue")
    hours = {row["queue"]: row["gpu_hours"] for row in report["rows"]}
    assert hours == {"default": pytest.approx(4.0), "plain": pytest.approx(1.0)}


async def test_queues_fair_share_weighs_cpu_where_the_quota_lists_it(tmp_path: Path) -> None:
    """``labgang queues`` shows the dominant resource share the scheduler uses: a queue of a cohort
    that can reach 16 CPUs whose job uses 12 CPUs of its nominal 8 borrows 4: 4 * 1000 / 16 = 250,
    though it uses 1 of its 4 GPUs."""
    config = parse_config(
        {
            "cohorts": [{"name": "lab"}],
            "queues": [
                {"name": "a", "cohort": "lab", "nominal": {"gpu": 4, "cpu": 8}},
                {"name": "b", "cohort": "lab", "nominal": {"gpu": 4, "cpu": 8}},
            ],
            "default_queue": "a",
        }
    )
    coord = Coordinator(config, Store(tmp_path / "db"), clock=Clock())
    try:
        for node in ("n1", "n2"):
            coord.agents.join(node, coord.clock())
        await with_nodes(coord)
        await coord.desk.submit(ROOT, {"argv": ["load"], "gpus_per_worker": 1, "cpus_per_task": 12})
        decide(coord, run_cycle(build_snapshot(coord.driver, coord.clock())))
        views = {q["name"]: q for q in coord.queue_views()}
        assert views["a"]["fair_share_ratio"] == pytest.approx(250.0)
        assert views["a"]["fair_share"] == pytest.approx(250.0)
        assert views["b"]["fair_share_ratio"] == 0
    finally:
        coord.store.close()
