"""``--success-policy``, ``--failure-policy``, ``--max-restarts`` and ``--startup-order`` on
``submit``/``run`` (docs/job-groups.md): the same body from the click command and the fast path;
a bad value is one line naming the flag, exit 2, checked by the CLI where it can and by the
coordinator against the job's groups otherwise (nothing is stored)."""

from __future__ import annotations

import re

import pytest
from click.testing import CliRunner
from labgang.launcher.cli import job_request, quick, submission
from labgang.launcher.cli.main import cli
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.errors import BadRequest
from labgang.launcher.coordinator.requests import Caller, build_spec

ENV = {"HOME": "/home/u"}
KEYS = ("success_policy", "failure_policy", "max_restarts", "startup_order")


def _click(args: list[str], command=submission.submit) -> dict[str, object]:
    ctx = command.make_context(command.name, list(args))
    params = dict(ctx.params)
    for key in ("state_dir", "as_json", "all_ranks", "quiet"):
        params.pop(key, None)
    return submission.build_submission(**params, env=ENV, cwd="/work")


def _fast(args: list[str], flags=None) -> dict[str, object]:
    options, argv = quick._parse_submission(args, flags or quick._submit_flags())
    for key in ("state_dir", "as_json", "all_ranks", "quiet"):
        options.pop(key, None)
    return job_request.build_submission(argv=argv, **options, env=ENV, cwd="/work")


@pytest.mark.parametrize(
    ("args", "want"),
    [
        ([], {}),
        (["--success-policy", "group:g0"], {"success_policy": "group:g0"}),
        (["--failure-policy", "restart", "--max-restarts", "3"], {"failure_policy": "restart", "max_restarts": 3}),
        (["--startup-order", "launcher, workers"], {"startup_order": ["launcher", "workers"]}),
    ],
)
def test_both_paths_send_the_same_policy_fields(args, want):
    for command, flags in ((submission.submit, quick._submit_flags()), (submission.run, quick._run_flags())):
        body = _fast([*args, "--", "train"], flags)
        assert body == _click([*args, "--", "train"], command)
        assert {k: body[k] for k in KEYS if k in body} == want


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--failure-policy", "retry"], "--failure-policy"),
        (["--max-restarts", "-1"], "--max-restarts"),
        (["--max-restarts", "1001"], "--max-restarts"),
        (["--startup-order", "g0,,g1"], "--startup-order"),
    ],
)
def test_bad_values_are_one_line_naming_the_flag_exit_2(args, flag, tmp_path):
    result = CliRunner().invoke(cli, ["submit", "--state-dir", str(tmp_path), *args, "--", "true"], prog_name="labgang")
    assert result.exit_code == 2
    assert flag in result.output


CONFIG = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})
ALICE = Caller(uid=1000, user="alice")


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ({"success_policy": "some"}, "success_policy", "all, any, group:NAME"),
        ({"success_policy": "group:launcher"}, "success_policy", "group: one of g0"),  # a one-group job is g0
        ({"failure_policy": "retry"}, "failure_policy", "fail, restart"),
        ({"max_restarts": 5000}, "max_restarts", "<= 1000"),
        ({"max_restarts": 2}, "max_restarts", "allowed: --max-restarts only with --failure-policy restart"),
        ({"max_restarts": 2, "failure_policy": "fail"}, "max_restarts", "--max-restarts 2 without --failure-policy"),
        ({"startup_order": ["g1"]}, "startup_order", "names among g0"),
    ],
)
def test_the_coordinator_refuses_a_policy_the_job_cannot_honour(extra, field, words):
    with pytest.raises(BadRequest) as info:
        build_spec({"argv": ["true"], **extra}, ALICE, CONFIG)
    assert info.value.field == field and words in str(info.value)


def test_a_good_policy_is_kept_in_the_spec_and_the_defaults_are_not_stored():
    spec = build_spec(
        {"argv": ["true"], "failure_policy": "restart", "max_restarts": 2, "success_policy": "any"}, ALICE, CONFIG
    )
    assert (spec.failure_policy, spec.max_restarts, spec.success_policy) == ("restart", 2, "any")
    assert {k: spec.to_dict()[k] for k in ("failure_policy", "max_restarts", "success_policy")} == {
        "failure_policy": "restart",
        "max_restarts": 2,
        "success_policy": "any",
    }
    plain = build_spec({"argv": ["true"]}, ALICE, CONFIG).to_dict()
    assert not set(KEYS) & set(plain)


@pytest.mark.parametrize(
    ("policy", "line"),
    [
        (None, None),
        ({"success": "all", "failure": "fail", "max_restarts": 0, "restarts_used": 0, "startup_order": []}, None),
        (
            {"success": "group:launcher", "failure": "restart", "max_restarts": 3, "restarts_used": 1,
             "startup_order": ["launcher", "workers"]},
            "success group:launcher; failure restart (1 of 3 restarts used); startup order launcher,workers",
        ),
    ],
)  # fmt: skip
def test_show_says_the_policies_that_are_not_a_plain_gangs(policy, line):
    from labgang.launcher.cli.format import job_detail, lifecycle_policy_text

    assert lifecycle_policy_text(policy) == line
    text = job_detail({"id": "1", "state": "running", "lifecycle_policy": policy}, now=0.0)
    if line is None:
        assert "Policies" not in text
    else:
        assert re.search(r"^Policies:\s+" + re.escape(line) + "$", text, re.M), text


POLICIES = """
success_policy = "group:launcher"
failure_policy = "restart"
max_restarts = 2
startup_order = "launcher, workers"
"""
GROUPS = """
[[group]]
name = "launcher"
command = ["mpirun"]
resources = { gpus = 0 }
[[group]]
name = "workers"
ranks = 4
command = "python worker.py"
resources = { gpus = 2 }
"""
JOB_FILE = POLICIES + GROUPS


def test_a_job_file_gives_the_policies_at_its_top_level_and_the_flags_win(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(JOB_FILE)
    body = _fast(["-f", str(path)])
    assert body == _click(["-f", str(path)])
    assert {k: body[k] for k in KEYS} == {
        "success_policy": "group:launcher",
        "failure_policy": "restart",
        "max_restarts": 2,
        "startup_order": ["launcher", "workers"],
    }
    over = _fast(["-f", str(path), "--max-restarts", "5", "--success-policy", "all"])
    assert (over["max_restarts"], over["success_policy"], over["failure_policy"]) == (5, "all", "restart")


@pytest.mark.parametrize(
    ("line", "words"),
    [("max_restarts = -1", "max_restarts: -1; allowed: a whole number >= 0"),
     ("startup_order = [1, 2]", "startup_order: [1, 2]; allowed: a list of group names"),
     ('failure_policy = ""', "failure_policy: ''; allowed: a non-empty string")],
)  # fmt: skip
def test_a_bad_policy_in_a_job_file_is_one_line_naming_the_key_exit_2(tmp_path, line, words):
    path = tmp_path / "job.toml"
    path.write_text(line + "\n" + GROUPS)
    result = CliRunner().invoke(cli, ["submit", "--state-dir", str(tmp_path), "-f", str(path)], prog_name="labgang")
    assert result.exit_code == 2
    assert words in result.output, result.output
