"""``labgang export job``: a job file's lifecycle policies (docs/group-lifecycle.md) become the
JobSet's successPolicy, failurePolicy and startupPolicy; Slurm lists each as not translated."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner
from labgang.launcher.cli.main import cli

GROUPS = """
[[group]]
name = "launcher"
command = "mpirun worker"
resources = { gpus = 0 }
[[group]]
name = "workers"
ranks = 4
command = "worker"
resources = { gpus = 2 }
"""
POLICIES = 'success_policy = "group:launcher"\nfailure_policy = "restart"\nmax_restarts = 3\n'


def export(tmp_path: Path, text: str, *args: str) -> tuple[int, str]:
    path = tmp_path / "job.toml"
    path.write_text(text)
    result = CliRunner().invoke(cli, ["export", "job", "-f", str(path), *args], prog_name="labgang")
    return result.exit_code, result.output


def test_the_jobset_carries_the_success_failure_and_startup_policies(tmp_path: Path) -> None:
    code, out = export(tmp_path, POLICIES + 'startup_order = ["launcher", "workers"]\n' + GROUPS, "--to", "kueue")
    assert code == 0, out
    spec = yaml.safe_load(out)["spec"]
    assert spec["successPolicy"] == {"operator": "All", "targetReplicatedJobs": ["launcher"]}
    assert spec["failurePolicy"] == {"maxRestarts": 3}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "InOrder"}


def test_a_plain_job_file_adds_no_policy_and_any_is_jobsets_any(tmp_path: Path) -> None:
    code, out = export(tmp_path, GROUPS, "--to", "kueue")
    assert code == 0 and not {"successPolicy", "failurePolicy", "startupPolicy"} & set(yaml.safe_load(out)["spec"])
    code, out = export(tmp_path, 'success_policy = "any"\n' + GROUPS, "--to", "kueue")
    assert yaml.safe_load(out)["spec"]["successPolicy"] == {"operator": "Any"}


def test_slurm_lists_every_policy_as_not_translated(tmp_path: Path) -> None:
    text = POLICIES + 'startup_order = "launcher"\n' + GROUPS
    code, out = export(tmp_path, text, "--to", "slurm", "--check", "--json")
    assert code == 0, out
    fields = {gap["field"] for gap in json.loads(out)["does_not_translate"]}
    assert {"success_policy", "failure_policy", "startup_order"} <= fields
