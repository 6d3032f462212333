"""`labgang up`'s refusals and its first hint, without starting a coordinator."""

from __future__ import annotations

import pytest
from click.testing import CliRunner
from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.launcher.cli.client import STARTING_MARKER
from labgang.launcher.cli.main import cli
from labgang.launcher.cli.up import try_hint


@pytest.mark.parametrize(
    "machine, shape",
    [
        ("h100x8.toml", "-n 4 -g 2"),
        ("rtx4090x2.toml", "-n 2 -g 1"),
        ("a100x8-mig.toml", "-n 3 -g 1"),
        ("n1-4gpu.toml", "-n 4 -g 1"),
    ],
)
def test_the_hint_fits_the_machine(repo_root, machine, shape):
    backend = open_backend(repo_root / "config" / "sim" / machine)
    try:
        hint = try_hint(read_inventory(backend))
    finally:
        backend.nvmlShutdown()
    assert hint == f"labgang run {shape} -- python examples/ddp_allreduce.py"


def test_simulate_and_nvml_exclude_each_other(tmp_path, repo_root):
    result = CliRunner().invoke(
        cli, ["up", "--nvml", "--simulate", str(repo_root / "config/sim/h100x8.toml"), "--state-dir", str(tmp_path)]
    )
    assert result.exit_code == 2 and "--simulate and --nvml exclude each other" in result.output


def test_missing_machine_file_is_a_usage_error_and_leaves_no_marker(tmp_path):
    result = CliRunner().invoke(cli, ["up", "--simulate", str(tmp_path / "nope.toml"), "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert result.output.startswith("labgang up: --simulate: ") and "nope.toml" in result.output
    assert not (tmp_path / STARTING_MARKER).exists()
