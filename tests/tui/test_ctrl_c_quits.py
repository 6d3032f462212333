"""Ctrl-C quits ``labgang top`` at once, typed on a real pseudo-terminal (the terminal in raw mode
delivers it as a key, not as SIGINT: Textual's own binding would only say "press ctrl+q")."""

from __future__ import annotations

import os
import pty
import select
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHILD = """
import sys
from labgang.tui.app import make_app
from labgang.tui.sources import open_source
app = make_app(open_source(local=True, simulate=sys.argv[1]), refresh_s=0.5)
app.run()
sys.exit(app.return_code or 0)
"""


def test_one_ctrl_c_on_the_terminal_quits_top() -> None:
    pid, master = pty.fork()
    if pid == 0:  # the child: the app on the pty's other end, as in a terminal
        os.environ["TERM"] = "xterm-256color"
        os.execv(sys.executable, [sys.executable, "-c", CHILD, str(ROOT / "config/sim/h100x8.toml")])  # noqa: S606
    try:
        seen = b""
        end = time.monotonic() + 20
        while b"sim-h100x8" not in seen and time.monotonic() < end:  # running and drawing its devices
            if select.select([master], [], [], 0.2)[0]:
                seen += os.read(master, 65536)
        assert b"sim-h100x8" in seen
        os.write(master, b"\x03")  # Ctrl-C, once
        end = time.monotonic() + 10
        while time.monotonic() < end:
            if select.select([master], [], [], 0.1)[0]:
                try:
                    os.read(master, 65536)  # keep draining its output so it never blocks on a full pty
                except OSError:
                    pass
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                pid = 0
                break
        else:
            pytest.fail("labgang top still runs 10 s after one Ctrl-C")
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status  # it quit, cleanly
    finally:
        os.close(master)
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
