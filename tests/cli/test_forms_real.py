"""Command-line forms a real coordinator gets (or refuses), through both CLI paths: the fast path
and the click group."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from coordinator_harness import running_coordinator

from tests.cli.test_quick import CLICK_MAIN


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[str]:
    """A real coordinator (no agent: jobs stay pending) on a temporary state directory."""
    yield from running_coordinator(tmp_path, "")


def labgang(state_dir: str, *args: str, click_only: bool = False) -> subprocess.CompletedProcess[str]:
    """``labgang ARGS`` through the console entry point (the fast path), or the click group only."""
    env = {**os.environ, "LABGANG_STATE_DIR": state_dir}
    pre = ["-c", CLICK_MAIN] if click_only else ["-m", "labgang.launcher"]
    return subprocess.run([sys.executable, *pre, *args], capture_output=True, text=True, env=env)


def both(state_dir: str, *args: str) -> list[subprocess.CompletedProcess[str]]:
    """``labgang ARGS`` through the fast path, then through the click group only."""
    return [labgang(state_dir, *args), labgang(state_dir, *args, click_only=True)]


def listing(state_dir: str) -> list[dict[str, object]]:
    jobs: list[dict[str, object]] = json.loads(labgang(state_dir, "queue", "--json").stdout)["jobs"]
    return jobs


def test_an_empty_command_is_refused_at_submission_on_both_paths(coordinator: str) -> None:
    for result in both(coordinator, "submit", "--", "", "x"):
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == (
            "labgang submit: argv: the command (argv[0]) is an empty string; it must name a program\n"
        )
    assert listing(coordinator) == []


def test_cancel_takes_array_tasks_in_the_form_queue_prints_on_both_paths(coordinator: str) -> None:
    submitted = labgang(coordinator, "submit", "--array", "0-5", "--", "true")
    assert submitted.returncode == 0, submitted.stderr
    array = submitted.stdout.strip()
    fast, slow = both(coordinator, "cancel", f"{array}_[1-2,4]")
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        0,
        f"job {array}_1: cancelled\njob {array}_2: cancelled\njob {array}_4: cancelled\n",
        "",
    )
    assert (
        slow.stdout
        == f"job {array}_1: already cancelled\njob {array}_2: already cancelled\njob {array}_4: already cancelled\n"
    )
    states = {job["id"]: job["state"] for job in listing(coordinator)}
    assert states == {f"{array}_{i}": "pending" for i in (0, 3, 5)}
    for result in both(coordinator, "cancel", f"{array}_[0,9]"):  # a task that does not exist: named
        assert result.returncode == 1, result.stderr
        assert result.stderr == f"labgang cancel: no job {array}_9 (job array {array} has tasks {array}_[0-5])\n"
    for result in both(coordinator, "cancel", f"{array}_[5-2]"):  # the --array syntax, and its errors
        assert (result.returncode, result.stdout) == (2, "")
        assert f"'{array}_[5-2]' is not a job id" in result.stderr and '"5-2": end below start' in result.stderr
    assert {job["id"] for job in listing(coordinator)} == {f"{array}_3", f"{array}_5"}


def test_a_task_list_of_no_array_is_one_line_on_both_paths(coordinator: str) -> None:
    """A new user's finding: ``cancel "12_[0-2000]"`` of no array printed 2,001 ``no job 12_N`` lines,
    and ``cancel "19_[0-3]"`` of a plain job 19 said ``no job 19_0``... Now one line each, exit 1."""
    plain = labgang(coordinator, "submit", "--", "true").stdout.strip()
    for result in both(coordinator, "cancel", "9999_[0-2000]"):
        assert (result.returncode, result.stdout, result.stderr) == (1, "", "labgang cancel: no job array 9999\n")
    for result in both(coordinator, "cancel", f"{plain}_[0-3]"):
        assert (result.returncode, result.stdout) == (1, ""), result.stderr
        assert result.stderr == f"labgang cancel: job {plain} is not a job array\n"
    assert {job["id"]: job["state"] for job in listing(coordinator)} == {plain: "pending"}
    for result in both(coordinator, "cancel", "9999_5"):  # one task asked for: that task is named
        assert (result.returncode, result.stderr) == (1, "labgang cancel: no job 9999_5\n")


def test_bytes_that_are_no_utf8_are_named_as_bytes_and_where_on_both_paths(coordinator: str) -> None:
    """A new user's finding: ``--name $'\\xff\\xfe'`` was told of "a lone surrogate such as \\ud800" (the
    user typed bytes), and a bad word of the command named no field at all."""
    import os

    bad = os.fsdecode(b"a\xffb")  # as Python hands such a shell word to labgang
    for result in both(coordinator, "submit", "-H", "--", "true", bad):
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == (
            "labgang submit: the command's word 2: is not UTF-8 text (byte 0xff at character 1); allowed: UTF-8 text\n"
        )
    for result in both(coordinator, "submit", "-H", "--name", bad, "--", "true"):
        assert result.returncode == 2
        assert result.stderr == (
            "labgang submit: --name: is not UTF-8 text (byte 0xff at character 1); allowed: UTF-8 text\n"
        )
    assert listing(coordinator) == []
