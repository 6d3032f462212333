"""GET /v1/jobs pages come from an order kept in step with the jobs in memory (jobindex.SubmissionOrder):
every listing equals a fresh sort of those jobs, whatever came, finished or left memory in between."""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import pytest
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import core, handlers
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.jobindex import JobIndex, SubmissionOrder
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus

ROOT = Caller(uid=0, user="root", admin=True)
ALICE = Caller(uid=1000, user="alice")
CONFIG = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})
BODY = {"argv": ["true"], "workers": 1, "gpus_per_worker": 1}


def in_memory(coord: Coordinator) -> list[str]:
    """What a listing must hold: every job in memory, sorted by seq afresh."""
    return [j.id for j in sorted(coord.jobs.values(), key=lambda j: j.seq)]


async def paged(coord: Coordinator, caller: Caller, query: dict[str, str], limit: int) -> list[str]:
    """Every page of GET /v1/jobs, following next_cursor as the CLI does."""
    ids: list[str] = []
    cursor = ""
    while True:
        page_query = {**query, "limit": str(limit), **({"cursor": cursor} if cursor else {})}
        reply = await handlers.list_jobs(coord.config, coord.desk, coord.views, caller, {}, page_query, b"")
        assert reply.pieces is not None
        page = json.loads(b"".join(reply.pieces))
        assert len(page["jobs"]) <= limit
        ids += [j["id"] for j in page["jobs"]]
        if page["next_cursor"] is None:
            return ids
        assert page["next_cursor"] == page["jobs"][-1]["id"]
        cursor = page["next_cursor"]


async def test_pages_follow_submissions_finishes_and_evictions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "RECENT_FINISHED", 3)
    coord = Coordinator(CONFIG, Store(tmp_path / "db"))
    ids = [(await coord.desk.submit(ROOT, BODY)).id for _ in range(10)]
    assert await paged(coord, ROOT, {"all": "1"}, 3) == ids
    for job_id in ids[2:8]:  # six finish; the recent list keeps three, so three leave memory
        await coord.desk.cancel(ROOT, job_id)
    ids += [(await coord.desk.submit(ROOT, BODY)).id for _ in range(4)]
    expected = in_memory(coord)
    assert len(expected) == 14 - 3
    assert len(coord.order) == len(expected)  # kept in step, not rebuilt
    for limit in (1, 2, 5, 500):
        assert await paged(coord, ROOT, {"all": "1"}, limit) == expected
    coord.store.close()


async def test_a_page_filtered_by_owner_or_user_keeps_submission_order(tmp_path: Path) -> None:
    coord = Coordinator(CONFIG, Store(tmp_path / "db"))
    mine = []
    for i in range(9):
        who = ALICE if i % 3 else ROOT
        job = await coord.desk.submit(who, BODY)
        if who is ALICE:
            mine.append(job.id)
    assert await paged(coord, ALICE, {}, 2) == mine
    assert await paged(coord, ROOT, {"user": "alice"}, 4) == mine
    assert [j.id for j in coord.desk.list_jobs(ALICE, after=int(mine[2]))] == mine[3:]
    coord.store.close()


async def test_a_restarted_coordinator_lists_the_stored_active_jobs_in_order(tmp_path: Path) -> None:
    coord = Coordinator(CONFIG, Store(tmp_path / "db"))
    ids = [(await coord.desk.submit(ROOT, BODY)).id for _ in range(5)]
    coord.store.close()
    again = Coordinator(CONFIG, Store(tmp_path / "db"))
    assert await paged(again, ROOT, {"all": "1"}, 2) == ids
    again.store.close()


def _spec() -> JobSpec:
    return JobSpec(
        name="x", user="root", uid=0, gid=None, queue="default", priority=0, workers=1, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["true"], env={}, cwd="/tmp", grace_s=1.0,
        time_limit_s=None, requeue=True, signal=None,
    )  # fmt: skip


async def test_jobs_that_arrive_or_leave_unannounced_are_still_listed_right(tmp_path: Path) -> None:
    """A rule that adds a job to memory some other way (or drops one) costs a rebuild, never a wrong page."""
    coord = Coordinator(CONFIG, Store(tmp_path / "db"))
    ids = [(await coord.desk.submit(ROOT, BODY)).id for _ in range(6)]
    stray = JobRecord(id="100", seq=100, spec=_spec(), status=JobStatus())
    coord.model.jobs[stray.id] = stray  # not through apply(JobSubmitted)
    assert await paged(coord, ROOT, {"all": "1"}, 4) == [*ids, "100"]
    del coord.model.jobs[ids[4]], coord.model.jobs[ids[1]]  # gone without an announcement
    for late in ("101", "102"):  # the count is back to what the order holds
        coord.model.jobs[late] = JobRecord(id=late, seq=int(late), spec=_spec(), status=JobStatus())
    expected = in_memory(coord)
    assert expected == [ids[0], ids[2], ids[3], ids[5], "100", "101", "102"]
    assert len(coord.order) == len(expected)
    assert await paged(coord, ROOT, {"all": "1"}, 2) == expected
    coord.store.close()


def test_the_order_keeps_jobs_that_share_a_sequence_number_apart() -> None:
    """Two jobs with one ``seq`` (not made by the coordinator today) are both kept and removed by id."""
    order = SubmissionOrder()
    first, twin, later = (
        JobRecord(id=i, seq=s, spec=_spec(), status=JobStatus()) for i, s in (("5", 5), ("5_1", 5), ("6", 6))
    )
    for job in (later, first, twin, first):  # out of order, one twice
        order.add(job)
    jobs = JobIndex({j.id: j for j in (first, twin, later)}, OrderedDict())
    assert [j.id for j in order.after(jobs, 0)] == ["5", "5_1", "6"] and len(order) == 3
    order.discard(twin)
    assert [j.id for j in order.after(JobIndex({"5": first, "6": later}, OrderedDict()), 0)] == ["5", "6"]
