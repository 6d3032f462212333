"""Host CPUs and memory per node: how many ranks of a request each node can still take.

A node's host use is derived from who holds its devices (owner, else the holder of a
reservation): a job with ``c`` of its devices on a node has ``ceil(c / per_worker)`` ranks there,
each using ``cpus_per_task`` CPUs and ``per_worker * mem_per_gpu`` bytes, plus ``mem`` bytes once
for the node. Deriving it from the device book means every change to devices (admissions,
reservations, and the simulated removal of preemption victims) changes host use with it:
victims free their CPUs and memory too, so a job short of host resources may preempt like a
job short of devices (docs/host-resources.md).

Placement uses :func:`capped_index`: a view of the free devices holding, per node, no more
than ``cap * per_worker`` devices, where ``cap`` = min(free devices // per_worker,
free CPUs // cpus_per_task, free memory // per-rank memory), 0 when the node lacks the
per-node ``mem``, and 0 on nodes an ``exclusive`` job holds (or, for an exclusive request, on
nodes anybody holds). Nodes are chosen on that view; devices from the real free list.
A node whose ``cpus`` (``memory``) is None does not limit CPU (memory) requests.
"""

from __future__ import annotations

from dataclasses import dataclass

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler.capacity import UNAVAILABLE, DeviceBook, FreeIndex
from labgang.launcher.scheduler.decisions import PendingReason, ReasonCode

GIB = 1024**3
GROUP_PROBE = "\0group:"
"""Owner tag prefix of devices a group holds while the later groups of its job are placed
(``scheduler/groups.py``)."""


@dataclass(slots=True)
class NodeUse:
    """Host resources held on one node.

    Attributes:
        cpus: logical CPUs held by ranks there.
        memory: bytes held.
        holders: jobs holding (or reserving) devices there.
        exclusive: one of them took the node whole.
        probes: of ``holders``, the groups of the job being placed (:data:`GROUP_PROBE`): they
            neither keep that job's ``exclusive`` groups off the node nor make it whole for others.
    """

    cpus: int = 0
    memory: int = 0
    holders: int = 0
    exclusive: bool = False
    probes: int = 0


def needs_check(book: DeviceBook, req: JobRequest) -> bool:
    """True when placing ``req`` must look at host resources at all: it asks for some, or some job
    of the snapshot is ``exclusive`` (it blocks its nodes for everyone). Other jobs place on the
    devices alone, at no extra cost."""
    return req.host or book.exclusive_known


def node_use(book: DeviceBook) -> list[NodeUse]:
    """Host use per node position, from the device book's owners and reservations: O(devices),
    computed again only after the book changed (``DeviceBook.changes``). Callers must not mutate it."""
    cached = book.host_use_cache
    if cached is not None and cached[0] == book.changes:
        return cached[1]
    out = _node_use(book)
    book.host_use_cache = (book.changes, out)
    return out


def _node_use(book: DeviceBook) -> list[NodeUse]:
    held: list[dict[str, int]] = [{} for _ in book.node_names]
    for d, owner in enumerate(book.owner):
        holder = owner if owner is not None and owner != UNAVAILABLE else book.reserved_for[d]
        if holder is not None:
            per_node = held[book.node_of[d]]
            per_node[holder] = per_node.get(holder, 0) + 1
    out = []
    for per_node in held:
        use = NodeUse(holders=len(per_node))
        for holder, count in per_node.items():
            r = book.requests.get(holder)
            probe = holder.startswith(GROUP_PROBE)
            use.probes += probe
            if r is None or not r.host:
                continue
            if r.groups:  # which group a device is of is not known here: count as the hungriest
                _add_group_use(use, count, r)
                continue
            ranks = -(-count // max(1, r.per_worker))
            use.cpus += ranks * r.cpus_per_task
            use.memory += ranks * r.rank_mem() + r.mem
            use.exclusive = use.exclusive or (r.exclusive and not probe)
        out.append(use)
    return out


def _add_group_use(use: NodeUse, count: int, r: JobRequest) -> None:
    """Host use of a job of groups holding ``count`` devices on one node, over-counted (never
    under): ranks as if every device were a rank of its smallest device group, each with the
    most CPUs and memory any device group asks per rank, plus the largest per-node ``mem``; and every
    rank of its groups with no device (they hold nothing to find them by, and are placed only on
    nodes where the job holds devices: ``groups._place_deviceless``), with their per-node ``mem``."""
    reqs = [g.request for g in r.groups if g.request.per_worker > 0]
    per = min(q.per_worker for q in reqs)
    ranks = -(-count // per)
    use.cpus += ranks * max(q.cpus_per_task for q in reqs)
    use.memory += ranks * max(q.rank_mem() for q in reqs) + max(q.mem for q in reqs)
    use.exclusive = use.exclusive or any(g.request.exclusive for g in r.groups)
    for g in r.groups:
        if g.request.per_worker == 0:
            use.cpus += g.request.workers * g.request.cpus_per_task
            use.memory += g.request.mem


def rank_cap(book: DeviceBook, use: NodeUse, n: int, req: JobRequest, free_devices: int) -> int:
    """Ranks of ``req`` node position ``n`` can take now, given its free devices and host use."""
    cap = free_devices // max(1, req.per_worker)
    if use.exclusive or (req.exclusive and use.holders > use.probes):
        return 0
    cpus, memory = book.node_cpus[n], book.node_memory[n]
    if req.cpus_per_task and cpus is not None:
        cap = min(cap, max(0, cpus - use.cpus) // req.cpus_per_task)
    if memory is not None:
        free_mem = max(0, memory - use.memory)
        if req.mem and free_mem < req.mem:
            return 0
        if req.mem_per_gpu:
            cap = min(cap, free_mem // req.rank_mem())
    return cap


def capped_index(
    book: DeviceBook, ix: FreeIndex, req: JobRequest, *, idle: bool = False, held: list[NodeUse] | None = None
) -> FreeIndex | None:
    """The free devices of ``ix`` cut, per node, to what host resources allow ``req``; None when
    nothing is cut (place on ``ix`` itself). ``idle``: as if no job held anything (the
    "empty cluster" of the unschedulable checks), or only ``held`` (host use per node position:
    the starvation reservations made so far)."""
    if not (req.host if idle else needs_check(book, req)):
        return None
    empty = held if held is not None else [NodeUse() for _ in book.node_names]
    uses = empty if idle else node_use(book)
    kept: list[int] = []
    cut = False
    for n, free in enumerate(ix.free):
        if not free:
            continue
        cap = rank_cap(book, uses[n], n, req, len(free))
        keep = cap * req.per_worker
        cut = cut or keep < len(free)
        kept.extend(free[:keep])
    return FreeIndex(len(book.node_names), kept, book.node_of) if cut else None


def _size(n: int) -> str:
    return f"{n / GIB:.0f} GiB" if n % GIB == 0 else f"{n / GIB:.1f} GiB"


def host_reason(book: DeviceBook, ix: FreeIndex, req: JobRequest, what: str) -> PendingReason | None:
    """Why ``req`` waits when its devices are free but host resources are not, naming the first
    nodes short of them with numbers (e.g. ``node vm has 4 of 32 cpus free; job needs 8 per
    rank``); None when host resources are not what stops it."""
    if not needs_check(book, req):
        return None
    uses = node_use(book)
    notes = []
    for n, free in enumerate(ix.free):
        if len(free) < req.per_worker:
            continue
        use, name = uses[n], book.node_names[n]
        cpus, memory = book.node_cpus[n], book.node_memory[n]
        if use.exclusive:
            notes.append(f"node {name} is held whole by an --exclusive job")
        elif req.exclusive and use.holders > use.probes:
            notes.append(f"node {name} is in use by {use.holders - use.probes} job(s); --exclusive needs it empty")
        elif req.cpus_per_task and cpus is not None and cpus - use.cpus < req.cpus_per_task:
            notes.append(
                f"node {name} has {max(0, cpus - use.cpus)} of {cpus} cpus free; job needs {req.cpus_per_task} per rank"
            )
        elif memory is not None and (req.mem or req.mem_per_gpu):
            free_mem = max(0, memory - use.memory)
            need, per = (req.mem, "per node") if req.mem else (req.rank_mem(), "per rank")
            if free_mem < need:
                notes.append(
                    f"node {name} has {_size(free_mem)} of {_size(memory)} memory free; job needs {_size(need)} {per}"
                )
    if not notes:
        return None
    more = f"; {len(notes) - 3} more node(s) alike" if len(notes) > 3 else ""
    return PendingReason(ReasonCode.HOST_RESOURCES, "; ".join(notes[:3]) + more + f"; job needs {what}")
