"""The supervisor against the simulated NVML and the real inventory reader: ranks appear on
their devices, held memory keeps a rank from being "gone", strangers are foreign."""

from __future__ import annotations

import json
import os
import subprocess

import pytest
from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.agent.supervisor import RankState, Supervisor, SupervisorConfig

MIB = 1024 * 1024


@pytest.fixture
def nvml(repo_root):
    backend = open_backend(simulate=repo_root / "config" / "sim" / "h100x8.toml")
    yield backend
    backend.nvmlShutdown()


def test_held_memory_keeps_a_stopped_rank_releasing_until_nvml_lets_go(nvml, state_dir, make_spec, cleanup, h):
    uuids = [d.uuid for d in read_inventory(nvml).allocatable()]
    sup = Supervisor(state_dir, allow_root=True, device_pids=lambda: read_inventory(nvml).device_pids())
    cleanup.append(sup)
    sup.launch(make_spec(["sleep", "60"], devices=(uuids[0],)))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    pid = sup.ranks()[0].pid
    assert pid in read_inventory(nvml).device_pids()[uuids[0]]  # the sim sees it through CUDA_VISIBLE_DEVICES
    nvml.hold_memory(uuids[0], pid, 2048 * MIB)
    sup.stop_job("job1", grace=1.0)
    shim_pid = json.loads((state_dir / "ranks" / "job1" / "0" / "shim.json").read_text())["pid"]
    # Wait until only the device check is left: no process of the rank, its small parent exited.
    h.run_until(
        sup, lambda: sup.ranks()[0].state is RankState.RELEASING and not h.pid_alive(pid) and not h.pid_alive(shim_pid)
    )
    for _ in range(3):
        assert sup.tick() == []
    assert sup.ranks()[0].state is RankState.RELEASING
    nvml.release_memory(uuids[0], pid)
    assert [(e.kind, e.exit_status) for e in sup.tick()] == [("gone", 143)]


def test_stranger_on_a_simulated_gpu_is_foreign_with_its_memory(nvml, state_dir, make_spec, cleanup, h):
    uuids = [d.uuid for d in read_inventory(nvml).allocatable()]
    sup = Supervisor(state_dir, allow_root=True)
    cleanup.append(sup)
    sup.launch(make_spec(["sleep", "60"], devices=(uuids[0],)))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    stranger = subprocess.Popen(["sleep", "60"], env={**os.environ, "CUDA_VISIBLE_DEVICES": uuids[3]})
    try:
        inventory = read_inventory(nvml)
        # The simulator scans every process of the host, so other tests' processes may show up too:
        # look at ours only.
        foreign = sup.foreign_processes(inventory)
        mine = [f for f in foreign if f.pid == stranger.pid]
        assert [(f.pid, f.device) for f in mine] == [(stranger.pid, uuids[3])]
        held = {p.pid: p.used_memory_bytes for p in inventory.find(uuids[3]).processes}
        assert mine[0].used_memory_bytes == held[stranger.pid] > 0 and mine[0].cmdline == ("sleep", "60")
        rank_pid = sup.ranks()[0].pid
        assert rank_pid in inventory.device_pids()[uuids[0]] and rank_pid not in {f.pid for f in foreign}
        assert uuids[3] in SupervisorConfig().blocked_devices(mine)
    finally:
        stranger.kill()
        stranger.wait()
