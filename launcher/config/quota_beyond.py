"""Nominal quota beyond the cluster: a queue's or a cohort's nominal quota of a device resource
(``gpu``, ``mig-<profile>``) above what every node together has. Not an error (nodes may join
later, Kueue allows it too), but the quota can never be used in full, and a user reading it
would expect that many devices: ``labgang config check --machine``, ``labgang up --config`` and
``labgang simulate`` (whose scenario names its nodes) warn about it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from labgang.launcher.model import GPU, MIG_PREFIX


def device_totals(devices: Iterable[Any]) -> dict[str, int]:
    """Devices per resource (``{"gpu": 16}``) of the allocatable devices of every node (objects with
    a ``resource``: the inventory's devices, the scheduler's ``Device``)."""
    return dict(Counter(device.resource for device in devices))


def _is_device(resource: str) -> bool:
    return resource == GPU or resource.startswith(MIG_PREFIX)


def quota_beyond_cluster(
    queues: Sequence[Any], cohorts: Sequence[Any], totals: Mapping[str, int], nodes: int
) -> list[str]:
    """One warning per queue and cohort whose nominal quota of a device resource is above the
    cluster's total of it.

    A cohort's nominal quota is its own plus its queues' and its child cohorts' (what the cohort
    could hand out). Resources other than devices (``cpu``, ``memory``) are not compared.

    Args:
        queues: ``[[queues]]`` models (``name``, ``cohort``, ``nominal``: resource → count).
        cohorts: ``[[cohorts]]`` models (``name``, ``parent``, ``nominal``).
        totals: the cluster's devices per resource (:func:`device_totals`).
        nodes: how many nodes those are (for the wording).

    Returns:
        Lines such as ``queue 'vision': nominal quota gpu=64 is above the cluster's 16 gpu (2 nodes);
        at most 16 can ever be in use``, queues first, in file order.
    """
    where = f"{nodes} node{'s' if nodes != 1 else ''}"
    out: list[str] = []

    def check(kind: str, name: str, nominal: Mapping[str, int]) -> None:
        for resource, count in sorted(nominal.items()):
            have = totals.get(resource, 0)
            if _is_device(resource) and count > have:
                out.append(
                    f"{kind} {name!r}: nominal quota {resource}={count} is above the cluster's {have} {resource} "
                    f"({where}); at most {have} can ever be in use"
                )

    for q in queues:
        check("queue", q.name, q.nominal)
    children: dict[str, list[str]] = {}
    for c in cohorts:
        if c.parent is not None:
            children.setdefault(c.parent, []).append(c.name)
    members: dict[str, list[Mapping[str, int]]] = {}
    for q in queues:
        if q.cohort is not None:
            members.setdefault(q.cohort, []).append(q.nominal)
    own = {c.name: c.nominal for c in cohorts}
    names = list(own) + [name for name in members if name not in own]  # a cohort named only by its queues

    def subtree(name: str, seen: frozenset[str]) -> Counter[str]:
        total: Counter[str] = Counter(own.get(name, {}))
        for nominal in members.get(name, []):
            total.update(nominal)
        for child in children.get(name, []):
            if child not in seen:  # a cycle of parents is the config's own error, reported apart
                total.update(subtree(child, seen | {child}))
        return total

    for name in names:
        check("cohort", name, subtree(name, frozenset({name})))
    return out
