"""Where a store replay's cluster and queue policy come from, when no file gives them.

- **Nodes**: the running coordinator's (``GET /v1/nodes``: every node and its whole GPUs) when
  one answers on the state directory's socket; else the nodes and devices the store's rank rows
  show (every device some job was given), which may undercount GPUs no job ever used. Either
  way a note says which.
- **Queue policy**: ``--config CLUSTER.toml``; without it, the built-in default ``labgang up``
  uses without ``--config``: one queue ``default`` whose nominal quota is every GPU
  (:meth:`ClusterConfig.default_for`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from labgang.launcher.config import ClusterConfig
from labgang.launcher.model import GPU
from labgang.launcher.plan.export import NodeShape
from labgang.launcher.plan.past import PastPeriod


@dataclass(frozen=True)
class _Device:
    resource: str


@dataclass(frozen=True)
class _Inventory:
    """What :meth:`ClusterConfig.default_for` reads of an inventory: its allocatable devices."""

    devices: tuple[_Device, ...]

    def allocatable(self) -> tuple[_Device, ...]:
        return self.devices


def cluster_nodes(state_dir: Path | None, period: PastPeriod) -> tuple[list[NodeShape], str]:
    """The nodes to replay on and a note saying where they came from."""
    from labgang.launcher.api.client import Client, ClientError

    try:
        with Client.for_state_dir(state_dir, timeout=3.0) as client:
            listed = client.nodes()
    except (ClientError, OSError):
        listed = None
    if listed:
        shapes = []
        mig = 0
        for node in listed:
            devices = node.get("devices") or []
            gpus = [d for d in devices if d.get("resource") == GPU]
            mig += len(devices) - len(gpus)
            if gpus:
                shapes.append(NodeShape(node["name"], len(gpus), gpus[0].get("model") or ""))
        if shapes:
            left_out = f"; its {mig} MIG device(s) are not replayed (whole GPUs only)" if mig else ""
            return shapes, f"cluster: the running coordinator's {len(shapes)} node(s){left_out}"
    whole = {name: [d for d in devs if not d.startswith("MIG-")] for name, devs in sorted(period.devices.items())}
    shapes = [NodeShape(name, len(devs)) for name, devs in whole.items() if devs]
    return shapes, (
        f"cluster: {len(shapes)} node(s) with the GPUs the history's jobs were given "
        "(no coordinator answered; GPUs no job used are not counted; change with --gpus or edit the file)"
    )


def default_policy(nodes: Iterable[NodeShape]) -> ClusterConfig:
    """The built-in default config for ``nodes`` (one queue ``default`` holding every GPU)."""
    counts: Counter[str] = Counter()
    for node in nodes:
        counts[GPU] += node.gpus
    inventory = _Inventory(tuple(_Device(GPU) for _ in range(counts[GPU])))
    return ClusterConfig.default_for(inventory)
