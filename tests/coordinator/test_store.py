"""The SQLite store: what is committed survives a kill -9, what is not was never acknowledged,
and a burst of writers shares a few commits."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from labgang.launcher.coordinator.store import JobSpec, JobStatus, RankRecord, Store
from labgang.launcher.lifecycle.records import HistoryEntry
from labgang.launcher.lifecycle.states import RankPhase
from labgang.launcher.model import JobState


def spec(name: str = "train") -> JobSpec:
    return JobSpec(
        name=name,
        user="alice",
        uid=1000,
        gid=1000,
        queue="default",
        priority=0,
        workers=2,
        per_worker=4,
        resource="gpu",
        gpu_model=None,
        nodes=None,
        argv=["python", "train.py"],
        env={"A": "1"},
        cwd="/tmp",
        grace_s=5.0,
        time_limit_s=None,
        requeue=True,
        signal=None,
    )


def test_round_trip_of_jobs_ranks_and_history(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    job = store.insert_job(spec(), JobStatus(submit_time=1.0, pending_since=1.0))
    job.history.append(HistoryEntry(1.0, "submitted", "by alice"))
    store.save_event(job.id, job.history[-1])
    job.status.state = JobState.RUNNING
    job.status.restart_count = 1
    job.ranks = {0: RankRecord(0, "n1", ("GPU-a", "GPU-b"), RankPhase.RUNNING, 42)}
    store.save_status(job)
    store.save_rank(job, job.ranks[0])
    store.add_decision(2.0, job.id, "admit", "admitted", "on n1")
    store.close()
    again = Store(tmp_path / "db")
    [loaded] = again.load_jobs()
    assert loaded.spec == job.spec and loaded.status == job.status
    assert loaded.ranks == job.ranks and loaded.history == job.history
    assert again.decisions(job.id) == [(2.0, "admit", "admitted", "on n1")]
    assert again.next_seq() == 2


def test_a_read_only_store_reads_and_refuses_every_write(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    job = store.insert_job(spec(), JobStatus(submit_time=1.0, pending_since=1.0))
    store.close()
    before = sorted(p.name for p in tmp_path.iterdir()), (tmp_path / "db").read_bytes()
    reader = Store(tmp_path / "db", read_only=True)
    assert [j.id for j in reader.find_jobs(user="alice")] == [job.id]
    reader.insert_job(spec("other"), JobStatus(submit_time=2.0, pending_since=2.0))
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        reader.close()  # its commit of the buffered job is refused
    assert (sorted(p.name for p in tmp_path.iterdir()), (tmp_path / "db").read_bytes()) == before
    with pytest.raises(sqlite3.OperationalError):
        Store(tmp_path / "missing", read_only=True)
    assert not (tmp_path / "missing").exists()


def test_acknowledged_writes_survive_kill9_and_unacknowledged_ones_are_absent(tmp_path: Path) -> None:
    script = textwrap.dedent(f"""
        import asyncio, os, signal
        from test_store import spec
        from labgang.launcher.coordinator.store import JobStatus, Store

        async def main():
            store = Store({str(tmp_path / "db")!r})
            for i in range(50):
                store.insert_job(spec(f"acked-{{i}}"), JobStatus())
            await store.durable()
            print("acked", flush=True)
            store.insert_job(spec("never-acked"), JobStatus())
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
    """)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent)}  # the child imports this module's spec()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30, env=env)
    assert proc.returncode == -9 and proc.stdout.strip() == "acked", proc.stderr
    names = [j.spec.name for j in Store(tmp_path / "db").load_jobs()]
    assert names == [f"acked-{i}" for i in range(50)]


async def test_concurrent_writers_share_commits(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")

    async def submit(i: int) -> None:
        store.insert_job(spec(f"j{i}"), JobStatus())
        await store.durable()

    await asyncio.gather(*(submit(i) for i in range(500)))
    assert store.count_jobs() == 500
    assert store.commits <= 5
    store.close()


def test_the_database_is_readable_only_by_its_owner(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    store.insert_job(spec(), JobStatus())
    store.commit()
    for name in ("db", "db-wal"):
        assert (tmp_path / name).stat().st_mode & 0o077 == 0, name
    store.close()


def test_a_version_1_database_gets_the_time_columns_from_each_status(tmp_path: Path) -> None:
    import json
    import sqlite3

    db = sqlite3.connect(tmp_path / "db")
    db.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "INSERT INTO meta VALUES ('schema', '1');"
        "CREATE TABLE jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT UNIQUE NOT NULL, user TEXT NOT NULL,"
        " queue TEXT NOT NULL, state TEXT NOT NULL, spec TEXT NOT NULL, status TEXT NOT NULL);"
    )
    done = JobStatus(state=JobState.SUCCEEDED, submit_time=10.0, end_time=20.0, restart_count=2)
    db.execute(
        "INSERT INTO jobs VALUES (1, '1', 'alice', 'default', 'succeeded', ?, ?)",
        (json.dumps(spec().to_dict()), done.to_json().replace(',"attempt":0', "").replace(',"admit_seq":0', "")),
    )
    db.commit()
    db.close()
    store = Store(tmp_path / "db")
    assert store.load_jobs(active_only=True) == []
    [old] = store.find_jobs(since=15.0, until=15.0)
    assert (old.status.end_time, old.status.restart_count, old.attempt) == (20.0, 2, 2)  # attempts were restarts
    assert store.find_jobs(since=21.0) == [] and store.find_jobs(until=9.0) == []
    store.close()


def test_a_job_not_ended_is_in_an_interval_only_up_to_now(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    running = store.insert_job(spec("running"), JobStatus(state=JobState.RUNNING, submit_time=10.0, start_time=20.0))
    store.save_status(running)
    ended = store.insert_job(spec("ended"), JobStatus(state=JobState.SUCCEEDED, submit_time=10.0, end_time=40.0))
    store.save_status(ended)
    store.commit()
    names = lambda **kw: [j.spec.name for j in store.find_jobs(**kw)]  # noqa: E731
    assert names(since=50.0, now=100.0) == ["running"]  # running from 10 until now (100)
    assert names(since=200.0, now=100.0) == []  # since is in the future: nothing ran then yet
    assert names(since=100.0, until=300.0, now=100.0) == ["running"]  # running at the instant now
    assert names(since=30.0, until=35.0, now=100.0) == ["running", "ended"]
    store.close()


def test_find_jobs_by_id_takes_a_job_a_task_or_every_task_of_an_array(tmp_path: Path) -> None:
    """``history -j``: ``12`` names job 12 or array 12's tasks, never job 120 or array 121's tasks."""
    store = Store(tmp_path / "db")
    for job_id in ("12_0", "12_1", "120", "121_0", "5"):
        store.insert_job(spec(job_id), JobStatus(submit_time=1.0), job_id=job_id)
    store.commit()
    ids = lambda *asked: [j.id for j in store.find_jobs(ids=asked)]  # noqa: E731
    assert ids("12") == ["12_0", "12_1"]
    assert ids("12_1", "5") == ["12_1", "5"]  # submission order
    assert ids("120") == ["120"] and ids("121") == ["121_0"] and ids("7") == []
    assert [j.id for j in store.find_jobs(ids=("12", "5"), limit=2)] == ["12_1", "5"]  # the most recent
    store.close()
