"""Scopes of the simulated NVML: a backend skips live processes tagged with another instance's scope."""

from __future__ import annotations

import time

import pytest
from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.agent.nvml.simulated import SimulatedNvml


def _pids_once_all_seen(backend, uuid: str, expected: set[int]) -> frozenset[int]:
    """The pids on ``uuid`` once ``expected`` all show (a fresh process's environ may lag), or after 5 s."""
    deadline = time.monotonic() + 5
    while True:
        pids = read_inventory(backend, now=time.monotonic()).device_pids()[uuid]
        if expected <= pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.05)


def test_a_scoped_backend_skips_processes_of_another_scope(sim_dir, sleeper):
    ours = open_backend(sim_dir / "h100x8.toml", scope="/tmp/state-a")
    theirs = open_backend(sim_dir / "h100x8.toml", scope="/tmp/state-b")
    unscoped = open_backend(sim_dir / "h100x8.toml")
    try:
        assert (ours.labgang_sim_scope, unscoped.labgang_sim_scope) == ("/tmp/state-a", None)
        uuid = read_inventory(ours, now=0.0).gpus[3].uuid
        mine = sleeper(uuid, "/tmp/state-a")
        other = sleeper(uuid, "/tmp/state-b")
        hand_started = sleeper(uuid, None)

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
