"""A reclaim is told as a reclaim, on real processes: vision borrows nlp's idle nominal gpu, then
an nlp job takes it back (``reclaim_within_cohort = "any"``). The victim's history and ``explain``
say ``reclaimed by queue nlp ...: vision was borrowing nlp's nominal gpu`` (not an equal-priority
``preempted by job``), and the reclaiming job's ``preempting`` line and pending reason say the same.
A coordinator and one agent on a simulated 4-GPU node."""

from __future__ import annotations

import pytest
from harness import Cluster, rank_script, wait_for

TEAMS = """
[[queues]]
name = "vision"
cohort = "lab"
nominal = { gpu = 1 }

[[queues]]
name = "nlp"
cohort = "lab"
nominal = { gpu = 3 }
reclaim_within_cohort = "any"
"""


@pytest.mark.slow
def test_a_reclaimed_borrower_and_its_reclaimer_say_it_was_a_reclaim() -> None:
    cluster = Cluster({"n1": "n1-4gpu.toml"}, nominal_gpus=0, queue_extra=TEAMS)
    hold = rank_script(
        "import os, time\n"
        "while not os.path.exists(os.path.join(os.environ['TEST_BASE'], 'stop')):\n"
        "    time.sleep(0.05)\n"
    )
    try:
        cluster.start()
        borrower = cluster.submit(hold, queue="vision", gpus_per_worker=4)  # 1 own + 3 of nlp's
        cluster.wait_state(borrower["id"], "running", timeout=20)
        reclaimer = cluster.submit(hold, queue="nlp", gpus_per_worker=3)
        b, r = borrower["id"], reclaimer["id"]
        wait_for(
            lambda: any(h["event"] == "requeued" for h in cluster.job(b)["history"]),
            timeout=20,
            what=f"job {b} requeued",
        )
        why = "vision was borrowing nlp's nominal gpu"
        stopped = [h for h in cluster.job(b)["history"] if h["event"] in ("stopping", "requeued")]
        assert stopped, cluster.job(b)["history"]
        for h in stopped:
            assert h["message"].startswith(f"reclaimed by queue nlp for job {r}: {why}; "), h
            assert "preempted by job" not in h["message"], h
        preempting = [h["message"] for h in cluster.job(r)["history"] if h["event"] == "preempting"]
        assert preempting and f"job {b} (queue vision, priority 0; reclaimed: {why})" in preempting[0], preempting
        lines = cluster.cli_ok("explain", b).splitlines()
        said = [line for line in lines if line.startswith("It was reclaimed by queue nlp")]
        assert len(said) == 1 and why in said[0], lines
        cluster.wait_state(r, "running", timeout=30)
        (cluster.base / "stop").write_text("go")
        cluster.wait_state(r, "succeeded", timeout=30)
    finally:
        cluster.stop()
