"""Fixtures for the supervisor's tests: real processes, a private state dir, and a leftover check.

Every rank started through ``make_spec`` carries a per-test token in its environment
(``LGTEST_TOKEN``); after each test the fixture stops what is still supervised and then
scans ``/proc`` for any process whose environment holds the token or whose command line
names the test's state dir (the ranks' small parents). Finding one fails the test, after
killing it so one failure does not cascade.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest
from labgang.agent.supervisor import LaunchSpec, RankEvent, RankState, Supervisor

PYTHON = sys.executable


def _processes_matching(token: str, state_dir: str) -> list[tuple[int, str]]:
    found = []
    me = os.getpid()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read()
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except OSError:
            continue
        if f"LGTEST_TOKEN={token}".encode() in environ.split(b"\0") or state_dir.encode() in cmdline:
            found.append((pid, cmdline.replace(b"\0", b" ").decode(errors="replace")))
    return found


def leftovers(token: str, state_dir: Path) -> list[tuple[int, str]]:
    """Live processes of a test: rank processes (by token) and small parents (by state dir)."""
    return _processes_matching(token, str(state_dir))


@pytest.fixture
def token() -> str:
    """A per-test marker put into every rank's environment."""
    return uuid.uuid4().hex


@pytest.fixture
def state_dir(token: str) -> Iterable[Path]:
    """A fresh state dir under /tmp that every user may traverse (so per-user log modes are what is tested)."""
    path = Path(tempfile.mkdtemp(prefix=f"lgsup-{token[:8]}-", dir="/tmp"))
    os.chmod(path, 0o755)  # noqa: S103 - see the docstring: every user must traverse it
    yield path
    shutil.rmtree(path, ignore_errors=True)


class FakeClock:
    """A monotonic clock the test moves by hand, for the timed arrows (grace, warning)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def make_spec(token: str) -> Callable[..., LaunchSpec]:
    """Build a LaunchSpec for a root rank with the test token; keyword arguments override fields."""

    def build(argv, *, job_id: str = "job1", rank: int = 0, world_size: int = 1, **overrides) -> LaunchSpec:
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LGTEST_TOKEN": token}
        env.update(overrides.pop("env", {}))
        fields: dict[str, Any] = dict(
            job_id=job_id,
            rank=rank,
            local_rank=rank,
            world_size=world_size,
            local_world_size=world_size,
            node_rank=0,
            master_addr="127.0.0.1",
            master_port=29400,
            devices=(f"GPU-test-{rank}",),
            argv=tuple(argv),
            env=env,
            cwd="/tmp",
            uid=0,
            grace=2.0,
        )
        fields.update(overrides)
        return LaunchSpec(**fields)

    return build


def run_until(
    sup: Supervisor, done: Callable[[], bool], timeout: float = 15.0, events: list[RankEvent] | None = None
) -> list[RankEvent]:
    """Tick ``sup`` every 20 ms until ``done()``; return the events seen. Fails after ``timeout`` s."""
    seen = [] if events is None else events
    deadline = time.monotonic() + timeout
    while True:
        seen.extend(sup.tick())
        if done():
            return seen
        if time.monotonic() > deadline:
            pytest.fail(f"condition not reached in {timeout} s; ranks: {sup.ranks()}; events: {seen}")
        time.sleep(0.02)


def all_in(sup: Supervisor, state: RankState) -> Callable[[], bool]:
    """A predicate: every rank of ``sup`` is in ``state``."""
    return lambda: bool(sup.ranks()) and all(r.state is state for r in sup.ranks())


@pytest.fixture
def cleanup(token: str, state_dir: Path):
    """Register supervisors to stop after the test; then fail if any process of the test remains."""
    sups: list[Supervisor] = []
    yield sups
    for sup in sups:
        for job in sorted({r.job_id for r in sup.ranks() if r.state is not RankState.GONE}):
            sup.stop_job(job, grace=0)
        deadline = time.monotonic() + 5
        while any(r.state is not RankState.GONE for r in sup.ranks()) and time.monotonic() < deadline:
            sup.tick()
            time.sleep(0.02)
    deadline = time.monotonic() + 3
    left = leftovers(token, state_dir)
    while left and time.monotonic() < deadline:
        time.sleep(0.05)
        left = leftovers(token, state_dir)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert not left, f"processes left behind by the test: {left}"


@pytest.fixture
def sup(state_dir: Path, cleanup) -> Supervisor:
    """A root supervisor on the real clock that may run root ranks (the tests run as root)."""
    s = Supervisor(state_dir, allow_root=True)
    cleanup.append(s)
    return s


@pytest.fixture
def fake_sup(state_dir: Path, cleanup, clock: FakeClock) -> Supervisor:
    """A root supervisor whose timed arrows follow ``clock`` (moved by the test)."""
    s = Supervisor(state_dir, allow_root=True, clock=clock)
    cleanup.append(s)
    return s


def pid_alive(pid: int) -> bool:
    """True when ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def wait_for_file(path: Path, timeout: float = 8.0) -> str:
    """Wait until ``path`` exists and is non-empty; return its text."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.stat().st_size:
            time.sleep(0.02)
            return path.read_text()
        time.sleep(0.02)
    pytest.fail(f"{path} did not appear within {timeout} s")


@pytest.fixture
def h():
    """Helpers for test modules (``--import-mode=importlib`` keeps conftest itself unimportable)."""
    import types

    return types.SimpleNamespace(
        run_until=run_until,
        all_in=all_in,
        pid_alive=pid_alive,
        wait_for_file=wait_for_file,
        leftovers=leftovers,
        python=PYTHON,
    )
