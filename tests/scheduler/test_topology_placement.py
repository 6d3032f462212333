"""Topology-aware placement on simulated machines built from real ``nvidia-smi topo -m`` captures.

The nodes go through the whole path: capture → simulated NVML → inventory read through the
pynvml topology calls → the coordinator's node builder → the pure scheduler.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.launcher.coordinator.topology import node_from_inventory
from labgang.launcher.model import JobRequest, QueueSpec
from labgang.launcher.scheduler import PendingJob, RankPlacement, ReasonCode, RunningJob, Snapshot, run_cycle
from labgang.launcher.scheduler.snapshot import Node

TOPO = Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "real-topology"

# derived UUIDs of the simulated captures (host name + index), GPU0..GPU7
H20 = [
    "GPU-44f20a5f-9cde-5597-9e89-12fc9892a6db",
    "GPU-60ea8570-eb97-574d-a3a1-0c952f96e21b",
    "GPU-fbcd35ec-795f-5f2a-afad-bb153e27f79e",
    "GPU-9d80f341-09db-50f2-88b4-bb7bb92cd93d",
    "GPU-065fc581-9ee6-569a-82cf-76b79df3d741",
    "GPU-03e8fac9-3371-54bb-a9e0-f2c0a84adf76",
    "GPU-dc2cd9ca-8977-598b-93da-1713355df419",
    "GPU-fd6c03a9-5532-5c01-b080-2a293a34b617",
]
V100 = [
    "GPU-3d2f1057-cbf0-552d-bf08-38ab28672454",
    "GPU-dc7c6439-55c2-5018-88a4-68a00fd68da3",
    "GPU-3a3f68bc-d2c3-5a23-93f8-b916631bd904",
    "GPU-8cde3aed-19ae-5ab9-94ab-e19ff153bbc8",
    "GPU-533dbe0e-8e2e-5071-b13f-f8f2d947bf2c",
    "GPU-5ac12227-760c-5750-83c2-171096f569a4",
    "GPU-454ebfbe-7f90-54ba-a529-156f2cc12f56",
    "GPU-9b9b0dfc-978a-542a-84d9-0fcd3211e83d",
]


def node(capture: str) -> Node:
    backend = open_backend(simulate=TOPO / capture)
    try:
        inv = read_inventory(backend, now=1.0)
    finally:
        backend.nvmlShutdown()
    return node_from_inventory(inv.hostname, inv)


def v100() -> Node:
    return node("v100-8gpu-dgx1-cube-mesh-1nic.txt")


def h20() -> Node:
    return node("h20-8gpu-nv18-2nic.txt")


def without_topology(n: Node) -> Node:
    return Node(n.name, tuple(replace(d, numa="") for d in n.devices))


def cycle(nodes: list[Node], req: JobRequest, busy: tuple[str, ...] = ()):
    running: tuple[RunningJob, ...] = ()
    if busy:
        running = (
            RunningJob("busy", "q", JobRequest(1, len(busy)), 0, 0.0, 0.0, (RankPlacement(0, nodes[0].name, busy),)),
        )
    snap = Snapshot(
        now=10.0,
        nodes=tuple(nodes),
        queues=(QueueSpec("q", nominal={"gpu": 64}),),
        running=running,
        pending=(PendingJob("j", "q", req, 0, 1.0, 1, 1.0),),
    )
    return run_cycle(snap)


def ranks(result) -> list[set[str]]:
    assert result.admitted, result.pending
    return [set(rp.devices) for rp in result.admitted[0].placement]


def test_v100_two_gpu_rank_takes_an_nv2_pair_on_one_socket():
    # GPU0-GPU3 is NV2 and both sit on CPUs 0-11,24-35; GPU0-GPU4 is NV2 across sockets
    assert ranks(cycle([v100()], JobRequest(1, 2))) == [{V100[0], V100[3]}]


def test_v100_four_gpu_rank_takes_the_nvlink_quad_of_one_socket():
    assert ranks(cycle([v100()], JobRequest(1, 4))) == [{V100[0], V100[1], V100[2], V100[3]}]


def test_v100_two_ranks_of_four_split_by_quad():
    got = ranks(cycle([v100()], JobRequest(2, 4)))
    assert got == [{V100[0], V100[1], V100[2], V100[3]}, {V100[4], V100[5], V100[6], V100[7]}]


def test_v100_four_gpu_rank_with_gpu0_busy_stays_on_the_other_quad():
    got = ranks(cycle([v100()], JobRequest(1, 4), busy=(V100[0],)))
    assert got == [{V100[4], V100[5], V100[6], V100[7]}]


def test_h20_four_gpu_rank_keeps_one_numa_node_when_two_gpus_are_busy():
    got = ranks(cycle([h20()], JobRequest(1, 4), busy=(H20[0], H20[1])))
    assert got == [{H20[4], H20[5], H20[6], H20[7]}]


def test_h20_two_gpu_ranks_pair_within_numa_nodes():
    got = ranks(cycle([h20()], JobRequest(4, 2)))
    assert got == [{H20[0], H20[1]}, {H20[2], H20[3]}, {H20[4], H20[5]}, {H20[6], H20[7]}]


def test_without_topology_facts_placement_is_unchanged():
    plain = without_topology(v100())
    assert ranks(cycle([plain], JobRequest(1, 2))) == [{V100[0], V100[1]}]
    assert ranks(cycle([plain], JobRequest(1, 4), busy=(V100[0],))) == [{V100[1], V100[2], V100[3], V100[4]}]


def test_required_nvlink_waits_with_the_level_and_the_node():
    # GPU0 and GPU4 busy: no 4 of GPUs 1-3, 5-7 are all joined by NVLink
    busy = (V100[0], V100[4])
    result = cycle([v100()], JobRequest(1, 4, topology="nvlink"), busy=busy)
    assert not result.admitted
    reason = result.pending[0].reason
    assert reason.code is ReasonCode.TOPOLOGY
    assert reason.message.startswith("topology nvlink: needs 4 gpu on NVLink")
    assert reason.message.endswith("sim-v100-8gpu-dgx1-cube-mesh-1nic's best 4 free are on one node")
    # preferred only: the same request without the level lands anyway
    assert ranks(cycle([v100()], JobRequest(1, 4), busy=busy))


def test_required_numa_is_not_met_by_nvlinks_across_sockets():
    busy = (H20[0], H20[4])
    result = cycle([h20()], JobRequest(1, 4, topology="numa"), busy=busy)
    assert result.pending and result.pending[0].reason.code is ReasonCode.TOPOLOGY
    assert result.pending[0].reason.message.endswith("sim-h20-8gpu-nv18-2nic's best 4 free are on one node")
    assert ranks(cycle([h20()], JobRequest(1, 4, topology="nvlink"), busy=busy))  # NV18 everywhere
    got = ranks(cycle([h20()], JobRequest(1, 3, topology="numa"), busy=busy))
    assert got == [{H20[1], H20[2], H20[3]}]


def test_required_level_keeps_the_gang_on_one_node():
    a = v100()
    b = Node("other", tuple(replace(d, uuid=d.uuid + "-b", node="other") for d in a.devices))
    result = cycle([a, b], JobRequest(3, 4, topology="node"))
    assert result.pending[0].reason.code is ReasonCode.TOPOLOGY
    assert "no node has 12 free" in result.pending[0].reason.message
    assert ranks(cycle([a, b], JobRequest(3, 4)))  # without the level it spreads over both


@pytest.mark.parametrize("level", ["nvlink", "pcie-switch", "numa", "node"])
def test_a_node_without_facts_meets_only_the_node_level(level):
    result = cycle([without_topology(v100())], JobRequest(1, 2, topology=level))
    assert bool(result.admitted) == (level == "node")


def test_nodes_wired_alike_each_get_their_own_best_set():
    a = v100()
    b = Node(
        "other",
        tuple(replace(d, uuid=d.uuid + "-b", node="other") for d in a.devices),
        tuple(replace(link, a=link.a + "-b", b=link.b + "-b") for link in a.links),
    )
    got = cycle([a, b], JobRequest(2, 4, nodes=2)).admitted[0].placement
    assert {rp.node: set(rp.devices) for rp in got} == {
        a.name: set(V100[:4]),
        "other": {u + "-b" for u in V100[:4]},
    }
