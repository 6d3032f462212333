"""A job named outside ASCII, listed where the standard streams are ASCII (``PYTHONIOENCODING=ascii``):
``labgang queue``, ``history`` and ``show`` print it, never a ``UnicodeEncodeError`` traceback. The
fast path escapes what ASCII cannot hold (``caf\\xe9``, launcher/cli/quick.py ``escape_unencodable``);
click's commands write through click, which writes UTF-8 to a stream that says ASCII (its documented
choice); either way the command succeeds with the name on stdout."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pytest
from up_harness import Up, running_up

NAME = "café-日本"
ESCAPED = "caf\\xe9-\\u65e5\\u672c"
CLICK = "from labgang.launcher.cli.main import main; main()"


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgasc")


@pytest.fixture(scope="module")
def jobs(up: Up) -> dict[str, str]:
    held = up.submit("-H", "--name", NAME, "--", "echo", "hi")
    cancelled = up.submit("-H", "--name", NAME, "--", "echo", "hi")
    assert up.cli("cancel", cancelled).returncode == 0
    return {"held": held, "cancelled": cancelled}


def _ascii(up: Up, argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    env = dict(up.env, PYTHONIOENCODING="ascii")
    return subprocess.run([sys.executable, *argv], env=env, capture_output=True, timeout=60, check=False)


@pytest.mark.parametrize("command", ["queue", "history", "show"])
def test_a_non_ascii_name_on_ascii_streams_is_escaped(up: Up, jobs: dict[str, str], command: str) -> None:
    args = [command, jobs["held"]] if command == "show" else [command]
    fast = _ascii(up, ["-m", "labgang.launcher", *args])
    assert (fast.returncode, fast.stderr) == (0, b""), fast.stderr.decode(errors="replace")
    assert ESCAPED in fast.stdout.decode("ascii")
    click = _ascii(up, ["-c", CLICK, *args])
    assert (click.returncode, click.stderr) == (0, b""), click.stderr.decode(errors="replace")
    assert NAME in click.stdout.decode() or ESCAPED in click.stdout.decode()


def test_an_error_line_with_a_non_ascii_argument_is_one_line(up: Up) -> None:
    done = _ascii(up, ["-m", "labgang.launcher", "show", "日本"])
    assert done.returncode in (1, 2), done.stderr
    assert b"Traceback" not in done.stderr
    assert len(done.stderr.decode().splitlines()) == 1, done.stderr
