"""Every file a user names on the command line: a file that is not UTF-8 text, or that
does not exist, gets one line naming the file and exit 2, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.launcher.cli.config import config
from labgang.launcher.cli.simulate import simulate

BINARY = b"\x00\xff"


@pytest.fixture
def binary_toml(tmp_path: Path) -> Path:
    p = tmp_path / "bin.toml"
    p.write_bytes(BINARY)
    return p


def _one_clean_line(output: str, path: Path) -> None:
    assert "Traceback" not in output and "UnicodeDecodeError" not in output, output
    lines = [line for line in output.splitlines() if line.strip()]
    assert len(lines) == 1, output
    assert lines[0].startswith(f"{path}: not a TOML file (not UTF-8 text"), output


def test_config_check_binary_file(binary_toml: Path) -> None:
    res = CliRunner().invoke(config, ["check", str(binary_toml)])
    assert res.exit_code == 2, res.output
    _one_clean_line(res.output, binary_toml)


def test_config_check_missing_file(tmp_path: Path) -> None:
    res = CliRunner().invoke(config, ["check", str(tmp_path / "nope.toml")])
    assert res.exit_code == 2
    assert "Traceback" not in res.output
    assert (
        res.output
        == f"labgang config check: FILE: {tmp_path / 'nope.toml'}: no such file; pass FILE (e.g. config/cluster.toml)\n"
    )


def test_simulate_binary_file(binary_toml: Path) -> None:
    res = CliRunner().invoke(simulate, [str(binary_toml)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert f"{binary_toml}: not a TOML file (not UTF-8 text" in res.output


def _labgang(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "labgang.launcher", *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["coordinator", "--config"], id="coordinator"),
        pytest.param(["agent", "--config"], id="agent"),
    ],
)
def test_daemon_config_binary_file(binary_toml: Path, tmp_path: Path, args: list[str]) -> None:
    res = _labgang(*args, str(binary_toml), "--state-dir", str(tmp_path / "state"))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert f"{binary_toml}: " in res.stderr and "not a TOML file (not UTF-8 text" in res.stderr


def test_simulated_machine_binary_file(binary_toml: Path, tmp_path: Path) -> None:
    res = _labgang("nodes", "--local", "--simulate", str(binary_toml))
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert f"{binary_toml}: not a text file (not UTF-8" in res.stderr, res.stderr
