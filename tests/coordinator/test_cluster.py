"""Multi-node tests on one machine: a real coordinator and two real agents (simulated 4-GPU
nodes n1 and n2) as subprocesses on loopback, real ranks via the real supervisor, the
real SQLite file, and the real Unix socket API."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from harness import SIM, Cluster, env_dump_script, rank_script, read_json, wait_for

pytestmark = pytest.mark.slow

NODES = {"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"}


def sim_uuids(name: str) -> set[str]:
    return {line.split('"')[1] for line in (SIM / name).read_text().splitlines() if line.startswith("uuid = ")}


def wait_go(then: str = "") -> str:
    """Rank code: write a 'started' marker, wait until the file 'go' exists, then run ``then``."""
    return (
        "base = os.environ['TEST_BASE']\n"
        "open(os.path.join(base, 'started-%s.%s-%s' % (os.environ['LABGANG_JOB_ID'],"
        " os.environ['LABGANG_RESTART_COUNT'], os.environ['RANK'])),"
        " 'a').write('x')\n"
        "while not os.path.exists(os.path.join(base, 'go')):\n"
        "    time.sleep(0.05)\n" + then
    )


@pytest.fixture
def cluster():
    c = Cluster(NODES)
    try:
        yield c.start()
    finally:
        c.stop()


def test_gang_spans_both_nodes_with_torchrun_variables(cluster: Cluster) -> None:
    out = cluster.base / "out"
    out.mkdir()
    job = cluster.submit(
        env_dump_script(str(out), "print('hello from rank', os.environ['RANK'])\n"), workers=2, gpus_per_worker=4
    )
    done = cluster.wait_state(job["id"], {"succeeded", "failed"})
    assert done["state"] == "succeeded", done
    assert done["exit_status"] == 0
    assert done["nodes"] == ["n1", "n2"]
    r0, r1 = read_json(out / "rank-0-0.json"), read_json(out / "rank-1-0.json")
    assert (r0["NODE_RANK"], r1["NODE_RANK"]) == ("0", "1")
    assert r0["LABGANG_JOB_ID"] == r1["LABGANG_JOB_ID"] == job["id"]  # the id `labgang queue` shows
    assert r0["WORLD_SIZE"] == r1["WORLD_SIZE"] == "2"
    assert r0["MASTER_ADDR"] == r1["MASTER_ADDR"] == "127.0.0.1"
    assert r0["MASTER_PORT"] == r1["MASTER_PORT"] and int(r0["MASTER_PORT"]) > 0
    d0, d1 = r0["CUDA_VISIBLE_DEVICES"].split(","), r1["CUDA_VISIBLE_DEVICES"].split(",")
    assert len(d0) == len(d1) == 4 and not set(d0) & set(d1)
    assert set(d0) == sim_uuids("n1-4gpu.toml") and set(d1) == sim_uuids("n2-4gpu.toml")
    with cluster.client() as c:
        chunk = c.logs(job["id"], rank=1)
    assert b"hello from rank 1" in chunk.data
    assert chunk.finished


def test_failing_rank_stops_the_gang_and_fails_the_job(cluster: Cluster) -> None:
    # Rank 1 fails once rank 0 runs (rank 0 says so with a marker file), so rank 0 is surely
    # stopped by the gang rule rather than never started, however slowly the machine starts them.
    code = (
        "import os, sys, time\n"
        "up = os.path.join(os.environ['TEST_BASE'], 'rank0-up')\n"
        "if os.environ['RANK'] == '1':\n"
        "    while not os.path.exists(up):\n"
        "        time.sleep(0.05)\n"
        "    sys.exit(3)\n"
        "open(up, 'w').close()\n"
        "time.sleep(60)\n"
    )
    job = cluster.submit(rank_script(code), workers=2, gpus_per_worker=4, grace_s=1.0)
    done = cluster.wait_state(job["id"], {"succeeded", "failed", "cancelled"}, timeout=20)
    assert done["state"] == "failed"
    assert done["exit_status"] == 3
    by_rank = {r["rank"]: r for r in done["ranks"]}
    assert by_rank[1]["exit_status"] == 3
    assert by_rank[0]["exit_status"] == 128 + signal.SIGTERM  # stopped by the gang rule, not run out
    assert "rank 1 on n2 exited with status 3" in done["reason"]["message"]


def test_refuses_agents_without_or_with_a_wrong_token(cluster: Cluster) -> None:
    async def try_link(headers: dict[str, str]) -> int:
        async with aiohttp.ClientSession() as s:
            with pytest.raises(aiohttp.WSServerHandshakeError) as info:
                await s.ws_connect(f"http://127.0.0.1:{cluster.port}/v1/agent/link", headers=headers)
            return info.value.status

    import asyncio

    assert asyncio.run(try_link({})) == 401
    assert asyncio.run(try_link({"Authorization": "Bearer not-the-token"})) == 401
    bad = cluster.base / "bad-token"
    bad.write_text("a-well-formed-but-wrong-token\n")  # well-formed: the coordinator must refuse it
    bad.chmod(0o600)
    cluster.nodes["n3"] = "n1-4gpu.toml"
    cluster.start_agent("n3", token_file=bad)
    wait_for(lambda: "refused the cluster token" in cluster.log_text("agent-n3"), what="agent n3 refused")
    log = cluster.log_text("coordinator")
    assert "refused agent link from 127.0.0.1: no cluster token" in log
    assert "refused agent link from 127.0.0.1: wrong cluster token" in log
    assert "n3" not in cluster.connected_nodes()


@pytest.fixture
def patient_cluster():
    """The cluster with the production node timeout (30 s): a coordinator restart on a loaded
    machine stays well within the node lease, so the agents keep their ranks running."""
    c = Cluster(NODES, node_timeout_s=30.0)
    try:
        yield c.start()
    finally:
        c.stop()


def test_coordinator_kill9_loses_nothing_and_starts_nothing_twice(patient_cluster: Cluster) -> None:
    cluster = patient_cluster
    gang = cluster.submit(rank_script("import os, time\n" + wait_go("print('done')\n")), workers=2, gpus_per_worker=4)
    cluster.wait_state(gang["id"], "running")
    queued = cluster.submit(rank_script("import os, time\n" + wait_go()), workers=2, gpus_per_worker=4)
    wait_for(lambda: cluster.job(queued["id"])["reason"] is not None, what="queued job has a reason")
    cluster.kill("coordinator")
    cluster.start_coordinator()
    # Both jobs are still known; the gang is still running (re-adopted from the agents' reports).
    wait_for(lambda: cluster.connected_nodes() == {"n1", "n2"}, timeout=20, what="agents reconnected")
    assert cluster.job(gang["id"])["state"] == "running"
    assert cluster.job(queued["id"])["state"] == "pending"
    (cluster.base / "go").write_text("go")
    done = cluster.wait_state(gang["id"], {"succeeded", "failed"}, timeout=20)
    assert done["state"] == "succeeded" and done["restart_count"] == 0
    after = cluster.wait_state(queued["id"], {"succeeded", "failed"}, timeout=20)
    assert after["state"] == "succeeded"
    started = sorted(p.name for p in cluster.base.glob("started-*"))
    g, q = gang["id"], queued["id"]
    assert started == sorted([f"started-{g}.0-0", f"started-{g}.0-1", f"started-{q}.0-0", f"started-{q}.0-1"])
    assert all((cluster.base / name).read_text() == "x" for name in started)  # each rank ran exactly once
    db = sqlite3.connect(cluster.coord_dir / "labgang.db")
    attempts = db.execute("SELECT job_id, attempt, rank, exit_status FROM ranks ORDER BY job_id, rank").fetchall()
    assert attempts == [(g, 0, 0, 0), (g, 0, 1, 0), (q, 0, 0, 0), (q, 0, 1, 0)]


def test_agent_kill9_keeps_ranks_running_and_reports_their_exit_after_restart(cluster: Cluster) -> None:
    job = cluster.submit(rank_script("import os, sys, time\n" + wait_go("sys.exit(0)\n")), workers=2, gpus_per_worker=4)
    cluster.wait_state(job["id"], "running")
    pid_n2 = wait_for(
        lambda: next(r["pid"] for r in cluster.job(job["id"])["ranks"] if r["node"] == "n2"),
        what="pid of rank 1 reported",
    )
    cluster.kill("agent-n2")
    os.kill(pid_n2, 0)  # the rank survived its agent
    (cluster.base / "go").write_text("go")  # both ranks exit 0; rank 1 while its agent is down
    wait_for(lambda: not os.path.exists(f"/proc/{pid_n2}") or _zombie(pid_n2), what="rank 1 exited")
    assert cluster.job(job["id"])["state"] == "running"  # rank 1's exit is not known yet
    cluster.start_agent("n2")
    done = cluster.wait_state(job["id"], {"succeeded", "failed"}, timeout=20)
    assert done["state"] == "succeeded", done
    assert [r["exit_status"] for r in done["ranks"]] == [0, 0]
    assert sorted(p.name for p in cluster.base.glob("started-*")) == [
        f"started-{job['id']}.0-0",
        f"started-{job['id']}.0-1",
    ]


@pytest.mark.timeout(120)
def test_a_gang_requeued_on_a_fence_that_ran_out_while_its_ranks_had_all_exited_0_ends_succeeded() -> None:
    """A 2-node gang: agent n2 is killed (SIGKILL) while its rank runs; both ranks then exit 0 on their own,
    n2's while nobody supervises it. Its fence runs out before the agent is back, so the coordinator counts
    that rank as stopped with its exit unknown and requeues the gang (docs/queue-semantics.md §A5). The
    restarted agent reports that the rank had exited 0: the attempt had finished, and the job, still
    waiting in its queue, ends succeeded and never starts again."""
    # A lease long enough that n2's small parent never fences its rank (it exits 0 at once after the kill).
    cluster = Cluster(NODES, node_timeout_s=5.0)
    try:
        cluster.start()
        job = cluster.submit(
            rank_script("import os, sys, time\n" + wait_go("sys.exit(0)\n")), workers=2, gpus_per_worker=4, grace_s=0.5
        )
        j = job["id"]
        cluster.wait_state(j, "running")
        pid_n2 = wait_for(
            lambda: next(r["pid"] for r in cluster.job(j)["ranks"] if r["node"] == "n2"), what="pid of rank 1 reported"
        )
        cluster.kill("agent-n2")
        (cluster.base / "go").write_text("go")  # both ranks exit 0; rank 1 while its agent is down
        wait_for(lambda: not os.path.exists(f"/proc/{pid_n2}") or _zombie(pid_n2), what="rank 1 exited")
        # The coordinator cannot know: n2 is lost, its fence runs out and the gang is requeued (§A5).
        requeued = cluster.wait_state(j, "pending", timeout=20)
        assert [h["event"] for h in requeued["history"]][-2:] == ["fence-expired", "requeued"], requeued["history"]
        cluster.start_agent("n2")
        done = cluster.wait_state(j, {"succeeded", "failed", "node_fail"}, timeout=20)
        assert done["state"] == "succeeded" and done["exit_status"] == 0, done["history"]
        events = [h["event"] for h in done["history"]]
        assert events.count("admitted") == 1, done["history"]  # never admitted again
        assert events[-2:] == ["rank-exited", "succeeded"], done["history"]
        assert "rank 1 on n2 exited with status 0" in done["history"][-2]["message"]
        # Each rank ran exactly once, and the store has only the first attempt's ranks.
        assert sorted(p.name for p in cluster.base.glob("started-*")) == [f"started-{j}.0-0", f"started-{j}.0-1"]
        db = sqlite3.connect(cluster.coord_dir / "labgang.db")
        assert db.execute("SELECT DISTINCT attempt FROM ranks WHERE job_id = ?", (j,)).fetchall() == [(0,)]
        # What people read back: the attempt that ran, succeeded (sacct's CD), its start kept.
        shown = cluster.cli_ok("show", j)
        assert re.search(r"^State:\s+SUCCEEDED$", shown, re.M) and re.search(r"^Started:\s+\d+s ago$", shown, re.M), (
            shown
        )
        attempts = cluster.cli_ok("history", "-j", j, "--attempts").splitlines()[1:]
        assert [(row.split()[1], row.split()[4]) for row in attempts] == [("0", "CD")], attempts  # ATTEMPT, STATE
        # ...with its nodes and ranks, their real exits, no restart, and its end when rank 1 really ended
        # (before the fence ran out), not when n2's restarted agent reported it.
        assert re.search(r"^Nodes:\s+n1,n2$", shown, re.M), shown
        view = cluster.job(j)
        assert [(r["rank"], r["node"], r["exit_status"]) for r in view["ranks"]] == [(0, "n1", 0), (1, "n2", 0)], view
        row = json.loads(cluster.cli_ok("history", "-j", j, "--json"))["jobs"][0]
        requeued_at = next(h["time"] for h in view["history"] if h["event"] == "requeued")
        assert (row["restart_count"], row["attempts"]) == (0, 1) and row["end_time"] < requeued_at, row
    finally:
        cluster.stop()


def test_silent_agent_is_lost_and_its_gang_requeued() -> None:
    cluster = Cluster(NODES, node_timeout_s=1.5)
    try:
        cluster.start()
        job = cluster.submit(rank_script("import os, time\n" + wait_go()), workers=2, gpus_per_worker=4, grace_s=0.5)
        cluster.wait_state(job["id"], "running")
        pid_n1 = wait_for(
            lambda: next(r["pid"] for r in cluster.job(job["id"])["ranks"] if r["node"] == "n1"),
            what="pid of rank 0 reported",
        )
        cluster.kill("agent-n2", signal.SIGSTOP)
        requeued = wait_for(
            lambda: (j := cluster.job(job["id"]))["restart_count"] == 1 and j, timeout=15, what="job requeued"
        )
        assert requeued["state"] == "pending"
        assert any(h["event"] == "stopping" and "node n2 lost" in h["message"] for h in requeued["history"])
        wait_for(lambda: not os.path.exists(f"/proc/{pid_n1}") or _zombie(pid_n1), what="rank 0 on n1 stopped")
        cluster.kill("agent-n2", signal.SIGCONT)
        # n2 answers again: its stale rank is stopped and the gang starts again as restart 1.
        again = cluster.wait_state(job["id"], "running", timeout=20)
        assert again["restart_count"] == 1
        (cluster.base / "go").write_text("go")
        done = cluster.wait_state(job["id"], {"succeeded", "failed"}, timeout=20)
        assert done["state"] == "succeeded"
        j = job["id"]
        assert sorted(p.name for p in cluster.base.glob("started-*")) == [
            f"started-{j}.0-0",
            f"started-{j}.0-1",
            f"started-{j}.1-0",
            f"started-{j}.1-1",
        ]
    finally:
        cluster.stop()


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[1].split()[0] == "Z"
    except OSError:
        return True


def test_preemption_stops_the_victim_with_grace_and_requeues_it() -> None:
    cluster = Cluster(NODES, queue_extra='within_queue = "lower-priority"\n')
    try:
        cluster.start()
        low = cluster.submit(
            rank_script("import os, time\n" + wait_go()), workers=2, gpus_per_worker=4, priority=0, grace_s=1.0
        )
        first = cluster.wait_state(low["id"], "running")
        high = cluster.submit(rank_script("import os, time\n" + wait_go()), workers=2, gpus_per_worker=4, priority=10)
        cluster.wait_state(high["id"], "running", timeout=20)
        victim = cluster.job(low["id"])
        assert victim["state"] == "pending" and victim["restart_count"] == 1
        assert victim["submit_time"] == first["submit_time"]
        assert any(
            h["event"] == "stopping" and f"preempted by job {high['id']}" in h["message"] for h in victim["history"]
        )
        (cluster.base / "go").write_text("go")
        cluster.wait_state(high["id"], "succeeded", timeout=20)
        rerun = cluster.wait_state(low["id"], "succeeded", timeout=20)
        assert rerun["restart_count"] == 1
        assert (cluster.base / f"started-{low['id']}.1-0").exists()  # LABGANG_RESTART_COUNT=1 attempt ran
    finally:
        cluster.stop()


def test_node_socket_forwards_to_the_coordinator_as_the_caller(cluster: Cluster) -> None:
    node_socket = cluster.agent_dir("n2") / "labgang.sock"
    with cluster.client(node_socket) as c:
        assert c.version()["uid"] == os.getuid()
        job = c.submit(
            {
                "argv": [sys.executable, "-c", "print('via n2')"],
                "cwd": str(cluster.base),
                "env": {"TEST_BASE": str(cluster.base)},
            }
        )
    assert job["uid"] == os.getuid()
    done = cluster.wait_state(job["id"], {"succeeded", "failed"})
    assert done["state"] == "succeeded"
    with cluster.client(node_socket) as c:
        assert b"via n2" in c.logs(job["id"], rank=0).data
        for _ in range(3):
            c.logs(job["id"], rank=0)
    # Requests are not logged at INFO (one line per `logs -f` poll would drown the log).
    for name in ("agent-n2", "coordinator"):
        requests = [line for line in cluster.log_text(name).splitlines() if "/v1/jobs/" in line]
        assert requests == [], requests


def test_a_rank_whose_command_cannot_run_fails_the_gang_with_127(cluster: Cluster) -> None:
    job = cluster.submit(
        [sys.executable, "-c", "pass"], workers=2, gpus_per_worker=4, cwd=str(cluster.base / "no-such-dir")
    )
    done = cluster.wait_state(job["id"], {"failed", "succeeded"}, timeout=30)
    assert (done["state"], done["exit_status"], done["restart_count"]) == ("failed", 127, 0)


def test_a_gang_refused_for_good_by_its_agents_fails_at_once(cluster: Cluster) -> None:
    """nobody (uid 65534) submits from a directory it cannot enter: every agent refuses the
    launch, a refusal retrying cannot change, so the job fails at once with the agents'
    reason (no requeue, no backoff)."""
    cluster.base.chmod(0o711)
    private = cluster.base / "private"
    private.mkdir(mode=0o700)
    body = json.dumps({"argv": ["true"], "workers": 2, "gpus_per_worker": 4, "cwd": str(private)})
    code = (  # the system interpreter and the standard library only: nobody cannot read the venv
        "import http.client, socket, sys\n"
        "class C(http.client.HTTPConnection):\n"
        "    def connect(self):\n"
        "        self.sock = socket.socket(socket.AF_UNIX); self.sock.connect(sys.argv[1])\n"
        "c = C('labgang'); c.request('POST', '/v1/jobs', sys.argv[2], {'Content-Type': 'application/json'})\n"
        "r = c.getresponse(); print(r.read().decode()); sys.exit(r.status != 201)\n"
    )
    out = subprocess.run(
        ["/usr/bin/python3", "-c", code, str(cluster.socket), body],
        user=65534,
        group=65534,
        capture_output=True,
        text=True,
        timeout=30,
        cwd="/",
    )
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)["job"]
    assert job["uid"] == 65534
    done = cluster.wait_state(job["id"], {"failed", "succeeded"}, timeout=30)
    assert done["state"] == "failed" and done["restart_count"] == 0, done
    assert "refused the launch (retrying would not help)" in done["reason"]["message"]
    assert "may not enter" in done["reason"]["message"]
    assert not any(h["event"] == "requeued" for h in done["history"])


def test_root_jobs_no_agent_allows_fail_at_once_then_are_refused_at_submission() -> None:
    """allow_root = false on the agents: a root job admitted before any agent said so fails at
    its first launch without retries; once the agents have said so, submission refuses it (403)."""
    from labgang.launcher.api.client import ApiError

    cluster = Cluster(NODES, agent_supervisor="allow_root = false\n")
    try:
        cluster.start_coordinator()
        job = cluster.submit(["true"], workers=1)  # no agent yet: nothing known to refuse it by
        for node in NODES:
            cluster.start_agent(node)
        done = cluster.wait_state(job["id"], {"failed", "succeeded"}, timeout=20)
        assert (done["state"], done["restart_count"]) == ("failed", 0), done
        assert "root jobs are off" in done["reason"]["message"]
        with pytest.raises(ApiError) as refused:
            cluster.submit(["true"], workers=1)
        assert refused.value.status == 403 and refused.value.field == "uid"
        assert "no node runs jobs as root" in refused.value.message
        assert "allow_root = false" in refused.value.message
    finally:
        cluster.stop()


def test_an_admission_recorded_just_before_a_crash_is_dispatched_after_the_restart() -> None:
    """The store says ADMITTED (placement recorded, nothing launched yet): the restarted
    coordinator dispatches it once rank 0's node is back, exactly once."""
    from labgang.launcher.coordinator.store import JobSpec, JobStatus, RankRecord, Store
    from labgang.launcher.model import JobState

    cluster = Cluster(NODES)
    try:
        n1, n2 = sorted(sim_uuids("n1-4gpu.toml")), sorted(sim_uuids("n2-4gpu.toml"))
        store = Store(cluster.coord_dir / "labgang.db")
        spec = JobSpec(
            name="crash",
            user="root",
            uid=os.getuid(),
            gid=None,
            queue="default",
            priority=0,
            workers=2,
            per_worker=4,
            resource="gpu",
            gpu_model=None,
            nodes=None,
            argv=rank_script("import os, time\n" + wait_go()),
            env={"TEST_BASE": str(cluster.base)},
            cwd=str(cluster.base),
            grace_s=1.0,
            time_limit_s=None,
            requeue=True,
            signal=None,
        )
        job = store.insert_job(
            spec, JobStatus(state=JobState.ADMITTED, submit_time=1.0, pending_since=1.0, admit_time=2.0)
        )
        job.ranks = {0: RankRecord(0, "n1", tuple(n1)), 1: RankRecord(1, "n2", tuple(n2))}
        for rank in job.ranks.values():
            store.save_rank(job, rank)
        store.close()
        cluster.start()
        cluster.wait_state(job.id, "running", timeout=20)
        (cluster.base / "go").write_text("go")
        done = cluster.wait_state(job.id, {"succeeded", "failed"}, timeout=20)
        assert done["state"] == "succeeded" and done["restart_count"] == 0
        assert sorted(p.name for p in cluster.base.glob("started-*")) == [
            f"started-{job.id}.0-0",
            f"started-{job.id}.0-1",
        ]
    finally:
        cluster.stop()
