"""Scopes of the simulated NVML: a backend skips live processes tagged with another instance's scope."""

from __future__ import annotations

import time
import uuid

import psutil
import pytest
from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.agent.nvml.simulated import SimulatedNvml


def _ours_once_all_seen(backend, device: str, started: set[int], expected: set[int]) -> set[int]:
    """Which of the processes this test ``started`` show on ``device``, once ``expected`` all do (a
    fresh process's environ may lag), or after 5 s. Processes of anything else on the host (other
    labgang instances, other test runs, hand-started ones) are left out of the answer."""
    deadline = time.monotonic() + 5
    while True:
        pids = set(read_inventory(backend, now=time.monotonic()).device_pids()[device]) & started
        if expected <= pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.05)


def test_a_scoped_backend_skips_processes_of_another_scope(sim_dir, sleeper):
    # Scopes of this test alone: no other instance or test run on the host tags with them.
    scope_a, scope_b = (f"test-scope-{uuid.uuid4().hex}" for _ in range(2))
    ours = open_backend(sim_dir / "h100x8.toml", scope=scope_a)
    theirs = open_backend(sim_dir / "h100x8.toml", scope=scope_b)
    unscoped = open_backend(sim_dir / "h100x8.toml")
    try:
        assert (ours.labgang_sim_scope, unscoped.labgang_sim_scope) == (scope_a, None)
        gpu = read_inventory(ours, now=0.0).gpus[3].uuid
        mine = sleeper(gpu, scope_a)
        other = sleeper(gpu, scope_b)
        hand_started = sleeper(gpu, None)
        started = {mine, other, hand_started}

        assert _ours_once_all_seen(ours, gpu, started, {mine, hand_started}) == {mine, hand_started}
        assert _ours_once_all_seen(theirs, gpu, started, {other, hand_started}) == {other, hand_started}
        # No scope configured: as before scopes existed, every process naming the UUID counts.
        assert _ours_once_all_seen(unscoped, gpu, started, started) == started
    finally:
        for backend in (ours, theirs, unscoped):
            backend.nvmlShutdown()


def test_an_empty_scope_is_refused(sim_dir):
    with pytest.raises(ValueError, match="scope"):
        SimulatedNvml.from_file(sim_dir / "h100x8.toml", scope="")


def test_a_process_read_while_still_in_exec_is_seen_once_its_environment_is(sim_dir, sleeper, monkeypatch, sim_scope):
    """A process can show an empty environment for a moment after its parent's ``Popen`` returned
    (the kernel is still inside ``execve``); the scan must not remember that empty read."""
    backend = open_backend(sim_dir / "h100x8.toml", scope=sim_scope)
    try:
        gpu = read_inventory(backend, now=0.0).gpus[2].uuid
        pid = sleeper(gpu, sim_scope)
        real_environ = psutil.Process.environ
        reads: list[int] = []

        def environ_mid_exec(self: psutil.Process) -> dict[str, str]:
            if self.pid == pid and not reads:
                reads.append(pid)
                return {}  # what /proc/PID/environ gives before the new image's stack is set up
            return real_environ(self)

        monkeypatch.setattr(psutil.Process, "environ", environ_mid_exec)
        assert pid not in read_inventory(backend, now=1.0).device_pids()[gpu]
        assert reads == [pid]
        assert pid in read_inventory(backend, now=2.0).device_pids()[gpu]
    finally:
        backend.nvmlShutdown()
