"""``GET /v1/history`` rules, in process: own jobs by default, others' for anyone asking, filters,
finished jobs read from the store, and the computed columns."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import views
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState

ALICE = Caller(uid=1001, user="alice")
BOB = Caller(uid=1002, user="bob")
ADMIN = Caller(uid=0, user="root", admin=True)
CONFIG = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}, {"name": "big", "nominal": {"gpu": 8}}]})


def _spec(user: str, queue: str = "default", workers: int = 2) -> JobSpec:
    return JobSpec(
        name=f"{user}-job", user=user, uid=1001 if user == "alice" else 1002, gid=None, queue=queue, priority=0,
        workers=workers, per_worker=2, resource="gpu", gpu_model=None, nodes=None, argv=["true"], env={},
        cwd="/tmp", grace_s=1.0, time_limit_s=None, requeue=True, signal=None,
    )  # fmt: skip


@pytest.fixture
def coord(tmp_path: Path):
    store = Store(tmp_path / "db")
    # alice: a job that ran an hour (submitted at 1000, waited 600 s) and one cancelled while pending
    store.insert_job(
        _spec("alice"),
        JobStatus(state=JobState.SUCCEEDED, submit_time=1000.0, start_time=1600.0, end_time=5200.0, exit_status=0),
    )
    store.insert_job(_spec("alice", "big"), JobStatus(state=JobState.CANCELLED, submit_time=9000.0, end_time=9100.0))
    store.insert_job(
        _spec("bob"), JobStatus(state=JobState.FAILED, submit_time=2000.0, start_time=2001.0, end_time=2101.0)
    )
    store.commit()
    c = Coordinator(CONFIG, store, clock=lambda: 10_000.0)
    yield c
    store.close()


async def test_own_jobs_by_default_and_anyone_reads_others_as_in_queue_and_show(coord: Coordinator) -> None:
    assert [j.spec.user for j in await coord.desk.history(ALICE)] == ["alice", "alice"]
    assert [j.spec.user for j in await coord.desk.history(BOB)] == ["bob"]
    # one rule with queue -u, show and report (sacct without PrivateData): a decided policy change
    assert [j.id for j in await coord.desk.history(ALICE, user="bob")] == ["3"]
    assert [j.id for j in await coord.desk.history(ALICE, user="all")] == ["1", "2", "3"]
    assert [j.id for j in await coord.desk.history(ADMIN, user="all")] == ["1", "2", "3"]
    assert [j.id for j in await coord.desk.history(ADMIN, user="bob")] == ["3"]


async def test_an_admin_without_user_reads_every_users_history_as_sacct_shows_root(coord: Coordinator) -> None:
    """root and a user of ``admins`` (the caller the coordinator builds from the config) see every
    user's jobs by default; anyone else their own."""
    from labgang.launcher.coordinator.routes import caller_for_uid

    assert [j.id for j in await coord.desk.history(ADMIN)] == ["1", "2", "3"]
    assert ADMIN.history_user(None) is None and ALICE.history_user(None) == "alice"
    config = parse_config({"queues": [{"name": "default"}], "admins": ["carol"]})
    carol = Caller(uid=1003, user="carol", admin=config.is_admin("carol"))
    assert [j.id for j in await coord.desk.history(carol)] == ["1", "2", "3"]
    assert caller_for_uid(config, 0).history_user(None) is None  # root is an admin of every config


async def test_filters_by_queue_state_and_time_window(coord: Coordinator) -> None:
    def ids(jobs: list[JobRecord]) -> list[str]:
        return [j.id for j in jobs]

    assert ids(await coord.desk.history(ADMIN, user="all", queue="big")) == ["2"]
    assert ids(await coord.desk.history(ADMIN, user="all", states=("failed", "succeeded"))) == ["1", "3"]
    # running or waiting at some point in [5000, 8000]: only job 1 (ended 5200)
    assert ids(await coord.desk.history(ADMIN, user="all", since=5000.0, until=8000.0)) == ["1"]
    assert ids(await coord.desk.history(ADMIN, user="all", until=1500.0)) == ["1"]
    assert ids(await coord.desk.history(ADMIN, user="all", limit=2)) == ["2", "3"]  # the most recently submitted


async def test_current_jobs_appear_with_their_state_in_memory(coord: Coordinator) -> None:
    job = await coord.desk.submit(ALICE, {"argv": ["x"], "workers": 1, "gpus_per_worker": 1})
    await coord.desk.cancel(ALICE, job.id)  # not committed yet: the history shows the memory's state
    [row] = [j for j in await coord.desk.history(ALICE) if j.id == job.id]
    assert row.status.state == JobState.CANCELLED


async def test_computed_columns(coord: Coordinator) -> None:
    [done, cancelled] = await coord.desk.history(ALICE)
    row = views.history_view(done, now=10_000.0)
    assert (row["wait_s"], row["elapsed_s"], row["gpu_hours"]) == (600.0, 3600.0, 4.0)  # 2 x 2 GPUs x 1 h
    assert (row["exit_status"], row["restart_count"], row["attempts"]) == (0, 0, 1)
    never = views.history_view(cancelled, now=10_000.0)
    assert (never["wait_s"], never["elapsed_s"], never["gpu_hours"]) == (100.0, None, None)
