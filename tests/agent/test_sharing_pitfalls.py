"""The two sharing pitfalls over what an agent would report: a simulated NVML read of real
processes sharing one card, annotated as the agent annotates (``ProcessFacts``, ``with_sharers``),
through the coordinator's node JSON into the detectors. Nothing here is specific to the simulator
but the machine file: the detectors read only the inventory's sharers and processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from labgang.agent.inventory import NodeInventory, read_inventory
from labgang.agent.nvml.simulated import SCOPE_VARIABLE
from labgang.agent.procfacts import ProcessFacts
from labgang.agent.sharers import with_sharers
from labgang.agent.supervisor.spec import ShareGrant
from labgang.launcher.pitfalls import ClusterSnapshot, PitfallKind, PitfallThresholds
from labgang.launcher.pitfalls.sharing import detect_shared_card_memory, detect_sharers_contend

GIB = 1024**3
CARD = "GPU-86daac8f-5985-a0f2-16a0-e7ecb6c27eb2"  # config/sim/rtx4090x2.toml, GPU 0: 24564 MiB
BUSY = "while True: pass"
IDLE = "import time; time.sleep(60)"


@pytest.fixture
def rank(sim_scope: str) -> Iterator[Callable[..., subprocess.Popen]]:
    """Start a process on ``CARD`` declaring ``mib`` of device memory, running ``code``."""
    procs: list[subprocess.Popen] = []

    def run(mib: int, code: str = IDLE) -> subprocess.Popen:
        env = {**os.environ, SCOPE_VARIABLE: sim_scope, "CUDA_VISIBLE_DEVICES": CARD, "SIM_GPU_MEMORY_MIB": str(mib)}
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=env))
        return procs[-1]

    yield run
    for proc in procs:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)


def snapshot_of(backend, facts: ProcessFacts, grants: dict, owners: dict) -> tuple[ClusterSnapshot, NodeInventory]:
    """What the coordinator would hold for this node: the agent's annotated inventory, as JSON."""
    inv = read_inventory(backend)
    inv = facts.annotate(inv, {pid: (run.rsplit(".", 1)[0], r) for pid, (run, r, _) in owners.items()})
    inv = with_sharers(inv, grants, owners)
    node = {"name": "n1", "inventory": inv.to_dict(), "devices": []}
    return ClusterSnapshot.from_api(time.time(), {"nodes": [node]}), inv


def wait_for(read: Callable[[], tuple[ClusterSnapshot, NodeInventory]], done: Callable[[NodeInventory], bool]):
    deadline = time.monotonic() + 15
    while True:
        snap, inv = read()
        if done(inv):
            return snap
        assert time.monotonic() < deadline, f"not reached: {inv.gpus[0].sharers} {inv.gpus[0].processes}"
        time.sleep(0.05)


def test_a_shared_card_near_its_memory_names_its_biggest_user(make_sim, sim_dir, rank):
    backend = make_sim(sim_dir / "rtx4090x2.toml", scan_processes=True)
    big, small = rank(13000), rank(9500)
    grants = {("12.0", 0): (CARD, ShareGrant("shard", 2, gpu_mem=8 * GIB)), ("13.0", 0): (CARD, ShareGrant("shard", 1))}
    owners = {big.pid: ("12.0", 0, (CARD,)), small.pid: ("13.0", 0, (CARD,))}
    facts = ProcessFacts()
    snap = wait_for(
        lambda: snapshot_of(backend, facts, grants, owners),
        lambda inv: all(s.used_memory_bytes for s in inv.gpus[0].sharers),
    )
    (found,) = detect_shared_card_memory(snap, PitfallThresholds())
    assert found.kind is PitfallKind.SHARED_CARD_MEMORY and (found.node, found.uuid, found.job) == ("n1", CARD, "12")
    assert found.summary == (
        "2 sharers use 22.0 GiB of 24.0 GiB (92%); the biggest is job 12 rank 0 with 12.7 GiB (budget 8.0 GiB)"
    )
    # Below the threshold: nothing.
    assert detect_shared_card_memory(snap, PitfallThresholds(shared_card_memory_pct=95)) == []
    assert detect_sharers_contend(snap, PitfallThresholds()) == []  # both sleep


def test_two_busy_sharers_contend_and_a_busy_one_next_to_an_idle_one_does_not(make_sim, sim_dir, rank):
    backend = make_sim(sim_dir / "rtx4090x2.toml", scan_processes=True)
    a, b, idle = rank(1000, BUSY), rank(1000, BUSY), rank(1000)
    grants = {(f"{j}.0", 0): (CARD, ShareGrant("shard", 1)) for j in (20, 21, 22)}
    owners = {a.pid: ("20.0", 0, (CARD,)), b.pid: ("21.0", 0, (CARD,)), idle.pid: ("22.0", 0, (CARD,))}
    facts = ProcessFacts()  # CPU activity is measured between two reads (NVML gives no per-process SM share here)
    t = PitfallThresholds(sharer_busy_pct=10)  # two spinning processes on a loaded CI host still pass 10 %

    def procs(inv: NodeInventory) -> dict:
        listed = inv.gpus[0].processes
        assert isinstance(listed, tuple), listed
        return {p.pid: p for p in listed}

    def both_busy(inv: NodeInventory) -> bool:
        seen = procs(inv)
        return len(seen) == 3 and all((seen[p.pid].cpu_pct or 0) >= 10 for p in (a, b) if p.pid in seen)

    snap = wait_for(lambda: snapshot_of(backend, facts, grants, owners), both_busy)
    (found,) = detect_sharers_contend(snap, t)
    assert found.kind is PitfallKind.SHARERS_CONTEND and found.uuid == CARD
    assert found.summary.startswith("2 busy sharers take turns on one card: job 20 rank 0 (")
    assert "job 21 rank 0 (" in found.summary and "job 22" not in found.summary
    b.send_signal(signal.SIGKILL)
    b.wait(timeout=10)
    snap = wait_for(lambda: snapshot_of(backend, facts, grants, owners), lambda inv: b.pid not in procs(inv))
    assert detect_sharers_contend(snap, t) == []
