"""A job file's problems name the file's own keys (``group[1].resources.nodes``), never the
command-line flags (``--nodes``): those the CLI finds in the file, and the coordinator's refusals
of what the file gave, on the fast path and the click path alike."""

from __future__ import annotations

from pathlib import Path

import pytest
from coordinator_harness import running_coordinator

from tests.cli.test_quick import click_run, fast_run

TWO = "[[group]]\nname = 'lead'\ncommand = 'a'\nresources = { gpus = 1 }\n[[group]]\nname = 'work'\ncommand = 'b'\n"


@pytest.mark.parametrize(
    "second, line",
    [
        (
            "resources = { gpus = 1, mig = '1g.10gb' }\n",
            "group[1]: resources.gpus and resources.mig exclude each other",
        ),
        ("resources = { gpus = 1, mem = 'lots' }\n", "group[1].resources.mem: "),
        (
            "resources = { gpus = 1, mem = '1G', mem_per_gpu = '1G' }\n",
            "group[1]: resources.mem and resources.mem_per_gpu exclude each other",
        ),
    ],
)
def test_what_the_cli_finds_in_the_file_names_its_key(tmp_path: Path, second: str, line: str) -> None:
    job = tmp_path / "job.toml"
    job.write_text(TWO + second)
    for run in (fast_run, click_run):
        result = run(str(tmp_path / "none"), "submit", "-f", str(job))
        assert (result.returncode, result.stdout) == (2, ""), (run, result.stderr)
        assert result.stderr.startswith(f"labgang submit: -f {job}: {line}"), (run, result.stderr)
        assert result.stderr.count("\n") == 1 and "--" not in result.stderr, result.stderr


@pytest.fixture
def coordinator(tmp_path):
    """A real coordinator (no agent: jobs stay pending) with one queue, ``default``."""
    yield from running_coordinator(tmp_path, "")


@pytest.mark.slow
@pytest.mark.parametrize(
    "second, line",
    [
        (
            "ranks = 2\nresources = { gpus = 1, topology = 'nvlink', nodes = 2 }\n",
            "group[1].resources.nodes: topology keeps the group on one node; nodes must be 1 or unset",
        ),
        (
            "ranks = 2\nresources = { gpus = 1, min_ranks = 3 }\n",
            "group[1].resources.min_ranks: 3; allowed: 1 to 2",
        ),
        (
            "resources = { gpus = 0, mem_per_gpu = '1G' }\n",
            "group[1].resources.mem_per_gpu: a group with gpus 0 has no device to count memory by; "
            "allowed: mem (per node) or cpus",
        ),
        ("resources = { mig = '1g.10gb' }\n", "group: every group's devices must be of one kind"),
    ],
)
def test_a_coordinator_refusal_of_the_file_names_its_key(coordinator, tmp_path: Path, second: str, line: str) -> None:
    job = tmp_path / "job.toml"
    job.write_text(TWO + second)
    for run in (fast_run, click_run):
        result = run(coordinator, "submit", "-f", str(job))
        assert (result.returncode, result.stdout) == (2, ""), (run, result.stderr)
        assert result.stderr.startswith(f"labgang submit: -f {job}: {line}"), (run, result.stderr)
        assert result.stderr.count("\n") == 1 and "--" not in result.stderr, result.stderr


@pytest.mark.slow
def test_colocate_from_the_file_is_named_by_its_key(coordinator, tmp_path: Path) -> None:
    job = tmp_path / "job.toml"
    job.write_text("colocate = [['lead', 'nope']]\n" + TWO)
    for run in (fast_run, click_run):
        result = run(coordinator, "submit", "-f", str(job))
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"labgang submit: -f {job}: colocate: lead,nope must name two or more"), (
            run,
            result.stderr,
        )


@pytest.mark.slow
def test_a_policy_from_the_file_is_named_by_its_key_and_one_from_a_flag_by_the_flag(coordinator, tmp_path) -> None:
    job = tmp_path / "job.toml"
    job.write_text("success_policy = 'group:nope'\n" + TWO)
    for run in (fast_run, click_run):
        result = run(coordinator, "submit", "-f", str(job))
        assert result.returncode == 2, result.stderr
        assert result.stderr.startswith(f"labgang submit: -f {job}: success_policy: 'nope' is not a group"), (
            run,
            result.stderr,
        )
        flagged = run(coordinator, "submit", "-f", str(job), "--success-policy", "group:other")
        assert flagged.returncode == 2, flagged.stderr
        assert flagged.stderr.startswith("labgang submit: --success-policy: 'other'"), (run, flagged.stderr)
