"""``labgang run``'s follower when output is lost or cut short: bytes a log's rotation discarded before
they were read are said on stderr with their count and make a succeeded job's run exit non-zero, and a
short write into the output (a pipe whose reader left mid-write) is finished, never dropped.

A scripted client stands in for the coordinator, so the rare case (run fell behind by two rotations)
happens on every run; ``tests/cli/test_run_output_rotation_end_to_end.py`` covers the real one.
"""

from __future__ import annotations

import io
from typing import Any

import pytest
from labgang.launcher.api.client import LogChunk
from labgang.launcher.cli.follow import EXIT_OUTPUT_LOST, follow_to_the_end, write_all


class RotatedClient:
    """A succeeded job whose log from 0 is gone up to ``lost`` bytes: the first read says so and gives
    what is left (``tail``), as the agent's ``read_log`` does for a reader behind ``.1``."""

    def __init__(self, lost: int, tail: bytes, status: int = 0) -> None:
        self.lost = lost
        self.tail = tail
        self.status = status
        self.reads: list[dict[str, Any]] = []

    def job(self, job_id: str) -> dict[str, Any]:
        return {
            "id": job_id,
            "state": "succeeded" if self.status == 0 else "failed",
            "queue": "default",
            "nodes": ["vm"],
            "reason": None,
            "exit_status": self.status,
            "start_time": 100.0,
            "ranks": [{"rank": 0, "exit_status": self.status}],
        }

    def logs(self, job_id: str, rank: int = 0, offset: int = 0, **kwargs: Any) -> LogChunk:
        self.reads.append({"offset": offset, **kwargs})
        if offset < self.lost:
            return LogChunk(self.tail, self.lost + len(self.tail), True, attempt=0, lost=self.lost - offset)
        return LogChunk(b"", offset, True, attempt=0)

    def cancel(self, job_id: str) -> dict[str, Any]:
        raise AssertionError("a job that ended is not cancelled")

    def close(self) -> None:
        pass


def test_lost_bytes_are_said_with_their_count_and_a_succeeded_run_exits_non_zero() -> None:
    client = RotatedClient(lost=5000, tail=b"the rest\n")
    out, err = io.BytesIO(), io.StringIO()
    code = follow_to_the_end(client, "7", (0,), out, err)  # type: ignore[arg-type]
    assert code == EXIT_OUTPUT_LOST != 0
    assert out.getvalue() == b"the rest\n"  # labgang's words never on stdout
    said = [line for line in err.getvalue().splitlines() if "discarded" in line]
    assert said == ["labgang: 5000 bytes of rank 0's output were discarded by log rotation before they were read"]
    assert client.reads[0].get("follower") == 0  # run says what it still needs: the rotation waits for it


def test_a_failed_job_keeps_its_own_status_when_bytes_were_lost_too() -> None:
    client = RotatedClient(lost=10, tail=b"x\n", status=3)
    code = follow_to_the_end(client, "7", (0,), io.BytesIO(), io.StringIO())  # type: ignore[arg-type]
    assert code == 3


def test_nothing_lost_is_exit_zero_and_silent() -> None:
    client = RotatedClient(lost=0, tail=b"")
    err = io.StringIO()
    assert follow_to_the_end(client, "7", (0,), io.BytesIO(), err) == 0  # type: ignore[arg-type]
    assert "discarded" not in err.getvalue()


class ShortWrites(io.BytesIO):
    """A stream whose ``write`` takes at most 3 bytes, as a buffered pipe's does when its reader left."""

    def write(self, data: Any) -> int:
        return super().write(bytes(data)[:3])


class GoneAfterShort(io.BytesIO):
    """A pipe whose reader left mid-write: one short count, then EPIPE."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def write(self, data: Any) -> int:
        self.calls += 1
        if self.calls > 1:
            raise BrokenPipeError(32, "Broken pipe")
        return super().write(bytes(data)[:4])


def test_write_all_finishes_a_short_write() -> None:
    sink = ShortWrites()
    write_all(sink, b"0123456789abcdef")
    assert sink.getvalue() == b"0123456789abcdef"


def test_write_all_raises_the_broken_pipe_a_short_count_hid() -> None:
    with pytest.raises(BrokenPipeError):
        write_all(GoneAfterShort(), b"0123456789")
