"""The coordinator's side of job dependencies, in process with a real SQLite store: finished jobs
a dependency names are found in memory or in the store (array tasks by id range), unknown ids are
refused, a held job is never in the scheduler's snapshot, and ``kill_invalid_depend`` is read
from the cluster config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import core
from labgang.launcher.coordinator.core import Coordinator, lifecycle_policy
from labgang.launcher.coordinator.errors import BadRequest, NotFound
from labgang.launcher.coordinator.requests import Caller, build_spec
from labgang.launcher.coordinator.scheduling import build_snapshot
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.records import JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState

ROOT = Caller(uid=0, user="root", admin=True)
CONFIG = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})
BODY = {"argv": ["true"], "workers": 1, "gpus_per_worker": 1}


def _spec(dependency: str | None = None) -> JobSpec:
    return JobSpec(
        name="old", user="root", uid=0, gid=None, queue="default", priority=0, workers=1, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["true"], env={}, cwd="/tmp", grace_s=1.0,
        time_limit_s=None, requeue=True, signal=None, dependency=dependency,
    )  # fmt: skip


def test_the_store_finds_a_job_and_its_array_tasks_by_id_range(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    rows = [("12", JobState.SUCCEEDED), ("12_0", JobState.FAILED), ("12_1", JobState.SUCCEEDED)]
    rows += [("123", JobState.SUCCEEDED), ("12_2", JobState.RUNNING), ("13", JobState.CANCELLED)]
    with store._lock:  # ids as an array submission writes them (a single job's id is its sequence number)
        for seq, (job_id, state) in enumerate(rows, 1):
            status = JobStatus(state=state, submit_time=1.0)
            store._db.execute(
                "INSERT INTO jobs (seq, id, user, queue, state, spec, status, submit_time) VALUES (?,?,?,?,?,?,?,?)",
                (seq, job_id, "root", "default", state.value, json.dumps(_spec().to_dict()),
                 status.to_json(), 1.0),
            )  # fmt: skip
    found = {(j.id, j.status.state) for j in store.finished_matching(["12"])}
    assert found == {("12", JobState.SUCCEEDED), ("12_0", JobState.FAILED), ("12_1", JobState.SUCCEEDED)}
    assert [j.id for j in store.finished_matching(["12_1", "13", "77"])] == ["12_1", "13"]
    store.close()


async def test_a_submission_naming_no_job_is_refused_and_one_naming_an_old_job_reads_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(core, "RECENT_FINISHED", 1)
    coord = Coordinator(CONFIG, Store(tmp_path / "db"))
    ok = await coord.desk.submit(ROOT, BODY)
    await coord.desk.cancel(ROOT, ok.id)
    newer = await coord.desk.submit(ROOT, BODY)
    await coord.desk.cancel(ROOT, newer.id)
    await coord.flush()
    assert ok.id not in coord.jobs  # only in SQLite now
    with pytest.raises(NotFound) as refused:  # a refusal (404, exit 1), as `cancel 999` is
        await coord.desk.submit(ROOT, {**BODY, "dependency": "afterany:999"})
    assert (refused.value.message, refused.value.field) == ("dependency: no job 999 (in afterany:999)", "dependency")
    assert coord.store.count_jobs() == 2  # nothing was inserted
    waiter = await coord.desk.submit(ROOT, {**BODY, "dependency": f"afterany:{ok.id}"})
    assert waiter.status.state == JobState.PENDING and waiter.status.dependency_met
    doomed = await coord.desk.submit(ROOT, {**BODY, "dependency": f"afterok:{ok.id}"})
    assert doomed.status.state == JobState.CANCELLED
    assert doomed.status.reason_message == f"afterok:{ok.id} can never be satisfied (cancelled)"
    coord.store.close()


async def test_a_held_job_is_not_in_the_snapshot_until_its_dependency_holds(tmp_path: Path) -> None:
    coord = Coordinator(CONFIG, Store(tmp_path / "db"))
    first = await coord.desk.submit(ROOT, BODY)
    held = await coord.desk.submit(ROOT, {**BODY, "dependency": f"afternotok:{first.id}"})
    assert [p.id for p in build_snapshot(coord.driver, coord.clock()).pending] == [first.id]
    assert (held.status.reason_code, held.status.reason_message) == (
        "dependency",
        f"waits for afternotok:{first.id} (pending)",
    )
    await coord.desk.cancel(ROOT, first.id)
    assert [p.id for p in build_snapshot(coord.driver, coord.clock()).pending] == [held.id]
    coord.store.close()


async def test_a_restarted_coordinator_judges_a_held_job_against_the_store(tmp_path: Path) -> None:
    store = Store(tmp_path / "db")
    gone = store.insert_job(_spec(), JobStatus(state=JobState.FAILED, submit_time=1.0, end_time=2.0))
    running = store.insert_job(_spec(), JobStatus(state=JobState.PENDING, submit_time=3.0))
    held = store.insert_job(_spec(f"afterany:{gone.id}:{running.id}"), JobStatus(submit_time=4.0))
    store.commit()
    coord = Coordinator(CONFIG, store)
    assert coord.model.finished_targets.keys() == {gone.id}
    assert [p.id for p in build_snapshot(coord.driver, coord.clock()).pending] == [running.id]
    assert coord.model.held == {held.id: f"waits for afterany:{running.id} (pending)"}
    store.close()


def test_kill_invalid_depend_comes_from_the_cluster_config() -> None:
    assert lifecycle_policy(CONFIG).kill_invalid_depend is True
    off = parse_config({"kill_invalid_depend": False, "queues": [{"name": "default", "nominal": {"gpu": 8}}]})
    assert lifecycle_policy(off).kill_invalid_depend is False


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("afterok", "'afterok': afterok needs at least one job id"),
        ("afterok:1+5", "a delay after a job"),
        ("after:1+1000000000", "1000000000 minutes is out of range; allowed: after:ID+MINUTES with 0 to 5,256,000"),
        (7, "string"),
    ],
)
def test_a_malformed_dependency_is_one_line_on_its_field(text: object, names: str) -> None:
    with pytest.raises(BadRequest) as refused:
        build_spec({**BODY, "dependency": text}, ROOT, CONFIG)
    assert refused.value.field == "dependency" and names in refused.value.message
    assert "\n" not in refused.value.message
