"""What ``labgang run`` says when its job is preempted or labgang shuts down under it, on a real
``labgang up --simulate``: the true reason (a `labgang run` job is not requeued, as srun's is not;
its client is right there), the job ended ``cancelled`` (Slurm's PreemptMode=CANCEL; labgang has no
PREEMPTED state, and ``failed`` would blame its command), and at a shutdown the fate of *its* job."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest
from up_harness import Up

from tests.cli.test_run_not_requeued import job_named, start_run

NOT_REQUEUED = "a `labgang run` job is not requeued, as srun's is not"


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    """Wait for a ``run`` (killed if still there after 60 s); its exit status and stderr."""
    try:
        _, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"run did not end: {err}") from None
    return proc.returncode, err


@pytest.mark.slow
def test_a_preempted_run_job_is_cancelled_with_the_true_reason(short_dir: Path) -> None:
    up = Up(short_dir)
    proc: subprocess.Popen[str] | None = None
    try:
        proc = start_run(up, "-J", "victim", "--grace", "2s", "-n", "1", "-g", "8", "--", "sleep", "300")
        victim = job_named(up, "victim")
        up.wait_state(victim, {"running"})
        urgent = up.submit("-p", "10", "-n", "1", "-g", "8", "--", "sleep", "300")
        code, err = finish(proc)
        view = up.wait_state(victim, {"cancelled", "failed"})
        assert view["state"] == "cancelled", view
        message = view["reason"]["message"]
        assert message.startswith(f"preempted by job {urgent}"), message
        assert message.endswith(f"; {NOT_REQUEUED}"), message
        assert "client is gone" not in message, message
        assert f"labgang: job {victim} cancelled: {message}" in err, err
        assert code == 1, err
        up.wait_state(urgent, {"running"})
        assert up.cli("cancel", urgent).returncode == 0
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        up.stop()


@pytest.mark.slow
def test_run_says_a_shutdown_cancels_its_job_or_with_requeue_reruns_it(short_dir: Path) -> None:
    up = Up(short_dir)
    runs: list[subprocess.Popen[str]] = []
    try:
        runs.append(start_run(up, "-J", "attached", "-n", "1", "-g", "1", "--", "sleep", "300"))
        runs.append(start_run(up, "--requeue", "-J", "kept", "-n", "1", "-g", "1", "--", "sleep", "300"))
        attached, kept = job_named(up, "attached"), job_named(up, "kept")
        for job_id in (attached, kept):
            up.wait_state(job_id, {"running"})
        assert up.stop() == 0, up.output()
        (_, attached_err), (_, kept_err) = finish(runs[0]), finish(runs[1])
        up.start()
        view = up.wait_state(attached, {"cancelled", "failed"})
        assert view["state"] == "cancelled", view
        # run's own words match what became of its job, whichever way it learnt of the end
        said_attached = [line for line in attached_err.splitlines() if f"job {attached}" in line][-1]
        assert "run again" not in said_attached and "cancel" in said_attached, attached_err
        assert NOT_REQUEUED in said_attached, attached_err
        said_kept = [line for line in kept_err.splitlines() if f"job {kept}" in line][-1]
        assert "runs again at the next start" in said_kept or "requeued" in said_kept, kept_err
        up.wait_state(kept, {"running"})
        assert up.cli("cancel", kept).returncode == 0
    finally:
        for proc in runs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
        up.stop()
