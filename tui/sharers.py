"""``labgang top``'s holder cell for a shared card (``--shards``/``--mps``): its sharers, the shares
they hold (used/total where the cluster says how many shards a card has) and each one's memory."""

from __future__ import annotations

from typing import Any

GiB = 1024**3
MiB = 1024**2


def _size(n: int) -> str:
    return f"{n / GiB:.1f}G" if n >= GiB else f"{n / MiB:.0f}M"


def sharers_text(gpu: Any, shards_per_gpu: int | None) -> str | None:
    """``"shared 3/4: 12 5.0G, 13 1.0G"`` for a GPU with sharers (``GpuInfo.sharers``), ``"shared mps
    80%: ..."`` for MPS ones; None for a card nobody shares."""
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
    who = ", ".join(f"{s.job} {_size(s.used_memory_bytes)}" for s in sharers)
    return f"shared {' '.join(parts)}: {who}"
