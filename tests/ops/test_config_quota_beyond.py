"""A nominal quota above the cluster's devices is a warning (exit 0) where the cluster's nodes are
known: ``config check --machine``, and the rule itself over queues and nested cohorts."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from click.testing import CliRunner
from labgang.launcher.cli.config import config
from labgang.launcher.config.quota_beyond import quota_beyond_cluster

TREE = """default_queue = "nlp"
[[cohorts]]
name = "lab"
[[cohorts]]
name = "vision-team"
parent = "lab"
nominal = { gpu = 2 }
[[queues]]
name = "vision"
cohort = "vision-team"
nominal = { gpu = 6 }
[[queues]]
name = "nlp"
cohort = "lab"
nominal = { gpu = 4, cpu = 512 }
"""


def test_config_check_warns_of_each_queue_and_cohort_above_the_named_nodes(tmp_path: Path, repo_root: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(TREE)
    node = str(repo_root / "config" / "sim" / "n1-4gpu.toml")  # 4 GPUs
    res = CliRunner().invoke(config, ["check", str(path), "--machine", node])
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith(f"{path}: cluster config ok")
    assert res.stderr.splitlines() == [
        f"{path}: warning: queue 'vision': nominal quota gpu=6 is above the cluster's 4 gpu (1 node); "
        "at most 4 can ever be in use",
        f"{path}: warning: cohort 'lab': nominal quota gpu=12 is above the cluster's 4 gpu (1 node); "
        "at most 4 can ever be in use",
        f"{path}: warning: cohort 'vision-team': nominal quota gpu=8 is above the cluster's 4 gpu (1 node); "
        "at most 4 can ever be in use",
    ]  # nlp's 4 gpu fit; its cpu is no device: not compared
    two = CliRunner().invoke(config, ["check", str(path), "--machine", node, "--machine", node])
    assert two.exit_code == 0 and "queue 'vision'" not in two.stderr  # 6 of 8 fit now
    assert "cohort 'lab': nominal quota gpu=12 is above the cluster's 8 gpu (2 nodes)" in two.stderr
    alone = CliRunner().invoke(config, ["check", str(path)])  # no nodes named: nothing to compare
    assert alone.exit_code == 0 and alone.stderr == ""


def test_a_machine_that_is_no_machine_file_is_refused_before_ok(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(TREE)
    res = CliRunner().invoke(config, ["check", str(path), "--machine", str(path)])
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.startswith(f"labgang config check: --machine: {path}: a TOML file but not a machine file")


def test_mig_quota_is_compared_with_the_mig_devices() -> None:
    queue = SimpleNamespace(name="q", cohort=None, nominal={"mig-1g.10gb": 9, "gpu": 0})
    lines = quota_beyond_cluster([queue], [], {"mig-1g.10gb": 8}, 1)
    assert lines == [
        "queue 'q': nominal quota mig-1g.10gb=9 is above the cluster's 8 mig-1g.10gb (1 node); "
        "at most 8 can ever be in use"
    ]
    assert quota_beyond_cluster([queue], [], {"mig-1g.10gb": 9}, 1) == []
