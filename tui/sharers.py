"""``labgang top``'s holder cell for a shared card (``--shards``/``--mps``): its sharers, the shares
they hold (used/total where the cluster says how many shards a card has) and each one's memory,
against its ``--gpu-mem`` budget where it has one (``OVER BUDGET`` past it, as ``labgang nodes --gpus``
says a budget violation)."""

from __future__ import annotations

from typing import Any

from labgang.agent.mem_size import size_text


def _size(n: int) -> str:
    return size_text(n, short=True)


OVER_BUDGET = "OVER BUDGET"


def sharer_memory(sharer: Any) -> str:
    """One sharer's memory (``inventory.Sharer``): ``512M`` without a budget, ``512M/16M`` with a
    ``--gpu-mem`` budget, and ``512M/16M OVER BUDGET`` when its processes use more than the budget
    (the agent's budget watch's test: usage strictly above the budget, bytes)."""
    used = int(sharer.used_memory_bytes or 0)
    budget = sharer.gpu_mem_bytes
    if not budget:
        return _size(used)
    over = f" {OVER_BUDGET}" if used > budget else ""
    return f"{_size(used)}/{_size(budget)}{over}"


def sharers_text(gpu: Any, shards_per_gpu: int | None) -> str | None:
    """``"shared 3/4: 12 5.0G, 13 1.0G/2.0G"`` for a GPU with sharers (``GpuInfo.sharers``), ``"shared mps
    80%: ..."`` for MPS ones; None for a card nobody shares. Each sharer's memory is
    :func:`sharer_memory` (``512M/16M OVER BUDGET`` for one past its ``--gpu-mem``)."""
    sharers = getattr(gpu, "sharers", ())
    if not sharers:
        return None
    shards = sum(s.shards for s in sharers)
    mps = sum(s.sm_percent or 0 for s in sharers if s.kind == "mps")
    parts = []
    if shards:
        parts.append(f"{shards}/{shards_per_gpu}" if shards_per_gpu else f"{shards} shards")
    if mps:
        parts.append(f"mps {mps}%")
    who = ", ".join(f"{s.job} {sharer_memory(s)}" for s in sharers)
    return f"shared {' '.join(parts)}: {who}"


def budgeted_jobs(snapshot: Any) -> dict[str, str]:
    """Job id → :func:`sharer_memory` of each running share with a ``--gpu-mem`` budget, from every
    node's shared cards (``ClusterSnapshot``): what ``top``'s jobs table says in a running job's
    REASON cell (``gpu-mem 512M/16M OVER BUDGET``). Jobs without a budget are absent."""
    out: dict[str, str] = {}
    for node in snapshot.nodes:
        if node.inventory is None:
            continue
        for gpu in node.inventory.gpus:
            for s in getattr(gpu, "sharers", ()):
                if s.gpu_mem_bytes:
                    out[s.job] = sharer_memory(s)
    return out
