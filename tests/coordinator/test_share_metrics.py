"""``/metrics`` of shared cards: sharers, shards used/free, MPS share and memory per sharer, from the
inventory's sharers (the agent's ``GpuInfo.sharers``) through a real ``CoordinatorMetrics``."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from labgang.agent.inventory import Sharer, read_inventory
from labgang.agent.nvml.simulated import SimulatedNvml
from labgang.launcher.coordinator.metrics import CoordinatorMetrics
from labgang.launcher.pitfalls import ClusterSnapshot
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

MACHINE = Path(__file__).resolve().parents[2] / "config" / "sim" / "rtx4090x2.toml"

GIB = 1024**3


def _snapshot(shards_per_gpu: int | None) -> ClusterSnapshot:
    backend = SimulatedNvml.from_file(MACHINE, scan_processes=False)
    backend.nvmlInit()
    try:
        inv = read_inventory(backend)
    finally:
        backend.nvmlShutdown()
    shared = (
        Sharer("12", 0, "shard", shards=1, gpu_mem_bytes=4 * GIB, used_memory_bytes=5 * GIB),
        Sharer("13", 0, "shard", shards=2, used_memory_bytes=GIB),
    )
    mps = (Sharer("14", 1, "mps", sm_percent=30, used_memory_bytes=2 * GIB),)
    gpus = (dataclasses.replace(inv.gpus[0], sharers=shared), dataclasses.replace(inv.gpus[1], sharers=mps))
    inv = dataclasses.replace(inv, gpus=gpus)
    node: dict[str, Any] = {"name": "n1", "inventory": inv.to_dict(), "devices": [], "shards_per_gpu": shards_per_gpu}
    return ClusterSnapshot.from_api(1.0, {"nodes": [node]})


def _samples(snapshot: ClusterSnapshot) -> dict[tuple[str, tuple], float]:
    metrics = CoordinatorMetrics(lambda: snapshot, version="test")
    text = generate_latest(metrics.registry).decode()
    out = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith(
            ("labgang_gpu_s", "labgang_gpu_used_shards", "labgang_gpu_free_shards", "labgang_gpu_mps")
        ):
            for s in family.samples:
                out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_each_shared_card_shows_its_sharers_shares_and_memory_per_sharer():
    got = _samples(_snapshot(4))
    card0 = (("gpu", "0"), ("node", "n1"), ("uuid", "GPU-86daac8f-5985-a0f2-16a0-e7ecb6c27eb2"))
    card1 = (("gpu", "1"), ("node", "n1"), ("uuid", "GPU-4776dfcb-8121-a920-139e-6dc5e7881309"))

    def sharer(card: tuple, job: str, rank: int, kind: str) -> tuple:
        return tuple(sorted((*card, ("job", job), ("rank", str(rank)), ("kind", kind))))

    assert got == {
        ("labgang_gpu_sharing_ranks", card0): 2.0,
        ("labgang_gpu_sharing_ranks", card1): 1.0,
        ("labgang_gpu_used_shards", card0): 3.0,
        ("labgang_gpu_used_shards", card1): 0.0,
        ("labgang_gpu_free_shards", card0): 1.0,
        ("labgang_gpu_free_shards", card1): 4.0,
        ("labgang_gpu_mps_sm_used_ratio", card0): 0.0,
        ("labgang_gpu_mps_sm_used_ratio", card1): 0.3,
        ("labgang_gpu_sharer_memory_used_bytes", sharer(card0, "12", 0, "shard")): 5.0 * GIB,
        ("labgang_gpu_sharer_memory_used_bytes", sharer(card0, "13", 0, "shard")): 1.0 * GIB,
        ("labgang_gpu_sharer_memory_used_bytes", sharer(card1, "14", 1, "mps")): 2.0 * GIB,
        ("labgang_gpu_sharer_memory_budget_bytes", sharer(card0, "12", 0, "shard")): 4.0 * GIB,
    }


def test_free_shards_are_left_out_where_the_cluster_does_not_say_how_many_a_card_has():
    got = _samples(_snapshot(None))
    assert not [k for k in got if k[0] == "labgang_gpu_free_shards"]
    assert [v for k, v in got.items() if k[0] == "labgang_gpu_used_shards"] == [3.0, 0.0]
