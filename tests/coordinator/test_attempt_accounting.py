"""Accounting records per start attempt, in process on a fake clock with a real SQLite store:
every attempt's GPU-seconds count (preempted, requeued, cancelled), WAIT is time pending, the
records survive a coordinator restart, and a store written before attempt records is migrated."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from labgang.launcher.coordinator import views
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Preempt
from labgang.launcher.scheduler.snapshot import RankPlacement
from lifecycle_driver import ROOT, advance, clock_of, decide, event, make_coord


@pytest.fixture
def coord(tmp_path: Path) -> Iterator[Coordinator]:
    yield from make_coord(tmp_path)


THREE = (RankPlacement(0, "n1", ("GPU-a", "GPU-b", "GPU-c")),)


def admit3(coord: Coordinator, job_id: str) -> None:
    decide(coord, CycleResult(admitted=(Admit(job_id, THREE),), preempted=(), pending=()))


def preempt(coord: Coordinator, victim: str, by: str) -> None:
    decide(coord, CycleResult(admitted=(), preempted=(Preempt(by, (victim,), "priority 10 > 0"),), pending=()))


async def test_a_job_preempted_after_10s_on_3_gpus_then_cancelled_counts_its_30_gpu_seconds(
    coord: Coordinator,
) -> None:
    job = (await coord.desk.submit(ROOT, {"argv": ["train"], "workers": 1, "gpus_per_worker": 3})).id
    other = (await coord.desk.submit(ROOT, {"argv": ["urgent"], "workers": 1, "gpus_per_worker": 3})).id
    advance(coord, 5)  # pending 5 s
    admit3(coord, job)
    event(coord, "n1", job, 0, "started")
    advance(coord, 10)  # held 10 s
    preempt(coord, job, other)
    event(coord, "n1", job, 0, "gone", 143)  # gone at once: 10 s of 3 devices
    assert coord.jobs[job].status.state == JobState.PENDING
    advance(coord, 20)  # pending again, 20 s
    await coord.desk.cancel(ROOT, job)
    assert coord.jobs[job].status.state == JobState.CANCELLED
    await coord.store.durable()

    [record] = await coord.desk.history(ROOT, user="all", states=("cancelled",))
    attempts = await coord.desk.attempts_of([record])
    row = views.history_view(record, clock_of(coord).now, attempts[job], per_attempt=True)
    assert row["gpu_hours"] == pytest.approx(30 / 3600)  # ~0.01 GPU-H, not "-"
    assert row["wait_s"] == pytest.approx(25.0)  # 5 s before the attempt + 20 s after the requeue
    assert row["elapsed_s"] == pytest.approx(10.0)
    [first] = row["attempt_records"]
    assert (first["attempt"], first["outcome"], first["code"], first["gpus"]) == (0, "preempted", "PR", 3)
    assert first["devices"] == ["n1/GPU-a", "n1/GPU-b", "n1/GPU-c"]
    assert "preempted by job" in first["reason"]


async def test_a_requeued_and_then_finished_job_sums_both_attempts_and_survives_a_restart(
    coord: Coordinator, tmp_path: Path
) -> None:
    job = (await coord.desk.submit(ROOT, {"argv": ["train"], "workers": 1, "gpus_per_worker": 3})).id
    other = (await coord.desk.submit(ROOT, {"argv": ["urgent"], "workers": 1, "gpus_per_worker": 3})).id
    admit3(coord, job)
    event(coord, "n1", job, 0, "started")
    advance(coord, 100)
    preempt(coord, job, other)
    advance(coord, 2)  # the grace period: devices still held
    event(coord, "n1", job, 0, "gone", 143)
    advance(coord, 50)
    admit3(coord, job)
    event(coord, "n1", job, 0, "started")
    advance(coord, 60)
    event(coord, "n1", job, 0, "exited", 0)
    event(coord, "n1", job, 0, "gone", 0)
    assert coord.jobs[job].status.state == JobState.SUCCEEDED
    coord.store.commit()
    coord.store.close()

    # a new coordinator on the same file reads the same records
    again = Store(tmp_path / "db")
    try:
        recs = again.attempts_of([job])[job]
        assert [(r.attempt, r.outcome, r.gpus) for r in recs] == [(0, "preempted", 3), (1, "succeeded", 3)]
        assert [r.gpu_seconds(0.0) for r in recs] == [pytest.approx(3 * 102), pytest.approx(3 * 60)]
        [loaded] = again.find_jobs(user="root")[:1]
        row = views.history_view(loaded, 0.0, recs)
        assert row["gpu_hours"] == pytest.approx(3 * 162 / 3600)
        assert row["wait_s"] == pytest.approx(50.0)
    finally:
        again.close()


async def test_a_running_attempt_counts_until_now_and_is_reloaded_with_its_job(coord: Coordinator, tmp_path) -> None:
    job = (await coord.desk.submit(ROOT, {"argv": ["train"], "workers": 1, "gpus_per_worker": 3})).id
    admit3(coord, job)
    event(coord, "n1", job, 0, "started")
    advance(coord, 40)
    coord.store.commit()
    [loaded] = Store(tmp_path / "db").load_jobs(active_only=True)
    rec = loaded.attempt_record
    assert rec is not None and (rec.attempt, rec.outcome, rec.end_time) == (0, "running", None)
    assert rec.gpu_seconds(clock_of(coord).now) == pytest.approx(120.0)


async def test_a_time_limited_job_ends_timeout_and_its_attempt_says_TO(coord: Coordinator) -> None:
    job = (
        await coord.desk.submit(ROOT, {"argv": ["train"], "workers": 1, "gpus_per_worker": 3, "time_limit_s": 30})
    ).id
    admit3(coord, job)
    event(coord, "n1", job, 0, "started")
    advance(coord, 31)
    coord.node_events.check_timers()
    event(coord, "n1", job, 0, "gone", 143)
    assert coord.jobs[job].status.state == JobState.TIMEOUT
    [rec] = (await coord.desk.attempts_of([coord.jobs[job]]))[job]
    assert (rec.outcome, rec.view(0.0)["code"]) == ("timeout", "TO")
    await coord.store.durable()
    assert [j.id for j in await coord.desk.history(ROOT, user="all", states=("timeout",))] == [job]


def test_a_schema_2_store_gets_a_record_for_each_admitted_jobs_last_attempt(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    db = sqlite3.connect(path)
    db.executescript(
        """
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        INSERT INTO meta VALUES ('schema', '2');
        CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, user TEXT NOT NULL,
            queue TEXT NOT NULL, state TEXT NOT NULL, spec TEXT NOT NULL, status TEXT NOT NULL,
            submit_time REAL NOT NULL DEFAULT 0, end_time REAL);
        CREATE TABLE ranks (job_id TEXT NOT NULL, attempt INTEGER NOT NULL, rank INTEGER NOT NULL, node TEXT NOT NULL,
            devices TEXT NOT NULL, state TEXT NOT NULL, pid INTEGER, exit_status INTEGER,
            PRIMARY KEY (job_id, attempt, rank));
        """
    )
    spec = {
        "name": "x", "user": "alice", "uid": 1001, "gid": None, "queue": "default", "priority": 0, "workers": 1,
        "per_worker": 2, "resource": "gpu", "gpu_model": None, "nodes": None, "argv": ["x"], "env": {}, "cwd": "/",
        "grace_s": 1.0, "time_limit_s": None, "requeue": True, "signal": None,
    }  # fmt: skip
    done = {"state": "succeeded", "submit_time": 10.0, "pending_since": 10.0, "admit_time": 20.0,
            "start_time": 21.0, "end_time": 120.0, "attempt": 1, "reason_message": "all ranks exited"}  # fmt: skip
    never = {"state": "cancelled", "submit_time": 10.0, "pending_since": 10.0, "end_time": 15.0}
    for seq, status in ((1, done), (2, never)):
        db.execute(
            "INSERT INTO jobs VALUES (?,?,?,?,?,?,?,?,?)",
            (seq, str(seq), "alice", "default", status["state"], json.dumps(spec), json.dumps(status), 10.0, None),
        )
    db.execute("INSERT INTO ranks VALUES ('1', 1, 0, 'n1', '[\"GPU-a\", \"GPU-b\"]', 'gone', 5, 0)")
    db.commit()
    db.close()

    store = Store(path)
    try:
        got = store.attempts_of(["1", "2"])
        assert list(got) == ["1"]
        [rec] = got["1"]
        assert (rec.attempt, rec.outcome, rec.devices) == (1, "succeeded", ("n1/GPU-a", "n1/GPU-b"))
        assert rec.gpu_seconds(0.0) == pytest.approx(2 * 100.0)
        assert store.meta("schema") == "3"
    finally:
        store.close()
