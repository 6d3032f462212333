"""``labgang history`` and ``labgang logs --attempt`` against real daemons: a preempted gang's
first attempt keeps its output, and the history lists finished and current jobs."""

from __future__ import annotations

import json

import pytest
from harness import Cluster, wait_for

COUNTED_RANK = 'n=$(cat count 2>/dev/null || echo 0); echo $((n + 1)) > count; echo "run $n"; exec sleep 60'


@pytest.fixture
def cluster():
    c = Cluster({"n1": "n1-4gpu.toml"}, nominal_gpus=4, queue_extra='within_queue = "lower-priority"\n').start()
    yield c
    c.stop()


def test_an_earlier_attempts_output_survives_a_requeue_and_the_history_lists_it(cluster: Cluster) -> None:
    low = cluster.submit(["/bin/sh", "-c", COUNTED_RANK], workers=1, gpus_per_worker=4, grace_s=0.5)
    cluster.wait_state(low["id"], "running")
    wait_for(lambda: (cluster.base / "count").exists(), what="the first attempt ran")
    high = cluster.submit(["true"], workers=1, gpus_per_worker=4, priority=10)
    cluster.wait_state(high["id"], "succeeded", timeout=30)
    wait_for(
        lambda: (j := cluster.job(low["id"]))["state"] == "running" and j["restart_count"] == 1,
        timeout=30,
        what="the preempted gang running again",
    )
    wait_for(lambda: (cluster.base / "count").read_text().strip() == "2", what="the second attempt ran")

    first = cluster.cli("logs", low["id"], "--attempt", "0")
    assert (first.returncode, first.stdout) == (0, "run 0\n"), first.stderr
    # the agent heads a restarted attempt's log with a "[labgang] job 1.1 rank 0 restart 1" line
    wait_for(lambda: cluster.cli("logs", low["id"]).stdout.endswith("restart 1\nrun 1\n"), what="attempt 1")
    assert cluster.cli("logs", low["id"], "--attempt", "1").stdout.endswith("\nrun 1\n")
    missing = cluster.cli("logs", low["id"], "--attempt", "7")
    assert missing.returncode == 2 and "attempt 7" in missing.stderr, missing.stderr
    assert f"job {low['id']} has attempts 0 to 1" in missing.stderr, missing.stderr

    rows = {r["id"]: r for r in json.loads(cluster.cli("history", "--json").stdout)["jobs"]}
    assert (rows[high["id"]]["state"], rows[high["id"]]["exit_status"]) == ("succeeded", 0)
    assert (rows[low["id"]]["state"], rows[low["id"]]["restart_count"], rows[low["id"]]["attempts"]) == (
        "running",
        1,
        2,
    )
    table = cluster.cli("history", "--state", "succeeded")
    header, *lines = table.stdout.splitlines()
    assert table.returncode == 0 and header.split()[:5] == ["JOBID", "NAME", "USER", "QUEUE", "STATE"]
    assert [(line.split()[0], line.split()[4]) for line in lines] == [(high["id"], "SUCCEEDED")]
    bad = cluster.cli("history", "--since", "yesterday-ish")
    assert bad.returncode == 2 and "--since" in bad.stderr and "2h, 7d" in bad.stderr
