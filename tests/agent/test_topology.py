"""GPU topology in the inventory: real ``nvidia-smi topo -m`` captures and machine files, read
through the pynvml topology calls of the simulated NVML (the same calls the real driver gets)."""

from __future__ import annotations

import http.server
import json
import socketserver
import threading
from pathlib import Path

import pynvml
import pytest
from click.testing import CliRunner
from labgang.agent.inventory import NodeInventory, Unavailable, read_inventory
from labgang.agent.nvml import open_backend
from labgang.agent.nvml.formats import detect_format
from labgang.agent.nvml.recorder import Recorder
from labgang.agent.nvml.simulated import SimulatedNvml
from labgang.agent.nvml.topology import format_cpulist, parse_cpulist
from labgang.launcher.cli.nodes import nodes

REPO = Path(__file__).resolve().parents[2]
TOPO = REPO / "tests" / "fixtures" / "real-topology"
V100 = TOPO / "v100-8gpu-dgx1-cube-mesh-1nic.txt"
H20 = TOPO / "h20-8gpu-nv18-2nic.txt"
H200 = TOPO / "h200-1gpu-mig.txt"
UNSUPPORTED = Unavailable("unsupported", 3)


def read(path: Path) -> NodeInventory:
    backend = open_backend(simulate=path)
    try:
        return read_inventory(backend, now=1.0)
    finally:
        backend.nvmlShutdown()


def matrix(inv: NodeInventory) -> list[list[str]]:
    return [
        ["X" if a.index == b.index else inv.link(a.index, b.index).link_class for b in inv.gpus]  # type: ignore[union-attr]
        for a in inv.gpus
    ]


@pytest.mark.parametrize("path", [V100, H20, H200], ids=lambda p: p.name)
def test_captures_are_detected_by_content(path):
    assert detect_format(path.read_text()) == "smi-topo"


def test_v100_cube_mesh_matrix_equals_the_capture():
    inv = read(V100)
    assert len(inv.gpus) == 8
    assert matrix(inv)[0] == ["X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"]
    assert matrix(inv)[5] == ["SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"]
    assert matrix(inv)[7] == ["SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"]
    # an NV# cell does not say the PCIe level: NVML's answer is NOT_SUPPORTED, never a guess
    assert inv.link(0, 3).pcie == UNSUPPORTED and inv.link(0, 3).nvlinks == 2
    assert inv.link(0, 5).pcie == "SYS" and inv.link(0, 5).nvlinks == 0
    # the 440 driver printed no NUMA Affinity column
    assert all(g.numa_node == UNSUPPORTED for g in inv.gpus)
    assert format_cpulist(inv.gpus[0].cpu_affinity) == "0-11,24-35"
    assert format_cpulist(inv.gpus[4].cpu_affinity) == "12-23,36-47"


def test_h20_nvswitch_pairs_all_nv18_and_two_numa_nodes():
    inv = read(H20)
    assert {link.link_class for link in inv.links} == {"NV18"}
    assert len(inv.links) == 28
    assert [g.numa_node for g in inv.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert format_cpulist(inv.gpus[6].cpu_affinity) == "96-191,288-383"


def test_h200_single_gpu_has_numa_and_cpus_but_no_pairs():
    inv = read(H200)
    assert inv.links == ()
    assert inv.gpus[0].numa_node == 0
    assert inv.gpus[0].cpu_affinity == tuple(range(24))


def test_topology_calls_answer_nvml_errors(make_sim):
    sim = make_sim(V100)
    h0, h3 = sim.nvmlDeviceGetHandleByIndex(0), sim.nvmlDeviceGetHandleByIndex(3)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        sim.nvmlDeviceGetTopologyCommonAncestor(h0, h3)
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        sim.nvmlDeviceGetNvLinkState(h0, 6)  # GPU0 has 1+1+2+2 links
    assert sim.nvmlDeviceGetNvLinkState(h0, 5) == 1
    assert sim.nvmlDeviceGetP2PStatus(h0, h3, pynvml.NVML_P2P_CAPS_INDEX_NVLINK) == pynvml.NVML_P2P_STATUS_OK
    h5 = sim.nvmlDeviceGetHandleByIndex(5)
    assert sim.nvmlDeviceGetP2PStatus(h0, h5, pynvml.NVML_P2P_CAPS_INDEX_NVLINK) != pynvml.NVML_P2P_STATUS_OK
    with pytest.raises(pynvml.NVMLError_NotSupported):
        sim.nvmlDeviceGetMemoryAffinity(h0, 1, pynvml.NVML_AFFINITY_SCOPE_NODE)


def test_machine_without_topology_reads_unsupported(sim_dir):
    inv = read(sim_dir / "h100x8.toml")
    assert all(g.numa_node == UNSUPPORTED and g.cpu_affinity == UNSUPPORTED for g in inv.gpus)
    assert inv.links and all(link.pcie == UNSUPPORTED and link.nvlinks == UNSUPPORTED for link in inv.links)
    assert {link.link_class for link in inv.links} == {"n/a"}


MACHINE = """
[machine]
hostname = "box"
[[gpu]]
model = "L40S"
numa_node = 0
cpu_affinity = "0"
[[gpu]]
model = "L40S"
numa_node = 0
cpu_affinity = "0"
[[gpu]]
model = "L40S"
numa_node = 1
cpu_affinity = "1"
[[link]]
gpus = [0, 1]
nvlinks = 4
pcie = "PIX"
[[link]]
gpus = [0, 2]
pcie = "SYS"
"""


def test_machine_file_keys(make_sim):
    inv = read_inventory(make_sim(text=MACHINE), now=1.0)
    assert inv.link(1, 0).link_class == "NV4" and inv.link(0, 1).pcie == "PIX"
    assert inv.link(0, 2).link_class == "SYS"
    assert inv.link(1, 2).pcie == UNSUPPORTED  # not given: unknown
    assert [g.numa_node for g in inv.gpus] == [0, 0, 1]
    assert [g.cpu_affinity for g in inv.gpus] == [(0,), (0,), (1,)]


@pytest.mark.parametrize(
    "change, message",
    [
        ('pcie = "PIX"', "link[0].pcie: 'BRIDGE'; allowed: internal, PIX, PXB, PHB, NODE, SYS"),
        ("nvlinks = 4", "link: GPU 0 has 40 NVLinks"),
        ('cpu_affinity = "0"', "gpu[0].cpu_affinity"),
    ],
)
def test_bad_topology_keys_name_the_field(make_sim, change, message):
    bad = {
        'pcie = "PIX"': MACHINE.replace('pcie = "PIX"', 'pcie = "BRIDGE"'),
        "nvlinks = 4": MACHINE.replace("nvlinks = 4", "nvlinks = 40"),
        'cpu_affinity = "0"': MACHINE.replace('cpu_affinity = "0"', 'cpu_affinity = "3-1"', 1),
    }[change]
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        make_sim(text=bad)


def test_record_and_replay_keep_the_topology(tmp_path):
    sim = SimulatedNvml.from_file(V100, virtual_time=True, scan_processes=False)
    recorder = Recorder(sim, tmp_path / "rec.json")
    recorder.nvmlInit()
    live = read_inventory(recorder, now=5.0)
    recorder.nvmlShutdown()
    replayed = read_inventory(open_backend(simulate=tmp_path / "rec.json"), now=5.0)
    assert replayed == live
    assert replayed.link(0, 3).nvlinks == 2


def test_inventory_json_round_trip_keeps_links_and_affinity():
    inv = read(H20)
    data = json.loads(json.dumps(inv.to_dict()))
    assert data["links"][0]["link_class"] == "NV18"
    assert data["links"][0]["pcie"] is None and data["links"][0]["pcie_unavailable"] == "unsupported"
    assert NodeInventory.from_dict(data) == inv


def test_cpulist_parsing():
    assert parse_cpulist("0-3,8,10-11") == (0, 1, 2, 3, 8, 10, 11)
    assert format_cpulist((0, 1, 2, 3, 8, 10, 11)) == "0-3,8,10-11"
    with pytest.raises(ValueError, match="cpu list"):
        parse_cpulist("a-b")


def test_nodes_topology_prints_the_matrix_and_json():
    result = CliRunner().invoke(nodes, ["--local", "--topology", "--simulate", str(V100)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1].split() == [
        "GPU0",
        "GPU1",
        "GPU2",
        "GPU3",
        "GPU4",
        "GPU5",
        "GPU6",
        "GPU7",
        "CPU",
        "Affinity",
        "NUMA",
        "Affinity",
    ]
    assert lines[2].split() == ["GPU0", "X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS", "0-11,24-35", "n/a"]
    result = CliRunner().invoke(nodes, ["--local", "--topology", "--json", "--simulate", str(H20)])
    data = json.loads(result.output)
    assert [g["numa_node"] for g in data["gpus"]] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert len(data["links"]) == 28


def test_topology_is_read_once_per_backend(make_sim, monkeypatch):
    sim = make_sim(V100)
    calls: list[str] = []
    for name in ("nvmlDeviceGetTopologyCommonAncestor", "nvmlDeviceGetCpuAffinity"):
        real = getattr(sim, name)
        monkeypatch.setattr(sim, name, lambda *a, _real=real, _name=name: calls.append(_name) or _real(*a))
    first = read_inventory(sim, now=1.0)
    assert calls.count("nvmlDeviceGetTopologyCommonAncestor") == 28 and calls.count("nvmlDeviceGetCpuAffinity") == 8
    second = read_inventory(sim, now=2.0)
    assert len(calls) == 36 and second.links == first.links
    assert [g.cpu_affinity for g in second.gpus] == [g.cpu_affinity for g in first.gpus]


class _Nodes(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def address_string(self):
        return "unix"

    def log_message(self, *args):
        pass


def test_nodes_topology_in_cluster_mode_prints_every_node(tmp_path):
    nodes_json = [
        {"name": "a", "connected": True, "inventory": read(V100).to_dict(), "devices": []},
        {"name": "b", "connected": True, "inventory": read(H20).to_dict(), "devices": []},
        {"name": "c", "connected": False, "inventory": None, "devices": []},
    ]
    _Nodes.body = json.dumps({"nodes": nodes_json}).encode()
    server = socketserver.ThreadingUnixStreamServer(str(tmp_path / "labgang.sock"), _Nodes)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        table = CliRunner().invoke(nodes, ["--state-dir", str(tmp_path), "--topology"])
        as_json = CliRunner().invoke(nodes, ["--state-dir", str(tmp_path), "--topology", "--json"])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert table.exit_code == 0, table.output
    blocks = table.stdout.split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == ["a", "b"]
    assert blocks[1].splitlines()[2].split()[:4] == ["GPU0", "X", "NV18", "NV18"]
    data = json.loads(as_json.stdout)["nodes"]
    assert [(n["hostname"], len(n["links"])) for n in data] == [("a", 28), ("b", 28)]
