"""Driving the coordinator's lifecycle directly on a fake clock, for the tests under
``tests/coordinator/`` (real SQLite store; agents represented by their registry records)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.events import CycleDecided
from labgang.launcher.scheduler.decisions import Admit, CycleResult
from labgang.launcher.scheduler.snapshot import RankPlacement

ROOT = Caller(uid=0, user="root", admin=True)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def clock_of(coord: Coordinator) -> Clock:
    """The fake clock the ``coord`` fixture gave its coordinator (for tests to move)."""
    assert isinstance(coord.clock, Clock)
    return coord.clock


def make_coord(tmp_path: Path) -> Iterator[Coordinator]:
    """A coordinator on a fake clock at t=1000 with nodes n1 and n2 attached and connected
    (real SQLite store under ``tmp_path``); closes the store after the test."""
    clock = Clock()
    config = parse_config(
        {
            "startup_timeout_s": 30,
            "node_timeout_s": 10,
            "requeue_backoff_s": 4,
            "max_start_failures": 2,
            "queues": [{"name": "default", "nominal": {"gpu": 8}}],
        }
    )
    c = Coordinator(config, Store(tmp_path / "db"), clock=clock)
    for node in ("n1", "n2"):
        c.agents.join(node, clock.now)
    yield c
    c.store.close()


async def submit(coord: Coordinator, **fields) -> str:
    job = await coord.desk.submit(ROOT, {"argv": ["train"], "workers": 2, "gpus_per_worker": 4, **fields})
    return job.id


def decide(coord: Coordinator, result: CycleResult) -> None:
    """Hand one cycle's result to the coordinator's lifecycle model at the current time."""
    coord.apply(CycleDecided(coord.clock(), result))


def admit(coord: Coordinator, job_id: str) -> None:
    placement = (RankPlacement(0, "n1", ("GPU-a",)), RankPlacement(1, "n2", ("GPU-b",)))
    decide(coord, CycleResult(admitted=(Admit(job_id, placement),), preempted=(), pending=()))


def event(coord: Coordinator, node: str, job_id: str, rank: int, kind: str, status: int | None = None) -> None:
    run_id = coord.jobs[job_id].run_id
    coord.node_events.apply_rank_event(
        node, {"job_id": run_id, "rank": rank, "kind": kind, "exit_status": status, "time": coord.clock()}
    )


def advance(coord: Coordinator, seconds: float) -> None:
    """Let simulated time pass while every connected agent keeps reporting."""
    clock_of(coord).now += seconds
    for conn in coord.agents.nodes.values():
        if conn.connected:
            conn.heard(clock_of(coord).now)


def start(coord: Coordinator, job_id: str) -> None:
    admit(coord, job_id)
    event(coord, "n1", job_id, 0, "started")
    event(coord, "n2", job_id, 1, "started")


def node_inventory(node: str, busy: dict[str, list[int]]) -> dict:
    """A simulated 4-GPU node's inventory dict whose GPUs show the given pids (uuid -> pids)."""
    from labgang.agent.inventory import read_inventory
    from labgang.agent.nvml.machine import machine_from_toml
    from labgang.agent.nvml.simulated import SimulatedNvml

    sim = Path(__file__).resolve().parents[2] / "config" / "sim" / f"{node}-4gpu.toml"
    backend = SimulatedNvml(machine_from_toml(sim.read_text(), str(sim)), scan_processes=False)
    backend.nvmlInit()
    for uuid, pids in busy.items():
        for pid in pids:
            backend.hold_memory(uuid, pid, 1 << 20)
    return read_inventory(backend, hostname=node).to_dict()


def node_uuids(node: str) -> list[str]:
    """The GPU UUIDs of that simulated 4-GPU node."""
    return [gpu["uuid"] for gpu in node_inventory(node, {})["gpus"]]
