"""`labgang up` stopping jobs that ignore SIGTERM: it says it waits for their grace periods, and a
second Ctrl-C (or SIGTERM) kills their ranks at once instead of waiting the grace out."""

from __future__ import annotations

import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from up_harness import Up

WAITING = "labgang up: stopping 1 job: waiting up to 600 s for their grace periods; Ctrl-C again to kill them now"


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_second_interrupt_kills_ranks_that_wait_out_their_grace() -> None:
    with tempfile.TemporaryDirectory(prefix="lgint", dir="/tmp") as d:
        up = Up(Path(d))
        assert up.proc is not None
        pids: list[int] = []
        try:
            ready = Path(d) / "ignoring"
            rank = (
                "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                f"open({str(ready)!r}, 'w').close(); time.sleep(3600)"
            )
            job_id = up.submit("--grace", "10m", "--", sys.executable, "-c", rank)
            pids = [r["pid"] for r in up.wait_state(job_id, {"running"})["ranks"]]
            deadline = time.monotonic() + 60
            while not ready.exists():  # SIGTERM is ignored from here on
                assert time.monotonic() < deadline, up.output()
                time.sleep(0.1)
            up.proc.send_signal(signal.SIGINT)
            while WAITING not in up.output():
                assert up.proc.poll() is None and time.monotonic() < deadline, up.output()
                time.sleep(0.1)
            assert all(alive(pid) for pid in pids)  # still inside its grace period
            up.proc.send_signal(signal.SIGINT)
            assert up.proc.wait(120) == 0, up.output()  # not the 600 s grace
            text = up.output()
            assert "labgang up: killing the ranks of 1 job now (SIGKILL)" in text, text
            assert f"stopped 1 job ({job_id}); it will run again at the next `labgang up`" in text, text
            assert not any(alive(pid) for pid in pids)
        finally:
            if up.proc.poll() is None:
                os.killpg(up.proc.pid, signal.SIGKILL)
                up.proc.wait(10)
            for pid in pids:  # ranks run in sessions of their own, and this one ignores SIGTERM
                if alive(pid):
                    os.kill(pid, signal.SIGKILL)
