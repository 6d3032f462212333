"""``labgang nodes``: the table a person reads, and cluster mode's errors."""

from __future__ import annotations

import http.server
import json
import socketserver
import threading

from click.testing import CliRunner
from labgang.launcher.cli.nodes import nodes


def test_table_shows_devices_profiles_and_na(sim_dir):
    result = CliRunner().invoke(nodes, ["--local", "--simulate", str(sim_dir / "a100x8-mig.toml")])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == "sim-a100x8-mig: driver 535.183.01, CUDA 12.2, 8 GPU(s), 17 MIG device(s)"
    assert lines[1].split() == [
        "DEVICE",
        "MODEL",
        "UUID",
        "PROFILE",
        "MEM",
        "GiB",
        "UTIL%",
        "SM%",
        "TEMP",
        "POWER",
        "PROCS",
        "WARNINGS",
    ]
    gpu0 = lines[2].split()
    assert gpu0[:6] == ["0", "NVIDIA", "A100-SXM4-80GB", "GPU-9e0a72e6", "MIG", "0.0/80.0"]
    assert gpu0[6:8] == ["n/a", "n/a"]  # utilisation unsupported in MIG mode, no GPM on Ampere
    assert lines[3].split() == ["0:0", "MIG-8322ba04", "1g.10gb", "0.0/9.5", "n/a", "n/a", "0", "gi7/ci0"]
    split = [line.split() for line in lines if "1c.3g.40gb" in line or "2c.3g.40gb" in line]
    assert [row[-1] for row in split] == ["gi1/ci0", "gi1/ci1"]
    whole = lines[-1].split()
    assert whole[:5] == ["7", "NVIDIA", "A100-SXM4-80GB", "GPU-a2621ef9", "-"] and whole[6] == "0"


def test_table_warns_about_pending_mig(sim_dir):
    result = CliRunner().invoke(nodes, ["--local", "--simulate", str(sim_dir / "h100-mig-pending.toml")])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[2].endswith("mig pending enable (reset needed)")


def test_simulate_without_local_is_a_usage_error(sim_dir):
    result = CliRunner().invoke(nodes, ["--simulate", str(sim_dir / "h100x8.toml")])
    assert result.exit_code == 2
    assert "add --local" in result.output


def test_cluster_mode_without_a_coordinator_is_one_line_exit_1(tmp_path):
    result = CliRunner().invoke(nodes, ["--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert result.stderr.strip().count("\n") == 0
    assert "no labgang coordinator at" in result.stderr and str(tmp_path) in result.stderr


class _NodesHandler(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self):
        if self.path != "/v1/nodes":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def address_string(self):
        return "unix"

    def log_message(self, *args):
        pass


def test_cluster_mode_prints_each_node_with_device_holders(tmp_path, sim_dir, sim_scope):
    from labgang.agent.inventory import read_inventory
    from labgang.agent.nvml import open_backend

    backend = open_backend(simulate=sim_dir / "n1-4gpu.toml", scope=sim_scope)
    inv = read_inventory(backend, now=5.0)
    backend.nvmlShutdown()
    held = inv.gpus[1].uuid
    _NodesHandler.body = json.dumps(
        {
            "nodes": [
                {
                    "name": "n1",
                    "connected": True,
                    "last_seen": 5.0,
                    "inventory": inv.to_dict(),
                    "devices": [
                        {
                            "uuid": held,
                            "resource": "gpu",
                            "model": "H100",
                            "job": "17",
                            "user": "alice",
                            "queue": "vision",
                            "state": "allocated",
                        }
                    ],
                },
                {"name": "n2", "connected": False, "last_seen": None, "inventory": None, "devices": []},
            ]
        }
    ).encode()
    sock = tmp_path / "labgang.sock"
    server = socketserver.ThreadingUnixStreamServer(str(sock), _NodesHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        result = CliRunner().invoke(nodes, ["--state-dir", str(tmp_path), "--gpus"])
        as_json = CliRunner().invoke(nodes, ["--state-dir", str(tmp_path), "--json"])
        summary = CliRunner().invoke(nodes, ["--state-dir", str(tmp_path)])  # one line per node, as sinfo
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("[connected] n1: driver 565.57.01")
    row = next(line for line in lines if held[:12] in line)
    assert row.split()[0] == "1" and row.endswith("allocated 17 (alice, vision)")
    assert "n2 (disconnected): no inventory yet" in result.stdout
    assert json.loads(as_json.stdout)["nodes"][0]["inventory"]["gpus"][1]["uuid"] == held
    assert [line.split()[:3] for line in summary.stdout.splitlines()[1:]] == [
        ["n1", "alloc", "1/0/0/1"],
        ["n2", "down", "0/0/0/0"],
    ]
