"""``labgang queue -q QUEUE -t STATE``: squeue's filters, on the fast path and the click path alike,
with a note when filters match nothing and a one-line refusal of a queue or state that does not exist."""

from __future__ import annotations

import json

import pytest
from coordinator_harness import running_coordinator
from labgang.launcher.api.client import ApiError, Client
from labgang.launcher.cli import jobs, quick

from tests.cli.test_quick import click_run, fast_run


@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--all"],
        ["-u", "bob"],
        ["--user=bob", "--json"],
        ["--json", "--all", "--state-dir", "/x"],
        ["-q", "vision", "-t", "pending,running", "--state", "admitted"],
        ["--queue=nlp", "-tPENDING"],
        ["-q", "a,b", "-q", "c", "-u", "root,0", "--user", "bob", "-t", "PD,r"],
    ],
)
def test_fast_queue_reads_the_flags_as_click_does(args):
    options, positional = quick.parse(args, quick._QUEUE_FLAGS, interspersed=True)
    params = jobs.queue.make_context("queue", list(args)).params
    assert positional == []
    assert options.get("all_users", False) == params["all_users"]
    assert tuple(options.get("user", ())) == params["user"]
    assert options.get("as_json", False) == params["as_json"]
    assert tuple(options.get("queue", ())) == params["queue"]
    assert tuple(options.get("states", ())) == params["states"]


@pytest.fixture
def coordinator(tmp_path):
    """A real coordinator (no agent: jobs stay pending) with one queue, ``default``."""
    yield from running_coordinator(tmp_path, "")


@pytest.mark.slow
def test_queue_filters_by_queue_and_state_and_says_when_nothing_matches(coordinator):
    for name in ("a", "b"):
        assert fast_run(coordinator, "submit", "--name", name, "--", "true").returncode == 0
    assert fast_run(coordinator, "cancel", "1").returncode == 0
    for run in (fast_run, click_run):
        listed = run(coordinator, "queue", "-q", "default", "-t", "PENDING")
        assert listed.returncode == 0 and listed.stderr == ""
        assert [line.split()[:2] for line in listed.stdout.splitlines()[1:]] == [["2", "b"]]
        as_json = run(coordinator, "queue", "--json", "--state", "pending,running")
        assert [job["name"] for job in json.loads(as_json.stdout)["jobs"]] == ["b"]

        nothing = run(coordinator, "queue", "-t", "running", "-t", "admitted")
        assert nothing.returncode == 0 and nothing.stdout.splitlines()[0].startswith("JOBID")
        assert nothing.stderr == (
            "labgang queue: note: no active job matches state running,admitted; "
            "finished jobs are in `labgang history`\n"
        )
        stranger = run(coordinator, "queue", "-u", "no-such-user-here")
        assert stranger.returncode == 0 and len(stranger.stdout.splitlines()) == 1
        assert stranger.stderr.splitlines() == [
            "labgang queue: note: no active job matches user no-such-user-here; finished jobs are in `labgang history`",
            "labgang queue: note: there is no user 'no-such-user-here' on this machine",
        ]
        plain_empty = run(coordinator, "queue", "--user", "root")
        assert plain_empty.returncode == 0


@pytest.mark.slow
def test_a_queue_or_state_that_does_not_exist_is_refused_in_one_line_on_both_paths(coordinator):
    for run in (fast_run, click_run):
        bad_queue = run(coordinator, "queue", "-q", "nosuch")
        assert bad_queue.returncode == 2 and bad_queue.stdout == ""
        assert bad_queue.stderr == "labgang queue: -q/--queue: no queue 'nosuch'; allowed: default\n"
        bad_state = run(coordinator, "queue", "-t", "pending,done")
        assert bad_state.returncode == 2 and len(bad_state.stderr.splitlines()) == 1
        assert bad_state.stderr.startswith("labgang queue: -t/--state: state 'done' is not a job state; allowed: ")


# A coordinator as it was before ``view=table`` and the ``queue``/``state`` filters (still running,
# say, after the package was upgraded under it): it refuses the view and ignores the filters.
OLD_COORDINATOR = (
    "import sys\n"
    "from labgang.launcher.coordinator import handlers\n"
    "handlers._VIEWS = ('full', 'queue')\n"
    "handlers._job_filter = lambda config, jobs, query: None\n"
    "from labgang.launcher.cli.main import main\n"
    "sys.argv[0] = 'labgang'\n"
    "main()\n"
)


@pytest.fixture
def old_coordinator(tmp_path):
    yield from running_coordinator(tmp_path, "", ("-c", OLD_COORDINATOR))


@pytest.mark.slow
def test_queue_against_a_coordinator_from_before_the_table_view_renders_and_filters_itself(old_coordinator):
    for name in ("a", "b", "c"):
        assert fast_run(old_coordinator, "submit", "--name", name, "--", "true").returncode == 0
    assert fast_run(old_coordinator, "cancel", "2").returncode == 0
    with Client.for_state_dir(old_coordinator) as client, pytest.raises(ApiError) as refused:
        client.job_table()
    assert (refused.value.status, refused.value.field) == (400, "view")  # it really is the old one
    for run in (fast_run, click_run):
        listed = run(old_coordinator, "queue")
        assert listed.returncode == 0 and listed.stderr == ""
        assert [line.split()[:2] for line in listed.stdout.splitlines()[1:]] == [["1", "a"], ["3", "c"]]
        assert listed.stdout.splitlines()[0].split()[0] == "JOBID"
        nothing = run(old_coordinator, "queue", "-t", "running")
        assert nothing.returncode == 0 and len(nothing.stdout.splitlines()) == 1
        assert nothing.stderr.startswith("labgang queue: note: no active job matches state running")
        as_json = run(old_coordinator, "queue", "--json", "-q", "default", "-t", "pending")
        assert [job["name"] for job in json.loads(as_json.stdout)["jobs"]] == ["a", "c"]


# A coordinator from between ``view=table`` and ``view=text`` (the table as a JSON string): it refuses the
# text view, so the client asks for the table view instead.
TABLE_ONLY_COORDINATOR = OLD_COORDINATOR.replace(
    "handlers._VIEWS = ('full', 'queue')\nhandlers._job_filter = lambda config, jobs, query: None\n",
    "handlers._VIEWS = ('full', 'queue', 'table')\n",
)


@pytest.fixture
def table_only_coordinator(tmp_path):
    yield from running_coordinator(tmp_path, "", ("-c", TABLE_ONLY_COORDINATOR))


@pytest.mark.slow
def test_queue_against_a_coordinator_from_before_the_text_view_reads_its_table_view(table_only_coordinator):
    assert TABLE_ONLY_COORDINATOR != OLD_COORDINATOR
    for name in ("a", "b", "c"):
        assert fast_run(table_only_coordinator, "submit", "--name", name, "--", "true").returncode == 0
    assert fast_run(table_only_coordinator, "cancel", "2").returncode == 0
    with Client.for_state_dir(table_only_coordinator) as client:
        status, _, body = client.request("GET", "/v1/jobs", query={"view": "text"})
        assert status == 400 and b'"view"' in body  # it really is one without the text view
        table, count = client.job_table(states=("PD",))
    assert count == 2 and [line.split()[:2] for line in table.splitlines()[1:]] == [["1", "a"], ["3", "c"]]
    for run in (fast_run, click_run):
        listed = run(table_only_coordinator, "queue")
        assert (listed.returncode, listed.stderr) == (0, "")
        assert [line.split()[:2] for line in listed.stdout.splitlines()] == [["JOBID", "NAME"], ["1", "a"], ["3", "c"]]
        nothing = run(table_only_coordinator, "queue", "-t", "running")
        assert nothing.returncode == 0 and len(nothing.stdout.splitlines()) == 1
        assert nothing.stderr.startswith("labgang queue: note: no active job matches state running")
