"""``labgang history``'s time arguments and table."""

from __future__ import annotations

import datetime as dt

import pytest
from labgang.launcher.cli.history import history_table, parse_when

NOW = 1_800_000_000.0


@pytest.mark.parametrize(
    ("text", "seconds_before_now"),
    [("2h", 7200.0), ("7d", 7 * 86400.0), ("1h30m", 5400.0), ("90", 90.0), ("30s", 30.0)],
)
def test_ages_count_back_from_now(text: str, seconds_before_now: float) -> None:
    assert parse_when(text, NOW) == NOW - seconds_before_now


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-01", dt.datetime(2026, 12, 1)),
        ("2026-12-01 14:30", dt.datetime(2026, 12, 1, 14, 30)),
        ("2026-12-01T14:30:05", dt.datetime(2026, 12, 1, 14, 30, 5)),
    ],
)
def test_dates_are_local_times(text: str, expected: dt.datetime) -> None:
    assert parse_when(text, NOW) == expected.timestamp()


@pytest.mark.parametrize("text", ["yesterday", "2026-13-01", "-2h", ""])
def test_anything_else_is_refused_naming_the_allowed_forms(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a time; allowed: a date \(2026-12-01\).*an age \(2h, 7d, 1h30m\)"):
        parse_when(text, NOW)


def test_the_table_shows_the_sacct_columns() -> None:
    row = {
        "id": "7", "name": "train", "user": "alice", "queue": "default", "state": "failed",
        "submit_time": NOW, "start_time": NOW + 60, "end_time": NOW + 3660, "wait_s": 60.0,
        "elapsed_s": 3600.0, "gpu_hours": 8.0, "exit_status": 3, "restart_count": 1,
        "reason": {"code": "failed", "message": "rank 1 on n2 exited with status 3"},
    }  # fmt: skip
    header, line = history_table([row]).splitlines()
    assert header.split() == [
        "JOBID", "NAME", "USER", "QUEUE", "STATE", "SUBMIT", "START", "END", "WAIT", "ELAPSED", "GPU-H", "EXIT",
        "RESTARTS", "REASON",
    ]  # fmt: skip
    assert line.split()[:5] == ["7", "train", "alice", "default", "FAILED"]
    assert " 1m00s " in line and " 1h00m " in line and " 8.00 " in line and line.endswith("exited with status 3")


def test_a_job_that_held_devices_twice_is_named_under_the_table_and_a_share_shows_its_part() -> None:
    from labgang.launcher.cli.history_table import attempts_note, gpus_cell

    rows: list[dict[str, object]] = [{"id": "3", "admitted_attempts": 2}, {"id": "4", "admitted_attempts": 1}]
    rows.append({"id": "5"})
    assert attempts_note(rows) == (
        "labgang history: note: ELAPSED and GPU-H add up the attempts of job 3 (2); START is the last "
        "attempt's (history --attempts lists each)"
    )
    assert attempts_note(rows[1:]) is None
    assert [gpus_cell(g) for g in (2, 1.0, 0.25, 0.5, 1 / 3)] == ["2", "1", "0.25", "0.5", "0.3333"]
