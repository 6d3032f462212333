"""``labgang top`` ends when its terminal goes away (a real pty whose master is closed): on SIGHUP,
and also when SIGHUP is ignored or never comes (an orphaned ``top``), instead of refreshing for no one."""

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
import signal, sys
if sys.argv[2] == "ignore":
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
from labgang.tui.app import make_app
from labgang.tui.sources import open_source
app = make_app(open_source(local=True, simulate=sys.argv[1]), refresh_s=0.5)
app.run()
sys.exit(app.return_code or 0)
"""


@pytest.mark.parametrize("sighup", ["default", "ignore"])
def test_top_exits_cleanly_when_its_terminal_is_closed(sighup: str):
    pid, master = pty.fork()
    if pid == 0:  # the child: the app on the pty's other end, as in a terminal
        os.environ["TERM"] = "xterm-256color"
        os.execv(sys.executable, [sys.executable, "-c", CHILD, str(ROOT / "config/sim/h100x8.toml"), sighup])  # noqa: S606
    try:
        seen = b""
        end = time.monotonic() + 20
        while b"sim-h100x8" not in seen and time.monotonic() < end:  # running and drawing its devices
            if select.select([master], [], [], 0.2)[0]:
                seen += os.read(master, 65536)
        assert b"sim-h100x8" in seen
        os.close(master)  # the terminal goes away
        master = -1
        end = time.monotonic() + 10
        while time.monotonic() < end:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                pid = 0
                break
            time.sleep(0.1)
        else:
            pytest.fail("labgang top still runs 10 s after its terminal was closed")
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status  # it ended itself, cleanly
    finally:
        if master >= 0:
            os.close(master)
        if pid:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
