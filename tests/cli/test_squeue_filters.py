"""``queue`` and ``history`` filters as a Slurm user types them (squeue's ``-u a,b``, ``-p a,b``,
``-t PD,R``, uids; sacct's ``-s pending,running``), against a real coordinator, on the fast path
and the click path alike; and the coordinator's ``user=``/``queue=``/``state=`` lists behind them."""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import subprocess

import pytest
from coordinator_harness import coordinator_process
from labgang.launcher import job_filters
from labgang.launcher.api.client import ApiError, Client
from labgang.launcher.lifecycle.states import JobState

from tests.cli.test_quick import click_run, fast_run

ME = pwd.getpwuid(os.geteuid()).pw_name  # whoever runs the tests
TWO_QUEUES = (
    'default_queue = "teama"\n'
    '[[queues]]\nname = "teama"\nnominal = { gpu = 8 }\n\n[[queues]]\nname = "teamb"\nnominal = { gpu = 8 }\n'
)


coordinator_with = contextlib.contextmanager(coordinator_process)
"""A real coordinator with a given cluster.toml, as a context manager (a second one on the same
``tmp_path`` is a restart): :func:`tests.cli.test_quick.coordinator_process`."""


def listed_ids(result: subprocess.CompletedProcess) -> list[str]:
    """The JOBID column of a ``queue`` table (after checking it succeeded without a note)."""
    assert (result.returncode, result.stderr) == (0, ""), result
    return [line.split()[0] for line in result.stdout.splitlines()[1:]]


def test_the_state_names_are_the_job_states_and_every_code_names_one():
    assert tuple(state.value for state in JobState) == job_filters.STATE_NAMES
    assert set(job_filters.STATE_CODES.values()) == set(job_filters.STATE_NAMES)
    assert job_filters.state_items(" pd, R ,cg,Cd,f,CA,cf,Running,,") == (
        "pending",
        "running",
        "terminating",
        "succeeded",
        "failed",
        "cancelled",
        "admitted",
    )
    with pytest.raises(ValueError, match=r"^state 'Done' is not a job state; allowed: pending \(PD\), "):
        job_filters.state_items("PD,Done")
    for empty in ("", ",,", " , "):
        with pytest.raises(ValueError, match=r"^must not be empty$"):
            job_filters.items(empty)


@pytest.mark.slow
def test_queue_takes_a_queue_its_jobs_are_still_in_after_it_left_the_configuration(tmp_path):
    with coordinator_with(tmp_path, '[[queues]]\nname = "default"\nnominal = { gpu = 8 }\n') as state:
        assert fast_run(state, "submit", "--name", "old", "--", "true").stdout.strip() == "1"
    with coordinator_with(tmp_path, TWO_QUEUES) as state:
        assert fast_run(state, "submit", "-q", "teama", "--name", "new", "--", "true").stdout.strip() == "2"
        for run in (fast_run, click_run):
            assert listed_ids(run(state, "queue", "-q", "default")) == ["1"], run
            assert listed_ids(run(state, "queue", "-q", "default,teama")) == ["1", "2"], run
            bad = run(state, "queue", "-q", "teamc")
            assert (bad.returncode, bad.stdout) == (2, "")
            assert bad.stderr == "labgang queue: -q/--queue: no queue 'teamc'; allowed: teama, teamb, default\n"


@pytest.fixture
def two_queues(tmp_path):
    """A coordinator with queues teama and teamb; jobs 1 (teama), 2 (teamb), 3 (teamb, cancelled)."""
    with coordinator_with(tmp_path, TWO_QUEUES) as state:
        for queue in ("teama", "teamb", "teamb"):
            assert fast_run(state, "submit", "-q", queue, "--", "true").returncode == 0
        assert fast_run(state, "cancel", "3").returncode == 0
        yield state


@pytest.mark.slow
def test_queue_filters_take_comma_lists_and_repeats_as_a_union(two_queues):
    for run in (fast_run, click_run):
        for args in (["-q", "teama", "-q", "teamb"], ["-q", "teama,teamb"], ["--queue=teamb", "-q", "teama, teamb"]):
            assert listed_ids(run(two_queues, "queue", *args)) == ["1", "2"], (run, args)
        for args in (["-u", "nobody", "-u", ME], [f"--user=nobody,{ME}"], ["-u", f"{ME},{ME}"]):
            assert listed_ids(run(two_queues, "queue", *args)) == ["1", "2"], (run, args)
        as_json = run(two_queues, "queue", "--json", "-q", "teamb", "-t", "pending,running")
        assert [job["id"] for job in json.loads(as_json.stdout)["jobs"]] == ["2"]
        history = run(two_queues, "history", "-s", "pending,cancelled", "--json")
        assert [(job["id"], job["state"]) for job in json.loads(history.stdout)["jobs"]] == [
            ("1", "pending"),
            ("2", "pending"),
            ("3", "cancelled"),
        ]
    with Client.for_state_dir(two_queues) as client:  # the API itself takes the lists
        assert [job["id"] for job in client.jobs(all_users=True, user=f"nobody,{ME}", queue="teamb,teama")] == [
            "1",
            "2",
            "3",
        ]
        table, count = client.job_table(all_users=True, user=f"{ME},nobody", queue="teamb", states=("PD", "ca"))
        assert count == 1 and table.splitlines()[1].split()[0] == "2"
        assert [job["id"] for job in client.history(states=("CA",))] == ["3"]
        with pytest.raises(ApiError) as refused:
            client.jobs(queue="teama,,teamc")
        assert (refused.value.status, refused.value.field, refused.value.message) == (
            400,
            "queue",
            "no queue 'teamc'; allowed: teama, teamb",
        )
        with pytest.raises(ApiError) as refused:
            client.history(states=("Done",))
        assert (refused.value.status, refused.value.field) == (400, "state")
        assert refused.value.message.startswith("state 'Done' is not a job state; allowed: pending (PD), ")


@pytest.mark.slow
def test_squeue_state_codes_any_case_and_an_unknown_state_quoted_as_typed(two_queues):
    for run in (fast_run, click_run):
        assert listed_ids(run(two_queues, "queue", "-t", "PD,R")) == ["1", "2"], run
        assert listed_ids(run(two_queues, "queue", "-tpd", "-q", "teamb")) == ["2"], run
        codes = run(two_queues, "history", "-s", "CA", "-s", "cd", "--json")
        assert [job["id"] for job in json.loads(codes.stdout)["jobs"]] == ["3"], run
        for command, flag in (("queue", "-t/--state"), ("history", "-s/--state")):
            bad = run(two_queues, command, flag[:2], "PD,Done")
            assert (bad.returncode, bad.stdout) == (2, ""), (run, command)
            assert bad.stderr.startswith(f"labgang {command}: {flag}: state 'Done' is not a job state; allowed: ")
            assert "pending (PD)" in bad.stderr and bad.stderr.count("\n") == 1


@pytest.mark.slow
def test_an_empty_filter_value_is_refused_naming_the_flag(two_queues):
    cases = [
        (["queue", "-t", ""], "labgang queue: -t/--state: must not be empty"),
        (["queue", "-t", ",,"], "labgang queue: -t/--state: must not be empty"),
        (["queue", "-q", ""], "labgang queue: -q/--queue: must not be empty"),
        (["queue", "--queue=,"], "labgang queue: -q/--queue: must not be empty"),
        (["queue", "-u", ""], "labgang queue: -u/--user: must not be empty"),
        (["queue", "-u", "root", "-u", " "], "labgang queue: -u/--user: must not be empty"),
        (["history", "-s", ","], "labgang history: -s/--state: must not be empty"),
    ]
    for run in (fast_run, click_run):
        for args, line in cases:
            result = run(two_queues, *args)
            assert (result.returncode, result.stdout, result.stderr) == (2, "", line + "\n"), (run, args)


@pytest.mark.slow
def test_a_uid_of_this_machine_names_its_user(two_queues):
    uid = str(os.geteuid())
    for run in (fast_run, click_run):
        assert listed_ids(run(two_queues, "queue", "-u", uid)) == ["1", "2"], run
        assert listed_ids(run(two_queues, "queue", "-u", f"nobody,{uid}")) == ["1", "2"], run
        history = run(two_queues, "history", "-u", uid, "--json")
        assert [job["id"] for job in json.loads(history.stdout)["jobs"]] == ["1", "2", "3"], run
        stranger = run(two_queues, "queue", "-u", "4000000000")  # no such uid: a name, as typed
        assert stranger.returncode == 0 and "there is no user '4000000000' on this machine" in stranger.stderr


@pytest.mark.slow
def test_history_says_when_its_filters_match_nothing_as_queue_does(two_queues):
    for run in (fast_run, click_run):
        empty = run(two_queues, "history", "-u", "nobody")
        assert empty.returncode == 0 and empty.stdout.splitlines() == [empty.stdout.splitlines()[0]]
        assert empty.stderr == "labgang history: note: no job of user nobody\n", run
        both = run(two_queues, "history", "-q", "teama", "-s", "R,CG", "--since", "1h")
        assert (
            both.stderr
            == "labgang history: note: no job of any user matches queue teama and state running,terminating "
            "in that time window\n"
        )
        queue = run(two_queues, "queue", "-u", "nobody")
        assert queue.stderr.startswith("labgang queue: note: no active job matches user nobody; ")
        assert run(two_queues, "history").stderr == ""  # no filter: nothing to explain
        window = run(two_queues, "history", "--since", "2099-01-01")  # a time window alone is a filter too
        assert (window.returncode, window.stderr) == (
            0,
            "labgang history: note: no job of any user in that time window\n",
        )


@pytest.mark.slow
def test_cancel_by_filters_cancels_the_jobs_every_filter_matches_one_line_each(tmp_path):
    with coordinator_with(tmp_path, TWO_QUEUES) as state:
        for queue, name in [("teama", "x"), ("teamb", "x"), ("teamb", "y"), ("teamb", "x"), ("teama", "y")]:
            assert fast_run(state, "submit", "-q", queue, "--name", name, "--", "true").returncode == 0
        fast = fast_run(state, "cancel", "-q", "teamb", "--name", "x,z", "-t", "PD")
        assert (fast.returncode, fast.stderr, fast.stdout) == (0, "", "job 2: cancelled\njob 4: cancelled\n")
        among = click_run(state, "cancel", "1", "3", "5", "-u", ME, "--name=y")  # only the JOBs that match
        assert (among.returncode, among.stderr, among.stdout) == (0, "", "job 3: cancelled\njob 5: cancelled\n")
        for run in (fast_run, click_run):
            nothing = run(state, "cancel", "-u", "nobody", "-q", "teama")
            assert (nothing.returncode, nothing.stdout) == (0, ""), run
            assert nothing.stderr == (
                "labgang cancel: note: no active job matches user nobody and queue teama; nothing to cancel\n"
            )
            bad = run(state, "cancel", "-q", "teamc")
            assert (bad.returncode, bad.stdout) == (2, "") and bad.stderr.startswith(
                "labgang cancel: -q/--queue: no queue 'teamc'; allowed: teama, teamb"
            )
            bare = run(state, "cancel")
            assert (bare.returncode, bare.stdout) == (2, "")
            assert bare.stderr == (
                "labgang cancel: give a JOB or a filter (-u/--user, -q/--queue, -t/--state, --name); "
                "see `labgang cancel --help`\n"
            )
        assert listed_ids(fast_run(state, "queue")) == ["1"]
