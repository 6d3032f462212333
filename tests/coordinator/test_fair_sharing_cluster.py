"""Fair sharing on real processes: a coordinator and two agents (simulated 4-GPU nodes) with
two teams in one cohort, and the persistence of admission fair sharing's usage histories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import Cluster, rank_script, wait_for
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.sharing import SharingState
from labgang.launcher.coordinator.store import Store

NODES = {"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"}

TEAMS = """
[[queues]]
name = "team-a"
cohort = "lab"
nominal = { gpu = 2 }

[[queues]]
name = "team-b"
cohort = "lab"
nominal = { gpu = 2 }

[[queues]]
name = "team-c"
cohort = "lab"
nominal = { gpu = 4 }
"""


def hold_until(marker: str) -> list[str]:
    """A rank that runs until the file ``marker`` exists in the test's base directory."""
    return rank_script(
        "import os, time\n"
        f"while not os.path.exists(os.path.join(os.environ['TEST_BASE'], {marker!r})):\n"
        "    time.sleep(0.05)\n"
    )


@pytest.mark.slow
def test_two_teams_lower_share_wins_the_freed_gpus() -> None:
    """team-a runs 4 GPUs (2 borrowed), team-b 2, team-c's 2 fill the cluster. a1 then b1 (2 GPUs
    each) wait. When c0 ends, the tournament compares team-a with a1 (6 GPUs: 4 borrowed, share
    4 * 1000 / 8 = 500) and team-b with b1 (4: share 250): b1 starts although a1 came first."""
    cluster = Cluster(NODES, config_extra="fair_sharing = true\n", nominal_gpus=0, queue_extra=TEAMS)
    try:
        cluster.start()
        a0 = cluster.submit(hold_until("stop-all"), queue="team-a", gpus_per_worker=4)
        b0 = cluster.submit(hold_until("stop-all"), queue="team-b", gpus_per_worker=2)
        c0 = cluster.submit(hold_until("stop-c"), queue="team-c", gpus_per_worker=2)
        for job in (a0, b0, c0):
            cluster.wait_state(job["id"], "running", timeout=20)
        a1 = cluster.submit(hold_until("stop-all"), queue="team-a", gpus_per_worker=2)
        b1 = cluster.submit(hold_until("stop-all"), queue="team-b", gpus_per_worker=2)
        wait_for(
            lambda: cluster.job(b1["id"])["state"] == "pending" and cluster.job(a1["id"])["reason"], what="both wait"
        )
        (cluster.base / "stop-c").write_text("go")
        cluster.wait_state(c0["id"], "succeeded", timeout=20)
        cluster.wait_state(b1["id"], "running", timeout=20)
        assert cluster.job(a1["id"])["state"] == "pending"
        # explain, with the numbers: both teams borrow 2 of the 8 GPUs the cohort could reach
        queue_text = cluster.cli_ok("explain", "team-a")
        assert "team-a uses gpu=4 of its nominal gpu=2." in queue_text
        assert "ratio 250.00 (x 1000), divided by its weight 1 gives its share 250.00" in queue_text
        assert "team-b 250.00 (weight 1)" in queue_text
        job_text = cluster.cli_ok("explain", a1["id"])
        assert f"job {a1['id']} (1 x 2 gpu) in queue team-a is pending." in job_text
        assert f"starting job {a1['id']} would raise it to 500.00" in job_text
        data = json.loads(cluster.cli_ok("explain", "team-b", "--json"))
        assert data["queue"]["fair_share"] == 250.0 and data["queue"]["fair_share_basis"] == {"gpu": 8}
        (cluster.base / "stop-all").write_text("go")
        for job in (a0, b0, b1, a1):
            cluster.wait_state(job["id"], "succeeded", timeout=30)
    finally:
        cluster.stop()


def test_tenant_usage_survives_a_restart(tmp_path: Path) -> None:
    """Histories sampled by one coordinator's sharing state are read back by the next one."""
    cfg = parse_config(
        {
            "admission_fair_sharing": {"half_life": 10.0, "sampling_interval": 5.0},
            "queues": [{"name": "default", "nominal": {"gpu": 4}}],
            "tenants": [
                {"name": "alice", "queue": "default", "usage": {"gpu": 4}},
                {"name": "bob", "queue": "default"},
            ],
        }
    )
    store = Store(tmp_path / "db")
    state = SharingState(cfg, store, now=100.0)
    state.sample(110.0, {("default", "bob"): 2})  # samples at 105 and 110: bob's job holds 2 GPUs
    before = {(t.queue, t.name): (t.history, t.last) for t in state.snapshot_tenants()}
    assert before[("default", "alice")][0] == pytest.approx(4 * 0.5)  # 10 s at half_life 10, U = 0
    assert before[("default", "bob")][0] == pytest.approx(2 * 0.5)  # U = 2 for 10 s
    store.close()
    again = SharingState(cfg, Store(tmp_path / "db"), now=200.0)
    after = {(t.queue, t.name): (t.history, t.last) for t in again.snapshot_tenants()}
    assert after == before
    assert again.last_sample == 110.0
