"""Following a job that is requeued mid-way, against a real ``labgang up --simulate``: ``labgang run``
and ``labgang logs -f`` print the whole second attempt from its first byte (not from the offset the
first attempt's log had reached), and the rank log's ``[labgang] ... restart 1`` line is labgang's:
``run`` prints it on its stderr, never on the job's stdout."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from up_harness import REPO, Up, running_up

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgq")


def wait_for(what: str, predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_run_and_logs_follow_print_the_whole_requeued_attempt(up: Up, tmp_path: Path) -> None:
    # Attempt 0 prints 01..20 and waits for the requeue; attempt 1 prints 01..20 and FINAL-LINE.
    mark = tmp_path / "first"
    script = f"seq -w 1 20; if [ -e {mark} ]; then echo FINAL-LINE; exit 0; fi; touch {mark}; exec sleep 300"
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        run = subprocess.Popen(
            [sys.executable, "-m", "labgang.launcher", "run", "--name", "pre3", "--", "sh", "-c", script],
            cwd=REPO,
            env=up.env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
        )
    follower = None
    try:
        wait_for("the submission", lambda: re.search(rb"submitted job (\d+)", err_path.read_bytes()) is not None)
        found = re.search(rb"submitted job (\d+)", err_path.read_bytes())
        assert found is not None
        job_id = found[1].decode()
        follower = subprocess.Popen(
            [sys.executable, "-m", "labgang.launcher", "logs", "-f", job_id],
            cwd=REPO,
            env=up.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        wait_for("attempt 0's output", mark.exists)
        time.sleep(0.5)  # both followers have read attempt 0's lines
        requeued = up.cli("requeue", job_id)
        assert requeued.returncode == 0, requeued.stderr
        assert run.wait(90) == 0, err_path.read_text()
        follow_out, follow_err = follower.communicate(timeout=60)
    finally:
        for proc in (run, follower):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()
    lines = "".join(f"{n:02d}\n" for n in range(1, 21))
    assert out_path.read_text() == lines + lines + "FINAL-LINE\n"
    assert f"[labgang] job {job_id}.1 rank 0 restart 1" in err_path.read_text()
    assert follower.returncode == 0, follow_err
    text = follow_out.decode()
    assert text.replace(f"[labgang] job {job_id}.1 rank 0 restart 1\n", "") == lines + lines + "FINAL-LINE\n"
