"""The lifecycle policies of issue 27 end to end: a real coordinator, two real agents (simulated
4-GPU nodes) and real rank processes. ``--failure-policy restart``: a rank's failure stops every
rank and starts the whole job again, up to ``--max-restarts``."""

from __future__ import annotations

import re

import pytest
from harness import Cluster, rank_script

pytestmark = pytest.mark.slow

NODES = {"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"}


@pytest.fixture
def cluster():
    c = Cluster(NODES)
    try:
        yield c.start()
    finally:
        c.stop()


# Each rank leaves a marker per attempt; in the first attempt rank 1 fails once rank 0 is up and
# rank 0 waits to be stopped; in the next one every rank exits 0.
FLAKY = rank_script(
    "import os, sys, time\n"
    "base, rank, restart = os.environ['TEST_BASE'], os.environ['RANK'], os.environ['LABGANG_RESTART_COUNT']\n"
    "open(os.path.join(base, f'started-{restart}-{rank}'), 'w').close()\n"
    "if restart == '0':\n"
    "    if rank == '1':\n"
    "        while not os.path.exists(os.path.join(base, 'started-0-0')):\n"
    "            time.sleep(0.05)\n"
    "        sys.exit(3)\n"
    "    while True:\n"
    "        time.sleep(0.05)\n"
)


def test_a_rank_failure_restarts_the_whole_job(cluster: Cluster) -> None:
    job = cluster.submit(FLAKY, workers=2, gpus_per_worker=4, failure_policy="restart", max_restarts=2)
    done = cluster.wait_state(job["id"], {"succeeded", "failed"}, timeout=40)
    assert done["state"] == "succeeded", done
    assert done["restart_count"] == 1
    assert done["lifecycle_policy"] == {
        "success": "all",
        "failure": "restart",
        "max_restarts": 2,
        "restarts_used": 1,
        "startup_order": [],
    }
    shown = cluster.cli("show", job["id"])
    assert re.search(r"^Policies:\s+failure restart \(1 of 2 restarts used\)$", shown.stdout, re.M), shown.stdout
    for marker in ("started-0-0", "started-0-1", "started-1-0", "started-1-1"):
        assert (cluster.base / marker).exists(), marker  # every rank ran again, rank 0 too
    lines = [(h["event"], h["message"]) for h in done["history"]]
    assert (
        "requeued",
        "rank 1 on n2 exited with status 3; restart 1 of 2 (--failure-policy restart); restart 1",
    ) in lines
    # rank 0 of the first attempt never exited on its own: it was stopped by the restart
    stopping = next(m for e, m in lines if e == "stopping")
    assert stopping.startswith("rank 1 on n2 exited with status 3; restart 1 of 2")


def test_without_restarts_left_the_failure_fails_the_job(cluster: Cluster) -> None:
    job = cluster.submit(FLAKY, workers=2, gpus_per_worker=4, failure_policy="restart", max_restarts=0)
    done = cluster.wait_state(job["id"], {"succeeded", "failed"}, timeout=40)
    assert (done["state"], done["exit_status"], done["restart_count"]) == ("failed", 3, 0)
    assert done["reason"]["message"] == (
        "rank 1 on n2 exited with status 3 (--failure-policy restart: 0 of 0 restarts used)"
    )
    assert not (cluster.base / "started-1-0").exists()  # no second attempt


# A 1-rank job whose only rank fails in its first attempt: nothing is left to stop when it fails.
ONCE = rank_script(
    "import os, sys\n"
    "base, restart = os.environ['TEST_BASE'], os.environ['LABGANG_RESTART_COUNT']\n"
    "open(os.path.join(base, f'once-{restart}'), 'w').close()\n"
    "sys.exit(3 if restart == '0' else 0)\n"
)


def test_a_one_rank_job_is_restarted_too(cluster: Cluster) -> None:
    job = cluster.submit(ONCE, workers=1, gpus_per_worker=1, failure_policy="restart", max_restarts=1)
    done = cluster.wait_state(job["id"], {"succeeded", "failed"}, timeout=40)
    assert (done["state"], done["restart_count"]) == ("succeeded", 1), done
    assert (cluster.base / "once-1").exists()
    requeued = [h["message"] for h in done["history"] if h["event"] == "requeued"]
    assert len(requeued) == 1 and re.fullmatch(
        r"rank 0 on n[12] exited with status 3; restart 1 of 1 \(--failure-policy restart\); restart 1", requeued[0]
    ), requeued
