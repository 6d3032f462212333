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

All or nothing: :func:`place` returns a placement for every rank or None.
"""

from __future__ import annotations

from labgang.launcher.scheduler.capacity import DeviceBook, FreeIndex

NodeShares = list[tuple[int, int]]
"""``[(node position, ranks on it), ...]`` in NODE_RANK order."""


def choose_nodes(ix: FreeIndex, workers: int, per_worker: int, nodes: int | None) -> NodeShares | None:
    """Pick the nodes and how many ranks each takes, or None when the gang does not fit.

    Args:
        ix: free devices of the requested resource.
        workers: ranks in the gang (>= 1).
        per_worker: devices per rank (>= 1).
        nodes: exact node count, or None for as few as fit.
    """
    if workers < 1 or per_worker < 1:
        return None
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


def choose_devices(book: DeviceBook, free: list[int], ranks: int, per_worker: int) -> list[list[int]]:
    """Split a node's free devices among ``ranks`` ranks of ``per_worker`` devices each.

    Args:
        book: the device book (for each device's group).
        free: the node's free device positions, in device order; must hold ranks * per_worker.

    Returns:
        One list of device positions per rank.
    """
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
    book: DeviceBook, ix: FreeIndex, workers: int, per_worker: int, nodes: int | None
) -> list[tuple[int, list[int]]] | None:
    """A full placement: ``[(node position, [device positions]), ...]`` per rank, or None.

    Ranks on one node are consecutive; nodes appear in the order :func:`choose_nodes` chose.
    """
    shares = choose_nodes(ix, workers, per_worker, nodes)
    if shares is None:
        return None
    ranks: list[tuple[int, list[int]]] = []
    for n, k in shares:
        for devs in choose_devices(book, ix.free[n], k, per_worker):
            ranks.append((n, devs))
    return ranks


def feasible(ix: FreeIndex, workers: int, per_worker: int, nodes: int | None) -> bool:
    """True when :func:`choose_nodes` would find a placement on ``ix`` (no devices chosen)."""
    return choose_nodes(ix, workers, per_worker, nodes) is not None
