"""``labgang explain JOB`` on real processes says when a job looked for no victims because it would
have to borrow (docs/queue-semantics.md §A3.1), and only then: a coordinator and one agent on a
simulated 4-GPU node, two teams in one cohort."""

from __future__ import annotations

import json

import pytest
from harness import Cluster, rank_script, wait_for

TEAMS = """
[[queues]]
name = "team-a"
cohort = "lab"
nominal = { gpu = 2 }
within_queue = "lower-priority"

[[queues]]
name = "team-b"
cohort = "lab"
nominal = { gpu = 2 }
"""

RULE = (
    "No preemption: the job needs 4 gpu, 2 above queue team-a's nominal quota of 2, so it could only start "
    "by borrowing; a job that would borrow may preempt only when its queue's borrow_within_cohort allows it, "
    "and team-a's is never (docs/queue-semantics.md §A3.1)."
)


def pending_with(cluster: Cluster, job_id: str, code: str) -> None:
    wait_for(
        lambda: (job := cluster.job(job_id))["state"] == "pending" and (job["reason"] or {}).get("code") == code,
        timeout=20,
        what=f"job {job_id} pending with {code}",
    )


@pytest.mark.slow
def test_explain_says_a_job_that_would_borrow_may_not_preempt_and_a_job_within_nominal_does_not() -> None:
    """a0 (team-a, 2 gpu, priority 0) runs. a1 (team-a, 4 gpu, priority 10) waits: evicting a0
    would make room (team-b lends its idle 2), but a1 would borrow 2 and team-a's
    borrow_within_cohort is never. Then b1 fills the node, and a2 (team-a, 2 gpu = its nominal,
    priority 0) waits too, having looked for victims and found none: no such line for it."""
    cluster = Cluster({"n1": "n1-4gpu.toml"}, nominal_gpus=0, queue_extra=TEAMS)
    hold = rank_script(
        "import os, time\n"
        "while not os.path.exists(os.path.join(os.environ['TEST_BASE'], 'stop')):\n"
        "    time.sleep(0.05)\n"
    )
    try:
        cluster.start()
        a0 = cluster.submit(hold, queue="team-a", gpus_per_worker=2, priority=0)
        cluster.wait_state(a0["id"], "running", timeout=20)
        a1 = cluster.submit(hold, queue="team-a", gpus_per_worker=4, priority=10)
        pending_with(cluster, a1["id"], "cohort_exhausted")
        text = cluster.cli_ok("explain", a1["id"])
        assert RULE in text.splitlines(), text
        data = json.loads(cluster.cli_ok("explain", a1["id"], "--json"))
        assert data["no_preemption"] == {
            "code": "would_borrow",
            "queue": "team-a",
            "resource": "gpu",
            "request": 4,
            "nominal": 2,
            "borrow": 2,
            "cohort": "lab",
            "borrow_within_cohort": "never",
            "message": RULE[0].lower() + RULE[1:-1],
        }
        assert data["job"]["reason"]["no_preemption"] == data["no_preemption"]
        assert RULE in data["sentences"]
        assert cluster.job(a0["id"])["state"] == "running"  # nobody was evicted for a1
        with cluster.client() as client:  # `labgang queue`'s rows keep the reason's code and message only
            row = next(r for r in client.jobs(view="queue") if r["id"] == a1["id"])
        assert row["reason"] == {"code": "cohort_exhausted", "message": data["job"]["reason"]["message"]}

        b1 = cluster.submit(hold, queue="team-b", gpus_per_worker=2)
        cluster.wait_state(b1["id"], "running", timeout=20)
        a2 = cluster.submit(hold, queue="team-a", gpus_per_worker=2, priority=0)
        pending_with(cluster, a2["id"], "cohort_exhausted")
        text = cluster.cli_ok("explain", a2["id"])
        assert f"job {a2['id']} (1 x 2 gpu) in queue team-a is pending." in text
        assert "It waits: cohort lab has 0 of 4 lendable gpu unused" in text
        assert "preemption" not in text.lower(), text
        data = json.loads(cluster.cli_ok("explain", a2["id"], "--json"))
        assert data["no_preemption"] is None and "no_preemption" not in data["job"]["reason"]
        (cluster.base / "stop").write_text("go")
        for job in (a0, b1):
            cluster.wait_state(job["id"], "succeeded", timeout=30)
    finally:
        cluster.stop()
