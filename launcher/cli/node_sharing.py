"""``labgang nodes --gpus``: how a node serves shared cards, and each shared card's sharers.

One line for the node (its MPS daemons; whether ``--gpu-mem`` budgets of shard jobs are enforced
by the card or watched through NVML, and why), then per shared card: shards used and free (free
where the cluster's ``[sharing]`` says how many a card has), the MPS share in use, the memory its
sharers use of the card's, and one line per sharer with its grant, usage and budget.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from labgang.agent.mem_size import size_text


def _gib(n: Any) -> str:
    return size_text(n or 0)


def sharing_line(sharing: Any) -> str:
    """The ``sharing:`` line of a node (``{"mps", "gpu_mem": {"mode", "reason"}}`` from its agent's hello)."""
    if not isinstance(sharing, Mapping):
        return "sharing: unknown (the agent does not say)"
    mps = sharing.get("mps")
    said = sharing.get("gpu_mem")
    gpu_mem: Mapping[str, Any] = said if isinstance(said, Mapping) else {}
    mode = str(gpu_mem.get("mode", "unknown"))
    return (
        f"sharing: MPS {'by ' + str(mps) + ' control daemons' if mps else 'off'}; "
        f"--gpu-mem of shard jobs {mode.upper() if mode == 'watched' else mode} ({gpu_mem.get('reason')})"
    )


def card_lines(gpu: Mapping[str, Any], shards_per_gpu: int | None) -> list[str]:
    """The lines of one GPU's sharers (``GpuInfo.sharers`` as JSON); [] for a card nobody shares."""
    sharers = [s for s in gpu.get("sharers") or [] if isinstance(s, Mapping)]
    if not sharers:
        return []
    shards = sum(int(s.get("shards") or 0) for s in sharers)
    mps = sum(int(s.get("sm_percent") or 0) for s in sharers if s.get("kind") == "mps")
    used = sum(int(s.get("used_memory_bytes") or 0) for s in sharers)
    parts = []
    if shards:
        free = f", {max(0, shards_per_gpu - shards)} free" if shards_per_gpu else ""
        parts.append(f"shards {shards}{'/' + str(shards_per_gpu) if shards_per_gpu else ''} used{free}")
    if mps:
        parts.append(f"MPS {mps} % of SMs used, {max(0, 100 - mps)} % free")
    parts.append(f"sharers use {_gib(used)} of {_gib(gpu.get('memory_total_bytes'))}")
    lines = [f"GPU {gpu.get('index')} {gpu.get('uuid')} shared by {len(sharers)}: " + "; ".join(parts)]
    for s in sharers:
        grant = f"shard x{s.get('shards')}" if s.get("kind") == "shard" else f"mps {s.get('sm_percent')} %"
        budget = s.get("gpu_mem_bytes")
        limit = f" of its {_gib(budget)} budget" if budget else " (no budget)"
        uses = _gib(s.get("used_memory_bytes"))
        lines.append(f"  job {s.get('job')} rank {s.get('rank')}  {grant}  uses {uses}{limit}")
    return lines


def node_sharing_lines(node: Mapping[str, Any]) -> list[str]:
    """Every sharing line of one node of ``GET /v1/nodes`` (the node line, then each shared card's)."""
    lines = [sharing_line(node.get("sharing"))]
    sent = node.get("inventory")
    inventory: Mapping[str, Any] = sent if isinstance(sent, Mapping) else {}
    spg = node.get("shards_per_gpu")
    for gpu in inventory.get("gpus") or []:
        if isinstance(gpu, Mapping):
            lines.extend(card_lines(gpu, spg if isinstance(spg, int) else None))
    return lines


def node_shares(node: Mapping[str, Any]) -> str | None:
    """The SHARES cell of ``labgang nodes``' one line per node; None where the node shares nothing.

    ``shard:U/F`` (shards held by sharers / shards still free: the room on its shard cards plus
    ``shards_per_gpu`` per idle whole GPU) where the cluster gives the node shards or a card holds
    shards; ``mps:U/F`` (percent of one card's SMs held by MPS sharers / still free: the room on the
    cards serving MPS plus 100 per idle whole GPU) where the cluster lets the node serve MPS
    (``mps_allowed``; where the view does not say, a card serving MPS shows it does) or a card serves
    MPS; both joined by ``,``. An idle card counts in both: it can take either.
    """
    sent = node.get("inventory")
    inventory: Mapping[str, Any] = sent if isinstance(sent, Mapping) else {}
    said = node.get("shards_per_gpu")
    spg = said if isinstance(said, int) and not isinstance(said, bool) else 0
    shards_used = shards_free = mps_used = mps_free = 0
    shard_cards = mps_cards = 0
    for gpu in inventory.get("gpus") or []:
        sharers = [
            s for s in (gpu.get("sharers") if isinstance(gpu, Mapping) else None) or [] if isinstance(s, Mapping)
        ]
        shards = sum(int(s.get("shards") or 0) for s in sharers if s.get("kind") == "shard")
        percent = sum(int(s.get("sm_percent") or 0) for s in sharers if s.get("kind") == "mps")
        if shards:
            shard_cards += 1
            shards_used += shards
            shards_free += max(0, spg - shards)
        if percent:
            mps_cards += 1
            mps_used += percent
            mps_free += max(0, 100 - percent)
    devices = node.get("devices") or []
    idle = sum(1 for d in devices if isinstance(d, Mapping) and d.get("resource") == "gpu" and d.get("state") == "free")
    shards_free += spg * idle
    allowed = node.get("mps_allowed")
    mps = allowed if isinstance(allowed, bool) else mps_cards > 0
    if mps:
        mps_free += 100 * idle  # as for shards: a free card can serve MPS too
    parts = []
    if spg or shard_cards:
        parts.append(f"shard:{shards_used}/{shards_free}")
    if mps or mps_cards:
        parts.append(f"mps:{mps_used}/{mps_free}")
    return ",".join(parts) or None
