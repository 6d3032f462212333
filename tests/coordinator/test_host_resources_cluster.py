"""Host CPUs and memory through the coordinator: the agent's capacity (psutil or its config, minus
its reserve) travels in the inventory into the scheduler's snapshot; two jobs asking ``-c`` beyond
a node's CPUs do not both start; a request no node could hold is refused at submission naming the
field; the job view shows the host requests. Fake clock, real SQLite store."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.agent.config import AgentConfigError, parse_agent_config
from labgang.agent.hostres import HostCapacity
from labgang.agent.inventory import NodeInventory
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.errors import Conflict
from labgang.launcher.coordinator.scheduling import build_snapshot
from labgang.launcher.coordinator.views import job_view
from labgang.launcher.scheduler.cycle import run_cycle
from labgang.launcher.scheduler.decisions import CycleResult
from lifecycle_driver import ROOT, decide, make_coord, node_inventory

G = 1024**3


@pytest.fixture
def coord(tmp_path: Path):
    yield from make_coord(tmp_path)


def capacity(**agent: object) -> HostCapacity:
    return HostCapacity.read(parse_agent_config({"node": "n1", **agent}))


async def with_host(coord: Coordinator, cpus: int, memory: int) -> None:
    """Inventories of n1 and n2 as their agents send them, with ``cpus`` and ``memory`` for jobs."""
    for node in ("n1", "n2"):
        inv = HostCapacity(cpus, memory).fill(NodeInventory.from_dict(node_inventory(node, {})))
        await coord.node_events.on_inventory(coord.agents.nodes[node], {"inventory": inv.to_dict(), "ranks": []})


def test_the_agent_offers_the_host_minus_its_reserve():
    assert capacity(cpus=32, memory="256G", reserve_cpus=4, reserve_memory="16G") == HostCapacity(28, 240 * G)
    assert capacity(cpus=2, reserve_cpus=8).cpus == 0  # never below 0
    read = capacity()  # psutil: this machine's logical CPUs and memory
    assert read.cpus >= 1 and read.memory > 0
    with pytest.raises(AgentConfigError, match=r"reserve_memory: .*'lots' is not a memory size"):
        parse_agent_config({"reserve_memory": "lots"})


async def test_snapshot_nodes_carry_the_agents_cpus_and_memory(coord: Coordinator):
    await with_host(coord, 16, 64 * G)
    nodes = build_snapshot(coord.driver, coord.clock()).nodes
    assert {(n.name, n.cpus, n.memory) for n in nodes} == {("n1", 16, 64 * G), ("n2", 16, 64 * G)}


async def test_two_jobs_asking_c_beyond_the_nodes_cpus_do_not_both_start(coord: Coordinator):
    await with_host(coord, 16, 64 * G)
    ids = []
    for _ in range(3):
        job = await coord.desk.submit(
            ROOT, {"argv": ["train"], "workers": 1, "gpus_per_worker": 1, "cpus_per_task": 12}
        )
        ids.append(job.id)
    result = run_cycle(build_snapshot(coord.driver, coord.clock()))
    started = sorted(a.job_id for a in result.admitted)
    assert len(started) == 2  # one per node: 12 + 12 > 16 on either
    assert {a.placement[0].node for a in result.admitted} == {"n1", "n2"}
    [waiting] = result.pending
    assert waiting.reason.code.value == "host_resources"
    assert "has 4 of 16 cpus free; job needs 12 per rank" in waiting.reason.message


async def test_a_request_no_node_could_hold_is_refused_naming_the_field(coord: Coordinator):
    await with_host(coord, 16, 64 * G)
    before = set(coord.jobs)
    with pytest.raises(Conflict) as err:
        await coord.desk.submit(ROOT, {"argv": ["train"], "gpus_per_worker": 1, "cpus_per_task": 17})
    assert err.value.field == "cpus_per_task"
    assert "job needs 17 cpus per rank but the largest node has 16" in str(err.value)
    with pytest.raises(Conflict) as err:
        await coord.desk.submit(ROOT, {"argv": ["train"], "gpus_per_worker": 1, "mem": 65 * G})
    assert err.value.field == "mem"
    assert set(coord.jobs) == before  # nothing stored


async def test_the_job_view_shows_the_host_requests(coord: Coordinator):
    await with_host(coord, 16, 64 * G)
    job = await coord.desk.submit(
        ROOT, {"argv": ["train"], "gpus_per_worker": 1, "cpus_per_task": 4, "mem_per_gpu": 8 * G, "exclusive": True}
    )
    view = job_view(job)
    assert (view["cpus_per_task"], view["mem"], view["mem_per_gpu"], view["exclusive"]) == (4, 0, 8 * G, True)


async def test_the_node_view_shows_offered_and_allocated_host_resources(coord: Coordinator):
    await with_host(coord, 16, 64 * G)
    job = await coord.desk.submit(
        ROOT, {"argv": ["train"], "workers": 2, "gpus_per_worker": 1, "cpus_per_task": 6, "mem": 10 * G}
    )
    [admitted] = run_cycle(build_snapshot(coord.driver, coord.clock())).admitted
    decide(coord, CycleResult(admitted=(admitted,), preempted=(), pending=()))
    views = {v["name"]: v for v in coord.node_views()}
    held: dict[str, tuple[int, int]] = {"n1": (0, 0), "n2": (0, 0)}
    ranks_on = [rp.node for rp in admitted.placement]
    for node in set(ranks_on):
        held[node] = (6 * ranks_on.count(node), 10 * G)  # --mem once per node
    assert admitted.job_id == job.id
    for name, view in views.items():
        assert (view["cpus"], view["memory_bytes"]) == (16, 64 * G)
        assert (view["cpus_allocated"], view["memory_allocated_bytes"]) == held[name]


async def test_a_node_offering_more_cpus_makes_a_refused_size_acceptable(coord: Coordinator):
    await with_host(coord, 16, 64 * G)
    body = {"argv": ["train"], "gpus_per_worker": 1, "cpus_per_task": 20}
    with pytest.raises(Conflict):
        await coord.desk.submit(ROOT, body)
    await with_host(coord, 32, 64 * G)  # the agents restarted with a smaller reserve
    assert (await coord.desk.submit(ROOT, body)).spec.cpus_per_task == 20
