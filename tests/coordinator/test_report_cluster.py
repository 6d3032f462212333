"""Accounting against real daemons (a coordinator and a simulated-GPU agent as subprocesses, the
``labgang`` CLI as a user runs it): a preempted attempt and a cancelled one are both counted in
``labgang report``, ``history --attempts`` lists them, the counters on ``/metrics`` agree, and a
time-limited job ends TIMEOUT (``history -s TO`` finds it)."""

from __future__ import annotations

import csv
import io
import json
import urllib.request

import pytest
from harness import Cluster, wait_for

SLEEPER = ["/bin/sh", "-c", "exec sleep 60"]


@pytest.fixture
def cluster():
    c = Cluster({"n1": "n1-4gpu.toml"}, nominal_gpus=4, queue_extra='within_queue = "lower-priority"\n').start()
    yield c
    c.stop()


def metric(cluster: Cluster, name: str, queue: str = "default") -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{cluster.port}/metrics", timeout=10) as r:
        text = r.read().decode()
    for line in text.splitlines():
        if line.startswith(f"{name}{{") and f'queue="{queue}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {name} for queue {queue} in /metrics")


def test_a_preempted_and_a_cancelled_attempt_both_count_in_report(cluster: Cluster) -> None:
    low = cluster.submit(SLEEPER, workers=1, gpus_per_worker=3, grace_s=0.5)["id"]
    cluster.wait_state(low, "running")
    high = cluster.submit(["true"], workers=1, gpus_per_worker=4, priority=10)["id"]
    cluster.wait_state(high, "succeeded", timeout=30)
    wait_for(
        lambda: (j := cluster.job(low))["state"] == "running" and j["restart_count"] == 1,
        timeout=30,
        what="the preempted gang running again",
    )
    cancel = cluster.cli("cancel", low)
    assert cancel.returncode == 0, cancel.stderr
    cluster.wait_state(low, "cancelled", timeout=30)

    out = cluster.cli("history", "--attempts", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["id"]: r for r in json.loads(out.stdout)["jobs"]}
    attempts = rows[low]["attempt_records"]
    assert [(a["attempt"], a["code"], a["gpus"]) for a in attempts] == [(0, "PR", 3), (1, "CA", 3)]
    assert all(a["gpu_hours"] > 0 and a["end_time"] is not None for a in attempts)
    assert rows[low]["gpu_hours"] == pytest.approx(sum(a["gpu_hours"] for a in attempts))
    table = cluster.cli("history", "--attempts")
    assert table.returncode == 0 and " PR " in table.stdout and " CA " in table.stdout, table.stdout

    out = cluster.cli("report", "--by", "queue", "--json")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    [default] = report["rows"]
    assert default["queue"] == "default" and default["attempts"] == 3  # both of low's, and high's
    expected = sum(r["gpu_hours"] for r in rows.values())
    assert default["gpu_hours"] == pytest.approx(expected, rel=1e-6)
    assert report["total"]["gpu_hours"] == pytest.approx(expected, rel=1e-6)

    out = cluster.cli("report", "--csv")
    assert out.returncode == 0, out.stderr
    lines = list(csv.DictReader(io.StringIO(out.stdout)))
    assert [line["user"] for line in lines][-1] == "total"
    assert float(lines[-1]["gpu_hours"]) == pytest.approx(expected, rel=1e-6)

    # the counter is the same sum, in seconds (nothing holds devices any more: it stays put)
    assert metric(cluster, "labgang_gpu_seconds_total") == pytest.approx(expected * 3600, rel=1e-6)

    both = cluster.cli("report", "--json", "--csv")
    assert both.returncode == 2 and "choose one" in both.stderr
    bad = cluster.cli("report", "--by", "node")
    assert bad.returncode == 2 and "--by: 'node' is not allowed; allowed: user, queue, team" in bad.stderr, bad.stderr


def test_a_time_limited_job_ends_timeout(cluster: Cluster) -> None:
    job = cluster.submit(SLEEPER, workers=1, gpus_per_worker=1, time_limit_s=1, grace_s=0.5)["id"]
    done = cluster.wait_state(job, {"timeout", "failed", "succeeded", "cancelled"}, timeout=30)
    assert done["state"] == "timeout" and done["reason"]["code"] == "timeout", done
    out = cluster.cli("history", "-s", "TO", "--json")
    assert out.returncode == 0, out.stderr
    assert [r["id"] for r in json.loads(out.stdout)["jobs"]] == [job]
    table = cluster.cli("history", "-s", "to")
    assert table.returncode == 0 and "TIMEOUT" in table.stdout, table.stdout


def test_a_job_preempted_then_cancelled_while_pending_keeps_its_start_and_its_PR_attempt_is_found(
    cluster: Cluster,
) -> None:
    """A new user's findings: such a job's START was ``-`` while ELAPSED and GPU-H counted its run,
    and ``history --attempts -s PR`` was refused although ``--attempts`` prints PR."""
    low = cluster.submit(SLEEPER, workers=1, gpus_per_worker=3, grace_s=0.5)["id"]
    cluster.wait_state(low, "running")
    high = cluster.submit(SLEEPER, workers=1, gpus_per_worker=4, priority=10, grace_s=0.5)["id"]
    cluster.wait_state(high, "running", timeout=30)
    cluster.wait_state(low, "pending", timeout=30)
    assert cluster.cli("cancel", low).returncode == 0
    cluster.wait_state(low, "cancelled", timeout=30)

    out = cluster.cli("history", "--attempts", "--json")
    assert out.returncode == 0, out.stderr
    row = {r["id"]: r for r in json.loads(out.stdout)["jobs"]}[low]
    [attempt] = row["attempt_records"]
    assert attempt["code"] == "PR" and attempt["start_time"] is not None
    assert row["start_time"] == attempt["start_time"] and row["elapsed_s"] > 0
    table = cluster.cli("history", "-s", "CA")
    assert table.returncode == 0, table.stderr
    [line] = [line for line in table.stdout.splitlines() if line.split()[0] == low]
    assert line.split()[6] != "-", table.stdout  # START (SUBMIT is 2 words)

    found = cluster.cli("history", "--attempts", "-s", "PR,RQ")
    assert found.returncode == 0, found.stderr
    assert [line.split()[:2] for line in found.stdout.splitlines()[1:]] == [[low, "0"]], found.stdout
    none = cluster.cli("history", "--attempts", "-s", "TO")
    assert none.returncode == 0 and none.stdout.count("\n") == 1, none.stdout  # the header only
    assert "no attempt of the jobs searched ended timeout" in none.stderr

    refused = cluster.cli("history", "-s", "PR")
    assert refused.returncode == 2, refused
    assert refused.stderr.strip().endswith(
        "-s/--state: preempted (PR) is how an attempt ended, not a job state; "
        "it goes with --attempts (history --attempts -s PR)"
    ), refused.stderr
    pending = cluster.cli("history", "--attempts", "-s", "PD")
    assert pending.returncode == 2 and "allowed with --attempts: running (R), succeeded (CD)" in pending.stderr
    assert cluster.cli("cancel", high).returncode == 0
