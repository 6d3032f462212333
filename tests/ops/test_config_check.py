"""``labgang config check``: tells a cluster config from an agent config and validates each
with its own schema; the shipped examples pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.launcher.cli.config import config

CLUSTER = '[[queues]]\nname = "default"\nnominal = { gpu = 2 }\n'
AGENT = 'coordinator = "http://coord.lab:7461"\ninterval_s = 2.0\n[supervisor]\nallow_root = false\n'


def check(*args: str):
    return CliRunner().invoke(config, ["check", *args])


def write(tmp_path: Path, text: str, name: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_example_agent_config_is_checked_as_an_agent_config(repo_root: Path) -> None:
    path = str(repo_root / "config" / "agent.toml")
    res = check(path)
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"{path}: agent config ok ("), res.output
    assert "unknown key" not in res.output


def test_example_cluster_config_is_checked_as_a_cluster_config(repo_root: Path) -> None:
    path = str(repo_root / "config" / "cluster.toml")
    res = check(path)
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"{path}: cluster config ok ("), res.output


def test_auto_detects_by_keys_not_by_name(tmp_path: Path) -> None:
    res = check(write(tmp_path, AGENT, "node.toml"))
    assert res.exit_code == 0 and "agent config ok" in res.output, res.output
    res = check(write(tmp_path, CLUSTER, "agent.toml"))
    assert res.exit_code == 0 and "cluster config ok" in res.output, res.output


def test_agent_config_errors_use_the_agent_schema(tmp_path: Path) -> None:
    res = check(write(tmp_path, AGENT + 'foreign = "zz"\n', "a.toml"))  # under [supervisor]
    assert res.exit_code == 2
    assert "supervisor: foreign: 'zz' is not a policy (allowed: block, report)" in res.output
    bad = write(tmp_path, 'coordinator = "coord.lab:7461"\ninterval_s = 2.0\nnodee = "x"\n', "b.toml")
    res = check(bad)
    assert res.exit_code == 2
    assert f"{bad}: coordinator: 'coord.lab:7461' must be an http:// or https:// URL\n" in res.output
    assert f"{bad}: nodee: unknown key; allowed keys: address, coordinator" in res.output
    assert "queues" not in res.output


@pytest.mark.parametrize("name", ["a,b", "x y/z", "-n1", ""])
def test_a_node_name_a_node_list_would_split_is_refused(tmp_path: Path, name: str) -> None:
    """``node = "a,b"`` was taken, and a rank saw SLURM_JOB_NODELIST=a,b: two hosts to Slurm's tools."""
    res = check(write(tmp_path, f'node = "{name}"\n', "a.toml"))
    assert res.exit_code == 2, res.output
    assert f"node: {name!r} is not a node name; allowed: a letter or digit, then letters, digits" in res.output
    ok = check(write(tmp_path, 'node = "gpu-01.lab_2"\n', "b.toml"))
    assert ok.exit_code == 0 and "agent config ok (node gpu-01.lab_2" in ok.output, ok.output


def test_explicit_kind_overrides_detection(tmp_path: Path) -> None:
    f = write(tmp_path, AGENT, "a.toml")
    res = check("--kind", "cluster", f)
    assert res.exit_code == 2
    assert f"{f}: interval_s: unknown key" in res.output  # the cluster schema's answer
    res = check("--kind", "agent", f)
    assert res.exit_code == 0 and "agent config ok" in res.output


def test_kind_lists_allowed_values(tmp_path: Path) -> None:
    res = check("--kind", "node", write(tmp_path, AGENT, "a.toml"))
    assert res.exit_code == 2
    assert "auto" in res.output and "cluster" in res.output and "agent" in res.output


@pytest.mark.parametrize("text", ["", 'token_file = "/etc/labgang/cluster.token"\n'])
def test_undecidable_file_asks_for_kind(tmp_path: Path, text: str) -> None:
    f = write(tmp_path, text, "x.toml")
    res = check(f)
    assert res.exit_code == 2
    assert "--kind" in res.output and "Traceback" not in res.output


BAD_CLUSTER = """\
default_queue = "nope"
[[cohorts]]
name = "lab"
[[cohorts]]
name = "lab"
[[queues]]
name = "a"
cohort = "lab"
nominal = { gpu = 4 }
lending_limit = { gpu = 6 }
within_queue = "sometimes"
[[queues]]
name = "a"
nominal = { tpu = 2 }
borrowing_limit = { gpu = 1 }
[[queues]]
name = "c"
cohort = "other"
"""


def test_every_problem_is_reported_in_one_pass(tmp_path: Path) -> None:
    """Field errors (a policy name, an unknown resource) and every cross-field rule come out
    together, one line each with its key path and what is allowed."""
    f = write(tmp_path, BAD_CLUSTER, "c.toml")
    res = check(f)
    assert res.exit_code == 2, res.output
    assert all(line.startswith(f"{f}: ") for line in res.output.splitlines()), res.output  # one line per problem
    lines = [line.removeprefix(f"{f}: ") for line in res.output.splitlines()]
    expected = [
        "queues[0].within_queue: 'sometimes' is not allowed; allowed: never, lower-priority",
        "queues[1].nominal.tpu: unknown resource 'tpu'; allowed: 'gpu' or 'mig-<profile>'",
        "queues[1].name: duplicate name 'a' (first at queues[0]); allowed:",
        "cohorts[1].name: duplicate name 'lab' (first at cohorts[0]); allowed:",
        "default_queue: 'nope' is not a queue; allowed: a, c",
        "queues[0].lending_limit.gpu: 6 is above the nominal quota (4); allowed: 0..4",
        "queues[1].borrowing_limit: needs a cohort; allowed: set queues[1].cohort to one of lab or remove",
        "queues[2].cohort: 'other' is not declared in [[cohorts]]; allowed: lab",
    ]
    for want in expected:
        assert any(line.startswith(want) for line in lines), (want, lines)
    assert len(lines) == len(expected), lines


@pytest.mark.parametrize(
    "extra, problem",
    [
        (
            '[[queues]]\nname = "b"\ncohort = "lab"\nnominal = { gpu = 4 }\nlending_limit = { gpu = 6 }\n',
            "queues[1].lending_limit.gpu: 6 is above the nominal quota (4)",
        ),
        (
            '[[queues]]\nname = "b"\ncohort = "lab"\nlending_limit = { "mig-1g.10gb" = 1 }\n',
            "queues[1].lending_limit.mig-1g.10gb: 1 is above the nominal quota (0)",
        ),
        ('[[cohorts]]\nname = "lab"\n', "cohorts[1].name: duplicate name 'lab'"),
        (  # a parent's typo is caught as a queue's cohort typo is (it was taken as a root of its own)
            '[[cohorts]]\nname = "vision"\nparent = "labb"\n',
            "cohorts[1].parent: 'labb' is not declared in [[cohorts]]; allowed: one of lab, "
            "or a [[cohorts]] table named 'labb'",
        ),
    ],
    ids=["lending-above-nominal", "lending-without-nominal", "duplicate-cohort", "undeclared-parent"],
)
def test_cross_field_mistakes_alone_are_refused(tmp_path: Path, extra: str, problem: str) -> None:
    good = '[[cohorts]]\nname = "lab"\n[[queues]]\nname = "default"\ncohort = "lab"\nnominal = { gpu = 4 }\n'
    assert check(write(tmp_path, good, "ok.toml")).exit_code == 0
    res = check(write(tmp_path, good + extra, "c.toml"))
    assert res.exit_code == 2, res.output
    assert problem in res.output


def test_unknown_admin_is_a_warning_not_an_error(tmp_path: Path) -> None:
    text = 'admins = ["nosuchuser-lg", "root"]\nadmin_groups = ["nosuchgroup-lg"]\n' + CLUSTER
    res = check(write(tmp_path, text, "c.toml"))
    assert res.exit_code == 0, res.output
    assert "warning: admins: unknown user 'nosuchuser-lg' on this host" in res.output
    assert "warning: admin_groups: unknown group 'nosuchgroup-lg' on this host" in res.output
    assert "'root'" not in res.output
    assert "cluster config ok" in res.output


def test_every_bad_entry_and_huge_numbers_are_said_in_labgangs_words(tmp_path: Path) -> None:
    text = (
        'default_queue = "a"\n[priority_classes]\nhigh = "x"\n'
        '[[queues]]\nname = "a"\nnominal = { gpu = 1e30 }\n'
        '[[queues]]\nname = "b"\nnominal = { gpu = -1, tpu = 2 }\n'
    )
    f = write(tmp_path, text, "c.toml")
    res = check(f)
    assert res.exit_code == 2, res.output
    assert all(line.startswith(f"{f}: ") for line in res.output.splitlines()), res.output  # one line per problem
    lines = [line.removeprefix(f"{f}: ") for line in res.output.splitlines()]
    assert lines == [
        "priority_classes.high: 'x' is not allowed; allowed: an integer",
        "queues[0].nominal.gpu: 1e+30 is not allowed; allowed: a device count from 0 to 1000000",
        "queues[1].nominal.gpu: -1 is out of range; allowed: a device count from 0 to 1000000",
        "queues[1].nominal.tpu: unknown resource 'tpu'; allowed: 'gpu' or 'mig-<profile>' such as 'mig-1g.10gb'"
        " (devices), 'cpu' or 'memory' (host)",
    ]
    assert "Input should" not in res.output and "Unable to parse" not in res.output


def test_every_bad_cpu_and_memory_quota_entry_is_its_own_line(tmp_path: Path) -> None:
    """A quota table's host entries are checked whole: a bad ``memory`` does not hide a bad ``cpu``
    (or a bad device count) of the same table, and a string ``cpu`` does not hide the ``memory``
    beside it; each problem is one line naming its key."""
    text = (
        'default_queue = "a"\n[[queues]]\nname = "a"\ncohort = "lab"\n'
        'nominal = { gpu = -2, cpu = -1, memory = "lots" }\n'
        'borrowing_limit = { cpu = "x", memory = -5 }\n'
    )
    f = write(tmp_path, text, "c.toml")
    res = check(f)
    assert res.exit_code == 2, res.output
    lines = [line.removeprefix(f"{f}: ") for line in res.output.splitlines()]
    assert lines == [
        "queues[0].nominal.gpu: -2 is out of range; allowed: a device count from 0 to 1000000",
        "queues[0].nominal.cpu: -1 is out of range; allowed: a CPU count from 0 to 16777216",
        "queues[0].nominal.memory: 'lots' is not a memory size; allowed: a whole number with an optional unit"
        " K, M (default), G or T, e.g. 16G or 8000",
        "queues[0].borrowing_limit.cpu: 'x' is not allowed; allowed: a CPU count from 0 to 16777216",
        "queues[0].borrowing_limit.memory: -5 is out of range; allowed: a size from 0 to 4611686018427387904"
        " bytes, such as '512G'",
    ]


@pytest.mark.parametrize(
    "value,line",
    [
        ("99999999999", "queues[0].nominal.gpu: 99999999999 is out of range; allowed: a device count from 0 to"),
        ("nan", "queues[0].nominal.gpu: inf and nan are not allowed (allowed: a finite number)"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_file_and_key(tmp_path: Path, value: str, line: str) -> None:
    f = write(tmp_path, CLUSTER.replace("gpu = 2", f"gpu = {value}"), "c.toml")
    res = check(f)
    assert res.exit_code == 2
    [only] = res.output.splitlines()
    assert only.startswith(f"{f}: {line}"), only


def test_agent_seconds_must_be_numbers_not_bools_or_strings(tmp_path: Path) -> None:
    f = write(tmp_path, 'coordinator = "http://coord.lab:7461"\ninterval_s = true\nsample_s = "0.5"\n', "a.toml")
    res = check(f)
    assert res.exit_code == 2
    assert res.output.splitlines() == [
        f"{f}: interval_s: true is not allowed; allowed: a number of seconds",
        f"{f}: sample_s: '0.5' is not allowed; allowed: a number of seconds",
    ]
    ok = write(tmp_path, 'coordinator = "http://coord.lab:7461"\ninterval_s = 2\nsample_s = 0.5\n', "b.toml")
    assert check(ok).exit_code == 0


def test_a_token_file_the_daemon_would_refuse_is_a_warning(tmp_path: Path) -> None:
    """An admin's finding: ``config check`` said ok for a world-readable token file, then the
    coordinator refused to start on it. Now a warning names the key and the fix; a missing
    coordinator token is no warning (the coordinator creates it), a missing agent token is."""
    token = tmp_path / "cluster.token"
    token.write_text("t" * 40 + "\n")
    token.chmod(0o644)
    cluster = write(tmp_path, f'token_file = "{token}"\n' + CLUSTER, "c.toml")
    res = check(cluster)
    assert res.exit_code == 0, res.output
    assert (
        f"{cluster}: warning: token_file: {token} must be readable only by its owner (chmod 600 {token}): "
        "the daemon reading it would refuse to start"
    ) in res.output
    token.chmod(0o600)
    res = check(cluster)
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    token.write_text("short\n")
    res = check(cluster)
    assert "warning: token_file:" in res.output and "has 5 characters" in res.output, res.output
    missing = tmp_path / "nowhere.token"
    res = check(write(tmp_path, f'read_token_file = "{missing}"\n' + CLUSTER, "d.toml"))
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    res = check(write(tmp_path, f'token_file = "{missing}"\n' + AGENT, "a.toml"))
    assert res.exit_code == 0, res.output
    assert f"warning: token_file: {missing} does not exist: the daemon reading it would refuse to start" in res.output
