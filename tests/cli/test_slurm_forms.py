"""Slurm's spellings that labgang reads and shows (docs/slurm.md): ``--time`` forms, exit status
as ``code:signal``, ``show``'s command and directory, and an array summarised by state."""

from __future__ import annotations

import pytest
from labgang.launcher.cli.array_view import array_detail, array_summary_json
from labgang.launcher.cli.format import exit_status_text, job_detail, slurm_exit_code
from labgang.launcher.durations import parse_time_limit


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90 * 60.0),  # Slurm: a bare number is minutes
        ("0", 0.0),
        ("1.5", 90.0),
        ("05:30", 5 * 60 + 30.0),  # MM:SS
        ("1:00:00", 3600.0),  # HH:MM:SS
        ("2-0", 2 * 86400.0),  # D-HH
        ("2-00:00:00", 2 * 86400.0),  # D-HH:MM:SS
        ("1-12", 86400 + 12 * 3600.0),
        ("1-12:30", 86400 + 12 * 3600 + 30 * 60.0),  # D-HH:MM
        ("90s", 90.0),  # ours: a unit keeps its meaning
        ("30m", 1800.0),
        ("2h", 7200.0),
        ("1h30m", 5400.0),
        ("1d", 86400.0),
    ],
)
def test_time_limit_reads_slurms_forms_and_ours(text, seconds):
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "1:2:3:4", "1-", "-5", "a-1", "1-2:x", "1:", "10:-5", "2-1:2:3:4"])
def test_time_limit_refuses_anything_else_naming_the_forms(text):
    with pytest.raises(ValueError, match=r"allowed: minutes \(90\), MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS"):
        parse_time_limit(text)


@pytest.mark.parametrize(
    ("status", "slurm"),
    [(0, "0:0"), (1, "1:0"), (3, "3:0"), (128, "128:0"), (137, "0:9"), (143, "0:15"), (138, "0:10"), (255, "255:0")],
)
def test_exit_status_as_slurms_code_and_signal(status, slurm):
    assert slurm_exit_code(status) == slurm


def test_exit_status_text_names_the_signal():
    assert exit_status_text(137, signal_name=True) == "137 (Slurm 0:9, killed by SIGKILL)"
    assert exit_status_text(2, signal_name=True) == "2 (Slurm 2:0)"
    assert exit_status_text(137) == "137 (0:9)"
    assert exit_status_text(1) == "1"
    assert exit_status_text(None) == "-"


def _view(**over):
    job = {
        "id": "12_1",
        "numeric_id": 13,
        "name": "sweep",
        "user": "ann",
        "uid": 1000,
        "queue": "default",
        "state": "failed",
        "workers": 1,
        "gpus_per_worker": 1,
        "resource": "gpu",
        "priority": 0,
        "submit_time": 1000.0,
        "exit_status": 137,
        "argv": ["python", "train.py", "--tag", "a b"],
        "cwd": "/home/ann/exp",
        "ranks": [],
        "history": [],
        "array_id": "12",
        "array_index": 1,
        "array_limit": None,
    }
    job.update(over)
    return job


def test_show_prints_the_command_directory_number_and_slurm_exit():
    text = job_detail(_view(), now=1100.0)
    lines = text.splitlines()
    assert lines[0] == "Job:         12_1  sweep  (number 13: its SLURM_JOB_ID)"
    assert "Command:     python train.py --tag 'a b'" in lines
    assert "Directory:   /home/ann/exp" in lines
    assert "Exit status: 137 (Slurm 0:9, killed by SIGKILL)" in lines


def test_show_says_a_hidden_command_is_hidden_and_a_plain_job_has_no_number_note():
    text = job_detail(_view(id="7", numeric_id=7, argv=None, cwd=None), now=1100.0)
    assert text.splitlines()[0] == "Job:         7  sweep"
    assert "Command:     (hidden: private_data)" in text
    assert "Directory:" not in text


def test_array_summary_counts_tasks_by_state_active_first():
    states = ["running", "running", "pending", "pending", "pending", "succeeded", "failed"]
    reply = {
        "array": "12",
        "jobs": [
            _view(id=f"12_{i}", numeric_id=12 + i, array_index=i, state=s, array_limit=2) for i, s in enumerate(states)
        ],
    }
    text = array_detail(reply)
    assert "Job array: 12  sweep" in text
    assert "Tasks:     7 (12_[0-6], at most 2 at once)" in text
    assert "Numbers:   12-18 (each task's own id, its SLURM_JOB_ID)" in text
    table = text.split("\n\n")[1].splitlines()
    assert [line.split()[:2] for line in table] == [
        ["STATE", "TASKS"],
        ["RUNNING", "2"],
        ["PENDING", "3"],
        ["SUCCEEDED", "1"],
        ["FAILED", "1"],
    ]
    assert table[1].endswith("12_[0-1]") and table[2].endswith("12_[2-4]") and table[3].endswith("12_5")
    summary = array_summary_json(reply)
    assert summary["tasks"] == 7 and summary["states"] == {"running": 2, "pending": 3, "succeeded": 1, "failed": 1}
    assert "Queue:     default" in text.splitlines()  # every task in its first queue: the queue alone


def test_array_summary_names_the_tasks_moved_to_another_queue():
    """After ``update 12_2 Partition=scratch`` (and 12_3, 12_4): show 12 said only the first task's queue."""
    jobs = [_view(id=f"12_{i}", array_index=i, state="pending") for i in range(6)]
    for i in (2, 3, 4):
        jobs[i]["queue"] = "scratch"
    jobs[5]["queue"] = "nlp"
    first = jobs[0]["queue"]
    assert f"Queue:     {first} (12_[2-4] in scratch; 12_5 in nlp)" in array_detail({"array": "12", "jobs": jobs})


@pytest.mark.parametrize("argv", [["python", "x y", "it's", "", "a$b", "ok=1,2", "--lr=1e-3", "ü", "a\nb"]])
def test_command_line_quotes_as_shlex_join(argv):
    import shlex

    from labgang.launcher.cli.format import command_line

    assert command_line(argv) == shlex.join(argv)
    assert shlex.split(command_line(argv)) == argv


NOW = 1_800_000_000.0  # a unix time


@pytest.mark.parametrize(
    ("text", "delay"),
    [
        ("now", 0.0),
        ("now+1hour", 3600.0),
        ("now+30", 30.0),  # Slurm: seconds by default
        ("now+30minutes", 1800.0),
        ("NOW+2days", 2 * 86400.0),
        ("now+1week", 604800.0),
        ("now-10", -10.0),
        ("30m", 1800.0),  # a delay in --time's forms
        ("90", 5400.0),  # a bare number: minutes, as --time
        ("1-00:00:00", 86400.0),
    ],
)
def test_begin_relative_forms(text, delay):
    from labgang.launcher.begin_time import parse_begin

    assert parse_begin(text, NOW) == NOW + delay


def test_begin_dates_and_times_of_day_are_local():
    import datetime

    from labgang.launcher.begin_time import parse_begin

    assert parse_begin("2030-01-02", NOW) == datetime.datetime(2030, 1, 2).timestamp()
    assert parse_begin("2030-01-02T16:30", NOW) == datetime.datetime(2030, 1, 2, 16, 30).timestamp()
    assert parse_begin("2030-01-02 16:30:05", NOW) == datetime.datetime(2030, 1, 2, 16, 30, 5).timestamp()
    assert (
        parse_begin("2030-01-02T16:30+00:00", NOW)
        == datetime.datetime(2030, 1, 2, 16, 30, tzinfo=datetime.UTC).timestamp()
    )
    here = datetime.datetime.fromtimestamp(NOW)
    for text, (hour, minute) in (("16:00", (16, 0)), ("teatime", (16, 0)), ("noon", (12, 0)), ("00:00", (0, 0))):
        at = parse_begin(text, NOW)
        seen = datetime.datetime.fromtimestamp(at)
        assert (seen.hour, seen.minute) == (hour, minute) and NOW < at <= NOW + 86400, text
    tomorrow = datetime.datetime.fromtimestamp(parse_begin("tomorrow", NOW))
    assert (tomorrow.date() - here.date()).days == 1 and (tomorrow.hour, tomorrow.minute) == (0, 0)


BAD_BEGINS = ["", "soon", "now+", "now+x", "now+1fortnight", "25:00", "12:61", "2030-13-01", "1:2:3:4"]


@pytest.mark.parametrize("text", BAD_BEGINS)
def test_begin_refuses_anything_else_listing_the_forms(text):
    from labgang.launcher.begin_time import parse_begin

    with pytest.raises(ValueError, match=r"allowed: now\+N\[seconds\|minutes\|hours\|days\|weeks\]"):
        parse_begin(text, NOW)


def test_output_patterns_expand_slurms_escapes():
    from labgang.launcher.output_pattern import NO_ARRAY_INDEX, expand, per_rank

    facts = dict(cwd="/home/ann/exp", name="sweep", user="ann", node="n1")
    task = expand("out/%x-%A_%a-%j.%N.%t.%u-100%%.txt", number=13, array_id="12", index=1, rank=2, **facts)
    assert task == "/home/ann/exp/out/sweep-12_1-13.n1.2.ann-100%.txt"
    single = expand("slurm-%A_%a.out", number=7, array_id=None, index=None, rank=0, **facts)
    assert single == f"/home/ann/exp/slurm-7_{NO_ARRAY_INDEX}.out"
    assert expand("/tmp/../var/x-%j", number=7, array_id=None, index=None, rank=0, **facts) == "/var/x-7"
    assert per_rank("o-%t") and not per_rank("o-%j") and not per_rank("o-%%t")


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("", "must not be empty"),
        ("out-%q", "'%q' is not an escape; allowed: %j, %A, %a, %x, %u, %N, %t, %%"),
        ("out-%", "'%' is not an escape"),
    ],
)
def test_output_patterns_refuse_unknown_escapes(pattern, problem):
    from labgang.launcher.output_pattern import check_pattern

    assert problem in (check_pattern(pattern) or "")
    assert check_pattern("ok-%j_%%.txt") is None


@pytest.mark.parametrize("text", ["0", "00:00", "0-0", "0s", "UNLIMITED", "infinite", " Infinite "])
def test_a_job_time_limit_of_zero_or_unlimited_is_none_as_in_slurm(text):
    from labgang.launcher.durations import parse_job_time_limit

    assert parse_job_time_limit(text) is None


def test_a_job_time_limit_otherwise_reads_as_time_and_refuses_as_time():
    from labgang.launcher.durations import parse_job_time_limit

    assert parse_job_time_limit("90") == 5400.0 and parse_job_time_limit("1-00:00:00") == 86400.0
    with pytest.raises(ValueError, match=r"allowed: minutes \(90\).*0 or UNLIMITED for none"):
        parse_job_time_limit("forever")


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("now+99999999hour", "'now+99999999hour' is 11,408 years ahead"),
        ("now+3651days", "'now+3651days' is 3,651 days"),
    ],
)
def test_a_begin_time_past_ten_years_ahead_is_refused_naming_the_limit(text, words):
    from labgang.launcher.begin_time import parse_begin

    with pytest.raises(ValueError, match=r"out of range; allowed: at most 3650 days \(10 years\) ahead") as err:
        parse_begin(text, NOW)
    assert str(err.value).startswith(words)
    assert parse_begin("now+3650days", NOW) == NOW + 3650 * 86400.0  # the limit itself is in range
