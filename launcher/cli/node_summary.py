"""``labgang nodes``' default view: one line per node, as Slurm's ``sinfo -N``.

Columns: NODE, STATE, GPUS(A/I/O/T), MIG, CPUS, MEMORY, LIMITS, MODEL, from the NodeViews of
``GET /v1/nodes`` (rendered in the client; ``nodes --gpus``/``--long`` prints the per-GPU table).

* STATE, sinfo's words: ``down`` (not connected, or lost), ``unknown`` (connected, no inventory
  yet), ``alloc`` (every device held by jobs), ``mix`` (some), ``idle`` (none); on a node an
  admin drained (``labgang drain``), ``drng`` while jobs still hold devices there and ``drain``
  once none does (sinfo's DRAINING and DRAINED). Each drained node's reason, admin and time
  follow the table, as ``sinfo -R`` lists them.
* GPUS(A/I/O/T), as sinfo's ``%C`` for CPUs: whole GPUs allocated to jobs / idle (free) / other
  (not offered: a foreign process, memory still held after a job, the GPU lost, its node
  drained) / total.
* MIG: per MIG profile, ``profile:allocated/total`` (``-`` without MIG devices).
* CPUS and MEMORY: the host's, where the node's view has them (``cpus``, ``memory_bytes``);
  ``-`` otherwise.
* LIMITS: whether the node's agent holds ranks to their CPUs and memory (cgroup v2):
  ``yes``, ``no`` (``nodes --gpus`` and ``--json``'s ``host_limits`` say why) or ``-`` (it does not say).
* MODEL: the GPU model(s).
* SHARES(U/F), before MODEL, only where some node shares cards (docs/sharing-node.md): shards used/free and the
  MPS share of SMs used/free per node (:func:`labgang.launcher.cli.node_sharing.node_shares`);
  ``-`` on a node that shares nothing.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from labgang.launcher.cli.node_sharing import node_shares
from labgang.launcher.text import align, printable

HEADERS = ("NODE", "STATE", "GPUS(A/I/O/T)", "MIG", "CPUS", "MEMORY", "LIMITS", "MODEL")
GIB = 1024**3


def node_state(node: Mapping[str, Any]) -> str:
    """sinfo's state word of one NodeView (see the module docstring)."""
    if not node.get("connected"):
        return "down"
    if not node.get("inventory"):
        return "unknown"
    devices = node.get("devices") or []
    allocated = sum(1 for d in devices if d.get("state") == "allocated")
    if node.get("drain"):
        return "drng" if allocated else "drain"
    if devices and allocated == len(devices):
        return "alloc"
    return "mix" if allocated else "idle"


def gpu_counts(devices: Iterable[Mapping[str, Any]], drained: bool = False) -> tuple[int, int, int, int]:
    """(allocated, idle, other, total) of the whole GPUs (resource ``gpu``) among ``devices``; on a
    ``drained`` node a free GPU is not offered, so counts as other."""
    gpus = [d for d in devices if d.get("resource") == "gpu"]
    allocated = sum(1 for d in gpus if d.get("state") == "allocated")
    idle = 0 if drained else sum(1 for d in gpus if d.get("state") == "free")
    return allocated, idle, len(gpus) - allocated - idle, len(gpus)


def mig_counts(devices: Iterable[Mapping[str, Any]]) -> str:
    """``1g.10gb:1/7,3g.40gb:0/2`` (allocated/total per MIG profile, by name); ``-`` when none."""
    per: dict[str, list[int]] = {}
    for d in devices:
        resource = str(d.get("resource") or "")
        if resource.startswith("mig-"):
            counts = per.setdefault(resource[4:], [0, 0])
            counts[0] += d.get("state") == "allocated"
            counts[1] += 1
    return ",".join(f"{p}:{a}/{t}" for p, (a, t) in sorted(per.items())) or "-"


def _models(devices: Iterable[Mapping[str, Any]]) -> str:
    return ",".join(sorted({str(d.get("model")) for d in devices if d.get("model")})) or "-"


def limits_cell(node: Mapping[str, Any]) -> str:
    """``yes``/``no``/``-``: whether the node's agent enforces ranks' CPUs and memory (its ``host_limits``)."""
    limits = node.get("host_limits")
    if not isinstance(limits, Mapping) or not isinstance(limits.get("enforced"), bool):
        return "-"
    return "yes" if limits["enforced"] else "no"


def node_line(node: Mapping[str, Any]) -> tuple[str, ...]:
    """The cells of one NodeView's line."""
    devices = node.get("devices") or []
    a, i, o, t = gpu_counts(devices, drained=bool(node.get("drain")))
    cpus = node.get("cpus")
    memory = node.get("memory_bytes")
    return (
        printable(str(node.get("name", "?"))),
        node_state(node),
        f"{a}/{i}/{o}/{t}",
        mig_counts(devices),
        str(cpus) if isinstance(cpus, int) else "-",
        f"{memory / GIB:.0f}G" if isinstance(memory, (int, float)) else "-",
        limits_cell(node),
        printable(_models(devices)),
    )


def node_summary(nodes: Iterable[Mapping[str, Any]]) -> str:
    """The ``labgang nodes`` table: a header and one line per node (NodeView dicts, in order),
    with a SHARES column where some node shares cards."""
    nodes = list(nodes)
    lines = [node_line(n) for n in nodes]
    shares = [node_shares(n) for n in nodes]
    if not any(shares):
        table = align(HEADERS, lines)
    else:
        headers = (*HEADERS[:-1], "SHARES(U/F)", HEADERS[-1])  # before MODEL, whose names hold spaces
        table = align(headers, [(*line[:-1], cell or "-", line[-1]) for line, cell in zip(lines, shares, strict=True)])
    drained = [drain_line(n) for n in nodes if isinstance(n.get("drain"), Mapping)]
    return "\n".join([table, *drained])


def drain_line(node: Mapping[str, Any]) -> str:
    """``drained: n1 by root since 2026-12-03 14:20: new PSU`` for a NodeView with a ``drain``
    (as ``sinfo -R``: the node, the admin, when, the reason; local time)."""
    import time  # only where a node is drained

    drain = node["drain"]
    since = drain.get("since")
    when = time.strftime("%Y-%m-%d %H:%M", time.localtime(since)) if isinstance(since, (int, float)) else "?"
    name, by, reason = (printable(str(x)) for x in (node.get("name", "?"), drain.get("by"), drain.get("reason")))
    return f"drained: {name} by {by} since {when}: {reason}"
