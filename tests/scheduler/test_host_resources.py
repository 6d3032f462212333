"""Host CPUs and memory (``-c``, ``--mem``, ``--mem-per-gpu``) and ``--exclusive`` in the pure cycle.

Table-driven: each case states the nodes (GPUs, CPUs, GiB), what runs, what waits, and the
decisions wanted: which jobs start, which are preempted, each waiting job's reason with numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from labgang.launcher.scheduler import ReasonCode, run_cycle
from labgang.launcher.scheduler.unschedulable import never_schedulable
from sched_builders import Cluster, JobBuilder, job, queue

HOST = ReasonCode.HOST_RESOURCES
Q = queue("q").nominal(gpu=16).within_queue("lower-priority").build()


@dataclass
class Case:
    """``nodes``: (name, gpus, cpus, mem GiB); ``running`` placed first, in order."""

    nodes: list[tuple[str, int, int | None, int | None]]
    running: list[JobBuilder]
    pending: list[JobBuilder]
    admitted: list[str]
    waiting: dict[str, tuple[ReasonCode, str]] = field(default_factory=dict)
    preempted: list[str] = field(default_factory=list)
    placed_on: dict[str, list[str]] = field(default_factory=dict)


CASES = {
    "two jobs asking -c beyond the node's cpus do not both start": Case(
        nodes=[("vm", 8, 32, 256)],
        running=[],
        pending=[job("a").gpus(1).host(cpus=20).submitted(1), job("b").gpus(1).host(cpus=20).submitted(2)],
        admitted=["a"],
        waiting={"b": (HOST, "node vm has 12 of 32 cpus free; job needs 20 per rank; job needs 1 x 1 gpu")},
    ),
    "running jobs' cpus count from their placement": Case(
        nodes=[("vm", 8, 32, 256)],
        running=[job("r").gang(2, 1).host(cpus=14)],
        pending=[job("a").gpus(1).host(cpus=8)],
        admitted=[],
        waiting={"a": (HOST, "node vm has 4 of 32 cpus free; job needs 8 per rank; job needs 1 x 1 gpu")},
    ),
    "jobs without host requests ignore cpus": Case(
        nodes=[("vm", 8, 32, 256)],
        running=[job("r").gpus(1).host(cpus=32)],
        pending=[job("a").gpus(1)],
        admitted=["a"],
    ),
    "a gang goes to the node whose cpus hold it, not the fullest by devices": Case(
        nodes=[("small", 2, 4, 64), ("big", 8, 64, 512)],
        running=[],
        pending=[job("a").gpus(1).host(cpus=16)],
        admitted=["a"],
        placed_on={"a": ["big"]},
    ),
    "cpus cap the ranks per node, so a gang spreads": Case(
        nodes=[("n1", 4, 16, None), ("n2", 4, 16, None)],
        running=[],
        pending=[job("a").gang(4, 1).host(cpus=8)],
        admitted=["a"],
        placed_on={"a": ["n1", "n1", "n2", "n2"]},
    ),
    "--mem is per node, once per node the gang uses": Case(
        nodes=[("vm", 8, None, 100)],
        running=[job("r").gang(2, 1).host(mem_gib=60)],
        pending=[job("a").gpus(1).host(mem_gib=50), job("b").gpus(1).host(mem_gib=40).submitted(1)],
        admitted=["b"],
        waiting={
            "a": (HOST, "node vm has 40 GiB of 100 GiB memory free; job needs 50 GiB per node; job needs 1 x 1 gpu")
        },
    ),
    "--mem-per-gpu counts per device of each rank": Case(
        nodes=[("vm", 8, None, 100)],
        running=[job("r").gpus(2).host(mem_per_gpu_gib=30)],
        pending=[job("a").gpus(2).host(mem_per_gpu_gib=30)],
        admitted=[],
        waiting={
            "a": (HOST, "node vm has 40 GiB of 100 GiB memory free; job needs 60 GiB per rank; job needs 1 x 2 gpu")
        },
    ),
    "a node with unknown cpus does not limit cpu requests": Case(
        nodes=[("old", 2, None, None)],
        running=[],
        pending=[job("a").gpus(1).host(cpus=500)],
        admitted=["a"],
    ),
    "--exclusive waits for a node nobody uses": Case(
        nodes=[("n1", 4, 32, None), ("n2", 4, 32, None)],
        running=[job("r").gpus(1)],
        pending=[job("x").gpus(1).host(exclusive=True)],
        admitted=["x"],
        placed_on={"x": ["n2"]},
    ),
    "--exclusive with every node in use waits with a reason": Case(
        nodes=[("n1", 4, 32, None)],
        running=[job("r").gpus(1)],
        pending=[job("x").gpus(1).host(exclusive=True)],
        admitted=[],
        waiting={"x": (HOST, "node n1 is in use by 1 job(s); --exclusive needs it empty; job needs 1 x 1 gpu")},
    ),
    "nobody starts on a node an --exclusive job holds": Case(
        nodes=[("n1", 4, 32, None)],
        running=[job("x").gpus(1).host(exclusive=True)],
        pending=[job("a").gpus(1)],
        admitted=[],
        waiting={"a": (HOST, "node n1 is held whole by an --exclusive job; job needs 1 x 1 gpu")},
    ),
    "a higher-priority job preempts for cpus: victims free their cpus": Case(
        nodes=[("vm", 8, 32, None)],
        running=[job("low").gpus(1).host(cpus=30)],
        pending=[job("hi").gpus(1).host(cpus=16).priority(10)],
        admitted=[],
        preempted=["hi"],
    ),
    "no preemption when the victims' cpus would not make room": Case(
        nodes=[("vm", 8, 32, None)],
        running=[job("low").gpus(1).host(cpus=4), job("keep").gpus(1).host(cpus=26).priority(20)],
        pending=[job("hi").gpus(1).host(cpus=16).priority(10)],
        admitted=[],
        waiting={"hi": (HOST, "node vm has 2 of 32 cpus free; job needs 16 per rank; job needs 1 x 1 gpu")},
    ),
    "one cycle's admissions count each other's cpus": Case(
        nodes=[("vm", 8, 32, None)],
        running=[],
        pending=[job(f"a{i}").gpus(1).host(cpus=10).submitted(i) for i in range(4)],
        admitted=["a0", "a1", "a2"],
        waiting={"a3": (HOST, "node vm has 2 of 32 cpus free; job needs 10 per rank; job needs 1 x 1 gpu")},
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_host_resources(name: str) -> None:
    case = CASES[name]
    cluster = Cluster()
    for node, gpus, cpus, mem in case.nodes:
        cluster.node(node, gpus, cpus=cpus, mem_gib=mem)
    for r in case.running:
        cluster.run(r)
    result = run_cycle(cluster.snapshot([Q], case.pending))
    assert [a.job_id for a in result.admitted] == case.admitted
    assert [p.job_id for p in result.preempted] == case.preempted
    got = {p.job_id: (p.reason.code, p.reason.message) for p in result.pending}
    for job_id, want in case.waiting.items():
        assert got[job_id] == want
    for a in result.admitted:
        if a.job_id in case.placed_on:
            assert [rp.node for rp in a.placement] == case.placed_on[a.job_id]


@pytest.mark.parametrize(
    ("builder", "field_name", "text"),
    [
        (job("a").gpus(1).host(cpus=64), "cpus_per_task", "job needs 64 cpus per rank but the largest node has 32"),
        (job("a").gpus(1).host(mem_gib=300), "mem", "memory per node but the largest node has"),
        (job("a").gpus(2).host(mem_per_gpu_gib=200), "mem_per_gpu", "memory per rank but the largest node has"),
        (job("a").gang(4, 2).nodes(1).host(cpus=10), "cpus_per_task", "hold no placement"),
    ],
)
def test_impossible_host_requests_are_unschedulable(builder: JobBuilder, field_name: str, text: str) -> None:
    nodes = Cluster().node("n1", 8, cpus=32, mem_gib=256).node("n2", 8, cpus=16, mem_gib=128).nodes
    found = never_schedulable(builder.request, Q, [Q], nodes)
    assert found is not None
    reason, bad = found
    assert reason.code is ReasonCode.UNSCHEDULABLE and bad == field_name
    assert text in reason.message and reason.message.endswith("even on an empty cluster")


def test_possible_host_request_is_schedulable() -> None:
    nodes = Cluster().node("n1", 8, cpus=32, mem_gib=256).nodes
    assert never_schedulable(job("a").gang(2, 1).host(cpus=16, mem_gib=256).request, Q, [Q], nodes) is None


def test_impossible_memory_is_said_in_sizes_not_bytes() -> None:
    from labgang.launcher.scheduler.unschedulable import mem_size

    nodes = Cluster().node("n1", 8, cpus=32, mem_gib=256).node("n2", 8, cpus=16, mem_gib=128).nodes
    found = never_schedulable(job("a").gpus(1).host(mem_gib=100 * 1024).request, Q, [Q], nodes)
    assert found is not None
    assert "job needs 100T of memory per node but the largest node has 256G" in found[0].message
    assert (mem_size(int(23.5 * 2**30)), mem_size(512 * 2**20), mem_size(100)) == ("23.5G", "512M", "100B")


def test_exclusive_whole_node_beyond_the_queue_is_unschedulable_and_says_exclusive() -> None:
    seven = queue("q7").nominal(gpu=7).build()
    nodes = Cluster().node("n1", 8, cpus=32, mem_gib=256).nodes
    found = never_schedulable(job("a").gpus(1).host(exclusive=True).request, seven, [seven], nodes)
    assert found is not None
    reason, bad = found
    assert reason.code is ReasonCode.UNSCHEDULABLE and bad == "exclusive"
    assert "--exclusive takes whole nodes" in reason.message and "job needs 8 gpu" in reason.message
    assert "can hold at most 7" in reason.message
    assert never_schedulable(job("a").gpus(1).request, seven, [seven], nodes) is None
    eight = queue("q8").nominal(gpu=8).build()
    assert never_schedulable(job("a").gpus(1).host(exclusive=True).request, eight, [eight], nodes) is None
