"""Each rank's start and end instants, from the agent's report to the store and ``labgang show``:
a real coordinator, two real agents (simulated 4-GPU nodes), real ranks stamping their own
start; and the store keeping the instants (an older store's ``ranks`` table gains the columns)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from harness import Cluster
from labgang.launcher.coordinator.store import JobStatus, RankRecord, Store
from labgang.launcher.lifecycle.states import RankPhase

from tests.coordinator.test_store import spec

NODES = {"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"}


def test_the_store_keeps_each_ranks_start_and_end_instants(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    job = store.insert_job(spec(), JobStatus(submit_time=1.0, pending_since=1.0))
    job.ranks = {
        0: RankRecord(0, "n1", ("GPU-a",), RankPhase.EXITED, 42, 0, start_time=10.125, end_time=20.5),
        1: RankRecord(1, "n2", ("GPU-b",), RankPhase.RUNNING, 43, None, start_time=10.25),
    }
    for rank in job.ranks.values():
        store.save_rank(job, rank)
    store.close()
    [loaded] = Store(tmp_path / "db").load_jobs()
    assert loaded.ranks == job.ranks


def test_a_store_written_before_rank_instants_gains_them_empty(tmp_path: Path) -> None:
    db = sqlite3.connect(tmp_path / "db")
    db.execute(
        "CREATE TABLE ranks (job_id TEXT NOT NULL, attempt INTEGER NOT NULL, rank INTEGER NOT NULL, node TEXT NOT NULL,"
        " devices TEXT NOT NULL, state TEXT NOT NULL, pid INTEGER, exit_status INTEGER,"
        " PRIMARY KEY (job_id, attempt, rank))"
    )
    db.execute("INSERT INTO ranks VALUES ('1', 0, 0, 'n1', '[\"GPU-a\"]', 'running', 42, NULL)")
    db.commit()
    db.close()
    store = Store(tmp_path / "db")
    job = store.insert_job(spec(), JobStatus(submit_time=1.0, pending_since=1.0))
    assert job.id == "1"
    store.commit()
    [loaded] = store.load_jobs()
    assert loaded.ranks[0] == RankRecord(0, "n1", ("GPU-a",), RankPhase.RUNNING, 42, None, None, None)


@pytest.mark.slow
def test_show_gives_each_ranks_start_and_end_as_the_ranks_saw_them() -> None:
    cluster = Cluster(NODES)
    try:
        cluster.start()
        out = cluster.base / "out"
        out.mkdir()
        stamp = f"echo $EPOCHREALTIME > {out}/start-$RANK; sleep 0.3; echo $EPOCHREALTIME > {out}/end-$RANK"
        job = cluster.submit(["/usr/bin/bash", "-c", stamp], workers=2, gpus_per_worker=4)
        done = cluster.wait_state(job["id"], {"succeeded", "failed"})
        assert done["state"] == "succeeded", done
        shown = cluster.cli("show", job["id"], "--json")
        assert shown.returncode == 0, shown.stderr
        ranks = json.loads(shown.stdout)["job"]["ranks"]
        assert [(r["rank"], r["node"]) for r in ranks] == [(0, "n1"), (1, "n2")]
        for r in ranks:
            began = float((out / f"start-{r['rank']}").read_text())
            ended = float((out / f"end-{r['rank']}").read_text())
            # the start: when its small parent saw the exec succeed (about when the rank's first
            # line ran, a little before or after it); the end: after the rank's last line
            # (tests/lifecycle/test_rank_instants.py pins that these are the agent's instants)
            assert abs(r["start_time"] - began) < 0.25, (r, began)
            assert ended <= r["end_time"] < ended + 0.5, (r, ended)
        text = cluster.cli("show", job["id"])
        assert text.returncode == 0, text.stderr
        header = next(line for line in text.stdout.splitlines() if line.startswith("RANK"))
        assert "START" in header.split() and "END" in header.split()
        spread = abs(ranks[1]["start_time"] - ranks[0]["start_time"])
        first = 0 if ranks[0]["start_time"] <= ranks[1]["start_time"] else 1
        assert f"Rank starts: within {spread:.3f} s (rank {first} first, rank {1 - first} last, 2 ranks)" in text.stdout
        print(f"start spread of a two-node gang as show reports it: {spread * 1e3:.1f} ms")
    finally:
        cluster.stop()
