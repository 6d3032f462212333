"""Every ``--json`` command answers a refusal with the coordinator's error object on stdout
(launcher/cli/json_error.py), on the fast path (launcher/cli/quick.py) and through the click
commands alike: a script reading the JSON gets JSON, the one line still goes to stderr and the exit
status is what it was. Real commands in fresh interpreters, against a state directory where no
coordinator answers, and against a real coordinator that refuses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from coordinator_harness import running_coordinator

CLICK_MAIN = "import sys; from labgang.launcher.cli.main import main; sys.argv = ['labgang', *sys.argv[1:]]; main()"

# Each command that has --json and talks to the coordinator, as a user would type it.
JSON_COMMANDS = [
    ["queue", "--json"],
    ["queue", "--json", "-t", "PD"],
    ["queues", "--json"],
    ["show", "3", "--json"],
    ["submit", "--json", "--", "true"],
    ["nodes", "--json"],
    ["explain", "default", "--json"],
    ["hold", "3", "--json"],
    ["release", "3", "--json"],
    ["requeue", "3", "--json"],
    ["update", "3", "TimeLimit=10", "--json"],
    ["history", "--json"],
]


def labgang(state_dir: str, *args: str, click_only: bool = False) -> subprocess.CompletedProcess[str]:
    """``labgang ARGS`` through the console entry point (the fast path where it applies), or the click group only."""
    env = {**os.environ, "LABGANG_STATE_DIR": state_dir}
    pre = ["-c", CLICK_MAIN] if click_only else ["-m", "labgang.launcher"]
    return subprocess.run([sys.executable, *pre, *args], capture_output=True, text=True, env=env, timeout=60)


def error_of(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    """The error object ``done`` printed on stdout, checked against its one stderr line."""
    assert done.stdout.strip(), f"nothing on stdout; stderr: {done.stderr}"
    error = json.loads(done.stdout)["error"]
    assert set(error) == {"message", "field", "allowed"}
    assert done.stderr.splitlines()[-1].endswith(f": {error['message']}")
    return error


@pytest.mark.parametrize("click_only", [False, True], ids=["fast", "click"])
@pytest.mark.parametrize("args", JSON_COMMANDS, ids=lambda a: " ".join(a))
def test_with_no_coordinator_a_json_command_prints_the_error_object(tmp_path: Path, args, click_only) -> None:
    state = tmp_path / "state"
    state.mkdir()
    done = labgang(str(state), *args, click_only=click_only)
    assert done.returncode == 1, done.stderr
    error = error_of(done)
    assert f"no labgang coordinator at {state}/labgang.sock" in str(error["message"])
    assert done.stderr == f"labgang {args[0]}: {error['message']}\n"
    plain = labgang(str(state), *[a for a in args if a != "--json"], click_only=click_only)
    assert (plain.returncode, plain.stdout) == (1, "")  # without --json: the line on stderr only, as before


@pytest.fixture
def coordinator(tmp_path: Path):
    """A real coordinator (no agent: jobs stay pending) on a temporary state directory."""
    yield from running_coordinator(tmp_path, "")


@pytest.mark.slow
def test_a_refusal_by_the_coordinator_is_the_same_error_object_on_both_paths(coordinator: str) -> None:
    """A queue the cluster does not have (400, field ``queue``, its allowed values) and a job it does
    not have (404): the fast path and the click command print the same object and line, same status."""
    for args in (["submit", "--json", "-q", "nope", "--", "true"], ["show", "999", "--json"]):
        fast, slow = labgang(coordinator, *args), labgang(coordinator, *args, click_only=True)
        assert (fast.returncode, fast.stdout, fast.stderr) == (slow.returncode, slow.stdout, slow.stderr), args
        assert fast.returncode in (1, 2)
        error = error_of(fast)
        if args[0] == "submit":
            assert error["field"] == "queue" and error["allowed"] == ["default"], error
            assert fast.returncode == 2
    assert labgang(coordinator, "queue", "--json").returncode == 0  # refused nothing: stdout is the listing
    assert "error" not in json.loads(labgang(coordinator, "queue", "--json").stdout)


@pytest.mark.slow
def test_a_verb_on_jobs_answers_a_refusal_with_the_error_object_and_lists_what_it_did(coordinator: str) -> None:
    """``hold``/``release``/``requeue`` act on each job on their own (as scontrol): every job refused
    is the first refusal's error object on stdout; some done is the list of those done, exit 1."""
    job = labgang(coordinator, "submit", "--", "true").stdout.strip()
    for args in (["hold", "999"], ["release", "999"], ["requeue", "999"], ["release", job]):
        done = labgang(coordinator, *args, "--json")
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        error = error_of(done)
        assert str(args[1]) in str(error["message"]), (args, error)
    both = labgang(coordinator, "hold", job, "999", "--json")
    assert both.returncode == 1, both.stderr
    assert [view["id"] for view in json.loads(both.stdout)] == [job]  # the job held, the other refused
    assert both.stderr == "labgang hold: no job 999\n", both.stderr
    assert labgang(coordinator, "show", job, "--json").returncode == 0


# Usage errors that click finds while parsing, before the command's --json exists as a parameter.
USAGE_ERRORS = [
    (["queue", "--json", "--bogus"], None, None, "no such option '--bogus'"),
    (["submit", "--json", "-n", "x", "--", "true"], "workers", "an integer >= 1", "-n/--workers: 'x'"),
    (["submit", "-n", "0", "--json", "--", "true"], "workers", "an integer >= 1", "-n/--workers: 0"),
    (["queue", "--json", "-t"], None, None, "option '-t' requires an argument"),
]


@pytest.mark.parametrize("click_only", [False, True], ids=["fast", "click"])
@pytest.mark.parametrize(("args", "field", "allowed", "said"), USAGE_ERRORS, ids=lambda a: str(a))
def test_a_usage_error_of_a_json_command_prints_the_error_object(
    tmp_path: Path, args, field, allowed, said, click_only
) -> None:
    done = labgang(str(tmp_path), *args, click_only=click_only)
    assert done.returncode == 2, done.stderr
    error = error_of(done)
    assert (error["field"], error["allowed"]) == (field, allowed)
    assert str(error["message"]).startswith(said), error
    assert done.stderr == f"labgang {args[0]}: {error['message']}\n"
    plain = labgang(str(tmp_path), *[a for a in args if a != "--json"], click_only=click_only)
    assert (plain.returncode, plain.stdout, plain.stderr) == (2, "", done.stderr)  # without --json: stderr only


def test_json_after_the_jobs_double_dash_is_the_jobs_word(tmp_path: Path) -> None:
    """``submit -n 0 -- prog --json``: the ``--json`` is the job's argument, so the usage error is the line only."""
    done = labgang(str(tmp_path), "submit", "-n", "0", "--", "prog", "--json", click_only=True)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith("labgang submit: -n/--workers: 0 is not in the range")


@pytest.mark.parametrize(
    ("args", "where"),
    [
        (["--state-dir", "/nowhere", "queue"], "(`labgang queue --state-dir ...`); see `labgang queue --help`"),
        (["--json", "nodes"], "(`labgang nodes --json ...`); see `labgang nodes --help`"),
        (["--bogus"], "(`labgang COMMAND --bogus ...`); see `labgang --help`"),
    ],
)
def test_an_option_before_the_command_says_where_it_goes(tmp_path: Path, args, where) -> None:
    done = labgang(str(tmp_path), *args, click_only=True)
    assert done.returncode == 2
    line = done.stderr.strip()
    assert line.startswith(f"labgang: no such option {args[0]!r} before the command"), line
    assert line.endswith(f"put a command's options after it {where}"), line
