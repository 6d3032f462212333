"""``labgang explain JOB`` on real processes after a preemption: one sentence per preemption (the
victim's "stopping" and "requeued" history lines merged), and the job's state said in plain
grammar ("is pending", "has succeeded"). A coordinator and one agent on a simulated 4-GPU node."""

from __future__ import annotations

import json

import pytest
from harness import Cluster, rank_script, wait_for


@pytest.mark.slow
def test_a_preempted_job_is_explained_with_one_preemption_sentence_and_its_state_in_plain_words() -> None:
    """low (4 gpu, priority 0) runs; high (4 gpu, priority 10) preempts it within the queue. low goes
    back to its queue, restart 1: explain says so once. Once both have run, low "has succeeded"."""
    cluster = Cluster({"n1": "n1-4gpu.toml"}, nominal_gpus=4, queue_extra='within_queue = "lower-priority"\n')
    hold = rank_script(
        "import os, time\n"
        "while not os.path.exists(os.path.join(os.environ['TEST_BASE'], 'stop')):\n"
        "    time.sleep(0.05)\n"
    )
    try:
        cluster.start()
        low = cluster.submit(hold, gpus_per_worker=4, priority=0)
        cluster.wait_state(low["id"], "running", timeout=20)
        high = cluster.submit(hold, gpus_per_worker=4, priority=10)
        cluster.wait_state(high["id"], "running", timeout=30)
        wait_for(
            lambda: any(h["event"] == "requeued" for h in cluster.job(low["id"])["history"]),
            timeout=20,
            what=f"job {low['id']} requeued",
        )
        history = [h for h in cluster.job(low["id"])["history"] if "preempted by job" in h["message"]]
        assert [h["event"] for h in history] == ["stopping", "requeued"]  # the two lines explain merges

        text = cluster.cli_ok("explain", low["id"])
        lines = text.splitlines()
        assert lines[0] == f"job {low['id']} (1 x 4 gpu) in queue default is pending.", text
        said = [line for line in lines if "preempted by job" in line]
        assert len(said) == 1, text
        reason = history[0]["message"].rpartition("; ")[0]
        assert said[0] == f"It was {reason}; every rank was stopped and it went back to its queue as restart 1.", text
        data = json.loads(cluster.cli_ok("explain", low["id"], "--json"))
        assert data["sentences"] == lines

        (cluster.base / "stop").write_text("go")
        cluster.wait_state(high["id"], "succeeded", timeout=30)
        cluster.wait_state(low["id"], "succeeded", timeout=30)
        lines = cluster.cli_ok("explain", low["id"]).splitlines()
        assert lines[0] == f"job {low['id']} (1 x 4 gpu) in queue default has succeeded.", lines
        assert len([line for line in lines if "preempted by job" in line]) == 1, lines
    finally:
        cluster.stop()
