"""examples/ddp_allreduce.py on its own: real torch.distributed (gloo) processes, no labgang."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch", reason="the example needs the [torch] extra: pip install -e '.[torch]'")

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(repo_root, devices_per_rank):
    port = _free_port()
    procs = []
    for rank, devices in enumerate(devices_per_rank):
        env = dict(
            os.environ,
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(port),
            WORLD_SIZE=str(len(devices_per_rank)),
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            CUDA_VISIBLE_DEVICES=devices,
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, str(repo_root / "examples" / "ddp_allreduce.py")],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    results = [p.communicate(timeout=60) for p in procs]
    return [p.returncode for p in procs], results


def test_two_ranks_with_their_own_devices_agree(repo_root):
    codes, results = _launch(repo_root, ["GPU-aaa,GPU-bbb", "GPU-ccc,GPU-ddd"])
    assert codes == [0, 0], results
    assert "ok: 2 ranks (gloo), all-reduce sum 3 == 3, 4 distinct devices" in results[0][0]


def test_a_device_seen_by_two_ranks_fails_every_rank(repo_root):
    codes, results = _launch(repo_root, ["GPU-aaa", "GPU-aaa"])
    assert codes == [1, 1]
    assert "device GPU-aaa visible to ranks 0 and 1" in results[1][1]


def test_index_instead_of_uuid_fails(repo_root):
    codes, results = _launch(repo_root, ["0", "1"])
    assert codes == [1, 1]
    assert "by index, not UUID" in results[0][1]


def test_outside_a_gang_it_says_how_to_run_it(repo_root):
    env = {k: v for k, v in os.environ.items() if k not in ("MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")}
    out = subprocess.run(
        [sys.executable, str(repo_root / "examples" / "ddp_allreduce.py")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 1 and "run me under `labgang run`" in out.stderr
