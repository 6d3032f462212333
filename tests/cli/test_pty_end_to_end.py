"""`labgang run --pty -- sh` end to end: a real pseudo-terminal (python's pty side of os.openpty)
drives `labgang run --pty` against a real `labgang up --simulate`; the rank's shell runs on a
terminal of its own there (tty, window size, Ctrl-C as SIGINT) and its exit status is run's."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Iterator

import pytest
from up_harness import REPO, Up, running_up

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgp")


class Terminal:
    """`labgang run --pty ARGS` on a pseudo-terminal of ROWS x COLS; what it printed so far."""

    def __init__(self, up: Up, *args: str, rows: int = 33, cols: int = 101) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labgang.launcher", "run", "--pty", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=REPO,
            env=up.env,
            start_new_session=True,
        )
        os.close(slave)
        self.seen = b""

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def read_until(self, wanted: bytes, timeout: float = 60.0) -> bytes:
        deadline = time.monotonic() + timeout
        while wanted not in self.seen:
            assert time.monotonic() < deadline, f"never saw {wanted!r}; saw {self.seen!r}"
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:  # EIO: labgang run closed the terminal (it exited)
                    break
        return self.seen

    def finish(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, f"labgang run --pty did not end; saw {self.seen!r}"
            time.sleep(0.05)
            ready, _, _ = select.select([self.master], [], [], 0)
            if ready:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:
                    pass
        os.close(self.master)
        return self.proc.returncode


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
