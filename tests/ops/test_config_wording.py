"""Config refusals read the same in every command: a missing file is worded once for all of them,
a problem is said once (in the order found), and allowed values read ``a, b``, never a Python list.
Real processes (``python -m labgang.launcher``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from labgang.launcher.config.cluster import ConfigError, cross_field_problems, parse_config

TWO_QUEUES_NAMED_A = '[[queues]]\nname = "a"\n\n[[queues]]\nname = "a"\n'
DUPLICATE = (
    "queues[1].name: duplicate name 'a' (first at queues[0]); allowed: a name not used by another [[queues]] table"
)
NO_DEFAULT = "default_queue: not set, and its default 'default' is not a queue; set default_queue to one of: a"


def labgang(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "labgang.launcher", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )


def refused(out: subprocess.CompletedProcess[str]) -> list[str]:
    """stderr's lines of a refusal: exit status 2, nothing on stdout."""
    assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
    assert out.stdout == ""
    return out.stderr.splitlines()


@pytest.mark.parametrize(
    ("args", "head", "example"),
    [
        (("coordinator", "--config"), "labgang coordinator: --config", "config/cluster.toml"),
        (("agent", "--config"), "labgang agent: --config", "config/agent.toml"),
        (("export", "kueue", "--offline", "--config"), "labgang export kueue: --config", "config/cluster.toml"),
        (("export", "slurm", "--offline", "--config"), "labgang export slurm: --config", "config/cluster.toml"),
        (("config", "check"), "labgang config check: FILE", "config/cluster.toml"),
    ],
    ids=["coordinator", "agent", "export-kueue", "export-slurm", "config-check"],
)
def test_a_missing_config_file_is_worded_the_same_by_every_command(
    tmp_path: Path, args: tuple[str, ...], head: str, example: str
) -> None:
    missing = tmp_path / "missing.toml"
    extra = ("--state-dir", str(tmp_path / "state")) if args[0] in ("coordinator", "agent") else ()
    lines = refused(labgang(tmp_path, *args, str(missing), *extra))
    how = "--config FILE" if "--config" in args else "FILE"
    assert lines == [f"{head}: {missing}: no such file; pass {how} (e.g. {example})"]
    assert not (tmp_path / "state").exists()


def test_labgang_up_words_a_missing_config_as_the_others_do(tmp_path: Path, repo_root: Path) -> None:
    missing = tmp_path / "missing.toml"
    sim = repo_root / "config/sim/h100x8.toml"
    out = labgang(tmp_path, "up", "--config", str(missing), "--simulate", str(sim), "--state-dir", str(tmp_path / "s"))
    assert refused(out) == [
        f"labgang up: --config: {missing}: no such file; pass --config FILE (e.g. config/cluster.toml)"
    ]
    assert not (tmp_path / "s").exists()


def test_two_queues_named_alike_give_each_problem_once_in_every_command(tmp_path: Path) -> None:
    """The default_queue problem used to come twice: once from the schema's own cross-field check
    (without the "is not set" note) and once from the check on the raw file (with it)."""
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(TWO_QUEUES_NAMED_A)
    coordinator = refused(labgang(tmp_path, "coordinator", "--config", str(cfg), "--state-dir", str(tmp_path / "s")))
    assert coordinator == [f"labgang coordinator: --config: {cfg}: {DUPLICATE}; {NO_DEFAULT}"]
    check = refused(labgang(tmp_path, "config", "check", str(cfg)))  # a checker: one line per problem
    assert check == [f"{cfg}: {DUPLICATE}", f"{cfg}: {NO_DEFAULT}"]
    export = refused(labgang(tmp_path, "export", "kueue", "--offline", "--config", str(cfg)))
    assert export == [f"labgang export kueue: --config: {cfg}: {DUPLICATE}; {NO_DEFAULT}"]


@pytest.mark.parametrize(
    ("data", "problems"),
    [
        ({"queues": [{"name": "a"}, {"name": "a"}]}, [DUPLICATE, NO_DEFAULT]),
        ({"queues": [{"name": "a"}]}, [NO_DEFAULT]),  # every key valid: only the cross-field rule
        (
            {"queues": [{"name": "a"}, {"name": "b"}], "default_queue": "c"},
            ["default_queue: 'c' is not a queue; allowed: a, b"],
        ),
        (
            {"queues": [{"name": "a", "cohort": "x"}, {"name": "b"}], "cohorts": [{"name": "lab"}, {"name": "ml"}]},
            [
                "default_queue: not set, and its default 'default' is not a queue; set default_queue to one of: a, b",
                "queues[0].cohort: 'x' is not declared in [[cohorts]]; allowed: lab, ml",
            ],
        ),
        (
            {"queues": [{"name": "a", "within_queue": "x"}], "tenants": [{"name": "t", "queue": "q"}]},
            [
                "queues[0].within_queue: 'x' is not allowed; allowed: never, lower-priority, "
                "lower-or-newer-equal-priority",
                NO_DEFAULT,
                "tenants: only allowed with admission_fair_sharing = { half_life = <seconds> }",
                "tenants[0].queue: 'q' is not a queue; allowed: a",
            ],
        ),
    ],
    ids=["duplicate-names", "only-cross-field", "explicit-default", "undeclared-cohort", "field-and-cross-field"],
)
def test_each_problem_is_said_once_in_order_with_allowed_values_as_a_list_a_person_reads(
    data: dict[str, object], problems: list[str]
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_config(data)
    assert caught.value.problems == problems
    assert "['" not in str(caught.value)


def test_a_config_error_keeps_the_first_of_repeated_problems() -> None:
    err = ConfigError("c.toml", ["b: bad", "a: bad", "b: bad"])
    assert err.problems == ["b: bad", "a: bad"] and str(err) == "c.toml: b: bad; a: bad"


def test_no_queue_names_at_all_still_says_what_is_allowed() -> None:
    assert cross_field_problems({"queues": [], "default_queue": "x"}) == [
        "default_queue: 'x' is not a queue; allowed: the name of a [[queues]] table"
    ]
    assert cross_field_problems({"queues": []}) == [
        "default_queue: not set, and its default 'default' is not a queue; "
        "set default_queue to the name of a [[queues]] table"
    ]


def test_config_check_of_one_queue_without_default_queue_says_it_in_one_readable_line(tmp_path: Path) -> None:
    """A new user's first config: one [[queues]] named ``a`` and no default_queue. The line says what is
    wrong (not set, its default is no queue) and what to do (set it to one of the queues), once each."""
    bad = tmp_path / "BAD.toml"
    bad.write_text('[[queues]]\nname = "a"\n')
    assert refused(labgang(tmp_path, "config", "check", str(bad))) == [
        f"{bad}: default_queue: not set, and its default 'default' is not a queue; set default_queue to one of: a"
    ]
