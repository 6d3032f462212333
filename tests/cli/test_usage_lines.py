"""What a fresh user meets at the edges of the CLI, on the fast path and the click path alike: a
missing option value names its subcommand, a bare ``labgang`` prints the help whole, each
``--json`` says what it prints, and the folded task list ``queue`` prints (``12_[2-5%2]``) can be
pasted into ``cancel`` and is refused in one clear line by ``show`` and ``explain``."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys

import click
import pytest
from coordinator_harness import running_coordinator
from labgang.launcher.cli.commands import COMMANDS, top_help

from tests.cli.test_quick import CLICK_MAIN, click_run, fast_run


def bare(path: str) -> subprocess.CompletedProcess:
    """``labgang`` without arguments: the console script's way (``-m labgang.launcher``) or click's."""
    argv = ["-m", "labgang.launcher"] if path == "fast" else ["-c", CLICK_MAIN]
    env = {**os.environ, "COLUMNS": "80"}
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=env)


@pytest.mark.parametrize("path", ["fast", "click"])
def test_bare_labgang_prints_the_help_whole_on_stderr_with_status_2(path):
    result = bare(path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == top_help(78)  # exactly `labgang --help` at 80 columns
    assert result.stderr.splitlines()[0] == "Usage: labgang [OPTIONS] COMMAND [ARGS]..."


@pytest.mark.parametrize(
    "args",
    [
        ["queue", "-u"],
        ["queue", "--state"],
        ["history", "--limit"],
        ["submit", "-n"],
        ["logs", "1", "-r"],
        ["cancel", "--state-dir"],
        ["show", "1", "--state-dir"],
        ["nodes", "--state-dir"],
    ],
)
def test_a_missing_option_value_names_the_subcommand(args, tmp_path):
    for run in (fast_run, click_run):
        result = run(str(tmp_path), *args)
        assert (result.returncode, result.stdout) == (2, ""), run
        assert result.stderr == f"labgang {args[0]}: option '{args[-1]}' requires an argument\n", run


def json_help(name: str) -> str | None:
    """The help of ``labgang NAME``'s ``--json`` flag, or None when it has none."""
    module, attr = COMMANDS[name][0].split(":")
    command: click.Command = getattr(importlib.import_module(f"labgang.{module}"), attr)
    return next((p.help for p in command.params if isinstance(p, click.Option) and "--json" in p.opts), None)


def test_each_json_flag_says_what_that_command_prints():
    helps = {name: json_help(name) for name in ("submit", "queue", "show", "queues", "history", "explain")}
    assert helps["submit"] == "Print the submitted job as JSON (its JobView) instead of its id."
    assert "table" not in str(helps["show"]) and "table" not in str(helps["explain"])
    assert len(set(helps.values())) == len(helps)  # each its own


@pytest.fixture
def coordinator(tmp_path):
    yield from running_coordinator(tmp_path, "")


@pytest.mark.slow
def test_the_folded_task_list_queue_prints_is_taken_by_cancel_and_explained_by_show(coordinator):
    for run in (fast_run, click_run):
        array_id = run(coordinator, "submit", "--array", "2-5%2", "--", "true").stdout.strip()
        folded = f"{array_id}_[2-5%2]"
        assert folded in run(coordinator, "queue").stdout  # as queue prints it
        for command in ("show", "explain"):
            result = (run if command == "show" else click_run)(coordinator, command, folded)
            assert (result.returncode, result.stdout) == (2, "")
            where = "JOB: " if command == "show" else ""
            assert result.stderr == (
                f"labgang {command}: {where}{folded!r} is a list of tasks of array {array_id}; "
                f"give one task id, such as {array_id}_2\n"
            ), (run, command)
        cancelled = run(coordinator, "cancel", folded)
        assert (cancelled.returncode, cancelled.stderr) == (0, ""), run
        assert cancelled.stdout.splitlines() == [f"job {array_id}_{i}: cancelled" for i in range(2, 6)]


@pytest.mark.slow
def test_hold_release_and_requeue_take_the_folded_task_list_as_cancel_does(coordinator):
    """``scontrol hold 12_[1-2]`` holds those tasks; labgang's hold and release refused the list that
    ``queue`` prints and ``cancel`` takes ("give one task id")."""
    array_id = click_run(coordinator, "submit", "--array", "0-3", "--", "true").stdout.strip()
    held = click_run(coordinator, "hold", f"{array_id}_[1-2]")
    assert (held.returncode, held.stderr) == (0, ""), held
    assert held.stdout.splitlines() == [f"job {array_id}_1: held", f"job {array_id}_2: held"]
    released = click_run(coordinator, "release", f"{array_id}_[1-2],{array_id}_0")
    assert released.returncode == 1, released  # 0 was never held: refused on its own line
    assert released.stdout.splitlines() == [f"job {array_id}_1: released", f"job {array_id}_2: released"]
    bad = click_run(coordinator, "requeue", f"{array_id}_[2-1]")
    assert (bad.returncode, bad.stdout, bad.stderr.count("\n")) == (2, "", 1), bad
