"""A real ``labgang up --simulate MACHINE`` on its own state directory, and the CLI against it,
for the end-to-end tests under ``tests/cli/`` (arrays, dependencies, topology)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
H100X8 = REPO / "config" / "sim" / "h100x8.toml"
STARTUP_S = 90.0  # a bound for a loaded machine; a healthy start takes one or two seconds
WAIT_S = 90.0


class Up:
    """``labgang up --simulate machine`` on ``state_dir`` (started by :meth:`start`, or at once
    with ``start=True``), its output in ``state_dir/up.log``, and the CLI with that state dir."""

    def __init__(
        self, state_dir: Path, machine: Path = H100X8, *, start: bool = True, args: tuple[str, ...] = ()
    ) -> None:
        self.state_dir = state_dir
        self.machine = machine
        self.args = args  # more `labgang up` arguments (e.g. --config FILE)
        self.env = dict(os.environ, LABGANG_STATE_DIR=str(state_dir), PYTHONUNBUFFERED="1")
        self.env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + self.env.get("PATH", "")
        self.env.pop("CUDA_VISIBLE_DEVICES", None)
        self.proc: subprocess.Popen[bytes] | None = None
        if start:
            self.start()

    def start(self) -> None:
        """Start ``labgang up`` and wait until it answers (``queues``), at most :data:`STARTUP_S`."""
        with open(self.state_dir / "up.log", "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "labgang.launcher", "up", "--simulate", str(self.machine), *self.args],
                cwd=REPO,
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + STARTUP_S
        while self.cli("queues").returncode != 0:
            assert self.proc.poll() is None and time.monotonic() < deadline, self.output()
            time.sleep(0.2)

    def output(self) -> str:
        """Everything ``labgang up`` has written so far."""
        return (self.state_dir / "up.log").read_text(errors="replace")

    def cli(self, *args: str, timeout: float = 120.0, umask: int = -1) -> subprocess.CompletedProcess[str]:
        """Run ``labgang ARGS`` against this instance; output as text. ``umask``: the CLI's (-1: this process's)."""
        return subprocess.run(
            [sys.executable, "-m", "labgang.launcher", *args],
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            umask=umask,
        )

    def submit(self, *args: str, umask: int = -1) -> str:
        """``labgang submit ARGS`` (under ``umask``, as :meth:`cli`); the job id it prints."""
        out = self.cli("submit", *args, umask=umask)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def job(self, job_id: str) -> dict:
        """``labgang show --json JOB``'s job."""
        out = self.cli("show", "--json", job_id)
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)["job"]

    def jobs(self) -> dict[str, dict]:
        """``labgang queue --json``'s jobs by id."""
        out = self.cli("queue", "--json")
        assert out.returncode == 0, out.stderr
        return {job["id"]: job for job in json.loads(out.stdout)["jobs"]}

    def wait_state(self, job_id: str, states: set[str], timeout: float = 60.0) -> dict:
        """Poll ``show`` until the job is in one of ``states``; its view then."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.job(job_id)
            if job["state"] in states:
                return job
            assert time.monotonic() < deadline, f"job {job_id} stayed {job['state']}, wanted {states}: {job}"
            time.sleep(0.1)

    def wait(self, what: str, predicate: Callable[[dict[str, dict]], bool]) -> dict[str, dict]:
        """Poll ``queue --json`` until ``predicate(jobs)`` holds, at most :data:`WAIT_S`."""
        deadline = time.monotonic() + WAIT_S
        while True:
            jobs = self.jobs()
            if predicate(jobs):
                return jobs
            assert time.monotonic() < deadline, f"timed out waiting for {what}: {jobs}"
            time.sleep(0.1)

    def stop(self) -> int | None:
        """Ctrl-C ``labgang up`` and wait for it; its exit status (None if never started).

        Raises:
            AssertionError: it did not stop within 60 s (then it is killed).
        """
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
                raise AssertionError(f"labgang up did not stop on Ctrl-C:\n{self.output()}") from None
        return self.proc.returncode


def alive(pid: int) -> bool:
    """Whether process ``pid`` runs: it exists and is neither a zombie nor dead (``/proc/PID/stat``)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def running_up(prefix: str, config: str | None = None) -> Iterator[Up]:
    """A module fixture's body: ``labgang up --simulate`` (8×H100) in a fresh ``/tmp/<prefix>…``
    state dir, yielded running; stopped after, and the stop must exit 0 (every job stopped in order).
    ``config``: a ``cluster.toml`` text it runs with (``--config``; the state dir is then a folder
    beside it), else the built-in default."""
    with tempfile.TemporaryDirectory(prefix=prefix, dir="/tmp") as d:
        if config is None:
            instance = Up(Path(d))
        else:
            (Path(d) / "cluster.toml").write_text(config)
            (Path(d) / "state").mkdir()
            instance = Up(Path(d) / "state", args=("--config", str(Path(d) / "cluster.toml")))
        try:
            yield instance
        finally:
            code = instance.stop()
        assert code == 0, instance.output()


@contextlib.contextmanager
def shared_up(prefix: str, config: str) -> Iterator[Up]:
    """``labgang up --simulate --config`` that every Unix user of the machine can reach (the tests with
    real users, ``lab_users``): its folder, config (0644) and state dir (0755) under ``/tmp/<prefix>…``
    (pytest's ``tmp_path`` is root's only; the socket itself is 0666), running while the block runs,
    then stopped and removed."""
    base = Path(tempfile.mkdtemp(prefix=prefix, dir="/tmp"))
    base.chmod(0o755)
    path = base / "cluster.toml"
    path.write_text(config)
    path.chmod(0o644)
    state = base / "state"
    state.mkdir(mode=0o755)
    up = Up(state, start=False, args=("--config", str(path)))
    up.start()
    try:
        yield up
    finally:
        up.stop()
        shutil.rmtree(base, ignore_errors=True)


def refused(out: subprocess.CompletedProcess[str], code: int, *words: str) -> str:
    """``out``'s one stderr line, after checking its exit status and that it says each of ``words``."""
    lines = out.stderr.strip().splitlines()
    assert out.returncode == code and len(lines) == 1, (out.returncode, out.stderr)
    assert all(word in lines[0] for word in words), lines[0]
    return lines[0]


def next_id(up: Up) -> int:
    """The number the next job would get (submitting one that is held, then cancelling it)."""
    job = up.submit("--hold", "--", "true")
    assert up.cli("cancel", job).returncode == 0
    return int(job) + 1
