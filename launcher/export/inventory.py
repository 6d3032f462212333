"""Where ``labgang export`` learns GPU models, MIG profiles and node names.

Either machine files given with ``--inventory`` (anything ``labgang nodes --local
--simulate`` reads: ``config/sim/*.toml``, ``nvidia-smi -q``/``-q -x``/``-L`` captures,
NVML records; or the JSON of ``labgang nodes --json`` / ``labgang nodes --local --json``),
or the coordinator's ``GET /v1/nodes`` when one answers. No inventory is not an error:
the export then uses generic names and says so in its header.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from labgang.agent.inventory import NodeInventory
from labgang.launcher.export.common import ExportError, Inventory, NodeGpus

COORDINATOR_TIMEOUT_S = 5.0


def _from_json(data: Any, path: Path) -> list[NodeGpus]:
    if isinstance(data, dict) and isinstance(data.get("nodes"), list):
        return _from_nodes(data["nodes"])
    if isinstance(data, dict) and "gpus" in data and "hostname" in data:
        return [NodeGpus.from_inventory(NodeInventory.from_dict(data))]
    raise ExportError(
        "--inventory",
        f"{path}: JSON that is neither `labgang nodes --json` nor `labgang nodes --local --json` output",
    )


def _from_nodes(nodes: list[Any]) -> list[NodeGpus]:
    out = []
    for node in nodes:
        if isinstance(node, dict) and isinstance(node.get("inventory"), dict):
            out.append(NodeGpus.from_inventory(NodeInventory.from_dict(node["inventory"]), str(node.get("name") or "")))
    return out


def read_file(path: Path) -> list[NodeGpus]:
    """The nodes one ``--inventory`` file describes.

    Raises:
        ExportError: field ``--inventory``; the file is missing or not a machine file.
    """
    from labgang.agent.inventory import read_inventory
    from labgang.agent.nvml import open_backend

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExportError("--inventory", f"{path}: cannot read ({exc})") from None
    if text.lstrip().startswith(("{", "[")) and path.suffix != ".toml":
        try:
            data = json.loads(text)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict) and ("nodes" in data or "hostname" in data):
            try:
                return _from_json(data, path)
            except ValueError as exc:
                raise ExportError("--inventory", f"{path}: {exc}") from None
    try:
        backend = open_backend(simulate=path)
    except (ValueError, OSError) as exc:
        raise ExportError("--inventory", f"{path}: not a machine file ({exc})") from None
    try:
        return [NodeGpus.from_inventory(read_inventory(backend, now=0.0))]
    finally:
        backend.nvmlShutdown()


def from_files(paths: list[Path]) -> Inventory:
    """The inventory of the ``--inventory`` files (nodes sorted by name).

    Raises:
        ExportError: a file cannot be read, or two files describe the same node name.
    """
    nodes: dict[str, NodeGpus] = {}
    for path in paths:
        for node in read_file(path):
            if node.name in nodes:
                raise ExportError("--inventory", f"{path}: node {node.name!r} is described twice")
            nodes[node.name] = node
    return Inventory(tuple(nodes[n] for n in sorted(nodes)), "files " + ", ".join(sorted(str(p) for p in paths)))


def from_coordinator(state_dir: Path | None) -> tuple[Inventory, str | None]:
    """The coordinator's nodes, or an empty inventory and the reason when none answers.

    Returns:
        ``(inventory, None)`` on success; ``(Inventory(), reason)`` when the coordinator is
        not reachable or refused.
    """
    from labgang.launcher.api.client import Client, ClientError

    try:
        with Client(Client.for_state_dir(state_dir).socket_path, COORDINATOR_TIMEOUT_S, wait_for_start=False) as c:
            nodes = c.nodes()
    except ClientError as exc:
        return Inventory(), str(exc)
    found = sorted(_from_nodes(nodes), key=lambda n: n.name)
    return Inventory(tuple(found), "coordinator (GET /v1/nodes)"), None
