"""``labgang show``'s per-rank START and END columns and its Rank starts line."""

from __future__ import annotations

import time

from labgang.launcher.cli.format import job_detail, start_spread

from tests.cli.test_format import _job


def _clock(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) + f".{int(t * 1000) % 1000:03d}"


def test_each_rank_shows_its_start_and_end_to_the_millisecond() -> None:
    t0 = 1_700_000_000.0
    ranks = [
        {"rank": 0, "node": "ws1", "devices": ["GPU-a"], "state": "exited", "pid": 11, "exit_status": 0,
         "start_time": t0 + 0.125, "end_time": t0 + 30.5},
        {"rank": 1, "node": "ws2", "devices": ["GPU-b"], "state": "running", "pid": 12, "exit_status": None,
         "start_time": t0 + 0.132, "end_time": None},
        {"rank": 2, "node": "ws2", "devices": ["GPU-c"], "state": "launching", "pid": None, "exit_status": None},
    ]  # fmt: skip
    text = job_detail(_job(ranks=ranks, workers=3, gpus_per_worker=1), now=t0 + 60)
    lines = text.splitlines()
    header = next(line for line in lines if line.startswith("RANK"))
    assert header.split() == ["RANK", "NODE", "STATE", "PID", "EXIT", "START", "END", "DEVICES"]
    row = {line.split()[0]: line.split() for line in lines[lines.index(header) + 1 : lines.index(header) + 4]}
    assert row["0"][-3:] == [_clock(t0 + 0.125), _clock(t0 + 30.5), "GPU-a"]
    assert row["1"][-3:] == [_clock(t0 + 0.132), "-", "GPU-b"]
    assert row["2"][-3:] == ["-", "-", "GPU-c"]
    assert "Rank starts: within 0.007 s (rank 0 first, rank 1 last, 2 ranks)" in lines


def test_the_start_spread_needs_two_started_ranks() -> None:
    assert start_spread([{"rank": 0, "start_time": 5.0}, {"rank": 1, "start_time": None}]) is None
    assert start_spread([]) is None
    assert start_spread([{"rank": 3, "start_time": 7.5}, {"rank": 1, "start_time": 5.0}]) == (
        "within 2.500 s (rank 1 first, rank 3 last, 2 ranks)"
    )
