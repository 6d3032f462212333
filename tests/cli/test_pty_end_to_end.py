"""`labgang run --pty -- sh` end to end: a real pseudo-terminal (python's pty side of os.openpty)
drives `labgang run --pty` against a real `labgang up --simulate`; the rank's shell runs on a
terminal of its own there (tty, window size, Ctrl-C as SIGINT) and its exit status is run's."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from pty_terminal import Terminal
from up_harness import REPO, Up, running_up

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgp")


def test_an_interactive_shell_on_a_terminal_of_its_own(up):
    term = Terminal(up, "--", "sh")
    term.type("echo answer=$((6*7)); stty size; tty\n")
    term.read_until(b"answer=42")
    out = term.read_until(b"/dev/pts/")
    assert b"33 101" in out  # the window size of the terminal that runs labgang run
    term.type("sleep 30; echo not-interrupted\n")
    typed = time.monotonic()
    term.read_until(b"sleep 30; echo not-interrupted\r")  # the rank's terminal echoed it: sh has it
    time.sleep(0.5)
    term.type("\x03")  # Ctrl-C: SIGINT to the rank's foreground job, through its own terminal
    term.type("echo after-ctrl-c; exit 3\n")
    out = term.read_until(b"after-ctrl-c")
    assert term.finish() == 3
    assert time.monotonic() - typed < 25  # the sleep did not run its 30 s
    assert out.count(b"not-interrupted") == 1  # only the echo of the typed line: Ctrl-C stopped the list


def test_a_0x0_terminal_still_types_and_the_rank_gets_a_real_size(up):
    term = Terminal(up, "--", "sh", rows=0, cols=0)  # a terminal that does not know its size (`script`)
    term.type("echo answer=$((6*7)); stty size\n")
    out = term.read_until(b"answer=42")
    out = term.read_until(b"24 80")  # the default, never 0 0
    assert b"not sent" not in out
    term.type("exit 4\n")
    assert term.finish() == 4


def test_pty_without_a_terminal_warns_and_runs_without_one(up):
    # as srun: --pty is disregarded with a warning (tests/cli/test_run_like_srun_end_to_end.py pipes commands in)
    out = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "run", "--pty", "--", "sh", "-c", "test -t 0 || echo no-tty"],
        cwd=REPO,
        env=up.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (out.returncode, out.stdout) == (0, "no-tty\n"), out.stderr
    assert out.stderr.splitlines()[0] == (
        "labgang run: warning: --pty: standard input is not a terminal; running without a pseudo-terminal"
    )
