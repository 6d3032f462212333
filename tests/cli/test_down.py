"""``labgang down``: a real ``labgang up --simulate`` stopped from another shell, its jobs kept
in the store for the next ``labgang up``; and its refusals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from unix_users import UserShell, point_system_instance
from up_harness import H100X8, REPO, Up


def down(state_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, LABGANG_STATE_DIR=str(state_dir))
    return subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "down", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_with_nothing_running_it_says_so_in_one_line_and_exits_1(tmp_path: Path) -> None:
    result = down(tmp_path)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"labgang down: no labgang up is running for {tmp_path} (nothing to stop)\n"
    assert list(tmp_path.iterdir()) == []  # it changed nothing


def test_with_json_a_refusal_is_the_error_shape_on_stdout_and_the_line_on_stderr(tmp_path: Path) -> None:
    result = down(tmp_path, "--json")
    assert result.returncode == 1
    message = f"no labgang up is running for {tmp_path} (nothing to stop)"
    assert json.loads(result.stdout) == {"error": {"message": message, "field": None, "allowed": None}}
    assert result.stderr == f"labgang down: {message}\n"
    assert list(tmp_path.iterdir()) == []  # it changed nothing


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A state directory under /tmp (a Unix socket's path is limited to 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="lgd-", dir="/tmp") as d:
        yield Path(d)


@pytest.mark.slow
def test_it_stops_labgang_up_and_its_running_job_waits_for_the_next_up(short_dir: Path) -> None:
    tmp_path = short_dir
    up = Up(tmp_path)
    try:
        running = up.submit("-n", "2", "-g", "1", "--", "sleep", "300")
        once = up.submit("--no-requeue", "-n", "1", "-g", "1", "--", "sleep", "300")
        up.wait_state(running, {"running"})
        up.wait_state(once, {"running"})
        waiting = up.submit("-n", "1", "-g", "8", "--", "true")  # needs every GPU: pending behind them
        listed = {job["id"] for job in json.loads(up.cli("queue", "--json").stdout)["jobs"]}
        result = down(tmp_path, "--json")
        assert result.returncode == 0, result.stderr
        assert up.proc is not None and up.proc.poll() is not None  # it waited for the exit
        assert up.proc.returncode == 0, up.output()
        report = json.loads(result.stdout)
        assert report["stopped"] == "labgang up" and report["pid"] == up.proc.pid
        assert report["state_dir"] == str(tmp_path) and len(report["nodes"]) == 1
        assert report["jobs"] == {"pending": [running, waiting]}  # both run again at the next up
        assert report["ended"] == {"cancelled": [once]}  # as Ctrl-C does: --no-requeue's job ends
        assert listed == {running, once, waiting}  # down's job ids are queue --json's, of the same type
        again = down(tmp_path)
        assert again.returncode == 1 and "no labgang up is running" in again.stderr
        # the next labgang up runs them again
        up.start()
        up.wait_state(running, {"running"})
        text = down(tmp_path)
        assert text.returncode == 0, text.stderr
        assert text.stdout.splitlines()[0] == (
            f"labgang down: stopping labgang up (pid {up.proc.pid}) of {tmp_path}; waiting for it to exit"
        )
        node = report["nodes"][0]
        assert text.stdout.splitlines()[1] == (
            f"labgang down: stopped labgang up (pid {up.proc.pid}) of {tmp_path}: its coordinator and the agent"
            f" of node {node}; 2 jobs wait for the next `labgang up` ({running}, {waiting})"
        )
    finally:
        up.stop()


@pytest.mark.slow
def test_it_refuses_a_coordinator_that_is_not_labgang_up(tmp_path: Path) -> None:
    from coordinator_harness import running_coordinator

    for state_dir in running_coordinator(tmp_path, ""):
        result = down(Path(state_dir))
        assert result.returncode == 1
        assert "is not a `labgang up`" in result.stderr and "systemctl stop labgang-coordinator" in result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_the_summary_says_what_ended_as_it_stopped() -> None:
    from labgang.launcher.cli.down import summary_line

    ended = {"cancelled": ["2"], "succeeded": ["3_1", "3_2"]}
    line = summary_line(7, Path("/s"), ["vm"], {"running": ["4"]}, ended, 24.0, here="vm")
    assert line == (
        "labgang down: stopped labgang up (pid 7) of /s: its coordinator and the agent of node vm; "
        "1 job left running (--keep-jobs: 4); the next `labgang up` re-adopts them if it starts within about "
        "24 s (the nodes' lease); after that each node stops its ranks and they run again; "
        "stopped and cancelled 2 (submitted with --no-requeue or by `labgang run`); "
        "3_[1-2] ended as they stopped (succeeded)"
    )
    # an agent started on its own (`labgang agent`) is not stopped by `down` and is not said to be
    line = summary_line(7, Path("/s"), ["n2", "vm"], {}, {}, here="vm")
    assert line == (
        "labgang down: stopped labgang up (pid 7) of /s: its coordinator and the agent of node vm; "
        "the agent of node n2 runs on and reconnects to the next `labgang up`; no jobs were waiting or running"
    )


def serving(shell: UserShell, state_dir: Path) -> bool:
    """True once ``labgang queues`` as ``shell``'s user answers from ``state_dir``'s instance."""
    return shell.run(["queues"], env={"LABGANG_STATE_DIR": str(state_dir)}).returncode == 0


@pytest.mark.slow
def test_without_a_state_dir_it_finds_the_instance_every_command_finds(lab_users: list[UserShell]) -> None:
    """A user runs their own ``labgang up --simulate`` while root's system instance serves: ``queue``
    with no variable reaches the system one, and so does ``down``, which is refused (root's, not the
    user's to stop) naming the line that stops the user's own, and stops neither. Once the system
    instance is gone, ``down`` finds the user's own and stops it, its first line naming its state dir."""
    shell = lab_users[0]
    own = shell.user.home / ".local" / "state" / "labgang"
    proc = shell.start(["up", "--simulate", str(H100X8)])
    base = Path(tempfile.mkdtemp(prefix="lgsd", dir="/tmp"))
    config = None
    system: Up | None = None
    try:
        deadline = time.monotonic() + 90
        while not serving(shell, own):
            assert proc.poll() is None and time.monotonic() < deadline, proc.stdout and proc.stdout.read()
            time.sleep(0.2)
        base.chmod(0o755)
        (base / "state").mkdir()
        system = Up(base / "state")
        config = point_system_instance(shell.python, system.state_dir)
        queue = shell.run(["queue", "--json"])
        assert queue.returncode == 0, queue.stderr  # reaches the system instance first (README's order)
        refused = shell.run(["down"])
        assert refused.returncode == 1 and refused.stdout == "", refused
        assert system.proc is not None
        assert refused.stderr == (
            f"labgang down: the labgang up of {system.state_dir} (pid {system.proc.pid}) is another user's: "
            f"not yours to stop; your own labgang up runs in {own}: `LABGANG_STATE_DIR={own} labgang down` stops it\n"
        )
        assert proc.poll() is None and system.proc.poll() is None  # it stopped neither
        assert system.stop() == 0, system.output()
        stopped = shell.run(["down"])
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.splitlines()[0] == (
            f"labgang down: stopping labgang up (pid {proc.pid}) of {own}; waiting for it to exit"
        )
        assert proc.wait(60) == 0
    finally:
        if config is not None:
            config.unlink(missing_ok=True)
        if system is not None and system.proc is not None and system.proc.poll() is None:
            system.stop()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)
            proc.wait(60)
        subprocess.run(["rm", "-rf", str(base)], check=False)
