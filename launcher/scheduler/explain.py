"""Numbers behind fair sharing, for people: each queue's dominant resource share and why.

:func:`queue_shares` computes, from plain usage, what :mod:`.fairshare` uses to order and
preempt (usage above the queue's nominal, the capacity its cohort could reach, the weight);
:func:`preemption_text` says, with those numbers, why a fair-sharing preemption was allowed.
Pure functions, no I/O: the coordinator's views, ``labgang explain`` and ``/metrics`` read them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from labgang.launcher.model import CohortSpec, JobRequest, QueueSpec
from labgang.launcher.scheduler.fairshare import add_demand, branch, lowest_common, ratio, share, share_value
from labgang.launcher.scheduler.quota import QuotaBook


@dataclass(frozen=True, slots=True)
class QueueShare:
    """One queue's fair share.

    Attributes:
        queue: the queue.
        weight: its ``fair_weight``.
        ratio: the largest borrowed fraction x 1000 of what its cohort could reach (0: not borrowing).
        share: ``ratio / weight`` (``inf`` for weight 0 with a positive ratio).
        above: devices used above nominal, per resource (only resources it borrows).
        basis: per resource, the most its cohort could reach (``maximum(parent)``); {} without a cohort.
    """

    queue: str
    weight: float
    ratio: float
    share: float
    above: Mapping[str, int] = field(default_factory=dict)
    basis: Mapping[str, int] = field(default_factory=dict)


def queue_shares(
    queues: Iterable[QueueSpec], cohorts: Iterable[CohortSpec], usage: Mapping[tuple[str, str], int]
) -> dict[str, QueueShare]:
    """Every queue's :class:`QueueShare` for ``usage`` (``{(queue, resource): devices}``)."""
    book = QuotaBook(queues, usage, cohorts)
    tree = book.tree
    out: dict[str, QueueShare] = {}
    for name, n in tree.queue_id.items():
        p = tree.parent[n]
        basis = {res: tree.maximum(p, res) for res in tree.resources} if p >= 0 else {}
        above = {
            res: book.node_usage(n, res) - tree.quota(n, res)
            for res in tree.resources
            if book.node_usage(n, res) > tree.quota(n, res)
        }
        out[name] = QueueShare(name, tree.weight[n], ratio(book, n), share_value(share(book, n)), above, basis)
    return out


def share_with(s: QueueShare, nominal: Mapping[str, int], used: Mapping[str, int], req: JobRequest) -> float:
    """The queue's share if ``req`` were admitted (``used``/``nominal``: its devices per resource)."""
    best = 0.0
    for res, most in s.basis.items():
        b = used.get(res, 0) + (req.total if res == req.resource else 0) - nominal.get(res, 0)
        if b > 0 and most > 0:
            best = max(best, b * 1000 / most)
    if best == 0:
        return 0.0
    return math.inf if s.weight <= 0 else best / s.weight


def fmt_share(value: float) -> str:
    """A share for a sentence: ``"250.00"``, ``"inf"``."""
    return "inf" if math.isinf(value) else f"{value:.2f}"


def preemption_text(
    book: QuotaBook,
    queue: str,
    req: JobRequest,
    victim_queues: Iterable[str],
    demand: Mapping[str, int] | None = None,
) -> str:
    """Why fair sharing let ``queue``'s job (``req``) take from ``victim_queues``, with the shares
    compared at each pair's lowest common cohort (``book``: fair-sharing usage now). ``demand``:
    what the job counts in fair-sharing usage (devices, and cpu/memory where its queue lists
    them; default its devices)."""
    own = {req.resource: req.total} if demand is None else demand
    tree = book.tree
    qn = tree.queue_id[queue]
    parts: list[str] = []
    for other in dict.fromkeys(victim_queues):
        if other == queue:
            continue
        vn = tree.queue_id[other]
        lca = lowest_common(book, qn, vn)
        if lca < 0:
            continue
        qb, vb = branch(book, qn, lca), branch(book, vn, lca)
        before = share_value(share(book, vb))
        add_demand(book, queue, own)
        try:
            after = share_value(share(book, qb))
        finally:
            add_demand(book, queue, own, -1)
        parts.append(
            f"{tree.names[vb]}'s share {fmt_share(before)} (weight {tree.weight[vb]:g}) against "
            f"{tree.names[qb]}'s {fmt_share(after)} with this job (weight {tree.weight[qb]:g})"
        )
    return "; ".join(parts)
