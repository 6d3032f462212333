"""Shared pytest fixtures for labgang's tests."""

from __future__ import annotations

import os
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from fixture_files import FIXTURES, REPO
from hypothesis import settings
from labgang.agent.nvml.simulated import SCOPE_VARIABLE
from unix_users import UserShell, cannot_create_users, cannot_share_python, lab_shells

# Property tests are deterministic: the same examples on every run (docs/testing.md), so a
# counterexample found once becomes a named regression test rather than a flaky CI run.
# LABGANG_HYPOTHESIS_PROFILE=explore searches with fresh random examples instead.
settings.register_profile("ci", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("LABGANG_HYPOTHESIS_PROFILE", "ci"))

# This test run's simulated-NVML scope: unique per run, so that the processes of other labgang
# instances and other test runs on the host (tagged with their own scopes) are invisible here.
SIM_SCOPE = f"labgang-tests-{uuid.uuid4().hex}"


# A non-interactive shell starts its background jobs with SIGINT and SIGQUIT ignored, and an
# ignored signal stays ignored in every process started below (`for i in ...; do pytest; done &`,
# nohup, CI runners). The tests deliver these signals to the processes they start (Ctrl-C on
# `labgang run`, a rank that signals itself), so the run restores the defaults first instead of
# depending on how it was started.
for _signum, _default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGQUIT, signal.SIG_DFL)):
    if signal.getsignal(_signum) is signal.SIG_IGN:
        signal.signal(_signum, _default)


MAX_WORKERS = 4


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many workers ``-n auto`` (``pyproject.toml``'s addopts) starts: one per CPU this run may
    use, at most ``MAX_WORKERS``. The CPUs are those the process may run on (its affinity) within
    a cgroup's quota (``cpu.max``), not the host's count that ``os.cpu_count`` gives in a container;
    the cap keeps the end-to-end tests' real processes from crowding a large machine's scheduler."""
    usable = len(os.sched_getaffinity(0))
    try:
        quota, period = Path("/sys/fs/cgroup/cpu.max").read_text().split()
    except (OSError, ValueError):
        quota, period = "max", "1"
    if quota != "max":
        usable = min(usable, max(1, int(quota) // int(period)))
    return max(1, min(usable, MAX_WORKERS))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``tests/fixtures``: the data files the tests read (real captures, scenario files)."""
    return FIXTURES


@pytest.fixture(scope="session")
def scenario_dir() -> Path:
    """``tests/fixtures/scenarios``: the project's scenario files (``peers/`` below it)."""
    return FIXTURES / "scenarios"


@pytest.fixture(scope="session", autouse=True)
def sim_scope() -> Iterator[str]:
    """This run's simulated-NVML scope, also exported as ``LABGANG_SIM_SCOPE`` for the whole run.

    Every process-scanning simulated backend a test opens passes ``scope=sim_scope``, and every
    process a test starts inherits the variable, so another run's scoped backends skip it. (The
    one-shot views ``labgang nodes/top --local --simulate`` are scoped by their state dir, like
    ``labgang up``.) A process meant to look hand-started must drop the variable
    (``tests/agent/conftest.py``'s ``sleeper`` does).
    """
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SCOPE_VARIABLE, SIM_SCOPE)
        yield SIM_SCOPE


@pytest.fixture(scope="module")
def lab_users() -> Iterator[list[UserShell]]:
    """Two throwaway Unix users (``tests/unix_users.py``), each a ``UserShell`` that runs labgang as that
    user with a login's environment only; removed after the module. Skips with the reason where this
    run cannot create users or share an interpreter with them."""
    reason = cannot_create_users() or cannot_share_python()
    if reason:
        pytest.skip(reason)
    with lab_shells(2) as shells:
        yield shells
