"""Memory follows active work: finished jobs leave the lifecycle model and are read from SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import core
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.errors import NotFound
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.records import JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState

ROOT = Caller(uid=0, user="root", admin=True)
CONFIG = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})


def _spec(user: str = "alice") -> JobSpec:
    return JobSpec(
        name="old", user=user, uid=1000, gid=None, queue="default", priority=0, workers=1, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["true"], env={}, cwd="/tmp", grace_s=1.0,
        time_limit_s=None, requeue=True, signal=None,
    )  # fmt: skip


def _seed_finished(store: Store, n: int) -> list[str]:
    ids = []
    for i in range(n):
        status = JobStatus(state=JobState.SUCCEEDED, submit_time=float(i), start_time=i + 1.0, end_time=i + 2.0)
        ids.append(store.insert_job(_spec(), status).id)
    store.commit()
    return ids


async def test_a_restarted_coordinator_holds_only_active_jobs(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    old = _seed_finished(store, 50)
    waiting = store.insert_job(_spec(), JobStatus(submit_time=100.0, pending_since=100.0))
    store.commit()
    coord = Coordinator(CONFIG, store)
    assert list(coord.model.jobs) == [waiting.id]  # nothing finished in memory
    assert list(coord.jobs) == [waiting.id]
    assert coord.desk.get_job(old[7]).status.state == JobState.SUCCEEDED  # read from the store when asked
    with pytest.raises(NotFound):
        coord.desk.get_job("9999")
    assert coord.finished_counts == {("default", "succeeded"): 50}
    store.close()


async def test_a_job_that_finishes_leaves_the_model_and_the_recent_list_is_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core, "RECENT_FINISHED", 2)
    coord = Coordinator(CONFIG, Store(tmp_path / "db"))
    ids = [(await coord.desk.submit(ROOT, {"argv": ["x"], "workers": 1, "gpus_per_worker": 1})).id for _ in range(3)]
    for job_id in ids:
        await coord.desk.cancel(ROOT, job_id)
    assert coord.model.jobs == {}
    assert list(coord.recent) == ids[1:]  # the two newest finished stay in memory
    assert [j.id for j in coord.desk.list_jobs(ROOT, all_users=True)] == ids[1:]
    await coord.flush()
    assert coord.desk.get_job(ids[0]).status.state == JobState.CANCELLED  # the oldest from SQLite
    assert coord.finished_counts == {("default", "cancelled"): 3}
    coord.store.close()
