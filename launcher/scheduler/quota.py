"""Quota arithmetic over a cohort tree: Kueue's nominal / borrowing limit / lending limit rules,
with hierarchical cohorts (docs/scenarios.md, "Quota in a cohort tree").

Every queue and every cohort is a *node* of a forest. Per node ``n`` and resource (device counts):

- ``quota(n)``: a queue's ``nominal``; a cohort's own ``nominal`` plus ``quota(c) - private(c)``
  for each child ``c``.
- ``private(n) = max(0, quota(n) - lending_limit(n))`` when ``n`` has a lending limit, else 0:
  nothing outside ``n``'s subtree ever uses it.
- ``usage(n)``: a queue's usage; a cohort's is ``sum(max(0, usage(c) - private(c)))`` over its
  children (a child first consumes its private part; only the excess lands in the parent).
- ``available(n) = quota(n) - usage(n)`` for a root, else ``max(0, private(n) - usage(n)) + A``
  with ``A = available(parent)``, capped when ``n`` has a borrowing limit ``B`` at
  ``quota(n) - private(n) - max(0, usage(n) - private(n)) + B``.
- ``maximum(n)`` (empty cluster) ``= quota(n)`` for a root, else ``private(n) + maximum(parent)``
  capped at ``quota(n) + B``.

A queue without a cohort is a root: it neither lends nor borrows. A queue can only use a
resource it lists in ``nominal`` (nominal 0 is enough to borrow it). In a flat cohort (a root
cohort without quota) this is Kueue's classical arithmetic: the cohort's quota is the *pool*
of what its queues lend. See docs/queue-semantics.md §A1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from labgang.launcher.model import CohortSpec, QueueSpec


class CohortTreeError(ValueError):
    """The cohort configuration is not a forest (a cycle of parents), or a root has limits."""


class CohortTree:
    """The static shape of a cohort forest: nodes, parents, children, quota and limits.

    Node ids are ints: queues first (in configuration order), then cohorts (declared ones in
    order, then implicit ones in order of first mention). Queue and cohort names are separate.

    Args:
        queues: every queue.
        cohorts: cohort specs (cohorts named only by a queue or a ``parent`` get a default one).

    Raises:
        CohortTreeError: a cycle of parents, or limits on a cohort without a parent.
    """

    def __init__(self, queues: Iterable[QueueSpec], cohorts: Iterable[CohortSpec] = ()) -> None:
        self.queues: dict[str, QueueSpec] = {}
        for q in queues:
            self.queues.setdefault(q.name, q)
        specs: dict[str, CohortSpec] = {}
        for cs in cohorts:
            specs.setdefault(cs.name, cs)
        order: list[str] = list(specs)
        for q in self.queues.values():
            if q.cohort is not None and q.cohort not in specs:
                specs[q.cohort] = CohortSpec(q.cohort)
                order.append(q.cohort)
        i = 0
        while i < len(order):
            parent = specs[order[i]].parent
            if parent is not None and parent not in specs:
                specs[parent] = CohortSpec(parent)
                order.append(parent)
            i += 1
        self.cohorts: dict[str, CohortSpec] = {name: specs[name] for name in order}
        self.queue_id: dict[str, int] = {name: i for i, name in enumerate(self.queues)}
        nq = len(self.queues)
        self.cohort_id: dict[str, int] = {name: nq + i for i, name in enumerate(order)}
        self.size = nq + len(order)
        self.names: list[str] = list(self.queues) + order
        self.is_queue: list[bool] = [True] * nq + [False] * len(order)
        self.parent: list[int] = [-1] * self.size
        self.children: list[list[int]] = [[] for _ in range(self.size)]
        self.weight: list[float] = [q.fair_weight for q in self.queues.values()] + [specs[c].fair_weight for c in order]
        self._nominal: list[Mapping[str, int]] = [q.nominal for q in self.queues.values()] + [
            specs[c].nominal for c in order
        ]
        self._borrow: list[Mapping[str, int]] = [
            q.borrowing_limit if q.cohort is not None else {} for q in self.queues.values()
        ] + [specs[c].borrowing_limit for c in order]
        self._lend: list[Mapping[str, int]] = [
            q.lending_limit if q.cohort is not None else {} for q in self.queues.values()
        ] + [specs[c].lending_limit for c in order]
        for q in self.queues.values():
            if q.cohort is not None:
                self._link(self.queue_id[q.name], self.cohort_id[q.cohort])
        for name in order:
            spec = specs[name]
            if spec.parent is not None:
                self._link(self.cohort_id[name], self.cohort_id[spec.parent])
            elif spec.borrowing_limit or spec.lending_limit:
                raise CohortTreeError(f"cohort {name!r} has a borrowing or lending limit but no parent")
        for name in order:
            seen = {self.cohort_id[name]}
            n = self.parent[self.cohort_id[name]]
            while n >= 0:
                if n in seen:
                    raise CohortTreeError(f"cohort {name!r} is its own ancestor (a cycle of parents)")
                seen.add(n)
                n = self.parent[n]
        self.root: list[int] = [0] * self.size
        self.depth: list[int] = [0] * self.size
        for n in range(self.size):
            r, d = n, 0
            while self.parent[r] >= 0:
                r, d = self.parent[r], d + 1
            self.root[n], self.depth[n] = r, d
        # per node: its root, and the nodes below the root down to it (root first; empty for a
        # root): the path :meth:`QuotaBook.node_available` walks on every quota fit
        self.down_to: list[tuple[int, tuple[int, ...]]] = []
        for n in range(self.size):
            path = [n]
            while self.parent[path[-1]] >= 0:
                path.append(self.parent[path[-1]])
            path.reverse()
            self.down_to.append((path[0], tuple(path[1:])))
        self.height: list[int] = [0] * self.size
        for n in sorted(range(nq, self.size), key=lambda m: -self.depth[m]):
            kids = [self.height[c] for c in self.children[n] if not self.is_queue[c]]
            self.height[n] = 1 + max(kids, default=0)
        self.resources: list[str] = sorted({r for m in self._nominal for r in m})
        self._quota: dict[tuple[int, str], int] = {}
        self._private: dict[tuple[int, str], int] = {}
        self._maximum: dict[tuple[int, str], int] = {}
        for n in sorted(range(self.size), key=lambda m: -self.depth[m]):
            for res in self.resources:
                total = self._nominal[n].get(res, 0) + sum(
                    self._quota[(c, res)] - self._private[(c, res)] for c in self.children[n]
                )
                self._quota[(n, res)] = total
                lend = self._lend[n].get(res)
                self._private[(n, res)] = 0 if lend is None else max(0, total - lend)
        for n in sorted(range(self.size), key=lambda m: self.depth[m]):
            for res in self.resources:
                p = self.parent[n]
                if p < 0:
                    best = self._quota[(n, res)]
                else:
                    best = self._private[(n, res)] + self._maximum[(p, res)]
                    limit = self._borrow[n].get(res)
                    if limit is not None:
                        best = min(best, self._quota[(n, res)] + limit)
                self._maximum[(n, res)] = best

    def _link(self, child: int, parent: int) -> None:
        self.parent[child] = parent
        self.children[parent].append(child)

    def quota(self, n: int, res: str) -> int:
        """``quota(n)`` for node ``n``."""
        return self._quota.get((n, res), 0)

    def private(self, n: int, res: str) -> int:
        """``private(n)``: the part of ``n``'s quota the rest of the tree never uses."""
        return self._private.get((n, res), 0)

    def maximum(self, n: int, res: str) -> int:
        """``maximum(n)``: the most ``n`` could hold on an empty cluster."""
        return self._maximum.get((n, res), 0)

    def borrowing_limit(self, n: int, res: str) -> int | None:
        """``n``'s borrowing limit for ``res`` (None = unlimited; roots have none)."""
        return self._borrow[n].get(res)

    def ancestors(self, n: int) -> list[int]:
        """``n``'s ancestors from its parent up to its root."""
        out = []
        p = self.parent[n]
        while p >= 0:
            out.append(p)
            p = self.parent[p]
        return out


_last_tree: tuple[tuple[QueueSpec, ...], tuple[CohortSpec, ...], CohortTree] | None = None
"""The last tree :func:`_tree_of` built, with the tuples it was built from."""


def _tree_of(queues: Iterable[QueueSpec], cohorts: Iterable[CohortSpec]) -> CohortTree:
    """``CohortTree(queues, cohorts)``, reused while callers pass the very same tuples (the
    coordinator and the simulator keep one queues tuple and one cohorts tuple until the config
    changes, and every cycle builds its books from them). A pure memo: a tree is never changed
    after it is built, and the specs are frozen."""
    global _last_tree
    last = _last_tree
    if last is not None and last[0] is queues and last[1] is cohorts:
        return last[2]
    tree = CohortTree(queues, cohorts)
    if isinstance(queues, tuple) and isinstance(cohorts, tuple):
        _last_tree = (queues, cohorts, tree)
    return tree


class QuotaBook:
    """Mutable usage of every queue and cohort of a :class:`CohortTree`, for one working copy.

    Args:
        queues: every queue's configuration.
        usage: initial usage as ``{(queue, resource): devices}``; pairs naming an unknown
            queue are ignored (their devices still count as occupied elsewhere).
        cohorts: cohort specs (parents, cohort quota, limits, weights).
        tree: a prebuilt tree for these queues and cohorts (then ``queues``/``cohorts`` are
            ignored); lets several books share one static shape.
    """

    def __init__(
        self,
        queues: Iterable[QueueSpec],
        usage: Mapping[tuple[str, str], int] = {},
        cohorts: Iterable[CohortSpec] = (),
        tree: CohortTree | None = None,
    ) -> None:
        self.tree = tree if tree is not None else _tree_of(queues, cohorts)
        self.queues: dict[str, QueueSpec] = self.tree.queues
        self._usage: dict[tuple[int, str], int] = {}
        for (queue, res), n in sorted(usage.items()):
            if queue in self.queues and n:
                self.add(queue, res, n)

    def copy(self) -> QuotaBook:
        """An independent book with the same tree and usage."""
        other = QuotaBook((), tree=self.tree)
        other._usage = dict(self._usage)
        return other

    # --- static per-queue numbers -------------------------------------------------------

    def qid(self, queue: str) -> int:
        """The tree node of ``queue``."""
        return self.tree.queue_id[queue]

    def nominal(self, queue: str, res: str) -> int:
        """Nominal quota of ``queue`` for ``res`` (0 when not listed)."""
        return self.queues[queue].nominal.get(res, 0)

    def borrowing_limit(self, queue: str, res: str) -> int | None:
        """Borrowing limit, or None when unlimited (or when the queue has no cohort: 0)."""
        spec = self.queues[queue]
        if spec.cohort is None:
            return 0
        return spec.borrowing_limit.get(res)

    def private(self, queue: str, res: str) -> int:
        """The part of nominal no other queue may ever use: ``max(0, N - L)`` when L is set."""
        return self.tree.private(self.qid(queue), res)

    def shared(self, queue: str, res: str) -> int:
        """The part of nominal lent to the cohort."""
        return self.nominal(queue, res) - self.private(queue, res)

    def lists(self, queue: str, res: str) -> bool:
        """True when ``queue`` lists ``res`` in its nominal quota (required to use it at all)."""
        return res in self.queues[queue].nominal

    # --- usage ---------------------------------------------------------------------------

    def usage(self, queue: str, res: str) -> int:
        """Devices of ``res`` held by ``queue`` (admitted, running, terminating, assumed)."""
        return self._usage.get((self.tree.queue_id[queue], res), 0)

    def node_usage(self, n: int, res: str) -> int:
        """``usage(n)`` for any node."""
        return self._usage.get((n, res), 0)

    def add(self, queue: str, res: str, delta: int) -> None:
        """Change ``queue``'s usage of ``res`` by ``delta`` devices (negative to release)."""
        n = self.tree.queue_id.get(queue)
        if n is None or delta == 0:
            return
        private, parent, book = self.tree._private, self.tree.parent, self._usage
        while delta and n >= 0:
            key = (n, res)
            old = book.get(key, 0)
            new = old + delta
            book[key] = new
            priv = private.get(key, 0)
            # what goes up to the parent: the change of the part above the private quota
            # (``max(0, new - priv) - max(0, old - priv)``, without the two calls)
            delta = (new - priv if new > priv else 0) - (old - priv if old > priv else 0)
            n = parent[n]

    def usage_with(self, queue: str, res: str, delta: int, upto: int) -> int:
        """``usage(upto)`` if ``queue`` (a node in ``upto``'s subtree) held ``delta`` more."""
        tree, book = self.tree, self._usage
        n = tree.queue_id[queue]
        while True:
            key = (n, res)
            old = book.get(key, 0)
            if n == upto:
                return old + delta
            priv = tree._private.get(key, 0)
            delta = max(0, old + delta - priv) - max(0, old - priv)
            n = tree.parent[n]

    def pool(self, cohort: str, res: str) -> int:
        """The cohort's quota (for a flat cohort, the pool its queues lend)."""
        return self.tree.quota(self.tree.cohort_id[cohort], res)

    def pool_usage(self, cohort: str, res: str) -> int:
        """The cohort's usage."""
        return self._usage.get((self.tree.cohort_id[cohort], res), 0)

    def members(self, cohort: str) -> list[str]:
        """Queues directly in ``cohort``, in configuration order."""
        tree = self.tree
        return [tree.names[c] for c in tree.children[tree.cohort_id[cohort]] if tree.is_queue[c]]

    # --- the rules -------------------------------------------------------------------------

    def node_available(self, n: int, res: str) -> int:
        """``available(n)`` (may be negative when held quota overfills a root)."""
        # the tree's and the book's maps read directly (the hot path of every quota fit)
        tree = self.tree
        quota, private, borrow, usage = tree._quota, tree._private, tree._borrow, self._usage
        top, chain = tree.down_to[n]  # its root, and the nodes below it down to ``n``
        avail = quota.get((top, res), 0) - usage.get((top, res), 0)
        for m in chain:
            key = (m, res)
            u = usage.get(key, 0)
            priv = private.get(key, 0)
            limit = borrow[m].get(res)
            if limit is not None:
                avail = min(avail, quota.get(key, 0) - priv - max(0, u - priv) + limit)
            avail = max(0, priv - u) + avail
        return avail

    def available(self, queue: str, res: str) -> int:
        """How many more devices of ``res`` ``queue`` may take now (>= 0; Kueue's ``Available``)."""
        if res not in self.queues[queue].nominal:  # :meth:`lists`
            return 0
        return max(0, self.node_available(self.tree.queue_id[queue], res))

    def potential(self, queue: str, res: str) -> int:
        """The most ``queue`` could ever hold of ``res``, on an empty cluster."""
        if not self.lists(queue, res):
            return 0
        return self.tree.maximum(self.qid(queue), res)

    def would_borrow(self, queue: str, res: str, request: int) -> bool:
        """True when taking ``request`` more would put ``queue`` above its nominal quota."""
        return self.usage(queue, res) + request > self.nominal(queue, res)

    def borrowed(self, queue: str, res: str) -> int:
        """Devices of ``res`` ``queue`` holds above its nominal quota (0 when within it)."""
        return max(0, self.usage(queue, res) - self.nominal(queue, res))

    def unused_lendable(self, queue: str, res: str) -> int:
        """The part of ``queue``'s unused nominal quota its cohort may use (within its lending limit)."""
        return min(max(0, self.nominal(queue, res) - self.usage(queue, res)), self.shared(queue, res))

    def above_nominal(self, queue: str, res: str) -> bool:
        """True while ``queue`` is borrowing ``res``."""
        return self.usage(queue, res) > self.nominal(queue, res)

    def borrows(self, n: int, res: str) -> bool:
        """True while node ``n`` uses more of ``res`` than its quota."""
        return self.node_usage(n, res) > self.tree.quota(n, res)

    def fitting_subtree(self, queue: str, res: str, request: int) -> int:
        """The smallest subtree whose quota holds ``request`` more for ``queue`` (its node)."""
        tree = self.tree
        q = tree.queue_id[queue]
        u = self.node_usage(q, res)
        if u + request <= self.nominal(queue, res):
            return q
        x = request - max(0, tree.private(q, res) - u)
        a = q
        for a in tree.ancestors(q):
            ua = self.node_usage(a, res)
            if ua + x <= tree.quota(a, res):
                return a
            x -= max(0, tree.private(a, res) - ua)
        return a if a != q else q

    def fit_height(self, queue: str, res: str, request: int) -> int:
        """Height of :meth:`fitting_subtree`: 0 for the queue itself, 1 + the largest child
        cohort height for a cohort (1 for a flat cohort)."""
        return self.tree.height[self.fitting_subtree(queue, res, request)]
