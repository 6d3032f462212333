"""The ``/metrics`` families of shared cards (``--shards``/``--mps``): sharers, shares, memory per sharer.

From each GPU's sharers as its agent reports them (``GpuInfo.sharers``, ``agent/sharers.py``).
Per card (labels ``node``, ``gpu``, ``uuid``), only for cards with sharers:

* ``labgang_gpu_sharing_ranks``: ranks sharing the card;
* ``labgang_gpu_used_shards`` and, where the cluster's ``[sharing]`` gives the node's
  ``shards_per_gpu``, ``labgang_gpu_free_shards``;
* ``labgang_gpu_mps_sm_used_ratio``: the SM share its MPS ranks were granted (0..1);

and per sharer (also ``job``, ``rank``, ``kind``): ``labgang_gpu_sharer_memory_used_bytes`` and,
where it has one, ``labgang_gpu_sharer_memory_budget_bytes`` (its ``--gpu-mem``).
"""

from __future__ import annotations

from labgang.launcher.pitfalls import ClusterSnapshot
from prometheus_client.core import GaugeMetricFamily, Metric

CARD_LABELS = ("node", "gpu", "uuid")
SHARER_LABELS = (*CARD_LABELS, "job", "rank", "kind")


def sharer_families(snapshot: ClusterSnapshot) -> list[Metric]:
    """The shared-card gauge families for one snapshot (see the module docstring)."""
    sharers = GaugeMetricFamily(
        "labgang_gpu_sharing_ranks", "Ranks sharing the card (--shards/--mps).", labels=CARD_LABELS
    )
    used = GaugeMetricFamily("labgang_gpu_used_shards", "Shards of the card its sharers hold.", labels=CARD_LABELS)
    free = GaugeMetricFamily(
        "labgang_gpu_free_shards", "Shards of the card still free (shards_per_gpu - used).", labels=CARD_LABELS
    )
    mps = GaugeMetricFamily(
        "labgang_gpu_mps_sm_used_ratio", "SM share granted to the card's MPS ranks (0..1).", labels=CARD_LABELS
    )
    memory = GaugeMetricFamily(
        "labgang_gpu_sharer_memory_used_bytes",
        "Device memory a sharer's processes use on its card.",
        labels=SHARER_LABELS,
    )
    budget = GaugeMetricFamily(
        "labgang_gpu_sharer_memory_budget_bytes", "A sharer's --gpu-mem budget.", labels=SHARER_LABELS
    )
    for node in snapshot.nodes:
        if node.inventory is None:
            continue
        for gpu in node.inventory.gpus:
            if not gpu.sharers:
                continue
            card = (node.name, str(gpu.index), str(gpu.uuid))
            shards = sum(s.shards for s in gpu.sharers)
            sharers.add_metric(card, float(len(gpu.sharers)))
            used.add_metric(card, float(shards))
            if node.shards_per_gpu:
                free.add_metric(card, float(max(0, node.shards_per_gpu - shards)))
            mps.add_metric(card, sum(s.sm_percent or 0 for s in gpu.sharers if s.kind == "mps") / 100.0)
            for s in gpu.sharers:
                labels = (*card, s.job, str(s.rank), s.kind)
                memory.add_metric(labels, float(s.used_memory_bytes))
                if s.gpu_mem_bytes:
                    budget.add_metric(labels, float(s.gpu_mem_bytes))
    return [sharers, used, free, mps, memory, budget]
