"""After a ``kill -9`` of ``labgang up``, its ranks run on until the node lease stops them (their small
parents fence them, about ``node_timeout_s`` × 0.8 later), and the next ``labgang up`` dates the job's
``stopping`` and ``rank-exited`` lines when that happened, not when it started (README, "labgang up")."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from pathlib import Path

import psutil
from up_harness import Up, alive

FENCE_WAIT_S = 90.0  # the lease is 24 s; a loaded machine may take longer to notice


def test_a_killed_labgang_ups_ranks_are_fenced_and_dated_then() -> None:
    with tempfile.TemporaryDirectory(prefix="lgkill9", dir="/tmp") as d:
        up = Up(Path(d))
        try:
            job_id = up.submit("--name", "outlives", "--", "sleep", "300")
            job = up.wait_state(job_id, {"running"})
            pid = job["ranks"][0]["pid"] if job.get("ranks") else None
            assert pid, job
            assert up.proc is not None
            shim = psutil.Process(pid).ppid()  # the rank's small parent: it fences it and dates the end
            os.kill(up.proc.pid, signal.SIGKILL)
            up.proc.wait(30)
            killed = time.time()
            assert alive(pid)  # nobody stopped it: it runs on, unwatched, until the lease runs out
            deadline = time.monotonic() + FENCE_WAIT_S
            # The fence is over when the small parent has exited too: it reaps the rank, then writes
            # the end's time (exit.json), then exits; the rank alone may be gone before that time is taken.
            while alive(pid) or alive(shim):
                assert time.monotonic() < deadline, f"rank {pid} still runs {FENCE_WAIT_S} s after kill -9"
                time.sleep(0.2)
            restarted = time.time()
            up.start()
            job = up.wait_state(job_id, {"running", "pending"})
            lines = {h["event"]: h for h in job["history"]}
            for event in ("stopping", "rank-exited"):
                assert killed < lines[event]["time"] < restarted, (event, killed, restarted, job["history"])
            assert lines["requeued"]["time"] >= restarted, job["history"]
            assert "lease ran out" in lines["stopping"]["message"], lines["stopping"]
        finally:
            if up.proc is not None and up.proc.poll() is None:
                up.stop()
            if up.proc is not None and up.proc.poll() is None:
                os.killpg(up.proc.pid, signal.SIGKILL)
