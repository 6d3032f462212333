"""A finished job never runs again, through a real ``labgang up``: a job that ignores SIGTERM and
exits 0 within its grace period while ``labgang up`` stops has succeeded, and the next ``labgang
up`` does not start it again (docs/queue-semantics.md §A3.6)."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

from up_harness import Up

WAITING = "labgang up: stopping 1 job: waiting up to 120 s for their grace periods"


def wait_for(what: str, condition, up: Up) -> None:
    deadline = time.monotonic() + 90
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{up.output()}"
        time.sleep(0.1)


def test_a_job_that_exits_0_while_up_stops_has_succeeded_and_never_runs_again() -> None:
    with tempfile.TemporaryDirectory(prefix="lgrerun", dir="/tmp") as d:
        ready, release = Path(d) / "ignoring", Path(d) / "release"
        up = Up(Path(d))
        try:
            rank = (
                f'trap "" TERM; touch {ready}; while [ ! -e {release} ]; do sleep 0.1; done; '
                "echo finished-attempt-$LABGANG_RESTART_COUNT; exit 0"
            )
            job_id = up.submit("--grace", "120s", "--name", "ignterm", "--", "bash", "-c", rank)
            up.wait_state(job_id, {"running"})
            wait_for("the rank to ignore SIGTERM", ready.exists, up)
            assert up.proc is not None
            up.proc.send_signal(signal.SIGINT)
            wait_for("labgang up to stop the job", lambda: WAITING in up.output(), up)
            release.touch()  # the rank exits 0 on its own, inside its grace period
            assert up.proc.wait(120) == 0, up.output()
            assert "will run again" not in up.output(), up.output()
            assert f"{job_id} finished as it stopped (succeeded)" in up.output(), up.output()

            up.start()  # the next `labgang up`
            job = up.job(job_id)
            assert (job["state"], job["exit_status"], job["restart_count"]) == ("succeeded", 0, 0), job
            events = [h["event"] for h in job["history"]]
            assert "requeued" not in events and events.count("admitted") == 1, events
            assert job["nodes"] == ["vm"]  # where it ran: a finished job keeps its last attempt's nodes
            logs = up.cli("logs", job_id)
            assert logs.returncode == 0 and logs.stdout.split() == ["finished-attempt-0"], logs
            second = up.cli("logs", job_id, "--attempt", "1")
            assert second.returncode != 0, second.stdout
        finally:
            if up.proc is not None and up.proc.poll() is None:
                up.stop()
            if up.proc is not None and up.proc.poll() is None:
                os.killpg(up.proc.pid, signal.SIGKILL)
