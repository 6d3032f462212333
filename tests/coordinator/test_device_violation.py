"""A rank that ignores CUDA_VISIBLE_DEVICES, end to end: a real coordinator and agent (simulated
NVML, which puts a process on the devices its ``CUDA_VISIBLE_DEVICES`` names:
docs/simulated-activity.md), a rank that re-executes itself with another GPU's UUID, and what
follows under each ``violation`` policy: the job's history, ``GET /v1/nodes`` (and ``labgang
nodes``), the pitfall, and with ``kill`` the job stopped and failed, saying why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from harness import SIM, Cluster, rank_script, wait_for

pytestmark = pytest.mark.slow

NODE_FILE = "n1-4gpu.toml"


def sim_uuids(name: str) -> list[str]:
    return [line.split('"')[1] for line in (SIM / name).read_text().splitlines() if line.startswith("uuid = ")]


def trespasser(all_uuids: list[str]) -> list[str]:
    """A rank that notes its own GPU, then re-executes itself on another one (``CUDA_VISIBLE_DEVICES``
    set by hand) and waits for the file ``go``."""
    wait = (
        "import os, time\n"
        "while not os.path.exists(os.path.join(os.environ['TEST_BASE'], 'go')):\n"
        "    time.sleep(0.05)\n"
    )
    return rank_script(
        "import os, sys\n"
        f"everyone = {all_uuids!r}\n"
        "mine = os.environ['CUDA_VISIBLE_DEVICES']\n"
        "other = [u for u in everyone if u != mine][0]\n"
        "open(os.path.join(os.environ['TEST_BASE'], 'other'), 'w').write(other + ' ' + mine)\n"
        f"os.execve(sys.executable, [sys.executable, '-c', {wait!r}], dict(os.environ, CUDA_VISIBLE_DEVICES=other))\n"
    )


def violations_of(cluster: Cluster, job_id: str) -> list[dict]:
    return [h for h in cluster.job(job_id)["history"] if h["event"] == "device-violation"]


def test_report_records_the_violation_shows_it_and_lets_the_job_run() -> None:
    cluster = Cluster({"n1": NODE_FILE}).start()
    try:
        well_behaved = cluster.submit(
            rank_script(
                "import os, time\n"
                "while not os.path.exists(os.path.join(os.environ['TEST_BASE'], 'go')):\n"
                "    time.sleep(0.05)\n"
            ),
            gpus_per_worker=1,
        )
        job = cluster.submit(trespasser(sim_uuids(NODE_FILE)), gpus_per_worker=1)
        lines = wait_for(lambda: violations_of(cluster, job["id"]), timeout=20, what="a device-violation line")
        other, mine = (cluster.base / "other").read_text().split()
        running = cluster.job(job["id"])
        pid = running["ranks"][0]["pid"]
        assert len(lines) == 1
        assert lines[0]["message"] == (
            f"rank 0 on n1 (pid {pid}) used device {other}, which it was not given (its devices: {mine})"
        )
        assert running["state"] == "running"  # violation = "report" (the default) stops nothing

        with cluster.client() as c:
            (node,) = c.nodes()
            findings = wait_for(
                lambda: [f for f in c.pitfalls()["findings"] if f["kind"] == "device-violation"],
                timeout=10,
                what="the device-violation pitfall",
            )
        assert node["confinement"] == {"mode": "none", "reason": "simulated GPUs have no device nodes to fence"}
        assert node["violations"] == [
            {"job": job["id"], "user": running["user"], "rank": 0, "pid": pid, "device": other, "allowed": [mine]}
        ]
        assert [(f["job"], f["uuid"], f["severity"]) for f in findings] == [(job["id"], other, "critical")]
        assert not [f for f in c_findings(cluster) if f["kind"] == "foreign-process" and f["uuid"] == other]

        shown = subprocess.run(
            [sys.executable, "-m", "labgang.launcher", "nodes", "--gpus", "--state-dir", str(cluster.coord_dir)],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert "confined: NO (simulated GPUs have no device nodes to fence)" in shown
        assert f"VIOLATION: job {job['id']} rank 0 pid {pid} not given it" in shown

        (cluster.base / "go").write_text("")
        assert cluster.wait_state(job["id"], {"succeeded", "failed"})["state"] == "succeeded"
        assert cluster.wait_state(well_behaved["id"], {"succeeded", "failed"})["state"] == "succeeded"
        assert violations_of(cluster, well_behaved["id"]) == []  # a rank on its own GPU is no violation
        assert len(violations_of(cluster, job["id"])) == 1  # reported once, though seen in every inventory
        assert "ranks NOT confined to their devices (simulated GPUs have no device nodes to fence)" in (
            cluster.log_text("agent-n1")
        )
    finally:
        cluster.stop()


def c_findings(cluster: Cluster) -> list[dict]:
    with cluster.client() as c:
        return c.pitfalls()["findings"]


def test_kill_stops_the_job_and_fails_it_with_the_reason() -> None:
    cluster = Cluster({"n1": NODE_FILE}, config_extra='violation = "kill"\n').start()
    try:
        job = cluster.submit(trespasser(sim_uuids(NODE_FILE)), gpus_per_worker=1, grace_s=1.0)
        done = cluster.wait_state(job["id"], {"succeeded", "failed", "cancelled"}, timeout=20)
        other, mine = (cluster.base / "other").read_text().split()
        assert done["state"] == "failed"
        assert done["reason"]["message"].startswith('device violation (violation = "kill"): rank 0 on n1 (pid ')
        assert f"used device {other}, which it was not given (its devices: {mine})" in done["reason"]["message"]
        events = [h["event"] for h in done["history"]]
        assert events.index("device-violation") < events.index("stopping")
        assert not (cluster.base / "go").exists()  # it never got to finish on its own
        assert done["ranks"][0]["exit_status"] == 128 + 15  # SIGTERM
    finally:
        cluster.stop()


def test_a_bad_violation_policy_is_refused_naming_the_key(tmp_path: Path) -> None:
    cfg = tmp_path / "cluster.toml"
    cfg.write_text('violation = "warn"\n[[queues]]\nname = "default"\nnominal = { gpu = 1 }\n')
    done = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "config", "check", str(cfg)],
        capture_output=True,
        text=True,
        check=False,
        env=dict(os.environ),
    )
    assert done.returncode != 0
    assert "violation" in done.stderr + done.stdout
    assert "'report'" in done.stderr + done.stdout and "'kill'" in done.stderr + done.stdout
