"""The coordinator's view of a node's topology: NUMA keys, links and each rank's CPUs, from inventories
read through the simulated NVML."""

from __future__ import annotations

from pathlib import Path

from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.launcher.coordinator.topology import node_from_inventory, rank_cpus

REPO = Path(__file__).resolve().parents[2]


def inventory(path: Path):
    backend = open_backend(simulate=path)
    try:
        return read_inventory(backend, now=1.0)
    finally:
        backend.nvmlShutdown()


def test_rank_cpus_is_the_union_over_sockets_and_none_without_facts():
    inv = inventory(REPO / "config" / "sim" / "numa2-4gpu.toml")
    uuids = [g.uuid for g in inv.gpus]
    assert rank_cpus(inv, [uuids[0], uuids[1]]) == [0]
    assert rank_cpus(inv, [uuids[1], uuids[2]]) == [0, 1]
    assert rank_cpus(inv, []) is None
    assert rank_cpus(None, uuids[:1]) is None
    plain = inventory(REPO / "config" / "sim" / "h100x8.toml")
    assert rank_cpus(plain, [plain.gpus[0].uuid]) is None  # NVML gave no CPUs: not pinned


def test_mig_devices_take_their_parents_cpus_and_numa(tmp_path):
    machine = (REPO / "config" / "sim" / "a100x8-mig.toml").read_text()
    machine = machine.replace(
        'model = "A100-SXM4-80GB"', 'model = "A100-SXM4-80GB"\nnuma_node = 1\ncpu_affinity = "1"', 1
    )
    path = tmp_path / "m.toml"
    path.write_text(machine)
    inv = inventory(path)
    mig = inv.gpus[0].mig_devices[0].uuid
    assert rank_cpus(inv, [mig]) == [1]
    node = node_from_inventory("m", inv)
    assert {d.numa for d in node.devices if d.uuid == mig} == {"numa1"}


def test_numa_key_falls_back_to_cpus_and_links_skip_unknowns():
    inv = inventory(REPO / "tests" / "fixtures" / "real-topology" / "v100-8gpu-dgx1-cube-mesh-1nic.txt")
    node = node_from_inventory("v", inv)
    assert node.devices[0].numa == "cpus:0-11,24-35" and node.devices[4].numa == "cpus:12-23,36-47"
    pairs = {(link.a, link.b): (link.nvlinks, link.pcie) for link in node.links}
    a, d = node.devices[0].uuid, node.devices[3].uuid
    assert pairs[(a, d)] == (2, "")  # NV2; the capture does not say the PCIe level
    assert len(node.links) == 28
