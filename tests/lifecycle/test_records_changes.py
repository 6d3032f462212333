"""JobStatus and RankRecord count every change made to them (``CountsChanges``), whichever field and
however it is written; what caches of a job's views rely on (launcher/coordinator/view_cache.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from labgang.launcher.lifecycle.records import HistoryEntry, JobStatus, RankRecord
from labgang.launcher.lifecycle.states import EndIntent, JobState, RankPhase


def another_value(value: Any) -> Any:
    """A value of the field's kind that differs from ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, JobState):
        return JobState.RUNNING if value != JobState.RUNNING else JobState.PENDING
    if isinstance(value, RankPhase):
        return RankPhase.RUNNING if value != RankPhase.RUNNING else RankPhase.EXITED
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, tuple):
        return (*value, "x")
    if value is None:
        return 7
    raise AssertionError(f"no other value for {value!r}")


def records() -> list[JobStatus | RankRecord]:
    return [JobStatus(), RankRecord(0, "n1", ("GPU-a",))]


@pytest.mark.parametrize("record", records(), ids=lambda r: type(r).__name__)
def test_a_new_value_in_any_field_is_a_change(record: JobStatus | RankRecord) -> None:
    for field in dataclasses.fields(record):
        before = record.changes
        setattr(record, field.name, another_value(getattr(record, field.name)))
        assert record.changes == before + 1, field.name


def test_the_same_value_again_is_no_change_but_an_equal_one_of_another_type_is() -> None:
    status = JobStatus(reason_message="needs 8 gpu")
    before = status.changes
    status.reason_message = "needs 8 gpu"  # an equal string: what every cycle writes to a pending job
    status.state = JobState.PENDING
    status.end_intent = None
    assert status.changes == before
    status.submit_time = 0  # 0 == 0.0, but the JSON differs ("0" and "0.0")
    assert status.changes == before + 1
    status.end_intent = EndIntent.PREEMPT
    assert status.changes == before + 2


def test_changes_is_neither_a_field_nor_compared_nor_stored() -> None:
    status = JobStatus()
    status.warned = True
    assert "changes" not in {f.name for f in dataclasses.fields(JobStatus)}
    assert status == JobStatus(warned=True)  # equal, however many writes each had
    assert "changes" not in status.to_json()
    assert JobStatus.from_json(status.to_json()) == status


def test_a_history_line_cannot_be_changed() -> None:
    entry = HistoryEntry(1.0, "submitted", "queue default")
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.message = "something else"  # type: ignore[misc]


def test_a_read_only_property_still_refuses_a_write() -> None:
    rank = RankRecord(0, "n1", ("GPU-a",))
    with pytest.raises(AttributeError):
        rank.ended = True  # type: ignore[misc]
    assert rank.ended is False and rank.changes == RankRecord(0, "n1", ("GPU-a",)).changes
