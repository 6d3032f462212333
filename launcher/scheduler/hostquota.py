"""The cycle's side of host CPUs and memory in quotas (launcher/host_quota.py says what a job
counts): each job's demand per quota resource, whether a queue may take it, and why not.

A job's demand is its devices (``req.resource``: ``req.total``, or for ``--exclusive`` every
device of its nodes) plus ``cpu`` and ``memory`` where its queue lists them in ``nominal``; the
quota book (quota.py) counts each like devices, so borrowing, lending limits and reclaim apply
to them unchanged, and victims of a preemption free their CPUs and memory in the book too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from labgang.launcher.host_quota import CPU, HOST_RESOURCES, MEMORY, least_demand, placed_demand
from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.decisions import PendingReason, ReasonCode
from labgang.launcher.scheduler.quota import QuotaBook

GIB = 1024**3


def counts_host(book: QuotaBook) -> bool:
    """True when some queue or cohort lists ``cpu`` or ``memory`` in its quota."""
    return any(res in HOST_RESOURCES for res in book.tree.resources)


def demand_before_placement(book: QuotaBook, queue: str, req: JobRequest, host: bool) -> dict[str, int]:
    """What ``req`` counts in ``queue`` at least (``host``: some queue counts CPUs or memory)."""
    if not host or not (req.host or req.exclusive):
        return {req.resource: req.total}
    return counted(book, queue, least_demand(req))


def demand_on_nodes(
    book: QuotaBook, devices: DeviceBook, queue: str, req: JobRequest, nodes: Iterable[int], host: bool
) -> dict[str, int]:
    """What ``req`` counts in ``queue`` on node positions ``nodes`` (``host`` as above)."""
    if not req.exclusive and (not host or not req.host):
        return {req.resource: req.total}
    distinct = sorted(set(nodes))
    per_node: dict[int, int] = {}
    if req.exclusive:
        for d in devices.by_resource.get(req.resource, ()):
            n = devices.node_of[d]
            per_node[n] = per_node.get(n, 0) + 1
    demand = placed_demand(req, distinct, per_node, devices.node_cpus, devices.node_memory)
    return counted(book, queue, demand) if host else {req.resource: demand.get(req.resource, req.total)}


def counted(book: QuotaBook, queue: str, demand: Mapping[str, int]) -> dict[str, int]:
    """``demand`` without the host resources ``queue`` does not list (those it does not limit)."""
    return {
        res: n
        for res, n in demand.items()
        if res not in HOST_RESOURCES or (queue in book.queues and book.lists(queue, res))
    }


def fits(book: QuotaBook, queue: str, demand: Mapping[str, int], *, within_nominal: bool = False) -> bool:
    """True when ``queue`` may take ``demand`` now (and stay within its nominal quota, if asked)."""
    for res, need in demand.items():
        if need > book.available(queue, res):
            return False
        if within_nominal and book.usage(queue, res) + need > book.nominal(queue, res):
            return False
    return True


def _amount(res: str, n: int) -> str:
    """``"8 cpu"``, ``"64 GiB"``, ``"4 gpu"``."""
    if res == MEMORY:
        return f"{n / GIB:.0f} GiB" if n % GIB == 0 else f"{n / GIB:.1f} GiB"
    return f"{n} {res}"


def quota_shortfall(
    book: QuotaBook, queue: str, demand: Mapping[str, int], *, exclusive: bool = False
) -> PendingReason | None:
    """Why ``demand`` does not fit ``queue``'s quota, naming the first resource short (devices,
    then ``cpu``, then ``memory``) with numbers, or None when all of it fits (``exclusive``: the
    demand is ``--exclusive``'s whole nodes, said after a device count)."""
    spec = book.queues.get(queue)
    if spec is None:
        return None
    order = [res for res in demand if res not in HOST_RESOURCES] + [CPU, MEMORY]
    for res in order:
        need = demand.get(res, 0)
        if not need or need <= book.available(queue, res):
            continue
        whole = " (--exclusive takes whole nodes)" if exclusive and res not in HOST_RESOURCES else ""
        u, n = book.usage(queue, res), book.nominal(queue, res)
        limit = spec.borrowing_limit.get(res) if spec.cohort is not None else 0
        if spec.cohort is None or (limit is not None and u + need > n + limit):
            may = n if not limit else n + limit
            extra = "" if not limit else f" (nominal quota {_amount(res, n)} + borrowing limit {_amount(res, limit)})"
            return PendingReason(
                ReasonCode.OVER_QUOTA,
                f"{queue} uses {_amount(res, u)} of the {_amount(res, may)} it may use{extra}; "
                f"job needs {_amount(res, need)}{whole}",
            )
        avail = book.available(queue, res)
        return PendingReason(
            ReasonCode.COHORT_EXHAUSTED,
            f"cohort {spec.cohort} has no more lendable {res} for it: {queue} uses {_amount(res, u)} of "
            f"{_amount(res, n)} and can get {_amount(res, avail)} more; job needs {_amount(res, need)}{whole}",
        )
    return None


HOST_FIELDS = {CPU: "cpus_per_task", MEMORY: "mem"}
"""The submission field a host resource's quota objects to (``mem_per_gpu`` when only that is asked)."""


def host_never_fits_quota(book: QuotaBook, queue: str, req: JobRequest) -> tuple[PendingReason, str] | None:
    """UNSCHEDULABLE, with the submission field at fault, when ``queue`` could never hold the CPUs
    or memory ``req`` counts at least, even with every lender's quota idle; else None."""
    if not req.host or queue not in book.queues:
        return None
    demand = counted(book, queue, least_demand(req))
    for res in (CPU, MEMORY):
        need = demand.get(res, 0)
        most = book.potential(queue, res) if need else 0
        if need and need > most:
            field = "mem_per_gpu" if res == MEMORY and not req.mem else HOST_FIELDS[res]
            reason = PendingReason(
                ReasonCode.UNSCHEDULABLE,
                f"job needs {_amount(res, need)} but queue {queue} can hold at most {_amount(res, most)} ({res} quota)",
            )
            return reason, field
    return None
