"""What the coordinator sends so that the hot commands compute nothing (issue 23 item 5, docs/cli-startup.md):
``show``'s text (``GET /v1/jobs/{id}?view=text``), ``submit``'s id (``Location``), ``cancel``'s look at
the job (``view=queue``), against a real coordinator; and the older coordinator's answers they fall back on."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from coordinator_harness import running_coordinator
from labgang.agent import paths
from labgang.launcher.api.client import ApiError, Client, socket_file_for
from labgang.launcher.cli.format import job_detail
from labgang.launcher.cli.job_facts import add_pitfalls, add_start_errors
from table_ages import without_ages


@pytest.fixture
def coordinator(tmp_path):
    """A real coordinator (no agent: jobs stay pending); yields its state directory."""
    yield from running_coordinator(tmp_path, "")


def rendered_here(client: Client, job_id: str, since: float, until: float) -> set[str]:
    """The text the command writes itself (JobView, start errors, pitfalls, ``job_detail``) at every instant
    from ``since`` to ``until`` (10 ms apart; ages are whole seconds, so this is each text of the window)."""
    job = client.job(job_id)
    add_start_errors(client, job)
    add_pitfalls(client, job)
    steps = int((until - since) / 0.01) + 2
    return {job_detail(job, since + i * 0.01) for i in range(steps)}


def submit(state: str, *args: str) -> str:
    """``labgang submit ARGS`` through the fast path; the id it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "submit", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "LABGANG_STATE_DIR": state},
        check=True,
    )
    return done.stdout.strip()


def cli(state: str, *args: str, click: bool = False, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``labgang ARGS`` through the fast path, or (``click``) the click group only: (status, stdout, stderr)."""
    entry = ["-c", "from labgang.launcher.cli.main import main; main()"] if click else ["-m", "labgang.launcher"]
    done = subprocess.run(
        [sys.executable, *entry, *args],
        capture_output=True,
        text=True,
        env={**os.environ, "LABGANG_STATE_DIR": state, **(env or {})},
    )
    return done.returncode, done.stdout, done.stderr


def both_ways(
    state: str, *args: str, env: dict[str, str] | None = None
) -> tuple[tuple[int, str, str], tuple[int, str, str]]:
    """``labgang ARGS`` through the fast path and through click, each ``(status, stdout, stderr)`` with its
    ages written ``AGE`` (the exact text, ages included, is held to the command's own rendering at an
    instant of the request by :func:`rendered_here`)."""
    fast, slow = cli(state, *args, env=env), cli(state, *args, click=True, env=env)
    return (fast[0], without_ages(fast[1]), fast[2]), (slow[0], without_ages(slow[1]), slow[2])


@pytest.mark.slow
def test_show_prints_the_coordinators_text_which_is_the_commands_own(coordinator, monkeypatch):
    held = submit(coordinator, "--hold", "-n", "2", "-g", "1", "--name", "held one", "--", "sleep", "1")
    after = submit(coordinator, "-d", f"afterok:{held}", "--time", "1h", "--name", "after", "--", "true")
    odd = submit(coordinator, "--name", "caf\u00e9 \U0001f600", "--", "echo", "tab\there")
    with Client(Path(coordinator) / "labgang.sock") as client:
        for job_id in (held, after, odd):
            since = time.time()
            text = client.job_text(job_id)
            until = time.time()
            assert isinstance(text, str), job_id
            assert text in rendered_here(client, job_id, since, until), job_id

        # The command's local time zone is not the coordinator's: the JobView, written by the command.
        with monkeypatch.context() as patched:
            patched.setenv("TZ", "Asia/Tokyo" if os.environ.get("TZ") != "Asia/Tokyo" else "UTC")
            assert client.job_text(held) == client.job(held)

        with pytest.raises(ApiError) as refused:
            client.job(held, view="table")
        assert (refused.value.status, refused.value.field) == (400, "view")
        assert refused.value.allowed == ["full", "queue", "text"]

    # Whole commands, fast path and click: the same status, output and errors; with another TZ too
    # (there the command writes the text itself).
    for args in (["show", held], ["show", after], ["show", odd], ["show", "999"]):
        fast, slow = both_ways(coordinator, *args)
        assert fast == slow, args
    fast, slow = both_ways(coordinator, "show", held, env={"TZ": "Asia/Tokyo"})
    assert fast[0] == 0 and fast == slow


@pytest.mark.slow
def test_show_of_an_array_and_show_json_are_written_by_the_command(coordinator):
    array_id = submit(coordinator, "--array", "0-2", "--", "true")
    for args in (["show", array_id], ["show", "--json", array_id], ["show", "--json", f"{array_id}_1"]):
        fast, slow = both_ways(coordinator, *args)
        assert fast[0] == 0 and fast == slow, args


@pytest.mark.slow
def test_submit_reads_its_id_from_location_and_cancel_reads_a_row(coordinator):
    with Client(Path(coordinator) / "labgang.sock") as client:
        status, headers, _ = client.request("POST", "/v1/jobs", body={"argv": ["true"], "workers": 1, "cwd": "/tmp"})
        assert status == 201 and headers["Location"].startswith("/v1/jobs/")
        job_id = headers["Location"].rpartition("/")[2]
        assert client.job(job_id)["id"] == job_id
        array_id = client.submit_id({"argv": ["true"], "workers": 1, "cwd": "/tmp", "array": "0-3"})
        assert client.array(array_id)["array"] == array_id and len(client.array(array_id)["jobs"]) == 4
        printed = submit(coordinator, "--array", "0-1", "--", "true")  # the array's id, as before
        assert [task["array_id"] for task in client.array(printed)["jobs"]] == [printed, printed]
        row = client.job(job_id, view="queue")
        assert (row["id"], row["state"]) == (job_id, "pending") and "argv" not in row
    assert cli(coordinator, "cancel", job_id) == (0, f"job {job_id}: cancelled\n", "")
    assert cli(coordinator, "cancel", job_id) == cli(coordinator, "cancel", job_id, click=True)
    assert cli(coordinator, "cancel", job_id)[1] == f"job {job_id}: already cancelled\n"


def test_a_coordinator_without_these_answers_gets_the_requests_of_before(fake):
    """The fake answers as a coordinator from before view=text, Location and view=queue: it ignores the
    query and sends JSON; the commands then read and write as they did."""
    with Client(fake.socket_path) as client:
        assert client.job_text("1") == {"id": "1", "state": "succeeded"}
        assert client.submit_id({"argv": ["true"]}) == "1"
    state = str(fake.socket_path.parent)
    fast, slow = both_ways(state, "show", "1")
    assert fast[0] == 0 and fast == slow and "State:       SUCCEEDED" in fast[1]
    assert ("GET", "/v1/jobs/1?view=text&tz=" + os.environ.get("TZ", "")) in [(m, p) for m, p, _ in fake.received]
    assert cli(state, "cancel", "1") == (0, "job 1: already succeeded\n", "")
    assert [path for method, path, _ in fake.received if method == "GET"][-1] == "/v1/jobs/1?view=queue"


@pytest.mark.parametrize("state_dir", ["/srv/lab", "/srv/lab/", "~/lab", "~", "relative/dir", Path("/srv/x")])
def test_a_given_state_directory_names_the_socket_paths_would(state_dir):
    """socket_file_for does not load agent/paths.py for a given state directory: the same file name."""
    assert socket_file_for(state_dir) == paths.socket_file(state_dir)
