"""``JobStatus.submitted`` builds a submitted job's status from a kept instance dict (a replay
makes one a job) instead of the dataclass build's write of every field through
``CountsChanges.__setattr__``: it must give exactly that build's object, whatever the time, and
count the writes made to it afterwards exactly alike (the driver's view caches rely on the count)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.lifecycle.records import JobStatus
from labgang.launcher.lifecycle.states import EndIntent, JobState


def built(now: float) -> JobStatus:
    """The un-shortcut build: the dataclass ``__init__``, every field through ``__setattr__``."""
    return JobStatus(state=JobState.PENDING, submit_time=now, pending_since=now)


VALUES: dict[str, Any] = {
    "state": st.sampled_from(list(JobState)),
    "submit_time": st.floats(allow_nan=False) | st.integers(-5, 5),
    "pending_since": st.floats(allow_nan=False),
    "reason_code": st.none() | st.sampled_from(["quota", "capacity"]),
    "reason_message": st.none() | st.sampled_from(["needs 8 gpu", "needs 4 gpu"]),
    "nominated": st.sampled_from([(), ("3",), ("3", "4")]),
    "end_intent": st.none() | st.sampled_from(list(EndIntent)),
    "attempt": st.integers(0, 3),
    "ran": st.booleans(),
    "hold": st.none() | st.just("root"),
}
WRITES = st.lists(st.one_of(*(st.tuples(st.just(name), values) for name, values in VALUES.items())), max_size=30)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(now=st.floats(allow_nan=False) | st.integers(-(2**40), 2**40), writes=WRITES)
def test_submitted_is_the_dataclass_build_and_counts_alike(now: float, writes: list[tuple[str, Any]]) -> None:
    fast, slow = JobStatus.submitted(now), built(now)
    assert type(fast) is JobStatus
    assert list(vars(fast).items()) == list(vars(slow).items())  # fields, change count, order
    assert [type(v) for v in vars(fast).values()] == [type(v) for v in vars(slow).values()]
    assert fast == slow and fast.to_json() == slow.to_json()
    for name, value in writes:
        setattr(fast, name, value)
        setattr(slow, name, value)
        assert fast.changes == slow.changes, name
    assert list(vars(fast).items()) == list(vars(slow).items())


def test_two_submitted_statuses_share_no_mutable_state() -> None:
    a, b = JobStatus.submitted(1.0), JobStatus.submitted(2.0)
    a.nominated = ("7",)
    a.reason_message = "x"
    assert b == built(2.0) and b.changes == built(2.0).changes
    for field in dataclasses.fields(JobStatus):  # every kept default is immutable: nothing to share
        hash(getattr(b, field.name))
