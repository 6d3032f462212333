"""torchrun without flags on the simulated two-node cluster (config/sim/n1-4gpu.toml and
n2-4gpu.toml): a real coordinator and two real agents on loopback launch ``torchrun
examples/torchrun_ddp.py`` as a 2-rank gang with 4 GPUs per rank, one rank per node; each
torchrun starts 4 workers (gloo on CPU) from labgang's PET_* variables alone, and the 8 join
one group."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from harness import REPO, Cluster

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="needs the [torch] extra"),
]
TORCHRUN = Path(sys.executable).with_name("torchrun")


@pytest.fixture
def cluster():
    c = Cluster({"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"}, startup_timeout_s=120.0)
    try:
        yield c.start()
    finally:
        c.stop()


def test_torchrun_per_node_with_four_processes_each(cluster):
    job = cluster.submit(
        [str(TORCHRUN), str(REPO / "examples" / "torchrun_ddp.py")],
        workers=2,
        gpus_per_worker=4,
        nodes=2,
        env={"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", "")},
    )
    done = cluster.wait_state(job["id"], {"succeeded", "failed"}, timeout=240)
    with cluster.client() as client:
        logs = [client.logs(job["id"], rank=r).data.decode(errors="replace") for r in (0, 1)]
    assert done["state"] == "succeeded", logs
    assert {r["node"] for r in done["ranks"]} == {"n1", "n2"}
    assert "torchrun_ddp: ok: 8 processes on 2 torchrun nodes x 4 (gloo), all-reduce sum 36 == 36, " in logs[0]
    assert "8 distinct devices" in logs[0]
