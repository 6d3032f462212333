"""Scopes of the simulated NVML: a backend skips live processes tagged with another instance's scope."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.agent.nvml.simulated import SCOPE_VARIABLE, SimulatedNvml


@pytest.fixture
def tagged_sleeper():
    """Start sleeping processes on a device, with or without ``LABGANG_SIM_SCOPE``; killed at teardown."""
    procs: list[subprocess.Popen] = []

    def start(cvd: str, scope: str | None) -> int:
        env = {k: v for k, v in os.environ.items() if k != SCOPE_VARIABLE}
        env["CUDA_VISIBLE_DEVICES"] = cvd
        if scope is not None:
            env[SCOPE_VARIABLE] = scope
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
        procs.append(proc)
        return proc.pid

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)


def _pids_once_all_seen(backend, uuid: str, expected: set[int]) -> frozenset[int]:
    """The pids on ``uuid`` once ``expected`` all show (a fresh process's environ may lag), or after 5 s."""
    deadline = time.monotonic() + 5
    while True:
        pids = read_inventory(backend, now=time.monotonic()).device_pids()[uuid]
        if expected <= pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.05)


def test_a_scoped_backend_skips_processes_of_another_scope(sim_dir, tagged_sleeper):
    ours = open_backend(sim_dir / "h100x8.toml", scope="/tmp/state-a")
    theirs = open_backend(sim_dir / "h100x8.toml", scope="/tmp/state-b")
    unscoped = open_backend(sim_dir / "h100x8.toml")
    try:
        assert (ours.labgang_sim_scope, unscoped.labgang_sim_scope) == ("/tmp/state-a", None)
        uuid = read_inventory(ours, now=0.0).gpus[3].uuid
        mine = tagged_sleeper(uuid, "/tmp/state-a")
        other = tagged_sleeper(uuid, "/tmp/state-b")
        hand_started = tagged_sleeper(uuid, None)

        assert _pids_once_all_seen(ours, uuid, {mine, hand_started}) == {mine, hand_started}
        assert _pids_once_all_seen(theirs, uuid, {other, hand_started}) == {other, hand_started}
        # No scope configured: as before scopes existed, every process naming the UUID counts.
        assert _pids_once_all_seen(unscoped, uuid, {mine, other, hand_started}) == {mine, other, hand_started}
    finally:
        for backend in (ours, theirs, unscoped):
            backend.nvmlShutdown()


def test_an_empty_scope_is_refused(sim_dir):
    with pytest.raises(ValueError, match="scope"):
        SimulatedNvml.from_file(sim_dir / "h100x8.toml", scope="")
