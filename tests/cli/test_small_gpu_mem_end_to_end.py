"""A small ``--gpu-mem`` budget through a real ``labgang up --simulate --config`` (4 shards per card,
``violation = "report"``): the new user's ``--gpu-mem 16`` (16 MiB) shard job whose process uses
512 MiB (the simulated NVML's ``SIM_GPU_MEMORY_MIB``) read ``uses 0.5 of 0.0 GiB`` in ``nodes --gpus``
and ``over its --gpu-mem budget of 0.0 GiB`` in its history; both now say MiB, as ``top`` does."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from up_harness import WAIT_S, Up, running_up

pytestmark = pytest.mark.slow

CONFIG = """
default_queue = "vision"

[sharing]
shards_per_gpu = 4

[[queues]]
name = "vision"
nominal = { gpu = 8 }
share_gpus = "queue"
"""


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgmem", CONFIG)


def violations(view: dict) -> list[str]:
    """The job's ``gpu-mem-violation`` history lines."""
    return [h["message"] for h in view.get("history", []) if h["event"] == "gpu-mem-violation"]


def test_a_16_mib_budget_reads_in_mib_in_history_nodes_and_top(up: Up) -> None:
    submitted = up.cli(
        "submit", "--shards", "1", "--gpu-mem", "16", "--", "env", "SIM_GPU_MEMORY_MIB=512", "sleep", "300"
    )
    assert submitted.returncode == 0 and "read as 16 MiB" in submitted.stderr, submitted.stderr
    job = submitted.stdout.strip()
    try:
        deadline = time.monotonic() + WAIT_S
        while not violations(view := up.job(job)):
            assert time.monotonic() < deadline, view
            time.sleep(0.2)
        ((device,),) = [rank["devices"] for rank in view["ranks"]]
        pid, node = view["ranks"][0]["pid"], view["nodes"][0]
        line = f"rank 0 on {node} (pid {pid}) uses 512 MiB of device {device}, over its --gpu-mem budget of 16 MiB"
        assert violations(view) == [line]
        assert view["state"] == "running"  # violation = "report": it runs on
        gpus = up.cli("nodes", "--gpus").stdout
        assert f"OVER BUDGET: job {job} rank 0 pid {pid} uses 512 MiB of its 16 MiB budget" in gpus, gpus
        assert f"  job {job} rank 0  shard x1  uses 512 MiB of its 16 MiB budget" in gpus, gpus
        assert "0.0 GiB" not in gpus, gpus
        assert "512M/16M OVER BUDGET" in up.cli("top", "--once").stdout
    finally:
        up.cli("cancel", job)
