"""Durations, signal specs and the squeue-style tables."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher import durations
from labgang.launcher.cli.format import (
    format_duration,
    job_detail,
    parse_duration,
    parse_signal_spec,
    queue_table,
)
from labgang.launcher.jobtable import gang_shape, job_table, where_or_why
from labgang.launcher.text import clip, display_width, render_table


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("90", 90),
        ("30s", 30),
        ("5m", 300),
        ("2h", 7200),
        ("1d", 86400),
        ("1h30m", 5400),
        ("1.5h", 5400),
        (" 10S ", 10),
        ("0", 0),
        ("2m30s", 150),
    ],
)
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "abc", "5x", "-3s", "30m1h", "5m5m", "1h30", "s", "1 h"])
def test_parse_duration_refuses_and_says_what_is_allowed(text):
    with pytest.raises(ValueError, match="30s, 5m, 2h"):
        parse_duration(text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789.smhdx \u0663\u00b2", max_size=12), st.integers(min_value=0, max_value=12))
def test_a_duration_part_is_read_as_the_regular_expression_reads_it(raw, pos):
    """durations.py reads a part by hand (``re`` is ~8 ms of a shell command's start); same as the pattern."""
    import re

    match = re.compile(r"(\d+(?:\.\d+)?)([smhd]?)").match(raw, pos)
    expected = None if match is None else (match.group(1), match.group(2), match.end())
    assert durations._part(raw, pos) == expected


@pytest.mark.parametrize(
    "seconds, text",
    [
        (0, "0s"),
        (59.9, "59s"),
        (60, "1m00s"),
        (303, "5m03s"),
        (7500, "2h05m"),
        (3 * 86400 + 4 * 3600, "3d04h"),
        (-5, "0s"),
        (None, "-"),
    ],
)
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


@pytest.mark.parametrize(
    "text, canonical",
    [("SIGUSR1@60", "SIGUSR1@60"), ("usr1@5m", "SIGUSR1@300"), ("10@30s", "SIGUSR1@30"), ("TERM@1m", "SIGTERM@60")],
)
def test_parse_signal_spec(text, canonical):
    assert parse_signal_spec(text) == canonical


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("USR1", "SIG@SECONDS"),
        ("BOGUS@60", "unknown signal"),
        ("USR1@soon", "not a duration"),
        ("USR1@1.5", "whole seconds"),
    ],
)
def test_parse_signal_spec_refuses(text, fragment):
    with pytest.raises(ValueError, match=fragment):
        parse_signal_spec(text)


def test_render_table_aligns_columns_and_checks_row_width():
    assert render_table(("A", "LONGER"), [("xyz", 1), ("", "")]) == "A    LONGER\nxyz  1\n"
    with pytest.raises(ValueError, match="2 cells, table has 3"):
        render_table(("A", "B", "C"), [("1", "2")])


def test_render_table_aligns_wide_and_combining_characters_by_terminal_columns():
    # a CJK name takes two columns per character, a combining accent none: the next column must
    # start at the same terminal column on every line
    rows = [("训练任务", "ann"), ("e\u0301te", "bob"), ("plain", "cy")]
    lines = render_table(("NAME", "USER"), rows).splitlines()
    starts = [
        display_width(line[: line.index(user)]) for line, user in zip(lines, ("USER", "ann", "bob", "cy"), strict=True)
    ]
    assert starts == [10, 10, 10, 10]
    assert display_width("训练任务") == 8 and display_width("e\u0301te") == 3 and display_width("abc") == 3


def test_an_emoji_drawn_wide_counts_two_columns_and_clipping_counts_columns_not_characters():
    assert display_width("heart\u2764\ufe0fok") == 9  # ❤ followed by variation selector 16: an emoji
    assert display_width("\u2764") == 1
    long_cjk = "训练" * 15
    assert clip(long_cjk, 20) == "训练" * 4 + "训~" and display_width(clip(long_cjk, 20)) == 19
    assert clip("a" * 25, 20) == "a" * 19 + "~" and clip("short", 20) == "short"
    assert clip("e\u0301" * 25, 20) == "e\u0301" * 19 + "~"  # an accent stays with its letter
    table = job_table([_job(name=long_cjk), _job(id="8", name="plain")], now=1300.0)
    first, second = table.splitlines()[1:]
    assert clip(long_cjk, 20) in first
    assert display_width(first[: first.index("ann")]) == display_width(second[: second.index("ann")])


def _job(**kw):
    base = {
        "id": "7",
        "name": "train",
        "user": "ann",
        "uid": 1000,
        "queue": "default",
        "state": "running",
        "workers": 4,
        "gpus_per_worker": 2,
        "resource": "gpu",
        "priority": 0,
        "submit_time": 1000.0,
        "admit_time": 1010.0,
        "start_time": 1011.0,
        "end_time": None,
        "reason": None,
        "nodes": ["ws1"],
        "exit_status": None,
        "restart_count": 0,
        "ranks": [],
        "history": [],
    }
    base.update(kw)
    return base


def test_queue_table_shows_where_it_runs_or_why_it_waits():
    pending = _job(
        id="8",
        state="pending",
        nodes=[],
        reason={"code": "NO_CAPACITY", "message": "needs 8 gpu, 0 free"},
        submit_time=1290.0,
    )
    text = job_table([_job(), pending], now=1300.0)
    lines = text.splitlines()
    assert lines[0].split() == ["JOBID", "NAME", "USER", "QUEUE", "STATE", "GANG", "PRIO", "AGE", "NODES(REASON)"]
    assert lines[1].split() == ["7", "train", "ann", "default", "RUNNING", "4x2", "0", "5m00s", "ws1"]
    assert lines[2].endswith("(needs 8 gpu, 0 free)") and "PENDING" in lines[2] and "10s" in lines[2]


def test_gang_shape_and_reason_fallbacks():
    assert gang_shape(_job(workers=2, gpus_per_worker=1, resource="mig-1g.10gb")) == "2x1 mig-1g.10gb"
    assert where_or_why(_job(state="pending", nodes=[], reason={"code": "HELD", "message": ""})) == "(HELD)"
    assert where_or_why(_job(state="pending", nodes=[], reason=None)) == "(waiting for a scheduling cycle)"
    assert where_or_why(_job(state="succeeded", nodes=["n1", "n2"])) == "n1,n2"


def test_queue_usage_table():
    text = queue_table(
        [
            {
                "name": "vision",
                "cohort": "lab",
                "nominal": {"gpu": 8},
                "used": {"gpu": 10},
                "borrowed": {"gpu": 2},
                "lent": {},
                "fair_share": 125.0,
                "fair_weight": 2.0,
                "pending": 3,
                "running": 2,
            }
        ]
    )
    assert text.splitlines()[1].split() == ["vision", "lab", "gpu=8", "gpu=10", "gpu=2", "-", "125.00", "2", "3", "2"]


def test_queue_table_shows_infinite_share_and_tenant_usage():
    text = queue_table(
        [
            {
                "name": "a",
                "cohort": "lab",
                "fair_share": None,
                "fair_weight": 0.0,
                "tenants": [{"name": "alice", "weight": 1.0, "usage": 2.5, "score": 2.5}],
            },
            {"name": "b", "cohort": "lab", "fair_share": 0.0, "fair_weight": 1.0, "tenants": []},
        ]
    )
    lines = text.splitlines()
    assert "SHARE" in lines[0] and "WEIGHT" in lines[0] and "TENANT USAGE" in lines[0]
    assert lines[1].split()[6:8] == ["inf", "0"] and lines[1].endswith("alice 2.50")
    assert lines[2].split()[6:8] == ["0.00", "1"] and lines[2].endswith("-")


def test_job_detail_lists_ranks_and_history_with_reasons():
    job = _job(
        state="failed",
        exit_status=3,
        end_time=1200.0,
        reason={"code": "RANK_FAILED", "message": "rank 1 exited with status 3"},
        ranks=[
            {"rank": 0, "node": "ws1", "devices": ["GPU-a", "GPU-b"], "state": "exited", "pid": 11, "exit_status": 143},
            {"rank": 1, "node": "ws1", "devices": ["GPU-c", "GPU-d"], "state": "exited", "pid": 12, "exit_status": 3},
        ],
        history=[
            {"time": 1000.0, "event": "submitted", "message": ""},
            {"time": 1200.0, "event": "failed", "message": "rank 1 exited with status 3"},
        ],
    )
    text = job_detail(job, now=1300.0)
    assert "State:       FAILED" in text
    assert "Reason:      RANK_FAILED: rank 1 exited with status 3" in text
    assert "Exit status: 3 (Slurm 3:0)" in text
    # SIGTERM: Slurm's code:signal beside it; no start or end instant known (an older coordinator's view)
    assert "0     ws1   EXITED  11   143 (0:15)  -      -    GPU-a,GPU-b" in text
    assert "1     ws1   EXITED  12   3           -      -    GPU-c,GPU-d" in text
    assert "1m40s  failed     rank 1 exited with status 3" in text


def test_job_detail_says_the_time_limit_and_its_grace_as_scontrol_says_timelimit():
    assert "Time limit" not in job_detail(_job(), now=1300.0)  # none set: no line
    text = job_detail(_job(time_limit_s=3600.0, grace_s=30.0), now=1300.0)
    assert "Time limit:  1h00m (then SIGTERM, SIGKILL after 30s of grace)" in text.splitlines()
    assert "Time limit:  5m00s" in job_detail(_job(time_limit_s=300.0, grace_s=0.0), now=1300.0).splitlines()


def test_control_characters_already_stored_are_shown_escaped_in_every_table():
    evil = "a\nb\x1b[2Jc"
    job = _job(name=evil, history=[{"time": 1000.0, "event": "submitted", "message": f"by ann: {evil}"}])
    table = job_table([job], now=1300.0)
    assert len(table.splitlines()) == 2 and "\x1b" not in table
    assert "a\\nb\\x1b[2Jc" in table
    detail = job_detail(job, now=1300.0)
    assert "\x1b" not in detail and "\n\x1b" not in detail
    assert "Job:" in detail and "7  a\\nb\\x1b[2Jc" in detail
    assert "by ann: a\\nb\\x1b[2Jc" in detail


def test_job_detail_says_what_the_job_asked_of_its_hosts():
    """``-c``, ``--mem``/``--mem-per-gpu`` and ``--exclusive`` in ``show``, as scontrol's MinCPUsNode
    and MinMemoryNode (they were in --json only)."""
    assert "Host:" not in job_detail(_job(), now=1300.0)  # none asked: no line
    text = job_detail(_job(cpus_per_task=4, mem=1536 * 1024**2, exclusive=True), now=1300.0)
    assert "Host:        4 CPUs per rank (-c), 1536M memory per node (--mem), whole nodes (--exclusive)" in text
    text = job_detail(_job(cpus_per_task=1, mem_per_gpu=8 * 1024**3), now=1300.0)
    assert "Host:        1 CPU per rank (-c), 8G memory per GPU (--mem-per-gpu)" in text
    assert job_detail(_job(mem=100), now=1300.0).count("100B memory per node") == 1  # as format_mem writes bytes
