"""The job commands' flags, output and exit statuses, against a real aiohttp server on a Unix socket."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner
from labgang.launcher.cli.follow import exit_status_of
from labgang.launcher.cli.main import cli
from labgang.launcher.cli.submission import build_submission
from unanswered_hint import agent_hint


def invoke(args, state_dir, env=None):
    return CliRunner().invoke(cli, [*args[:1], "--state-dir", str(state_dir), *args[1:]], env=env)


def test_submit_prints_the_id_and_sends_the_flags(fake):
    result = invoke(
        [
            "submit",
            "-n",
            "4",
            "-g",
            "2",
            "-q",
            "vision",
            "-p",
            "high",
            "--grace",
            "30s",
            "--time",
            "2h",
            "--no-requeue",
            "--signal",
            "USR1@1m",
            "--",
            "python",
            "train.py",
            "--lr",
            "3",
        ],
        fake.socket_path.parent,
        env={"CUDA_VISIBLE_DEVICES": "GPU-x", "KEEP_ME": "1"},
    )
    assert result.exit_code == 0, result.output
    assert result.output == "1\n"
    method, path, body = fake.received[-1]
    assert (method, path) == ("POST", "/v1/jobs")
    assert body["argv"] == ["python", "train.py", "--lr", "3"]
    assert (body["workers"], body["gpus_per_worker"], body["queue"], body["priority"]) == (4, 2, "vision", "high")
    assert (body["grace_s"], body["time_limit_s"], body["requeue"], body["signal"]) == (30, 7200, False, "SIGUSR1@60")
    assert "name" not in body and body["mig"] is None  # the coordinator names it after train.py
    assert body["env"]["KEEP_ME"] == "1" and "CUDA_VISIBLE_DEVICES" not in body["env"]


def test_options_after_the_command_belong_to_the_command(fake):
    result = invoke(["submit", "python", "-n", "9"], fake.socket_path.parent)
    assert result.exit_code == 0, result.output
    assert fake.received[-1][2]["argv"] == ["python", "-n", "9"] and fake.received[-1][2]["workers"] == 1


def test_submit_json(fake):
    result = invoke(["submit", "--json", "--mig", "mig-1g.10gb", "-p", "5", "--", "true"], fake.socket_path.parent)
    assert result.exit_code == 0, result.output
    job = json.loads(result.output)["job"]
    assert (job["id"], job["mig"], job["priority"], job["gpus_per_worker"]) == ("1", "1g.10gb", 5, 1)


@pytest.mark.parametrize(
    "args, fragment",
    [
        (
            ["-g", "0"],
            "labgang submit: -g/--gpus-per-worker: 0 is only for one group of a job of groups "
            "(CMD : OPTIONS -- CMD); allowed: 1 or more\n",
        ),
        (["-n", "0"], "labgang submit: -n/--workers: 0 is not in the range x>=1; allowed: an integer >= 1\n"),
        (["--mig", "big"], "labgang submit: --mig: 'big' is not a MIG profile; allowed: a profile name"),
        (["--mig", "1g.10gb", "-g", "2"], "-g/--gpus-per-worker and --mig exclude each other"),
        (
            ["--time", "soon"],
            "labgang submit: -t/--time: 'soon' is not a time limit; allowed: minutes (90), MM:SS, HH:MM:SS, D-HH",
        ),
        (["--signal", "USR9@60"], "unknown signal 'USR9'"),
        (["-p", "very high"], "-p/--priority: 'very high' is neither an integer nor a priority class name"),
    ],
)
def test_bad_flags_are_usage_errors_and_send_nothing(fake, args, fragment):
    result = invoke(["submit", *args, "--", "true"], fake.socket_path.parent)
    assert result.exit_code == 2
    assert fragment in result.output
    assert fake.received == []


def test_refused_field_names_the_flag_and_what_is_allowed(fake):
    result = invoke(["submit", "-q", "nope", "--", "true"], fake.socket_path.parent)
    assert result.exit_code == 2
    assert "labgang submit: -q/--queue: unknown queue 'nope' (allowed: default)" in result.output


def test_missing_command_is_a_usage_error(fake):
    result = invoke(["submit", "-n", "2"], fake.socket_path.parent)
    assert result.exit_code == 2 and "CMD" in result.output


def test_no_coordinator_is_one_line_and_status_1(short_dir):
    result = invoke(["queue"], short_dir)
    assert result.exit_code == 1
    assert result.output == (
        f"labgang queue: no labgang coordinator at {short_dir / 'labgang.sock'}; "
        f"start one with `labgang up`{agent_hint()}\n"
    )


def test_state_dir_from_environment(fake):
    result = CliRunner().invoke(cli, ["queues"], env={"LABGANG_STATE_DIR": str(fake.socket_path.parent)})
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[1].split() == ["default", "-", "gpu=8", "gpu=2", "-", "-", "0.00", "1", "1", "1"]


def test_cancel_reports_each_job_and_fails_if_any_is_refused(fake):
    result = invoke(["cancel", "3", "2", "1"], fake.socket_path.parent)
    assert result.exit_code == 1
    assert "job 3: cancelled\n" in result.output
    assert "labgang cancel: job 2 belongs to bob\n" in result.output  # the id once
    assert "job 1: already succeeded\n" in result.output
    assert [r[1] for r in fake.received if r[0] == "POST"] == ["/v1/jobs/3/cancel", "/v1/jobs/2/cancel"]


def test_logs_prints_the_rank_output(fake):
    result = invoke(["logs", "1"], fake.socket_path.parent)
    assert result.exit_code == 0, result.output
    assert result.output == "hello\nworld\n"


def test_show_unknown_job_is_refused(fake):
    result = invoke(["show", "9"], fake.socket_path.parent)
    assert result.exit_code == 1 and "no job 9" in result.output


def test_build_submission_defaults(tmp_path):
    mine = os.umask(0o027)  # the caller's umask goes with the submission (and is put back at once)
    try:
        body = build_submission(
            argv=["/usr/bin/python3", "-c", "pass"],
            env={"A": "1", "RANK": "3", "LABGANG_STATE_DIR": "/x"},
            cwd=str(tmp_path),
        )
        assert os.umask(0o027) == 0o027
    finally:
        os.umask(mine)
    assert body == {
        "workers": 1,
        "gpus_per_worker": 1,
        "mig": None,
        "requeue": True,
        "argv": ["/usr/bin/python3", "-c", "pass"],
        "env": {"A": "1"},
        "cwd": str(tmp_path),
        "umask": 0o027,
    }


@pytest.mark.parametrize(
    "job, status",
    [
        ({"state": "succeeded", "exit_status": 0}, 0),
        ({"state": "failed", "exit_status": 3}, 3),
        ({"state": "failed", "exit_status": 137}, 137),
        ({"state": "failed", "exit_status": None}, 1),
        ({"state": "cancelled", "exit_status": 143}, 1),
    ],
)
def test_exit_status_of(job, status):
    assert exit_status_of(job) == status


def _real_validation(fake, user: str, **config):
    """Have the fake refuse submissions exactly as the real coordinator's build_spec does for ``user``."""
    from labgang.launcher.config.cluster import parse_config
    from labgang.launcher.coordinator.requests import Caller, build_spec

    cfg = parse_config(config)
    fake.validate = lambda body: build_spec(body, Caller(uid=4242, user=user), cfg)


def test_unknown_priority_class_lists_the_classes_once(fake):
    _real_validation(
        fake, "root", priority_classes={"batch": 0, "default": 10, "high": 100}, queues=[{"name": "default"}]
    )
    result = invoke(["submit", "-p", "urgent", "--", "true"], fake.socket_path.parent)
    assert result.exit_code == 2, result.output
    assert "unknown priority class 'urgent'" in result.output
    assert result.output.count("batch") == 1, result.output


def test_refused_default_queue_says_it_came_from_the_default(fake):
    _real_validation(
        fake,
        "bob",
        default_queue="team-a",
        queues=[{"name": "team-a", "users": ["alice"]}, {"name": "shared"}, {"name": "b", "users": ["bob"]}],
    )
    result = invoke(["submit", "--", "true"], fake.socket_path.parent)
    assert result.exit_code == 1, result.output
    assert result.output == (
        "labgang submit: default queue 'team-a' (from cluster.toml default_queue) is not open to user 'bob'; "
        "use -q to pick one of: shared, b\n"
    )
    # with -q the refusal is about the queue given, as before
    result = invoke(["submit", "-q", "team-a", "--", "true"], fake.socket_path.parent)
    assert result.exit_code == 1 and "from cluster.toml" not in result.output
    assert "user 'bob' may not submit to queue 'team-a'" in result.output


@pytest.mark.parametrize("command", ["cancel", "show", "logs"])
def test_a_job_id_that_is_not_a_number_is_a_usage_error(fake, command):
    result = invoke([command, "abc"], fake.socket_path.parent)
    assert result.exit_code == 2, result.output
    assert "'abc' is not a job id" in result.output and "a job number" in result.output
    assert fake.received == []


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["submit", "-n", "0", "--", "true"],
            "labgang submit: -n/--workers: 0 is not in the range x>=1; allowed: an integer >= 1",
        ),
        (
            ["submit", "--grace", "-5s", "--", "true"],
            "labgang submit: --grace: '-5s' is not a duration; allowed: a number of seconds, or with a unit: "
            "30s, 5m, 2h, 1d, 1h30m",
        ),
        (
            ["submit", "--mig", "bogus", "--", "true"],
            "labgang submit: --mig: 'bogus' is not a MIG profile; allowed: a profile name as nvidia-smi shows it, "
            "e.g. 1g.10gb, 3g.40gb, 1g.18gb+me",
        ),
        (["submit", "--bogus", "--", "true"], "labgang submit: no such option '--bogus'; see `labgang submit --help`"),
        (["submit", "-n", "2"], "labgang submit: missing argument '-- CMD [ARGS]...'; see `labgang submit --help`"),
        (
            ["cancel", "x"],
            "labgang cancel: JOB: 'x' is not a job id; allowed: a job number such as 12, "
            "or an array task such as 12_7 (see `labgang queue`)",
        ),
        (
            ["coordinator", "--config", "c.toml", "--tcp-port", "70000"],
            "labgang coordinator: --tcp-port: 70000 is not in the range 0<=x<=65535; "
            "allowed: an integer from 0 to 65535",
        ),
        (["bogus"], "labgang: no such command 'bogus'; see `labgang --help`"),
        (
            ["config", "check", "--kind", "x", "f"],
            "labgang config check: --kind: 'x' is not allowed; allowed: auto, cluster, agent, machine",
        ),
    ],
)
def test_usage_errors_are_one_line_in_the_same_style_as_refusals(args, line):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert result.output == line + "\n"  # no Usage:/Try/Error: block


EMPTY_GPU_MODEL = (
    "--gpu-model: must not be empty; allowed: part of a GPU name such as H100 (leave it out for any model)"
)


@pytest.mark.parametrize(
    "args, line",
    [
        (
            ["--name", "evil\n\x1b[31mred"],
            "labgang submit: --name: 'evil\\n\\x1b[31mred' contains control characters (\\n, \\x1b); "
            "allowed: printable characters",
        ),
        (["-q", ""], "labgang submit: -q/--queue: must not be empty; allowed: a queue name (see `labgang queues`)"),
        (["--gpu-model", ""], f"labgang submit: {EMPTY_GPU_MODEL}"),
        (["--gpu-model", "   "], f"labgang submit: {EMPTY_GPU_MODEL}"),
    ],
)
def test_names_with_control_characters_and_empty_queues_are_refused_before_sending(fake, args, line):
    result = invoke(["submit", *args, "--", "true"], fake.socket_path.parent)
    assert result.exit_code == 2
    assert result.output == line + "\n"
    assert fake.received == []


def test_cancel_of_the_same_job_twice_cancels_and_reports_it_once(fake):
    result = invoke(["cancel", "3", "1", "3", "1"], fake.socket_path.parent)
    assert result.exit_code == 0, result.output
    assert result.output == "job 3: cancelled\njob 1: already succeeded\n"
    assert [path for method, path, _ in fake.received if method == "POST"] == ["/v1/jobs/3/cancel"]


def test_cancel_of_an_unknown_job_names_it_once(fake):
    result = invoke(["cancel", "9"], fake.socket_path.parent)
    assert (result.exit_code, result.output) == (1, "labgang cancel: no job 9\n")
