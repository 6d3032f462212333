"""The coordinator's row cache for ``GET /v1/jobs?view=table`` never serves a stale row: whatever
field of a job changes, in whatever order, its cached row facts equal fresh ones."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from pathlib import Path
from tempfile import mkdtemp
from typing import TYPE_CHECKING

from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.store import Store
from labgang.launcher.coordinator.table_view import row, table
from labgang.launcher.coordinator.view_cache import JobMemo
from labgang.launcher.coordinator.views import queue_row
from labgang.launcher.jobtable import job_table, row_facts
from labgang.launcher.lifecycle.records import JobRecord, JobStatus, RankRecord
from labgang.launcher.lifecycle.states import JobState, RankPhase

if TYPE_CHECKING:
    from labgang.launcher.jobtable import RowFacts

ROOT = Caller(uid=0, user="root", admin=True)
CONFIG = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})


def submitted(body: dict[str, object]) -> JobRecord:
    """A job as a real coordinator records it at submission."""

    async def go() -> JobRecord:
        coord = Coordinator(CONFIG, Store(Path(mkdtemp(prefix="lgtv-")) / "db"), clock=lambda: 1000.0)
        try:
            return await coord.desk.submit(ROOT, body)
        finally:
            coord.store.close()

    return asyncio.run(go())


JOBS = [submitted({"argv": ["true"], "workers": 2}), submitted({"argv": ["true"], "array": "0-3%2"})]

# Values every JobStatus field may take (the same type as the field's default, or None where allowed).
STATUS_VALUES = {
    "state": st.sampled_from(list(JobState)),
    "reason_code": st.sampled_from([None, "unschedulable", "ARRAY_LIMIT", "DEPENDENCY"]),
    "reason_message": st.sampled_from([None, "", "needs 8 gpu", "waits for afterok:1 (running)"]),
    "nominated": st.sampled_from([(), ("n1",), ("n1", "n2")]),
    "end_intent": st.none(),
}
_FLOATS = st.sampled_from([0.0, 1.0, 990.0, 1000.0, 4000.0])


def _value(name: str) -> st.SearchStrategy[object]:
    if name in STATUS_VALUES:
        return STATUS_VALUES[name]
    default = getattr(JobStatus(), name)
    if isinstance(default, bool):
        return st.booleans()
    if isinstance(default, int):
        return st.integers(0, 5)
    if isinstance(default, float):
        return _FLOATS
    return st.one_of(st.none(), _FLOATS)  # the optional times; the optional ints take these too


# Every field of JobStatus, and the ones a row shows (state, reason) as often again: a change of
# the reason's message alone, with a code set before it, must be among the examples.
_SHOWN = ["state", "reason_code", "reason_message", "submit_time"]
STATUS_CHANGE = st.sampled_from([f.name for f in dataclasses.fields(JobStatus)] + _SHOWN * 4).flatmap(
    lambda name: st.tuples(st.just("status"), st.just(name), _value(name))
)
RANK_CHANGE = st.tuples(
    st.just("rank"), st.integers(0, 2), st.sampled_from([None, "n1", "n2", "n3"]), st.sampled_from(list(RankPhase))
)


@settings(max_examples=400, deadline=None)
@given(job_index=st.integers(0, len(JOBS) - 1), changes=st.lists(st.one_of(STATUS_CHANGE, RANK_CHANGE), max_size=12))
def test_cached_rows_always_equal_fresh_rows_whatever_changes(job_index: int, changes: list[tuple]) -> None:
    job = copy.deepcopy(JOBS[job_index])
    cache: JobMemo[RowFacts] = JobMemo()
    assert cache.get(job, row) == row_facts(queue_row(job))
    for change in changes:
        if change[0] == "status":
            setattr(job.status, change[1], change[2])
        else:
            _, rank, node, phase = change
            if node is None:
                job.ranks.pop(rank, None)
            elif rank in job.ranks:
                job.ranks[rank].node, job.ranks[rank].state = node, phase
            else:
                job.ranks[rank] = RankRecord(rank, node, (f"GPU-{rank}",), phase)
        assert cache.get(job, row) == row_facts(queue_row(job)), change


def test_a_replaced_job_object_is_not_served_from_the_old_ones_row() -> None:
    cache: JobMemo[RowFacts] = JobMemo()
    old = copy.deepcopy(JOBS[0])
    cache.get(old, row)
    new = copy.deepcopy(JOBS[0])
    new.spec = dataclasses.replace(new.spec, name="renamed")  # e.g. read back from the store after a restart
    assert cache.get(new, row)[0][1] == "renamed"


def test_the_table_lists_the_unfinished_jobs_as_the_pure_renderer_does() -> None:
    jobs = [copy.deepcopy(job) for job in JOBS]
    jobs[0].status.state = JobState.SUCCEEDED
    text, count = table(JobMemo(), jobs, 1090.0, None, len(jobs))
    assert count == 1 and text == job_table([queue_row(jobs[1])], 1090.0)
    assert table(JobMemo(), jobs, 1090.0, lambda job: False, len(jobs)) == (job_table([], 1090.0), 0)
