"""A launcher-plus-workers job of groups on a real ``labgang up --simulate`` (8 x H100): its ranks
all start together (the launcher with no device, on the workers' node) or it waits whole.
Each rank runs the job's first command until the run side of issue 27 gives each group its own."""

from __future__ import annotations

import pytest
from up_harness import Up, running_up


@pytest.fixture(scope="module")
def lg():
    yield from running_up("lg-groups-")


@pytest.mark.slow
def test_launcher_and_workers_start_together_or_wait_whole(lg: Up) -> None:
    # 3 workers x 2 GPUs + a deviceless launcher: 6 of the 8 GPUs
    first = lg.submit(
        "--name", "mpi", "-n", "1", "-g", "0", "--", "sleep", "30", ":", "-n", "3", "-g", "2", "--", "sleep", "30"
    )
    job = lg.wait_state(first, {"running"})
    ranks = sorted(job["ranks"], key=lambda r: r["rank"])
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    assert ranks[0]["devices"] == [] and [len(r["devices"]) for r in ranks[1:]] == [2, 2, 2]
    assert all(r["state"] == "running" for r in ranks)
    assert len({u for r in ranks for u in r["devices"]}) == 6
    # a second one needs 1 + 4 x 1: 2 of the 8 GPUs are left, so it waits whole, nothing of it starts
    second = lg.submit("-n", "1", "-g", "0", "--", "sleep", "30", ":", "-n", "4", "-g", "1", "--", "sleep", "30")
    waiting = lg.wait_state(second, {"pending"})
    assert waiting["ranks"] == [] and "job needs 4" in waiting["reason"]["message"], waiting  # summed quota
    assert lg.cli("cancel", first).returncode == 0
    started = lg.wait_state(second, {"running"})
    assert len(started["ranks"]) == 5
    assert lg.cli("cancel", second).returncode == 0
    lg.wait_state(second, {"cancelled"})
