"""The coordinator's cache of encoded JobViews (GET /v1/jobs): it answers what job_view would,
however the job changed, and rebuilds nothing that did not change."""

from __future__ import annotations

import dataclasses
import json

from labgang.launcher.coordinator.store import HistoryEntry, JobRecord, JobSpec, JobStatus, RankRecord
from labgang.launcher.coordinator.view_cache import JobViewCache, page_body, page_pieces
from labgang.launcher.coordinator.views import job_view
from labgang.launcher.lifecycle.states import RankPhase
from labgang.launcher.model import JobState


def job(job_id: str, name: str = "train") -> JobRecord:
    spec = JobSpec(
        name=name,
        user="alice",
        uid=1000,
        gid=1000,
        queue="default",
        priority=0,
        workers=2,
        per_worker=1,
        resource="gpu",
        gpu_model=None,
        nodes=None,
        argv=["python", "train.py"],
        env={},
        cwd="/tmp",
        grace_s=5.0,
        time_limit_s=None,
        requeue=True,
        signal=None,
    )
    record = JobRecord(id=job_id, seq=int(job_id), spec=spec, status=JobStatus(submit_time=1.0))
    record.history.append(HistoryEntry(1.0, "submitted", "queue default"))
    return record


def listed(cache: JobViewCache, jobs: list[JobRecord]) -> list[dict]:
    page = json.loads(page_body([cache.encoded(j, job_view) for j in jobs], None))
    assert page["next_cursor"] is None
    return page["jobs"]


def fresh(jobs: list[JobRecord]) -> list[dict]:
    return json.loads(json.dumps([job_view(j) for j in jobs]))


def test_every_kind_of_change_shows_in_the_next_listing() -> None:
    cache = JobViewCache()
    jobs = [job("1"), job("2")]
    assert listed(cache, jobs) == fresh(jobs)

    jobs[0].status.reason_code = "QUOTA"  # status changed in place
    jobs[0].status.reason_message = "queue default: 8 of 8 gpu in use"
    assert listed(cache, jobs) == fresh(jobs)

    jobs[0].status.state = JobState.ADMITTED
    jobs[0].ranks = {0: RankRecord(0, "n1", ("GPU-a",)), 1: RankRecord(1, "n1", ("GPU-b",))}
    assert listed(cache, jobs) == fresh(jobs)

    jobs[0].ranks[1].state = RankPhase.RUNNING  # a rank changed in place
    jobs[0].ranks[1].pid = 4242
    jobs[0].history.append(HistoryEntry(2.0, "started", "all ranks running"))
    assert listed(cache, jobs) == fresh(jobs)

    jobs[1].status = dataclasses.replace(jobs[1].status, state=JobState.CANCELLED)  # status replaced
    jobs[1].spec = dataclasses.replace(jobs[1].spec, priority=7)  # spec replaced
    assert listed(cache, jobs) == fresh(jobs)
    assert [j["state"] for j in listed(cache, jobs)] == ["admitted", "cancelled"]


def test_an_unchanged_job_is_not_encoded_again() -> None:
    cache = JobViewCache()
    pending = job("1")
    first = cache.encoded(pending, job_view)
    assert cache.encoded(pending, job_view) is first
    pending.status.reason_message = "waiting"
    assert cache.encoded(pending, job_view) is not first


def test_each_variant_of_a_view_is_kept_apart() -> None:
    cache = JobViewCache()
    pending = job("1")

    def hidden(j: JobRecord) -> dict:
        return {**job_view(j), "argv": None}

    assert json.loads(cache.encoded(pending, job_view, variant=False))["argv"] == ["python", "train.py"]
    assert json.loads(cache.encoded(pending, hidden, variant=True))["argv"] is None
    assert json.loads(cache.encoded(pending, job_view, variant=False))["argv"] == ["python", "train.py"]


def test_a_new_job_under_a_reused_id_is_not_served_the_old_view() -> None:
    cache = JobViewCache()
    old, new = job("1", "old"), job("1", "new")
    cache.encoded(old, job_view)
    assert json.loads(cache.encoded(new, job_view))["name"] == "new"


def test_the_cache_forgets_jobs_that_are_gone() -> None:
    cache = JobViewCache()
    listed(cache, [job(str(i)) for i in range(1, 200)])
    cache.trim(199)
    assert len(cache) == 199
    kept = [job("1")]
    cache.trim(1)
    assert len(cache) == 0
    assert listed(cache, kept) == fresh(kept)


def test_the_three_variants_of_every_job_survive_a_trim() -> None:
    """Whole views, views without argv (private_data) and queue rows of the same jobs are all kept."""
    cache = JobViewCache()
    jobs = [job(str(i)) for i in range(1, 101)]
    for variant in (False, True, "queue"):
        for record in jobs:
            cache.encoded(record, job_view, variant=variant)
    cache.trim(len(jobs))
    assert len(cache) == 300


def test_a_page_body_is_the_json_the_handler_used_to_write() -> None:
    views = [job_view(job("1")), job_view(job("2"))]
    body = page_body([json.dumps(v).encode() for v in views], "2")
    assert json.loads(body) == {"jobs": views, "next_cursor": "2"}


def test_a_page_in_pieces_is_the_page_in_one_in_pieces_of_whole_jobs_of_about_their_size() -> None:
    views = [json.dumps(job_view(job(str(i)))).encode() for i in range(1, 8)]
    size = len(views[0])
    for encoded in (views, views[:1], []):
        for cursor in ("7", None):
            whole = b'{"jobs": [' + b", ".join(encoded) + b'], "next_cursor": ' + json.dumps(cursor).encode() + b"}"
            assert page_body(encoded, cursor) == whole
            for piece_bytes in (1, size, 2 * size + 1, 1 << 20):
                pieces = page_pieces(encoded, cursor, piece_bytes)
                assert b"".join(pieces) == whole
                # jobs of one size here: piece_bytes // size of them a piece (at least one), each piece whole jobs
                per_piece = max(1, piece_bytes // size)
                assert len(pieces) == max(1, -(-len(encoded) // per_piece))
                assert all(p.endswith(b"}") and p[-size:].startswith(b'{"id"') for p in pieces[:-1])
    assert len(page_pieces(views, None, 1)) == len(views)  # one job a piece
    assert len(page_pieces(views, None)) == 1  # 64 KiB: a short page in one piece


def test_a_page_stops_at_its_limit_or_its_bytes_and_always_holds_one_job() -> None:
    cache = JobViewCache()
    jobs = [job(str(i)) for i in range(1, 6)]
    size = len(cache.encoded(jobs[0], job_view))
    encoded, last, more = cache.page(iter(jobs), job_view, False, 2, 1 << 20)
    assert (len(encoded), last, more) == (2, jobs[1], True)
    encoded, last, more = cache.page(iter(jobs), job_view, False, 10, 3 * size - 1)  # the third job goes over
    assert (len(encoded), last, more) == (2, jobs[1], True)
    encoded, last, more = cache.page(iter(jobs), job_view, False, 10, 1)  # one job even over the budget
    assert (len(encoded), last, more) == (1, jobs[0], True)
    encoded, last, more = cache.page(iter(jobs), job_view, False, 10, 1 << 20)
    assert (last, more) == (jobs[-1], False)
    assert [json.loads(e) for e in encoded] == fresh(jobs)


def test_a_page_asks_each_job_its_variant_when_given_a_function() -> None:
    cache = JobViewCache()
    mine, theirs = job("1"), job("2")

    def hidden(j: JobRecord) -> dict:
        return {**job_view(j), "argv": None} if j is theirs else job_view(j)

    encoded, _, _ = cache.page(iter([mine, theirs]), hidden, lambda j: j is theirs, 10, 1 << 20)
    assert [json.loads(e)["argv"] for e in encoded] == [["python", "train.py"], None]
    assert json.loads(cache.encoded(theirs, job_view, variant=False))["argv"] == ["python", "train.py"]
