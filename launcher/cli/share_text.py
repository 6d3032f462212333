"""``labgang explain``'s sentences on a job's share of one GPU (``--shards``, ``--mps``; docs/sharing.md)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labgang.agent.mem_size import format_mem


def share_sentences(job: Mapping[str, Any]) -> list[str]:
    """What share of a card the job asks for and how it is placed and counted; [] for whole devices.

    Args:
        job: the job view (``GET /v1/jobs/{id}``): ``shards``, ``mps``, ``gpu_mem`` (bytes), ``state``, ``ranks``,
            ``history`` (its last ``share-placed`` line: how the scheduler placed the share).
    """
    shards, mps, mem = int(job.get("shards") or 0), int(job.get("mps") or 0), int(job.get("gpu_mem") or 0)
    if not (shards or mps):
        return []
    what = f"{shards} shard{'s' if shards != 1 else ''} (time-sliced)" if shards else f"{mps} % of its SMs through MPS"
    budget = f", with a device-memory budget of {format_mem(mem)}" if mem else ""
    part = f"{mps / 100:g} gpu" if mps else f"{shards} x 1/shards_per_gpu gpu (the node's [sharing] shards_per_gpu)"
    out = [
        f"It asks for a share of one GPU: {what}{budget}, {part} of a card. Its queue's quota counts cards, "
        "not parts of them: a card its queue's shares hold alone counts one whole gpu (no other queue can use "
        "the rest of it), and its shares on cards shared with other queues are summed and rounded up."
    ]
    ranks = job.get("ranks") or []
    placed = [h for h in job.get("history") or [] if isinstance(h, Mapping) and h.get("event") == "share-placed"]
    if job.get("state") in ("admitted", "running") and placed:
        # recorded by the scheduler at admission (launcher/scheduler/shares.py: placement_note)
        out.append(f"At admission it {placed[-1].get('message')}.")
    elif job.get("state") in ("admitted", "running") and ranks:
        card, node = (ranks[0].get("devices") or ["?"])[0], ranks[0].get("node", "?")
        out.append(
            f"It runs on card {card} of {node}: a share goes to the shared card with the least room left that "
            "holds it and whose sharers its queue may share with (share_gpus, share_with), else to a whole free "
            "card of the fullest node, so whole cards stay free for gangs."
        )
    return out
