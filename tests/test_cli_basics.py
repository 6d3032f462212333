"""The ``labgang`` entry point: version, help, and every subcommand's --help."""

import subprocess
import sys

from click.testing import CliRunner
from labgang.launcher.cli.main import COMMANDS, cli


def test_version_prints_package_version():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output.startswith("labgang, version ")


def test_help_lists_every_command():
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for name in COMMANDS:
        assert name in result.output


def test_python_dash_m_is_the_same_command():
    out = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "--version"], capture_output=True, text=True, check=True
    )
    assert out.stdout.startswith("labgang, version ")
