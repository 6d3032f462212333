"""Topology inside a node: how close two devices are, and the best-connected sets of devices.

Closeness of a device pair (higher is closer), from the node's :class:`~.snapshot.DeviceLink`
facts and the devices' NUMA keys:

* 4 ``nvlink``: NVLinks join them;
* 3 ``pcie-switch``: one PCIe switch (``PIX``) or one board (``internal``);
* 2 ``numa``: one NUMA node (``PXB``, ``PHB``, ``NODE``, or equal NUMA keys);
* 1 ``node``: anything else on the same node (``SYS``, or nothing known).

A set of devices is as close as its farthest pair. Among sets, placement prefers the closest,
then the one with the most NVLinks, then the most pairs on one PCIe switch, then on one NUMA
node (:func:`pair_weight`). The search (:func:`best_set`) grows a set from each free device in
turn, adding the device closest to the set so far, and keeps the best; it is deterministic
(ties go to lower device positions) and costs O(free² × size) per node.

A required level (``JobRequest.topology``) holds for every pair of the whole gang's devices, so
any level keeps the gang on one node (``node`` asks for only that). ``nvlink`` and
``pcie-switch`` need that closeness or better; ``numa`` needs every device on one NUMA node
(equal NUMA keys, or for devices without one a PCIe path that stays in a NUMA node): NVLinks
across sockets do not make GPUs local to one socket's CPUs and memory.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from labgang.launcher.scheduler.snapshot import Node

LEVELS: dict[str, int] = {"nvlink": 4, "pcie-switch": 3, "numa": 2, "node": 1}
"""Required level name → the closeness every pair of the gang's devices must reach."""
LEVEL_WORDS = {4: "NVLink", 3: "one PCIe switch", 2: "one NUMA node", 1: "one node"}
_SWITCH = ("internal", "PIX")
_NUMA = ("PXB", "PHB", "NODE")
_PCIE_BONUS = {"internal": 4, "PIX": 4, "PXB": 3, "PHB": 2, "NODE": 1}
MEMO_LIMIT = 200_000
"""Best-set answers kept ((node shape, free set on the node), size, mode → set); nodes wired alike share
answers, and the memo lives as long as the nodes tuple."""


def pair_weight(nvlinks: int, pcie: str, same_numa: bool) -> int:
    """Preference weight of a pair: NVLinks first, then one PCIe switch, then one NUMA node."""
    switch = 100 if pcie in _SWITCH else 0
    numa = 10 if same_numa or pcie in _NUMA else 0
    return nvlinks * 1000 + switch + numa + _PCIE_BONUS.get(pcie, 0)


def pair_closeness(nvlinks: int, pcie: str, same_numa: bool) -> int:
    """Closeness 1..4 of a pair (see the module docstring)."""
    if nvlinks > 0:
        return 4
    if pcie in _SWITCH:
        return 3
    if pcie in _NUMA or same_numa:
        return 2
    return 1


class TopologyView:
    """Pair closeness and weights of every node's devices, by device position (built once per nodes tuple).

    Args:
        nodes: the snapshot's nodes.
        pos: device UUID → position (first listing wins).
    """

    def __init__(self, nodes: Sequence[Node], pos: dict[str, int]) -> None:
        self.close: dict[tuple[int, int], int] = {}
        self.local: dict[tuple[int, int], bool] = {}
        self.weight: dict[tuple[int, int], int] = {}
        self.numa: dict[int, str] = {}  # device position → NUMA key
        self.node_has: list[bool] = []
        self.node_best: list[int] = []  # the highest closeness of any pair on the node
        for node in nodes:
            devs = [pos[d.uuid] for d in node.devices if d.uuid in pos]
            for d in node.devices:
                if d.numa and d.uuid in pos:
                    self.numa[pos[d.uuid]] = d.numa
            has = bool(node.links) or any(d.numa for d in node.devices)
            self.node_has.append(has)
            best = 1
            if has:
                for link in node.links:
                    a, b = pos.get(link.a), pos.get(link.b)
                    if a is None or b is None or a == b:
                        continue
                    key = (min(a, b), max(a, b))
                    same = self._same_numa(a, b)
                    self.close[key] = pair_closeness(link.nvlinks, link.pcie, same)
                    self.local[key] = same or (link.pcie in _SWITCH + _NUMA and not (a in self.numa and b in self.numa))
                    self.weight[key] = pair_weight(link.nvlinks, link.pcie, same)
                    best = max(best, self.close[key])
                if any(self._same_numa(a, b) for i, a in enumerate(devs) for b in devs[i + 1 :]):
                    best = max(best, 2)
            self.node_best.append(best)
        self._tables(nodes, pos)
        self._memo: dict[tuple[int, tuple[int, ...], int, bool], tuple[tuple[int, ...], int, int]] = {}
        self._reach_memo: dict[tuple[int, tuple[int, ...], int, int, bool], tuple[int, ...]] = {}

    def _same_numa(self, a: int, b: int) -> bool:
        na = self.numa.get(a, "")
        return bool(na) and na == self.numa.get(b, "")

    def _tables(self, nodes: Sequence[Node], pos: dict[str, int]) -> None:
        """Fill ``adj`` / ``adj_numa``: device → {peer on its node → (closeness, weight)}."""
        self.adj: dict[int, dict[int, tuple[int, int]]] = {}
        self.adj_numa: dict[int, dict[int, tuple[int, int]]] = {}
        # nodes wired alike share memo entries: each device's (shape id, index on its node, node devices)
        self._where: dict[int, tuple[int, int, list[int]]] = {}
        shapes: dict[tuple[object, ...], int] = {}
        for ni, node in enumerate(nodes):
            if not self.node_has[ni]:
                continue
            devs = sorted({pos[d.uuid] for d in node.devices if d.uuid in pos})
            for a in devs:
                self.adj[a], self.adj_numa[a] = {}, {}
            for i, a in enumerate(devs):
                for b in devs[i + 1 :]:
                    key = (a, b)
                    close = self.close.get(key)
                    if close is None:
                        same = self._same_numa(a, b)
                        plain = numa = (2, 10) if same else (1, 0)
                    else:
                        plain = (close, self.weight[key])
                        numa = (2 if self.local[key] else 1, self.weight[key])
                    self.adj[a][b] = self.adj[b][a] = plain
                    self.adj_numa[a][b] = self.adj_numa[b][a] = numa
            shape = tuple((self.adj[a].get(b), self.adj_numa[a].get(b)) for a in devs for b in devs)
            sid = shapes.setdefault(shape, len(shapes))
            for i, a in enumerate(devs):
                self._where[a] = (sid, i, devs)

    def _local(self, free: Sequence[int]) -> tuple[int, tuple[int, ...], list[int]]:
        """(shape id, indexes on the node, the node's devices) of free devices of one node."""
        sid, _, devs = self._where[free[0]]
        return sid, tuple(self._where[d][1] for d in free), devs

    def pair(self, a: int, b: int, numa: bool = False) -> tuple[int, int]:
        """(closeness, weight) of devices ``a`` and ``b`` of one node with topology facts.

        With ``numa``, closeness is 2 when the pair is on one NUMA node and 1 otherwise.
        """
        return (self.adj_numa if numa else self.adj)[a][b]

    def could_reach(self, free: Sequence[int], size: int, closeness: int, numa: bool = False) -> list[int]:
        """The devices of ``free`` that have at least ``size - 1`` free peers at ``closeness`` or
        closer: a set reaching ``closeness`` can only use these (a quick necessary condition)."""
        if not free:
            return []
        sid, local, devs = self._local(free)
        key = (sid, local, size, closeness, numa)
        hit = self._reach_memo.get(key)
        if hit is not None:
            return [devs[i] for i in hit]
        table = self.adj_numa if numa else self.adj
        out = []
        for d in free:
            row = table[d]
            if sum(1 for e in free if e != d and row[e][0] >= closeness) >= size - 1:
                out.append(d)
        if len(self._reach_memo) >= MEMO_LIMIT:
            self._reach_memo.clear()
        self._reach_memo[key] = tuple(self._where[d][1] for d in out)
        return out

    def best_set(self, free: Sequence[int], size: int, numa: bool = False) -> tuple[list[int], int, int]:
        """The best-connected ``size`` devices of ``free`` (see the module docstring); memoised.

        Args:
            free: free devices of one node with topology facts (at least ``size``).
            numa: rank sets by NUMA locality first (closeness 2: all on one NUMA node, 1: not).

        Returns:
            ``(devices ascending, closeness of the farthest pair, total weight)``; a single
            device has closeness 4.
        """
        if size <= 0 or not free:
            return [], 4, 0
        sid, local, devs = self._local(free)
        key = (sid, local, size, numa)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= MEMO_LIMIT:
                self._memo.clear()
            chosen, close, total = self._search(free, size, self.adj_numa if numa else self.adj)
            found = self._memo[key] = (tuple(self._where[d][1] for d in chosen), close, total)
        return [devs[i] for i in found[0]], found[1], found[2]

    def _search(
        self, free: Sequence[int], size: int, table: dict[int, dict[int, tuple[int, int]]]
    ) -> tuple[list[int], int, int]:
        if size <= 0:
            return [], 4, 0
        best: tuple[int, int, list[int]] | None = None
        for seed in free:
            chosen = [seed]
            close = 4
            total = 0
            rest = [d for d in free if d != seed]
            while len(chosen) < size:
                pick = -1
                pick_key = (-1, -1)
                for c in rest:
                    row = table[c]
                    c_close, c_weight = 4, 0
                    for m in chosen:
                        pc, pw = row[m]
                        c_close = min(c_close, pc)
                        c_weight += pw
                    if (c_close, c_weight) > pick_key:
                        pick, pick_key = c, (c_close, c_weight)
                chosen.append(pick)
                rest.remove(pick)
                close = min(close, pick_key[0])
                total += pick_key[1]
            if best is None or (close, total) > (best[0], best[1]):
                best = (close, total, sorted(chosen))
                if size == 1:
                    break
        assert best is not None
        return best[2], best[0], best[1]

    def split(self, devices: Iterable[int], ranks: int, per_worker: int) -> list[list[int]]:
        """Split a gang's devices on one node into ``ranks`` ranks, each the best-connected of what is left."""
        left = sorted(devices)
        out: list[list[int]] = []
        for _ in range(ranks - 1):
            take, _, _ = self.best_set(left, per_worker)
            out.append(take)
            left = [d for d in left if d not in take]
        out.append(left)
        return out


__all__ = ["LEVELS", "LEVEL_WORDS", "TopologyView", "pair_closeness", "pair_weight"]
