"""Gang placement: which nodes and which devices each rank gets.

Rules (docs/queue-semantics.md §R, docs/scenarios.md on placement):

- A gang whose ranks fit on one node goes to the fullest node that holds it (fewest free
  devices of the resource, ties in node order), keeping emptier nodes whole for big gangs.
- A gang that needs several nodes takes the fewest nodes: the nodes with the most free
  capacity first, and the partial remainder on the fullest node that holds it.
- An exact ``nodes = m`` spreads ranks evenly (``workers // m`` or one more per node) over
  the fullest nodes that hold each share.
- Within a node a rank prefers devices of one ``group`` (NVLink domain, PCIe switch, or a
  MIG device's parent GPU): the smallest group that holds the rank, else the largest groups.
- MIG requests (``mig-<profile>``) only ever see devices of that resource, so a GPU in MIG
  mode is never handed out whole and a full-GPU request never lands on a MIG device.
- On a node with topology facts (``Node.links``, ``Device.numa``), full GPUs are chosen by
  :mod:`.topology` instead of by group: the gang's share of the node is the best-connected set
  of free GPUs, split into ranks that are each the best-connected of what is left. A required
  level (``JobRequest.topology``) puts the gang on one node whose best free set reaches it:
  the fullest such node.

All or nothing: :func:`place` returns a placement for every rank or None.
"""

from __future__ import annotations

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler.capacity import DeviceBook, FreeIndex
from labgang.launcher.scheduler.decisions import PendingReason, ReasonCode
from labgang.launcher.scheduler.topology import LEVEL_WORDS, LEVELS, TopologyView

NodeShares = list[tuple[int, int]]
"""``[(node position, ranks on it), ...]`` in NODE_RANK order."""


def choose_nodes(
    ix: FreeIndex,
    workers: int,
    per_worker: int,
    nodes: int | None,
    topology: TopologyView | None = None,
    level: str | None = None,
) -> NodeShares | None:
    """Pick the nodes and how many ranks each takes, or None when the gang does not fit.

    Args:
        ix: free devices of the requested resource.
        workers: ranks in the gang (>= 1).
        per_worker: devices per rank (>= 1).
        nodes: exact node count, or None for as few as fit.
        topology: the snapshot's topology (None: no node has topology facts).
        level: a required level (:data:`.topology.LEVELS` key), or None.
    """
    if workers < 1 or per_worker < 1:
        return None
    if level is not None:
        if nodes not in (None, 1):
            return None
        n = node_reaching(ix, workers * per_worker, topology, LEVELS[level])
        return None if n is None else [(n, workers)]
    if nodes is not None:
        return _exact_nodes(ix, workers, per_worker, nodes)
    need = workers * per_worker
    if need > ix.total:
        return None
    single = ix.fullest_holding(need)
    if single is not None:
        return [(single, workers)]
    shares: NodeShares = []
    got = 0
    for n, count in ix.most_free():
        cap = count // per_worker
        if cap == 0:
            break
        if got + cap >= workers:
            rest = workers - got
            chosen = {m for m, _ in shares}
            last = ix.fullest_holding(rest * per_worker, chosen)
            shares.append((last if last is not None else n, rest))
            return shares
        shares.append((n, cap))
        got += cap
    return None


def _exact_nodes(ix: FreeIndex, workers: int, per_worker: int, nodes: int) -> NodeShares | None:
    if nodes < 1 or nodes > workers:
        return None
    base, extra = divmod(workers, nodes)
    shares: NodeShares = []
    chosen: set[int] = set()
    for ranks, how_many in ((base + 1, extra), (base, nodes - extra)):
        for _ in range(how_many):
            n = ix.fullest_holding(ranks * per_worker, chosen)
            if n is None:
                return None
            chosen.add(n)
            shares.append((n, ranks))
    shares.sort(key=lambda s: s[0])
    return shares


def node_reaching(ix: FreeIndex, need: int, topology: TopologyView | None, closeness: int) -> int | None:
    """The fullest node whose best-connected ``need`` free devices reach ``closeness``, or None."""
    for c in sorted(k for k in ix.buckets if k >= need):
        for n in ix.buckets[c]:
            if closeness <= 1 or need == 1:
                return n
            if topology is None or not topology.node_has[n] or topology.node_best[n] < closeness:
                continue
            numa = closeness == LEVELS["numa"]
            usable = topology.could_reach(ix.free[n], need, closeness, numa)
            if len(usable) >= need and topology.best_set(usable, need, numa)[1] >= closeness:
                return n
    return None


def choose_devices(book: DeviceBook, free: list[int], ranks: int, per_worker: int) -> list[list[int]]:
    """Split a node's free devices among ``ranks`` ranks of ``per_worker`` devices each.

    Args:
        book: the device book (for each device's group and the topology).
        free: the node's free device positions, in device order; must hold ranks * per_worker.

    Returns:
        One list of device positions per rank.
    """
    topo = book.topology
    if topo is not None and free and book.resource[free[0]] == "gpu" and topo.node_has[book.node_of[free[0]]]:
        chosen, _, _ = topo.best_set(free, ranks * per_worker)
        return topo.split(chosen, ranks, per_worker)
    groups: dict[str, list[int]] = {}
    for d in free:
        groups.setdefault(book.group[d], []).append(d)
    pools = list(groups.values())  # first-appearance order
    out: list[list[int]] = []
    for _ in range(ranks):
        fitting = [p for p in pools if len(p) >= per_worker]
        if fitting:
            pool = min(fitting, key=len)  # min keeps the first of equal sizes
            take, pool[:] = pool[:per_worker], pool[per_worker:]
        else:
            take = []
            for pool in sorted(pools, key=len, reverse=True):
                k = min(per_worker - len(take), len(pool))
                take += pool[:k]
                del pool[:k]
                if len(take) == per_worker:
                    break
            take.sort()
        pools = [p for p in pools if p]
        out.append(take)
    return out


def place(
    book: DeviceBook,
    ix: FreeIndex,
    workers: int,
    per_worker: int,
    nodes: int | None,
    level: str | None = None,
    capped: FreeIndex | None = None,
) -> list[tuple[int, list[int]]] | None:
    """A full placement: ``[(node position, [device positions]), ...]`` per rank, or None.

    Ranks on one node are consecutive; nodes appear in the order :func:`choose_nodes` chose.
    ``level`` is a required topology level (None: preferred only). ``capped`` is ``ix`` cut to
    what host resources allow per node (:func:`.hostres.capped_index`): nodes are chosen on it,
    devices from ``ix``.
    """
    shares = choose_nodes(capped if capped is not None else ix, workers, per_worker, nodes, book.topology, level)
    if shares is None:
        return None
    ranks: list[tuple[int, list[int]]] = []
    for n, k in shares:
        for devs in choose_devices(book, ix.free[n], k, per_worker):
            ranks.append((n, devs))
    return ranks


def feasible(
    ix: FreeIndex,
    workers: int,
    per_worker: int,
    nodes: int | None,
    topology: TopologyView | None = None,
    level: str | None = None,
) -> bool:
    """True when :func:`choose_nodes` would find a placement on ``ix`` (no devices chosen)."""
    return choose_nodes(ix, workers, per_worker, nodes, topology, level) is not None


def topology_reason(book: DeviceBook, ix: FreeIndex, req: JobRequest, what: str) -> PendingReason:
    """Why a gang with a required level waits: which level is missing on which node.

    Args:
        book: the cycle's device book.
        ix: free devices of the request's resource (and model).
        req: the request; ``req.topology`` is set.
        what: the request described for people (``reasons.describe_request``).
    """
    level = req.topology or "node"
    want = LEVELS[level]
    need = req.total
    head = f"topology {level}: needs {need} {req.resource} on {LEVEL_WORDS[want]}"
    if req.nodes not in (None, 1):
        return PendingReason(ReasonCode.TOPOLOGY, f"{head}, which keeps the gang on one node; job needs {what}")
    holding = [n for c in sorted(ix.buckets, reverse=True) if c >= need for n in ix.buckets[c]]
    if not holding:
        return PendingReason(
            ReasonCode.TOPOLOGY, f"{head}; no node has {need} free (largest has {ix.largest()}); job needs {what}"
        )
    notes = []
    for n in holding[:3]:
        name = book.node_names[n]
        topo = book.topology
        if topo is None or not topo.node_has[n]:
            notes.append(f"{name} has no topology facts")
        else:
            got = topo.best_set(ix.free[n], need, numa=want == LEVELS["numa"])[1]
            notes.append(f"{name}'s best {need} free are on {LEVEL_WORDS[got]}")
    more = f"; {len(holding) - 3} more node(s) alike" if len(holding) > 3 else ""
    return PendingReason(ReasonCode.TOPOLOGY, f"{head}; " + "; ".join(notes) + more)
