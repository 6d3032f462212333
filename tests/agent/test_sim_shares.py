"""The simulated NVML's shared cards (``agent/nvml/simshare.py``): several live processes on one
card each with their own memory, an MPS server whose clients only the MPS query lists, and
out-of-memory when a card's sharers ask for more than it has. Real processes, scanned by psutil."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from labgang.agent.inventory import NodeInventory, ProcessInfo, Unavailable, read_inventory
from labgang.agent.nvml.simulated import SCOPE_VARIABLE

MIB = 1024 * 1024
CARD = "GPU-86daac8f-5985-a0f2-16a0-e7ecb6c27eb2"  # config/sim/rtx4090x2.toml, GPU 0 (24564 MiB)


@pytest.fixture
def start(sim_scope: str) -> Iterator[Callable[..., subprocess.Popen]]:
    """Start a sleeping process on ``CARD`` declaring ``mib`` of device memory (and MPS variables)."""
    procs: list[subprocess.Popen] = []

    def run(mib: float, **env: str) -> subprocess.Popen:
        full = {**os.environ, SCOPE_VARIABLE: sim_scope, "CUDA_VISIBLE_DEVICES": CARD, "SIM_GPU_MEMORY_MIB": str(mib)}
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={**full, **env})
        procs.append(proc)
        return proc

    yield run
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)


def listed(procs: tuple[ProcessInfo, ...] | Unavailable) -> tuple[ProcessInfo, ...]:
    """A process list NVML gave (the test fails on an unavailable one)."""
    assert isinstance(procs, tuple), procs
    return procs


def _read_until(backend, done: Callable[[NodeInventory], bool], timeout: float = 10.0) -> NodeInventory:
    """Read inventories until ``done(inv)`` (a process is scanned once it has exec'd)."""
    deadline = time.monotonic() + timeout
    while True:
        inv = read_inventory(backend)
        if done(inv):
            return inv
        if time.monotonic() > deadline:
            pytest.fail(f"not reached in {timeout} s: {inv.gpus[0].processes}, {inv.gpus[0].mps_processes}")
        time.sleep(0.02)


def test_several_processes_share_one_card_each_with_its_memory(make_sim, sim_dir: Path, start):
    backend = make_sim(sim_dir / "rtx4090x2.toml", scan_processes=True)
    a, b = start(1000), start(3000)
    inv = _read_until(backend, lambda inv: {a.pid, b.pid} <= inv.device_pids()[CARD])
    used = {p.pid: p.used_memory_bytes for p in listed(inv.gpus[0].processes)}
    assert used[a.pid] == 1000 * MIB and used[b.pid] == 3000 * MIB
    assert inv.gpus[0].mps_processes == ()
    assert inv.device_memory()[CARD] == sorted(used.items())


def test_mps_clients_are_listed_only_by_the_mps_query_and_their_server_holds_their_memory(
    make_sim, sim_dir: Path, start, tmp_path: Path
):
    backend = make_sim(sim_dir / "rtx4090x2.toml", scan_processes=True)
    pipe = str(tmp_path / "pipe")
    server = start(0, SIM_MPS_ROLE="server", CUDA_MPS_PIPE_DIRECTORY=pipe)
    c1, c2 = start(2000, CUDA_MPS_PIPE_DIRECTORY=pipe), start(500, CUDA_MPS_PIPE_DIRECTORY=pipe)
    lone = start(700)  # time-sliced next to the MPS server: a plain compute process
    pids = {server.pid, c1.pid, c2.pid, lone.pid}
    inv = _read_until(backend, lambda inv: pids <= inv.device_pids()[CARD])
    gpu = inv.gpus[0]
    assert {p.pid: p.used_memory_bytes for p in listed(gpu.processes)} == {server.pid: 2500 * MIB, lone.pid: 700 * MIB}
    assert {p.pid: p.used_memory_bytes for p in listed(gpu.mps_processes)} == {c1.pid: 2000 * MIB, c2.pid: 500 * MIB}
    handle = backend.nvmlDeviceGetHandleByIndex(0)
    plain = {r.pid for r in backend.nvmlDeviceGetComputeRunningProcesses(handle)}
    assert c1.pid not in plain and server.pid in plain  # what a tool reading only this call sees
    assert NodeInventory.from_dict(inv.to_dict()) == inv
    # Without its server, a client is a plain process again.
    server.send_signal(signal.SIGKILL)
    server.wait(timeout=10)
    inv = _read_until(backend, lambda inv: server.pid not in inv.device_pids()[CARD])
    assert c1.pid in {p.pid for p in listed(inv.gpus[0].processes)} and inv.gpus[0].mps_processes == ()


def test_a_sharer_that_does_not_fit_in_what_is_left_of_the_card_is_ended(make_sim, sim_dir: Path, start):
    backend = make_sim(sim_dir / "rtx4090x2.toml", scan_processes=True)
    first = start(15000)
    _read_until(backend, lambda inv: first.pid in inv.device_pids()[CARD])
    second = start(15000)  # started later: the card has about 9.5 GiB left for it
    third = start(1000)  # still fits after the second is refused
    # The card refuses the second when NVML next sees both (a read is when the simulation looks).
    inv = _read_until(backend, lambda inv: second.poll() is not None and third.pid in inv.device_pids()[CARD])
    assert second.returncode == -signal.SIGTERM
    assert second.pid not in inv.device_pids()[CARD] and first.poll() is None and third.poll() is None
    (oom,) = backend.labgang_out_of_memory()
    assert (oom.uuid, oom.pid, oom.wanted) == (CARD, second.pid, 15000 * MIB)
    assert 0 < oom.free < 15000 * MIB
