"""A job submitted by ``labgang run`` is attached to its ``run``: when labgang stops (or its node
is lost) it is not requeued to run again with nobody attached, as Slurm does not requeue an srun
whose client is gone; ``run --requeue`` keeps the old behaviour, and ``submit``'s jobs are requeued."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from up_harness import REPO, Up


def start_run(up: Up, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "labgang.launcher", "run", *args],
        cwd=REPO,
        env=up.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def job_named(up: Up, name: str) -> str:
    jobs = up.wait(f"job {name}", lambda jobs: any(j.get("name") == name for j in jobs.values()))
    return next(i for i, j in jobs.items() if j.get("name") == name)


@pytest.mark.slow
def test_a_run_job_is_not_rerun_after_labgang_stops_unless_run_asked_requeue(short_dir: Path) -> None:
    up = Up(short_dir)
    runs: list[subprocess.Popen[str]] = []
    try:
        runs.append(start_run(up, "-J", "attached", "-n", "1", "-g", "1", "--", "sleep", "300"))
        runs.append(start_run(up, "--requeue", "-J", "kept", "-n", "1", "-g", "1", "--", "sleep", "300"))
        # --array is the click command's (the fast path declines it): the same default there
        runs.append(start_run(up, "--array", "0", "-J", "clicked", "-n", "1", "-g", "1", "--", "sleep", "300"))
        submitted = up.submit("-J", "batch", "-n", "1", "-g", "1", "--", "sleep", "300")
        attached, kept, clicked = job_named(up, "attached"), job_named(up, "kept"), job_named(up, "clicked")
        for job_id in (attached, kept, clicked, submitted):
            up.wait_state(job_id, {"running"})
        assert up.stop() == 0, up.output()
        assert (
            f"stopped and cancelled {', '.join(sorted((attached, clicked), key=int))} (submitted with " in up.output()
        )
        for proc in runs:
            proc.wait(60)
        up.start()
        up.wait_state(kept, {"running"})  # run --requeue: requeued, as before
        up.wait_state(submitted, {"running"})  # submit: requeued
        for job_id in (attached, clicked):
            view = up.wait_state(job_id, {"cancelled", "failed"})
            assert view["state"] == "cancelled", view
            assert view["reason"]["message"] == (
                "stopped: labgang up shut down; a `labgang run` job is not requeued, as srun's is not"
            ), view["reason"]
        time.sleep(0.5)
        assert up.job(attached)["state"] == "cancelled"  # it stays ended: nobody is attached to a rerun
    finally:
        for proc in runs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
        up.stop()


def test_run_refuses_requeue_with_no_requeue(tmp_path: Path) -> None:
    up = Up(tmp_path, start=False)
    out = up.cli("run", "--requeue", "--no-requeue", "--", "true")
    assert out.returncode == 2, out
    assert out.stderr.strip().splitlines() == [
        "labgang run: --requeue and --no-requeue exclude each other; allowed: one of them"
    ], out.stderr
