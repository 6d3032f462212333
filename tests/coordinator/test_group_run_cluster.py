"""A job of groups run end to end (issue 27, the run side): a real coordinator, two real agents
(simulated 4-GPU nodes) and real rank processes. A launcher-plus-workers job's ranks see their
groups and the global ranks; with ``success_policy = "group:launcher"`` it succeeds when the
launcher does and its workers are stopped; a rank failure restarts the whole job.

Jobs are submitted through the API (``groups`` in the body) and the CLI (``-f job.toml``)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import Cluster, rank_script

pytestmark = pytest.mark.slow

NODES = {"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"}
KEYS = (
    "RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LABGANG_GROUP", "LABGANG_GROUP_RANK",
    "LABGANG_GROUP_SIZE", "LABGANG_GROUPS", "LABGANG_GROUP_LAUNCHER_ADDR", "LABGANG_GROUP_WORKERS_ADDR",
    "SLURM_PROCID", "SLURM_HET_JOB_OFFSET", "SLURM_HET_SIZE", "SLURM_NTASKS_HET_GROUP_1", "ROLE",
    "LABGANG_RESTART_COUNT", "CUDA_VISIBLE_DEVICES",
)  # fmt: skip

# Every rank dumps its variables to env-<restart>-<rank>.json first.
DUMP = (
    "import json, os, sys, time\n"
    "base, rank, restart = os.environ['TEST_BASE'], os.environ['RANK'], os.environ['LABGANG_RESTART_COUNT']\n"
    f"keys = {list(KEYS)!r}\n"
    "path = os.path.join(base, f'env-{restart}-{rank}.json')\n"
    "open(path + '.tmp', 'w').write(json.dumps({k: os.environ.get(k) for k in keys}))\n"
    "os.replace(path + '.tmp', path)\n"
    "def seen(name):\n"
    "    return os.path.exists(os.path.join(base, name))\n"
)
# The launcher waits for every worker of its attempt to be up, then exits 0 (mpirun's way); with
# FAIL_ONCE set, in the first attempt it waits to be stopped (its worker rank 2 fails).
LAUNCHER = rank_script(
    DUMP + "while not (seen(f'env-{restart}-1.json') and seen(f'env-{restart}-2.json')):\n    time.sleep(0.05)\n"
    "while os.environ.get('FAIL_ONCE') and restart == '0':\n    time.sleep(0.05)\n"
)
# A worker runs until it is stopped; with FAIL_ONCE set, worker rank 2 fails the first attempt.
WORKER = rank_script(
    DUMP + "if os.environ.get('FAIL_ONCE') and restart == '0' and rank == '2':\n    sys.exit(5)\n"
    "while True:\n    time.sleep(0.05)\n"
)


def submit_job(cluster: Cluster, *, job_env: dict[str, str] | None = None, **policies: Any) -> str:
    """Submit a job of groups (launcher: 1 rank, no GPU; workers: 2 ranks x 2 GPUs) through the
    API; return its id."""
    groups = [
        {"name": "launcher", "workers": 1, "gpus_per_worker": 0, "argv": LAUNCHER, "env": {"ROLE": "launcher"}},
        {"name": "workers", "workers": 2, "gpus_per_worker": 2, "argv": WORKER, "env": {"ROLE": "worker"}},
    ]
    env = {"TEST_BASE": str(cluster.base), **(job_env or {})}
    with cluster.client() as c:
        job = c.submit({"cwd": str(cluster.base), "env": env, "groups": groups, **policies})
    return str(job["id"])


@pytest.fixture
def cluster():
    c = Cluster(NODES)
    try:
        yield c.start()
    finally:
        c.stop()


def env_of(base: Path, restart: int, rank: int) -> dict[str, str]:
    return json.loads((base / f"env-{restart}-{rank}.json").read_text())


def test_the_ranks_see_their_groups_and_the_job_succeeds_when_its_launcher_does(cluster: Cluster) -> None:
    job_id = submit_job(cluster, success_policy="group:launcher")
    done = cluster.wait_state(job_id, {"succeeded", "failed"}, timeout=40)
    assert done["state"] == "succeeded", done
    assert (done["exit_status"], done["reason"]["code"]) == (0, "completed")
    assert done["reason"]["message"] == (
        "group launcher succeeded (--success-policy group:launcher); the other ranks were stopped"
    )
    ranks = {r["rank"]: r for r in done["ranks"]}
    assert ranks[0]["exit_status"] == 0
    assert ranks[1]["exit_status"] != 0 and ranks[2]["exit_status"] != 0  # stopped by the launcher's success
    envs = {rank: env_of(cluster.base, 0, rank) for rank in (0, 1, 2)}
    seen = [
        (e["RANK"], e["WORLD_SIZE"], e["LABGANG_GROUP"], e["LABGANG_GROUP_RANK"], e["LABGANG_GROUP_SIZE"], e["ROLE"])
        for _, e in sorted(envs.items())
    ]
    assert seen == [
        ("0", "3", "launcher", "0", "1", "launcher"),
        ("1", "3", "workers", "0", "2", "worker"),
        ("2", "3", "workers", "1", "2", "worker"),
    ]
    master = {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs.values()}
    assert len(master) == 1 and next(iter(master))[0] == "127.0.0.1"  # global rank 0's, for every rank
    for rank, e in envs.items():
        assert e["LABGANG_GROUPS"] == "launcher,workers"
        assert e["LABGANG_GROUP_LAUNCHER_ADDR"] == e["LABGANG_GROUP_WORKERS_ADDR"] == "127.0.0.1"
        assert (e["SLURM_PROCID"], e["SLURM_HET_SIZE"], e["SLURM_NTASKS_HET_GROUP_1"]) == (str(rank), "2", "2")
        assert e["SLURM_HET_JOB_OFFSET"] == ("0" if rank == 0 else "1")
    assert envs[0]["CUDA_VISIBLE_DEVICES"] == ""  # the launcher asked for no GPU
    assert all(len(envs[r]["CUDA_VISIBLE_DEVICES"].split(",")) == 2 for r in (1, 2))


def test_a_rank_failure_restarts_the_whole_job_of_groups(cluster: Cluster) -> None:
    job_id = submit_job(
        cluster, job_env={"FAIL_ONCE": "1"}, success_policy="group:launcher", failure_policy="restart",
        max_restarts=1,
    )  # fmt: skip
    done = cluster.wait_state(job_id, {"succeeded", "failed"}, timeout=60)
    assert done["state"] == "succeeded", done
    assert done["restart_count"] == 1 and done["lifecycle_policy"]["restarts_used"] == 1
    for rank in (0, 1, 2):  # every rank ran again, the launcher and the worker that did not fail too
        assert env_of(cluster.base, 1, rank)["LABGANG_RESTART_COUNT"] == "1"
    events = [(h["event"], h["message"]) for h in done["history"]]
    requeued = [m for e, m in events if e == "requeued"]
    assert len(requeued) == 1 and requeued[0].startswith("rank 2 on ")
    assert "exited with status 5; restart 1 of 1 (--failure-policy restart)" in requeued[0]


def test_startup_order_from_a_job_file_launches_the_workers_after_the_launcher(cluster: Cluster) -> None:
    job_file = cluster.base / "job.toml"
    base = json.dumps(str(cluster.base))
    job_file.write_text(
        'success_policy = "group:launcher"\nstartup_order = ["launcher", "workers"]\n'
        f'[[group]]\nname = "launcher"\nranks = 1\ncommand = {json.dumps(LAUNCHER)}\n'
        f'env = {{ ROLE = "launcher", TEST_BASE = {base} }}\nresources = {{ gpus = 0 }}\n'
        f'[[group]]\nname = "workers"\nranks = 2\ncommand = {json.dumps(WORKER)}\n'
        f'env = {{ ROLE = "worker", TEST_BASE = {base} }}\nresources = {{ gpus = 2 }}\n'
    )
    submitted = cluster.cli("submit", "-f", str(job_file))
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    done = cluster.wait_state(job_id, {"succeeded", "failed"}, timeout=40)
    assert done["state"] == "succeeded", done
    assert done["lifecycle_policy"]["startup_order"] == ["launcher", "workers"]
    events = [(h["event"], h["message"]) for h in done["history"]]
    launching = [m for e, m in events if e == "group-launching"]
    assert len(launching) == 1 and launching[0].startswith("group workers: the groups before it started")
    order = [e for e, _ in events]
    assert order.index("group-launching") < order.index("running")  # the job ran once the workers started too
    shown = cluster.cli("show", job_id).stdout
    assert re.search(r"^Policies:\s+success group:launcher; startup order launcher,workers$", shown, re.M), shown


def test_a_startup_order_the_job_cannot_follow_is_refused_and_nothing_is_stored(cluster: Cluster) -> None:
    refused = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "submit", "--state-dir", str(cluster.coord_dir),
         "--startup-order", "g1,g0", "-n", "1", "-g", "0", "--", "true", ":", "-n", "1", "--", "true"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "labgang submit: --startup-order: begins with g1, not the first group g0 (its rank 0 is MASTER_ADDR) "
        "(allowed: an order beginning with g0; list the groups in the order they should start)"
    ]
    with cluster.client() as c:
        assert c.jobs() == []
