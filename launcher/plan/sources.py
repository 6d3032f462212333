"""Where a store replay's cluster and queue policy come from, when no file gives them.

- **Nodes**: the running coordinator's (``GET /v1/nodes``: every node and its whole GPUs) when
  one answers on the state directory's socket; else the nodes and devices the store's rank rows
  show (every device some job was given), which may undercount GPUs no job ever used. Either
  way a note says which.
- **Queue policy**: ``--config CLUSTER.toml``; without it, the config the instance's coordinator
  recorded in the store when it started (:mod:`labgang.launcher.config.record`); for a store
  that records none, the built-in default ``labgang up`` uses without ``--config``: one queue
  ``default`` whose nominal quota is every GPU (:meth:`ClusterConfig.default_for`).
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.config.record import RecordedConfig, read_recorded
from labgang.launcher.model import GPU
from labgang.launcher.plan.export import NodeShape
from labgang.launcher.plan.past import HistoryUnreadable, PastPeriod, open_read_only


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
            if gpus:
                shapes.append(NodeShape(node["name"], len(gpus), gpus[0].get("model") or ""))
            migs = [(d.get("resource") or "", d.get("model") or "") for d in devices if d.get("resource") != GPU]
            mig += len(migs)
            shapes.extend(mig_shapes(node["name"], migs))
        if shapes:
            with_mig = f" ({mig} MIG device(s) as nodes NAME~PROFILE)" if mig else ""
            return shapes, f"cluster: the running coordinator's {len(listed)} node(s){with_mig}"
    shapes = []
    mig = 0
    for name, devs in sorted(period.devices.items()):
        whole = [d for d in devs if d not in period.mig_resources]
        if whole:
            shapes.append(NodeShape(name, len(whole)))
        migs = [(period.mig_resources[d], "") for d in sorted(devs) if d in period.mig_resources]
        mig += len(migs)
        shapes.extend(mig_shapes(name, migs))
    with_mig = f", {mig} of them MIG devices (as nodes NAME~PROFILE)" if mig else ""
    return shapes, (
        f"cluster: {len(period.devices)} node(s) with the devices the history's jobs were given{with_mig} "
        "(no coordinator answered; devices no job used are not counted; change with --gpus or edit the file)"
    )


def mig_shapes(node: str, devices: Iterable[tuple[str, str]]) -> list[NodeShape]:
    """The scenario nodes standing for ``node``'s MIG devices, given as ``(resource, model)``
    pairs (resource ``mig-1g.10gb``): one node ``NODE~PROFILE`` per profile, each of its ``gpus``
    holding one device of that profile, so the replay has as many devices of each profile as
    the node. Which devices share a physical GPU is not kept (the API does not say; a MIG job
    takes one device per rank, so placement does not depend on it)."""
    counts: Counter[tuple[str, str]] = Counter(devices)
    profiles: dict[str, tuple[int, str]] = {}
    for (resource, model), n in counts.items():
        profile = resource.removeprefix("mig-")
        have, first_model = profiles.get(profile, (0, model))
        profiles[profile] = (have + n, first_model or model)
    return [NodeShape(f"{node}~{p}", n, model, mig=p) for p, (n, model) in sorted(profiles.items())]


def default_policy(nodes: Iterable[NodeShape]) -> ClusterConfig:
    """The built-in default config for ``nodes`` (one queue ``default`` holding every GPU and
    MIG device)."""
    counts: Counter[str] = Counter()
    for node in nodes:
        counts[f"mig-{node.mig}" if node.mig else GPU] += node.gpus
    inventory = _Inventory(tuple(_Device(resource) for resource, n in counts.items() for _ in range(n)))
    return ClusterConfig.default_for(inventory)


def recorded_policy(db_path: Path) -> RecordedConfig | None:
    """The config the instance's coordinator recorded in the store at ``db_path`` when it started
    (:mod:`labgang.launcher.config.record`), or None when it recorded none.

    Raises:
        HistoryUnreadable: the store cannot be read.
    """
    db = open_read_only(db_path)
    try:
        return read_recorded(db)
    except sqlite3.Error as err:
        raise HistoryUnreadable(f"cannot read the labgang store {db_path}: {err}") from None
    finally:
        db.close()
