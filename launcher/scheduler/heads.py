"""The order phase with one head per queue, chosen anew after every attempt.

Used when fair sharing or admission fair sharing is on (docs/scenarios.md, "Fair sharing and
cohort trees"); the classical path keeps its sorted heap (:mod:`.cycle`).

- Preemptors waiting for their victims (sticky heads) go first, as in the classical order.
- Each queue offers its head: the first of its pending jobs by queue order, or with admission
  fair sharing by tenant score first (lower first), then queue order. Scores change as jobs of
  a tenant start (entry penalty), so the head is recomputed each time.
- With fair sharing the next head is the winner of the tournament down the cohort tree
  (:class:`~.fairshare.Tournament`); without it, the classical key: lower fitting-subtree
  height, higher priority, earlier submit, file order.
- A best-effort-fifo queue moves on to its next job whatever happened to the head; a
  strict-fifo queue whose head did not start blocks the rest of the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from labgang.launcher.model import Queueing
from labgang.launcher.scheduler import reasons
from labgang.launcher.scheduler.decisions import Pending
from labgang.launcher.scheduler.fairshare import Tournament
from labgang.launcher.scheduler.nominate import Entry
from labgang.launcher.scheduler.tenants import TenantBook, TenantKey, key_of

if TYPE_CHECKING:
    from labgang.launcher.scheduler.cycle import _Cycle


class QueueLine:
    """One queue's pending jobs, offered head by head.

    Args:
        entries: the queue's entries in queue order (sticky preemptors already removed).
        strict: strict-fifo (a failed head blocks the rest).
        tenants: the tenants' histories with admission fair sharing, else None.
    """

    def __init__(
        self,
        entries: list[Entry],
        strict: bool,
        tenants: TenantBook | None,
        known_failure: Callable[[Entry], bool] | None = None,
    ) -> None:
        self.strict = strict
        self.tenants = tenants
        self.known_failure = known_failure
        self.by_tenant: dict[TenantKey, list[Entry]] = {}
        self.ptr: dict[TenantKey, int] = {}
        for e in entries:
            k = key_of(e.spec.name, e.job.tenant) if tenants is not None else ("", "")
            self.by_tenant.setdefault(k, []).append(e)
        for k in self.by_tenant:
            self.ptr[k] = 0
        self.blocked = False

    def head(self) -> Entry | None:
        """The job the queue offers now, or None. Jobs whose answer is already known (a job of
        the same class, at least as strong, failed and nothing changed since: ``known_failure``
        answers them) are passed over here, without a trip through the tournament."""
        while True:
            e = self._first()
            if e is None or self.known_failure is None or not self.known_failure(e):
                return e
            self.advance(e)

    def _first(self) -> Entry | None:
        if self.blocked:
            return None
        best: Entry | None = None
        best_key: tuple[float, int, float, int] | None = None
        for k, lst in self.by_tenant.items():
            i = self.ptr[k]
            if i >= len(lst):
                continue
            e = lst[i]
            score = self.tenants.score(k) if self.tenants is not None else 0.0
            key = (score, -e.job.priority, e.job.submit_time, e.job.seq)
            if best_key is None or key < best_key:
                best, best_key = e, key
        return best

    def advance(self, e: Entry) -> None:
        """``e`` (the head) was tried; the next job becomes head."""
        k = key_of(e.spec.name, e.job.tenant) if self.tenants is not None else ("", "")
        self.ptr[k] += 1

    def rest(self) -> list[Entry]:
        """Every entry not offered yet, in queue order."""
        out = [e for k, lst in self.by_tenant.items() for e in lst[self.ptr[k] :]]
        out.sort(key=lambda e: (-e.job.priority, e.job.submit_time, e.job.seq))
        return out


def run_by_heads(cycle: _Cycle, by_queue: dict[str, list[Entry]]) -> None:
    """Run the order phase head by head (see the module docstring); decisions go to ``cycle``."""
    from labgang.launcher.scheduler.cycle import Outcome

    sticky: list[Entry] = []
    lines: dict[str, QueueLine] = {}
    for name, entries in by_queue.items():
        rest: list[Entry] = []
        for e in entries:
            if e.job.nominated:
                sticky.append(e)
            elif e.unschedulable is not None:
                cycle.pending.append(Pending(e.job.id, e.unschedulable))
            else:
                rest.append(e)
        if rest:
            strict = rest[0].spec.queueing is Queueing.STRICT_FIFO
            # without starvation reservations room only shrinks in a cycle: a known failure holds
            skip = None if strict or cycle.reservations else cycle.known_failure
            lines[name] = QueueLine(rest, strict, cycle.tenants, skip)
    sticky.sort(key=lambda e: (-e.job.priority, e.job.submit_time, e.job.seq))
    for e in sticky:
        cycle._process(e)
    fair = cycle.snapshot.sharing.fair_sharing
    tournament: Tournament | None = None
    if fair:
        book = cycle.state.shares
        assert book is not None
        tournament = Tournament(
            book,
            lambda item: _prio(item),
            lambda item: _req(cycle, item),
        )
        for name, line in lines.items():
            tournament.set_head(name, line.head())
    cycle.on_change.clear()
    while True:
        nxt: Entry | None
        if tournament is not None:
            picked = tournament.next()
            nxt = picked if isinstance(picked, Entry) else None
        else:
            nxt = _classical_next(cycle, lines)
        if nxt is None:
            break
        e = nxt
        line = lines[e.spec.name]
        line.advance(e)
        outcome = cycle._process(e)
        if line.strict and outcome not in (Outcome.ADMITTED, Outcome.UNSCHEDULABLE, Outcome.LIMITED):
            line.blocked = True
            reason = reasons.blocked_reason(e.spec.name, e.job.id)
            for x in line.rest():
                cycle.pending.append(Pending(x.job.id, reason))
        if tournament is not None:
            changed = set(cycle.on_change)
            changed.add(e.spec.name)
            for name in sorted(changed):
                if name in lines:
                    tournament.set_head(name, lines[name].head())
                else:
                    tournament.touch(name)
        cycle.on_change.clear()


def _prio(item: object) -> tuple[int, float, int]:
    assert isinstance(item, Entry)
    return (item.job.priority, item.job.submit_time, item.job.seq)


def _req(cycle: _Cycle, item: object) -> tuple[str, Mapping[str, int]]:
    assert isinstance(item, Entry)
    return (item.spec.name, cycle.state.pending_share_demand(item.spec.name, item.job.request))


def _classical_next(cycle: _Cycle, lines: dict[str, QueueLine]) -> Entry | None:
    best: Entry | None = None
    best_key: tuple[int, int, float, int] | None = None
    for line in lines.values():
        e = line.head()
        if e is None:
            continue
        key = (cycle.height(e), -e.job.priority, e.job.submit_time, e.job.seq)
        if best_key is None or key < best_key:
            best, best_key = e, key
    return best
