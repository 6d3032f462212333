"""A ``kill -9`` of ``labgang up`` followed by ``labgang up`` again: the new one re-adopts the ranks
that ran on. ``labgang run`` waits for it and follows the same job on (as after an orderly stop of a
``labgang up --keep-jobs``, which leaves the job running), where an orderly stop (which cancels a run
job) still says so at once; and a job whose ranks ended while labgang was down is
accounted until they ended, not until the restart (README: GPU-H and ELAPSED run from admission until
the ranks were all gone)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from labgang.launcher.cli.follow import labgang_stopped
from pty_terminal import Terminal
from up_harness import REPO, WAIT_S, Up, alive


def wait_for(what: str, predicate, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def gated(go: Path, before: str = "", after: str = "") -> list[str]:
    """A rank that prints ``before``, waits until the file ``go`` exists, then prints ``after``."""
    return ["sh", "-c", f'echo {before}; while [ ! -e "{go}" ]; do sleep 0.1; done; echo {after}']


class Run:
    """``labgang run ARGS`` in the background; its stderr lines collected as they come."""

    def __init__(self, up: Up, *args: str, stdin: int = subprocess.DEVNULL) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "labgang.launcher", "run", *args],
            cwd=REPO,
            env=up.env,
            stdin=stdin,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.err: list[str] = []
        self.out = ""
        self._readers = [
            threading.Thread(target=self._read_err, daemon=True),
            threading.Thread(target=self._read_out, daemon=True),
        ]
        for reader in self._readers:
            reader.start()

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.err.append(line.rstrip("\n"))

    def _read_out(self) -> None:
        assert self.proc.stdout is not None
        self.out = self.proc.stdout.read()

    def said(self, text: str) -> bool:
        """True once a stderr line holds ``text``; fails when ``run`` exited without saying it."""
        if any(text in line for line in self.err):
            return True
        assert self.proc.poll() is None or self._readers[0].is_alive(), (self.proc.returncode, self.err)
        return False

    def finish(self, timeout: float = WAIT_S) -> int:
        code = self.proc.wait(timeout)
        for reader in self._readers:
            reader.join(10)
        return code

    def job_id(self) -> str:
        wait_for("run's submitted line", lambda: self.said("submitted job "))
        line = next(line for line in self.err if "submitted job " in line)
        return line.rsplit(" ", 1)[1]


@pytest.fixture
def up() -> Iterator[Up]:
    with tempfile.TemporaryDirectory(prefix="lgk9r", dir="/tmp") as d:
        instance = Up(Path(d))
        try:
            yield instance
        finally:
            if instance.proc is not None and instance.proc.poll() is None:
                instance.stop()
            if instance.proc is not None and instance.proc.poll() is None:
                os.killpg(instance.proc.pid, signal.SIGKILL)


def kill9(up: Up) -> None:
    assert up.proc is not None
    os.kill(up.proc.pid, signal.SIGKILL)
    up.proc.wait(30)


def test_run_waits_for_a_killed_labgang_up_to_come_back_and_follows_its_job_on(up: Up) -> None:
    go = up.state_dir / "go"
    run = Run(up, "--", *gated(go, "before", "after"))
    try:
        job_id = run.job_id()
        up.wait_state(job_id, {"running"})
        kill9(up)
        wait_for("run to say it waits", lambda: run.said("labgang went away without stopping"))
        up.start()  # re-adopts the rank, which still runs
        wait_for("run to follow again", lambda: run.said(f"labgang is back; following job {job_id} again"))
        go.touch()
        assert run.finish() == 0, run.err
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    assert run.out == "before\nafter\n", run.out
    assert not any("cancels it" in line for line in run.err), run.err
    job = up.job(job_id)
    assert job["state"] == "succeeded", job
    assert any(h["event"] == "re-adopted" for h in job["history"]), job["history"]


def test_an_orderly_stop_under_run_still_says_it_cancels_the_job_without_waiting(up: Up) -> None:
    run = Run(up, "--", *gated(up.state_dir / "never", "before"))
    try:
        job_id = run.job_id()
        up.wait_state(job_id, {"running"})
        assert up.stop() == 0, up.output()
        assert run.finish() == 1, run.err
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    # what the shutdown did, from whichever run saw last: its socket gone, or the job's end before that
    assert run.err[-1] in (
        f"labgang run: {labgang_stopped(job_id, False)}",
        f"labgang: job {job_id} cancelled: stopped: labgang up shut down; a `labgang run` job is not requeued, "
        "as srun's is not",
    ), run.err
    assert not any("went away" in line for line in run.err), run.err


def test_run_waits_for_labgang_up_stopped_with_keep_jobs_and_follows_its_job_on() -> None:
    # an orderly stop that leaves the job running (--keep-jobs) is no cancel: run waits for the
    # next start, which re-adopts the rank, instead of saying the shutdown cancelled its job
    with tempfile.TemporaryDirectory(prefix="lgkeep", dir="/tmp") as d:
        up = Up(Path(d), args=("--keep-jobs",))
        go = up.state_dir / "go"
        run = Run(up, "--", *gated(go, "before", "after"))
        try:
            job_id = run.job_id()
            up.wait_state(job_id, {"running"})
            assert up.stop() == 0, up.output()
            wait_for(
                "run to say it waits",
                lambda: run.said(f"labgang stopped and left job {job_id} running (--keep-jobs)"),
            )
            assert json.loads((up.state_dir / "up.kept").read_text()) == [job_id]
            up.start()
            wait_for("run to follow again", lambda: run.said(f"labgang is back; following job {job_id} again"))
            assert not (up.state_dir / "up.kept").exists()  # the new coordinator holds the job now
            go.touch()
            assert run.finish() == 0, run.err
        finally:
            if run.proc.poll() is None:
                run.proc.kill()
            if up.proc is not None and up.proc.poll() is None:
                up.stop()
    assert run.out == "before\nafter\n", run.out
    assert not any("cancels it" in line or "went away" in line for line in run.err), run.err


def test_run_array_waits_for_a_killed_labgang_up_and_follows_its_tasks_on(up: Up) -> None:
    go = up.state_dir / "go"
    run = Run(up, "--array", "0-1", "--", *gated(go))
    try:
        wait_for("run's submitted line", lambda: run.said("submitted job array "))
        array_id = next(line for line in run.err if "submitted job array " in line).rsplit(" ", 1)[1]
        up.wait(
            "both tasks running",
            lambda jobs: (
                sorted(j["state"] for j in jobs.values() if str(j.get("array_id")) == array_id)
                == ["running", "running"]
            ),
        )
        kill9(up)
        wait_for(
            "run to say it waits",
            lambda: run.said(f"labgang went away without stopping (killed?) while following job array {array_id}"),
        )
        up.start()
        wait_for("run to follow again", lambda: run.said(f"labgang is back; following job array {array_id} again"))
        go.touch()
        assert run.finish() == 0, run.err
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    assert sorted(line for line in run.err if " succeeded" in line) == [  # each once, in the order they ended
        f"labgang: {array_id}_0 succeeded (exit 0)",
        f"labgang: {array_id}_1 succeeded (exit 0)",
    ], run.err


def test_a_job_that_ends_while_labgang_up_is_down_is_accounted_until_its_rank_ended(up: Up) -> None:
    go = up.state_dir / "go"
    job_id = up.submit("--name", "short", "--", *gated(go))
    job = up.wait_state(job_id, {"running"})
    pid = job["ranks"][0]["pid"]
    kill9(up)
    down = up.cli("down")  # nothing to stop, and it says what became of the ranks
    assert down.returncode == 1, down.stderr
    assert "the last one went away without stopping (killed?): its ranks run on unwatched" in down.stderr
    go.touch()
    wait_for(f"rank {pid} to end", lambda: not alive(pid))
    ended_by = time.time()
    up.start()
    job = up.wait_state(job_id, {"succeeded", "failed"})
    assert job["state"] == "succeeded", job
    rank_end = job["ranks"][0]["end_time"]
    assert rank_end <= ended_by, job["ranks"]
    assert job["end_time"] == rank_end, (job["end_time"], rank_end, ended_by)
    ends = [(h["event"], h["time"]) for h in job["history"] if h["event"] in ("rank-exited", "succeeded")]
    assert ends == [("rank-exited", rank_end), ("succeeded", rank_end)], job["history"]
    out = up.cli("history", "--json")
    assert out.returncode == 0, out.stderr
    (row,) = [r for r in json.loads(out.stdout)["jobs"] if str(r.get("id")) == job_id]
    assert row["end_time"] == rank_end, row


def test_run_streams_its_standard_input_on_after_a_killed_labgang_up_came_back(up: Up) -> None:
    run = Run(up, "--", "sh", "-c", "read a; echo got $a; read b; echo got $b", stdin=subprocess.PIPE)
    assert run.proc.stdin is not None
    try:
        job_id = run.job_id()
        run.proc.stdin.write("one\n")
        run.proc.stdin.flush()
        wait_for("rank 0 to read its first line", lambda: up.cli("logs", job_id).stdout == "got one\n")
        kill9(up)
        wait_for("run to say it waits", lambda: run.said("labgang went away without stopping"))
        up.start()
        wait_for("run to follow again", lambda: run.said(f"labgang is back; following job {job_id} again"))
        run.proc.stdin.write("two\n")
        run.proc.stdin.close()
        assert run.finish() == 0, run.err
    finally:
        if run.proc.poll() is None:
            run.proc.kill()
    assert run.out == "got one\ngot two\n", (run.out, run.err)


def test_run_pty_takes_keys_on_after_a_killed_labgang_up_came_back(up: Up) -> None:
    term = Terminal(up, "--", "sh")
    try:
        term.type("echo one=$((1+1))\n")
        term.read_until(b"one=2")
        kill9(up)
        term.read_until(b"labgang went away without stopping")
        up.start()
        term.read_until(b"labgang is back; following job")
        term.type("echo two=$((2+2)); exit 3\n")
        term.read_until(b"two=4")
        assert term.finish() == 3, term.seen
    finally:
        if term.proc.poll() is None:
            term.proc.kill()
