"""Quota arithmetic: Kueue's classical nominal / borrowing limit / lending limit rules.

Per queue ``q`` and resource (all quantities are device counts):

- ``N`` nominal, ``B`` borrowing limit (None = unlimited), ``L`` lending limit (None = all of N).
- ``private(q) = N - L`` when L is set, else 0: never visible to another queue.
- ``shared(q) = N - private(q)``: what ``q`` puts into its cohort's pool.
- A cohort's pool ``P = sum(shared)``; its usage ``U = sum(max(0, u - private))``
  (a queue first consumes its private part; only the excess lands in the pool).
- ``available(q) = max(0, private - u) + min(P - U, shared - max(0, u - private) + B)``
  (the second term of the ``min`` only when B is set).
- ``potential(q) = min(N + B, private + P)``: the most ``q`` could ever hold (empty cluster).

A queue without a cohort can neither lend nor borrow: ``available = N - u``. A queue can
only use a resource it lists in ``nominal`` (nominal 0 is enough to borrow it).
See docs/queue-semantics.md §A1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from labgang.launcher.model import QueueSpec


class QuotaBook:
    """Mutable usage of every queue and cohort, for one cycle's working copy.

    Args:
        queues: every queue's configuration.
        usage: initial usage as ``{(queue, resource): devices}``; pairs naming an unknown
            queue are ignored (their devices still count as occupied elsewhere).
    """

    def __init__(self, queues: Iterable[QueueSpec], usage: Mapping[tuple[str, str], int] = {}) -> None:
        self.queues: dict[str, QueueSpec] = {q.name: q for q in queues}
        self._members: dict[str, list[str]] = {}
        for q in self.queues.values():
            if q.cohort is not None:
                self._members.setdefault(q.cohort, []).append(q.name)
        self._usage: dict[tuple[str, str], int] = {}
        self._pool: dict[tuple[str, str], int] = {}
        self._pool_usage: dict[tuple[str, str], int] = {}
        for q in self.queues.values():
            if q.cohort is None:
                continue
            for res in q.nominal:
                key = (q.cohort, res)
                self._pool[key] = self._pool.get(key, 0) + self.shared(q.name, res)
        for (queue, res), n in sorted(usage.items()):
            if queue in self.queues and n:
                self.add(queue, res, n)

    # --- static per-queue numbers -------------------------------------------------------

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
        spec = self.queues[queue]
        limit = spec.lending_limit.get(res)
        if limit is None:
            return 0
        return max(0, spec.nominal.get(res, 0) - limit)

    def shared(self, queue: str, res: str) -> int:
        """The part of nominal lent to the cohort pool."""
        return self.nominal(queue, res) - self.private(queue, res)

    def lists(self, queue: str, res: str) -> bool:
        """True when ``queue`` lists ``res`` in its nominal quota (required to use it at all)."""
        return res in self.queues[queue].nominal

    # --- usage ---------------------------------------------------------------------------

    def usage(self, queue: str, res: str) -> int:
        """Devices of ``res`` held by ``queue`` (admitted, running, terminating, assumed)."""
        return self._usage.get((queue, res), 0)

    def add(self, queue: str, res: str, delta: int) -> None:
        """Change ``queue``'s usage of ``res`` by ``delta`` devices (negative to release)."""
        if queue not in self.queues or delta == 0:
            return
        old = self._usage.get((queue, res), 0)
        new = old + delta
        self._usage[(queue, res)] = new
        cohort = self.queues[queue].cohort
        if cohort is not None:
            priv = self.private(queue, res)
            change = max(0, new - priv) - max(0, old - priv)
            if change:
                key = (cohort, res)
                self._pool_usage[key] = self._pool_usage.get(key, 0) + change

    def pool(self, cohort: str, res: str) -> int:
        """The cohort's lendable pool ``P`` for ``res``."""
        return self._pool.get((cohort, res), 0)

    def pool_usage(self, cohort: str, res: str) -> int:
        """The cohort's pool usage ``U`` for ``res``."""
        return self._pool_usage.get((cohort, res), 0)

    def members(self, cohort: str) -> list[str]:
        """Queues of ``cohort``, in configuration order."""
        return self._members.get(cohort, [])

    # --- the rules -------------------------------------------------------------------------

    def available(self, queue: str, res: str) -> int:
        """How many more devices of ``res`` ``queue`` may take now (Kueue's ``Available``)."""
        if not self.lists(queue, res):
            return 0
        spec = self.queues[queue]
        u = self.usage(queue, res)
        nominal = spec.nominal[res]
        if spec.cohort is None:
            return max(0, nominal - u)
        priv = self.private(queue, res)
        room = self.pool(spec.cohort, res) - self.pool_usage(spec.cohort, res)
        limit = spec.borrowing_limit.get(res)
        if limit is not None:
            room = min(room, self.shared(queue, res) - max(0, u - priv) + limit)
        return max(0, priv - u) + max(0, room)

    def potential(self, queue: str, res: str) -> int:
        """The most ``queue`` could ever hold of ``res``, on an empty cluster."""
        if not self.lists(queue, res):
            return 0
        spec = self.queues[queue]
        nominal = spec.nominal[res]
        if spec.cohort is None:
            return nominal
        best = self.private(queue, res) + self.pool(spec.cohort, res)
        limit = spec.borrowing_limit.get(res)
        if limit is not None:
            best = min(best, nominal + limit)
        return best

    def would_borrow(self, queue: str, res: str, request: int) -> bool:
        """True when taking ``request`` more would put ``queue`` above its nominal quota."""
        return self.usage(queue, res) + request > self.nominal(queue, res)

    def above_nominal(self, queue: str, res: str) -> bool:
        """True while ``queue`` is borrowing ``res``."""
        return self.usage(queue, res) > self.nominal(queue, res)
