"""Fair sharing: dominant resource shares (DRS) and the admission tournament down a cohort tree.

Kueue's fair sharing (docs/scenarios.md, "Fair sharing"). For a node ``n`` (queue or cohort)
with a parent ``p``, per resource ``n`` borrows ``b = usage(n) - quota(n)`` when that is > 0;
``ratio(n) = max(b * 1000 / maximum(p))`` over the borrowed resources (``maximum(p) = 0``
skipped) and ``share(n) = ratio(n) / fair_weight(n)``, infinite for weight 0 and a positive
ratio. A root's share is 0. Usage here is the fair-sharing usage: running jobs not told to
leave, plus preemptors waiting for their victims (``CycleState.shares``).

Shares are compared as :data:`Share` tuples ``(infinite, value)``: a finite share is
``(0, share)``, an infinite one ``(1, ratio)``, so two infinite shares compare by ratio and an
infinite share is above every finite one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from labgang.launcher.scheduler.quota import QuotaBook

Share = tuple[int, float]
"""``(0, share)`` for a finite share, ``(1, ratio)`` for an infinite one (weight 0)."""

ZERO: Share = (0, 0.0)


def ratio(book: QuotaBook, n: int) -> float:
    """``ratio(n)``: the largest borrowed fraction (x 1000) of what ``n``'s parent could reach."""
    tree = book.tree
    p = tree.parent[n]
    if p < 0:
        return 0.0
    best = 0.0
    for res in tree.resources:
        b = book.node_usage(n, res) - tree.quota(n, res)
        if b <= 0:
            continue
        most = tree.maximum(p, res)
        if most <= 0:
            continue
        best = max(best, b * 1000 / most)
    return best


def share(book: QuotaBook, n: int) -> Share:
    """``share(n)`` as a comparable :data:`Share`."""
    r = ratio(book, n)
    if r == 0:
        return ZERO
    w = book.tree.weight[n]
    if w <= 0:
        return (1, r)
    return (0, r / w)


def add_demand(book: QuotaBook, queue: str, demand: Mapping[str, int], sign: int = 1) -> None:
    """Add (``sign`` 1) or take away (-1) ``demand`` (amount per resource: devices, and ``cpu`` /
    ``memory`` where the queue's quota lists them) to ``queue``'s fair-sharing usage in ``book``."""
    for res, n in demand.items():
        book.add(queue, res, sign * n)


def share_value(s: Share) -> float:
    """The share as a number (``inf`` for an infinite one)."""
    return float("inf") if s[0] else s[1]


def branch(book: QuotaBook, n: int, lca: int) -> int:
    """The child of ``lca`` on ``n``'s path (``n`` itself when its parent is ``lca``)."""
    parent = book.tree.parent
    while parent[n] != lca:
        n = parent[n]
    return n


def lowest_common(book: QuotaBook, a: int, b: int) -> int:
    """The lowest common cohort of nodes ``a`` and ``b`` (-1 when in separate trees)."""
    tree = book.tree
    seen = set(tree.ancestors(a))
    for c in tree.ancestors(b):
        if c in seen:
            return c
    return -1


class Tournament:
    """The next head to try among queues' heads, chosen anew after every attempt.

    Within a tree, the winner of a tournament from the root down: at a cohort, each child
    nominates (a queue its head, a cohort the winner inside it), and nominee ``h`` beats ``g``
    when, comparing the children that nominated them with each nominee admitted, (1) h's
    child does not borrow in any of h's resources and g's does; (2) h's child has the lower share;
    (3) h has the higher priority; (4) the earlier submit; (5) h comes first in the file.
    Among separate trees: higher priority, earlier submit, file order.

    Winners are cached per cohort and recomputed only along the path of a queue whose head
    or usage changed (:meth:`touch`): a child's share depends only on its own subtree.

    Args:
        book: the fair-sharing usage (mutated temporarily while judging, always restored).
        priority: ``item -> (priority, submit_time, seq)`` for the heads this tournament holds.
        request: ``item -> (queue, {resource: amount})``: its devices, and ``cpu``/``memory``
            where its queue's quota lists them (``CycleState.pending_share_demand``).
    """

    def __init__(
        self,
        book: QuotaBook,
        priority: Callable[[object], tuple[int, float, int]],
        request: Callable[[object], tuple[str, Mapping[str, int]]],
    ) -> None:
        self.book = book
        self._prio = priority
        self._req = request
        self.heads: dict[int, object] = {}
        self._cache: dict[int, tuple[object, tuple[int, Share, int, float, int]] | None] = {}
        self._roots: dict[int, None] = {}

    def set_head(self, queue: str, item: object | None) -> None:
        """``queue``'s head is now ``item`` (None: it has none left)."""
        n = self.book.tree.queue_id[queue]
        if item is None:
            self.heads.pop(n, None)
        else:
            self.heads[n] = item
        self.touch(queue)

    def touch(self, queue: str) -> None:
        """Something changed for ``queue`` (its head or its usage): forget cached winners."""
        tree = self.book.tree
        n = tree.queue_id[queue]
        for a in tree.ancestors(n):
            self._cache.pop(a, None)
        self._roots[tree.root[n]] = None

    def _key(self, child: int, item: object) -> tuple[int, Share, int, float, int]:
        """Sort key of nominee ``item`` nominated by ``child`` (lower wins)."""
        book = self.book
        tree = book.tree
        queue, demand = self._req(item)
        add_demand(book, queue, demand)
        try:
            borrows = 1 if any(book.node_usage(child, res) > tree.quota(child, res) for res in demand) else 0
            s = share(book, child)
        finally:
            add_demand(book, queue, demand, -1)
        prio, submit, seq = self._prio(item)
        return (borrows, s, -prio, submit, seq)

    def _winner(self, cohort: int) -> object | None:
        if cohort in self._cache:
            got = self._cache[cohort]
            return None if got is None else got[0]
        tree = self.book.tree
        best: tuple[object, tuple[int, Share, int, float, int]] | None = None
        for child in tree.children[cohort]:
            item = self.heads.get(child) if tree.is_queue[child] else self._winner(child)
            if item is None:
                continue
            key = self._key(child, item)
            if best is None or key < best[1]:
                best = (item, key)
        self._cache[cohort] = best
        return None if best is None else best[0]

    def next(self) -> object | None:
        """The next head to try, or None when no queue has one."""
        tree = self.book.tree
        best: object | None = None
        best_key: tuple[int, float, int] | None = None
        for root in list(self._roots):
            item = self.heads.get(root) if tree.is_queue[root] else self._winner(root)
            if item is None:
                del self._roots[root]
                continue
            prio, submit, seq = self._prio(item)
            key = (-prio, submit, seq)
            if best_key is None or key < best_key:
                best, best_key = item, key
        return best
