"""``labgang --help`` is written without click (launcher/cli/commands.py) exactly as click writes it."""

from __future__ import annotations

import os
import subprocess
import sys

import click
import pytest
from labgang.launcher.cli import commands
from labgang.launcher.cli.main import cli


def click_help(monkeypatch: pytest.MonkeyPatch, columns: int) -> str:
    monkeypatch.setenv("COLUMNS", str(columns))
    return cli.get_help(click.Context(cli, info_name="labgang", **cli.context_settings)) + "\n"  # as --help echoes it


@pytest.mark.parametrize("columns", [*range(40, 83), 120, 400])
def test_the_help_without_click_is_clicks_help_at_every_width(monkeypatch: pytest.MonkeyPatch, columns: int) -> None:
    expected = click_help(monkeypatch, columns)
    assert commands.help_width() == max(min(columns, 80) - 2, 50)
    assert commands.top_help() == expected


def test_the_wrapping_breaks_where_textwrap_does() -> None:
    assert commands.wrap("labgang: gang-scheduled GPU jobs", 20, "  ") == ["  labgang: gang-", "  scheduled GPU jobs"]
    assert commands.wrap("a --flag -n 4 re-run x-y", 9) == ["a --flag", "-n 4 re-", "run x-y"]
    assert commands.wrap("", 10) == []


def test_every_command_has_one_line_of_help_and_a_target() -> None:
    for name, (target, text) in commands.COMMANDS.items():
        module, _, attribute = target.partition(":")
        assert module and attribute and text.endswith(".") and "\n" not in text, name


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_labgang_help_prints_clicks_text_without_importing_click(flag: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    code = (
        f"import sys; sys.argv = ['labgang', {flag!r}]\n"
        "from labgang.launcher.cli import quick\n"
        "import atexit; atexit.register(lambda: print('CLICK', 'click' in sys.modules, file=sys.stderr))\n"
        "quick.main()\n"
    )
    fast = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    slow = subprocess.run(
        [
            sys.executable,
            "-c",
            "from labgang.launcher.cli.main import main; import sys; sys.argv[0] = 'labgang'; main()",
            flag,
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert (fast.returncode, slow.returncode) == (0, 0)
    assert fast.stdout == slow.stdout and fast.stdout.startswith("Usage: labgang [OPTIONS] COMMAND [ARGS]...\n")
    assert fast.stderr == "CLICK False\n"
