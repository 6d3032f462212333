"""The ``[sharing]`` table (GPU sharing by shards and MPS) and the queues' ``share_with`` rule, for
``cluster.toml`` and scenario files alike (docs/sharing.md).

::

    [sharing]
    shards_per_gpu = 4          # 0 = no shards; a shard is 1/4 gpu of quota
    mps = true                  # --mps allowed
    [sharing.nodes.ws-old]      # per-node override, by node name
    shards_per_gpu = 0
    mps = false

A node not named under ``[sharing.nodes]`` takes the cluster-wide values. Because a shard is one quota
unit everywhere, an override may turn shards off (0) or on (the cluster's number), never change it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from labgang.launcher.config.queues import Strict, strict_int
from labgang.launcher.model import GpuSharing, NodeGpuSharing
from pydantic import AfterValidator, Field, StrictBool, model_validator

MAX_SHARDS_PER_GPU = 64
"""Most shards one card splits into."""


def _shards(value: int) -> int:
    if not 0 <= value <= MAX_SHARDS_PER_GPU:
        raise ValueError(f"{value} is out of range; allowed: 0 (off) to {MAX_SHARDS_PER_GPU}")
    return value


Shards = Annotated[int, strict_int(f"a whole number 0..{MAX_SHARDS_PER_GPU}"), AfterValidator(_shards)]


class NodeSharingModel(Strict):
    """``[sharing.nodes.<name>]``: one node's override (absent keys: the cluster-wide values)."""

    shards_per_gpu: Shards | None = None
    mps: StrictBool | None = None


class SharingModel(Strict):
    """``[sharing]``: ``shards_per_gpu`` (0 = off), ``mps``, and per-node overrides under ``nodes``."""

    shards_per_gpu: Shards = 0
    mps: StrictBool = False
    nodes: dict[str, NodeSharingModel] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _overrides(self) -> SharingModel:
        problems = []
        for name, n in self.nodes.items():
            if n.shards_per_gpu not in (None, 0, self.shards_per_gpu):
                problems.append(
                    f"sharing.nodes.{name}.shards_per_gpu: {n.shards_per_gpu} is not allowed; allowed: 0 (off) or "
                    f"{self.shards_per_gpu} (sharing.shards_per_gpu: a shard is one quota unit on every node)"
                )
        if problems:
            raise ValueError("\n".join(problems))
        return self

    def node(self, name: str) -> NodeGpuSharing:
        """Node ``name``'s sharing: its override over the cluster-wide values."""
        return self.to_spec().node(name)

    def to_spec(self) -> GpuSharing:
        """The scheduler's :class:`GpuSharing`."""
        nodes = {
            name: NodeGpuSharing(
                self.shards_per_gpu if n.shards_per_gpu is None else n.shards_per_gpu,
                self.mps if n.mps is None else n.mps,
            )
            for name, n in self.nodes.items()
        }
        return GpuSharing(self.shards_per_gpu, self.mps, nodes)


def share_with_problems(queues: list[tuple[int, Mapping[str, Any]]]) -> list[str]:
    """Every problem with the queues' ``share_with`` lists, one line each: an unknown queue, a queue
    naming itself, a queue with ``share_gpus = "none"`` naming others, or a partner that does not
    name it back (a shared card holds jobs of two queues only when both name each other).

    Args:
        queues: ``(index, raw [[queues]] table)`` pairs, in file order.
    """
    problems: list[str] = []
    tables = {str(q.get("name")): q for _, q in queues}
    for i, q in queues:
        name = q.get("name")
        others = q.get("share_with") or []
        if not isinstance(others, list):
            continue
        for other in others:
            where = f"queues[{i}].share_with"
            partner = tables.get(str(other))
            if other == name:
                problems.append(f"{where}: {other!r} is the queue itself; list other queues")
            elif partner is None:
                problems.append(f"{where}: unknown queue {other!r}; allowed: {', '.join(sorted(tables))}")
            elif q.get("share_gpus", "none") == "none":
                problems.append(f"{where}: queue {name!r} has share_gpus = 'none'; set 'queue' or 'user' to share")
            elif name not in (partner.get("share_with") or []):
                problems.append(
                    f"{where}: queue {other!r} does not name {name!r} in its share_with; both queues must name "
                    "each other"
                )
    return problems
