"""Host CPUs and memory as quota resources: a queue's (or cohort's) ``nominal``, ``borrowing_limit``
and ``lending_limit`` may name ``cpu`` (logical CPUs) and ``memory`` (counted in bytes; in
cluster.toml a size such as ``"512G"``, or a whole number of MiB as ``--mem`` and Slurm read it),
beside the device resources.

They are counted with the same arithmetic as devices (launcher/scheduler/quota.py: borrowing,
lending, reclaim), only in queues that list them: a queue whose ``nominal`` has no ``cpu`` does
not limit CPUs, as before. What a job counts (docs/host-resources.md, "Quotas"):

- ``cpu``: ``cpus_per_task`` x ranks;
- ``memory``: ``mem_per_gpu`` x its devices, plus ``mem`` once per node it runs on;
- ``--exclusive``: the whole of each node it runs on, devices of its resource included (all of
  the node's CPUs and memory where the node reports them, else what it asked).

Before a placement is known a job counts what it would at least hold (its ``--nodes``, or one
node; not the whole nodes of ``--exclusive``); the scheduler checks the exact amount once it has
chosen the nodes (:func:`placed_demand`). Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from labgang.launcher.model import JobRequest

CPU = "cpu"
MEMORY = "memory"
HOST_RESOURCES = (CPU, MEMORY)
"""The quota resources that are not devices."""

MAX_CPUS = 1 << 24
"""The most ``cpu`` a quota table may give."""
MAX_MEMORY = 1 << 62
"""The most ``memory`` bytes a quota table may give."""


def is_host_resource(name: str) -> bool:
    """True for ``cpu`` and ``memory``."""
    return name in HOST_RESOURCES


def quota_value(resource: str, value: object) -> object:
    """A quota table's entry as the scheduler counts it: a ``memory`` size (``"512G"``; a bare
    number, ``8000`` or ``"8000"``, is MiB as Slurm reads it) becomes bytes; anything else is
    returned as given (checked later).

    Raises:
        ValueError: a ``memory`` string that is not a size; the message says what is allowed.
    """
    if resource == MEMORY and isinstance(value, str):
        from labgang.agent.mem_size import parse_mem

        return parse_mem(value, zero=True)
    if resource == MEMORY and isinstance(value, int) and not isinstance(value, bool):
        return value * 1024**2
    return value


def quota_text(resource: str, value: int) -> object:
    """A quota entry as a scenario file or cluster.toml reads it back (:func:`quota_value`'s
    inverse): ``memory`` bytes as an exact size (``"256G"``, ``"1536M"``, ``"4K"``), since a bare
    number there is MiB; anything else unchanged. Bytes not a whole number of KiB stay a number
    of bytes (no size holds them)."""
    if resource != MEMORY or isinstance(value, bool) or not isinstance(value, int) or value % 1024:
        return value
    for unit, size in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if value % size == 0:
            return f"{value // size}{unit}"
    return value  # unreachable: value % 1024 == 0


def quota_problem(resource: str, value: int) -> str | None:
    """Why ``value`` cannot be ``resource``'s quota (one phrase naming what is allowed), or None."""
    if resource == CPU and not 0 <= value <= MAX_CPUS:
        return f"{value} is out of range; allowed: a CPU count from 0 to {MAX_CPUS}"
    if resource == MEMORY and not 0 <= value <= MAX_MEMORY:
        return f"{value} is out of range; allowed: a size such as '512G' (bytes from 0 to {MAX_MEMORY})"
    return None


def host_demand(req: JobRequest, nodes: int) -> dict[str, int]:
    """``cpu`` and ``memory`` ``req`` counts on ``nodes`` nodes (exclusive nodes not made whole).
    A job of groups: the sum over its groups, each group's per-node ``mem`` on as many of the
    job's nodes as it has ranks (never under what it uses)."""
    out: dict[str, int] = {}
    if req.groups:
        for g in req.groups:
            q = g.request
            for res, n in host_demand(replace(q, mem=0), nodes).items():
                out[res] = out.get(res, 0) + n
            if q.mem:
                out[MEMORY] = out.get(MEMORY, 0) + q.mem * min(nodes, q.workers)
        return out
    if req.cpus_per_task:
        out[CPU] = req.cpus_per_task * req.workers
    memory = req.mem_per_gpu * req.per_worker * req.workers + req.mem * nodes
    if memory:
        out[MEMORY] = memory
    return out


def least_demand(req: JobRequest) -> dict[str, int]:
    """What ``req`` counts at least, before its nodes are chosen: its devices, and its host
    resources on ``--nodes`` nodes (one without it)."""
    return {req.resource: req.total, **host_demand(req, req.nodes or 1)}


def placed_demand(
    req: JobRequest,
    nodes: Sequence[int],
    node_devices: Mapping[int, int],
    node_cpus: Sequence[int | None],
    node_memory: Sequence[int | None],
) -> dict[str, int]:
    """What ``req`` counts once placed on node positions ``nodes`` (each once).

    Args:
        req: the request. nodes: the distinct node positions of its ranks.
        node_devices: devices of ``req.resource`` per node position (for ``--exclusive``).
        node_cpus, node_memory: each node's offered CPUs and bytes, None where it does not say.
    """
    demand = {req.resource: req.total, **host_demand(req, len(nodes))}
    if req.exclusive:
        demand[req.resource] = max(req.total, sum(node_devices.get(n, 0) for n in nodes))
        cpus = [node_cpus[n] for n in nodes]
        memory = [node_memory[n] for n in nodes]
        if all(c is not None for c in cpus) and nodes:
            demand[CPU] = max(demand.get(CPU, 0), sum(c for c in cpus if c is not None))
        if all(m is not None for m in memory) and nodes:
            demand[MEMORY] = max(demand.get(MEMORY, 0), sum(m for m in memory if m is not None))
    return {res: n for res, n in demand.items() if n}
