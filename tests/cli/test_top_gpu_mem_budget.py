"""``labgang top --once`` on a real ``labgang up --simulate --config`` (8 x H100, 4 shards per card):
a shard job's memory shows against its ``--gpu-mem`` budget in the shared card's holder cell, and a
job whose process uses more than its budget (the simulated NVML's ``SIM_GPU_MEMORY_MIB``) is marked
``OVER BUDGET`` there (and in its row of the jobs table's REASON), the words ``labgang nodes --gpus``
uses for a budget violation (a new user's finding: ``top`` showed ``1 512M`` and nothing about the
16M budget)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from up_harness import WAIT_S, Up, running_up

pytestmark = pytest.mark.slow

# violation = "report" (the default): the job keeps running over its budget, as the new user's did
CONFIG = """
default_queue = "team"

[sharing]
shards_per_gpu = 4

[[queues]]
name = "team"
nominal = { gpu = 8 }
share_gpus = "queue"
"""


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgtb", CONFIG)


def shared_line(up: Up, *needles: str) -> str:
    """The first line of ``top --once`` (a shared card's device row) holding every one of ``needles``,
    waiting for the agent's next inventory to report the sharers' memory."""
    deadline = time.monotonic() + WAIT_S
    while True:
        out = up.cli("top", "--once", "--width", "250")
        assert out.returncode == 0, out.stderr
        found = [line for line in out.stdout.splitlines() if all(n in line for n in needles)]
        if found:
            return found[0]
        assert time.monotonic() < deadline, out.stdout
        time.sleep(0.3)


def test_top_shows_a_shards_memory_against_its_budget_and_marks_it_over_budget(up: Up) -> None:
    over = up.submit("--shards", "1", "--gpu-mem", "16", "--", "env", "SIM_GPU_MEMORY_MIB=512", "sleep", "300")
    within = up.submit("--shards", "1", "--gpu-mem", "1G", "--", "env", "SIM_GPU_MEMORY_MIB=256", "sleep", "300")
    try:
        up.wait_state(over, {"running"})
        up.wait_state(within, {"running"})
        # both share one card; the agent reports what each one's process uses
        line = shared_line(up, f" {over} 512M", f" {within} 256M")
        assert f" {over} 512M/16M OVER BUDGET" in line, line
        assert f" {within} 256M/1.0G" in line and f"{within} 256M/1.0G OVER" not in line, line
        # the jobs table: a running share's REASON cell says the same
        out = up.cli("top", "--once", "--width", "250").stdout
        rows = {line.split()[0]: line for line in out.splitlines() if " running " in line and "gpu-mem " in line}
        assert rows[over].rstrip().endswith("gpu-mem 512M/16M OVER BUDGET"), out
        assert rows[within].rstrip().endswith("gpu-mem 256M/1.0G"), out
    finally:
        up.cli("cancel", *up.jobs())
