"""One scheduling cycle: a pure function from a :class:`Snapshot` to a :class:`CycleResult`.

Phases, in the order :func:`run_cycle` runs them (Kueue's ``schedule()`` in spirit):

1. **nominate** (:mod:`.nominate`): each queue's pending jobs in queue order; unschedulable
   jobs set aside (they never block and never preempt).
2. **reserve** (:mod:`.starvation`): devices reserved for starving gangs.
3. **order**: across queues, a waiting preemptor first, then jobs that fit within their
   queue's nominal quota before jobs that would borrow, then priority, submit time and
   submission order. Best-effort-fifo queues offer every job (a head that does not fit lets
   later jobs try); a strict-fifo queue offers only its head until the head starts.
   The borrow test is re-evaluated when a job comes up, since earlier admissions change it.
4. for each job, **quota fit** then **placement**, both against the cycle's copy; when either
   fails, the **preemption search** (:mod:`.preemption`) with simulate-and-undo and a minimal
   victim set; else a typed pending reason with numbers.
5. **admit on the copy**: an admitted job's usage and devices, a preemptor's usage and its
   reserved devices, and quota held by a waiting head are added to the copy, so later jobs
   of the same cycle see them and nothing is over-admitted.

The function reads no clock, does no I/O, uses no randomness and never iterates a set or
dict whose order could vary: the same snapshot always gives the same decisions. A snapshot
that already reflects a cycle's decisions (admitted jobs running, victims terminating,
preemptors with ``nominated`` set) yields no new admissions or preemptions for them.
"""

from __future__ import annotations

import enum
import heapq
from collections.abc import Iterator

from labgang.launcher.model import JobRequest, Queueing, ReclaimWithinCohort
from labgang.launcher.scheduler import reasons
from labgang.launcher.scheduler.capacity import FreeIndex
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Pending, PendingReason, Preempt
from labgang.launcher.scheduler.nominate import Entry, nominate
from labgang.launcher.scheduler.placement import feasible
from labgang.launcher.scheduler.preemption import find_victims, may_search
from labgang.launcher.scheduler.snapshot import Snapshot
from labgang.launcher.scheduler.starvation import reserve_for_starving
from labgang.launcher.scheduler.state import CycleState, RawPlacement


class Outcome(enum.Enum):
    """What happened to one job in a cycle."""

    ADMITTED = "admitted"
    WAITING = "waiting"            # preempted victims (now or earlier) and waits for them
    FAILED = "failed"              # does not fit, no victims
    UNSCHEDULABLE = "unschedulable"


def run_cycle(snapshot: Snapshot) -> CycleResult:
    """Decide admissions, preemptions and pending reasons for one snapshot.

    Args:
        snapshot: the cluster at one instant (never mutated).

    Returns:
        Every pending job of ``snapshot`` exactly once in ``admitted`` or ``pending``
        (preemptors also in ``preempted``), in the order they were decided.
    """
    return _Cycle(snapshot).run()


class _Cycle:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.state = CycleState(snapshot)
        self.admitted: list[Admit] = []
        self.preempted: list[Preempt] = []
        self.pending: list[Pending] = []
        self.chosen_victims: set[str] = set()
        self.held_queues: set[str] = set()
        self.held: dict[tuple[str, str], int] = {}  # usage added for waiting jobs, per (queue, resource)
        self.reservations: dict[str, list[int]] = {}
        self.epoch = 0  # bumped whenever devices become free for real; caches key on it
        self._place_fails: dict[tuple, tuple[int, list[tuple[int, int]]]] = {}
        self._search_fails: dict[tuple, tuple[int, list[tuple[int, float, int, int]]]] = {}
        self._reason_cache: dict[tuple, PendingReason] = {}

    # --- orchestration ---------------------------------------------------------------------------

    def run(self) -> CycleResult:
        by_queue, orphans = nominate(self.snapshot, self.state)
        self.pending.extend(orphans)
        self.reservations = reserve_for_starving(
            self.state, [e for entries in by_queue.values() for e in entries])
        for entry, queue_entries, position in self._order(by_queue):
            outcome = self._process(entry)
            if entry.spec.queueing is Queueing.STRICT_FIFO:
                if outcome in (Outcome.ADMITTED, Outcome.UNSCHEDULABLE):
                    self._offer_next(queue_entries, position + 1)
                else:
                    self._block(entry, queue_entries, position + 1)
        return CycleResult(tuple(self.admitted), tuple(self.preempted), tuple(self.pending))

    def _order(self, by_queue: dict[str, list[Entry]]) -> Iterator[tuple[Entry, list[Entry], int]]:
        """Yield ``(entry, its queue's entries, its position)`` in admission order."""
        self._heap: list[tuple] = []
        for entries in by_queue.values():
            if not entries:
                continue
            if entries[0].spec.queueing is Queueing.STRICT_FIFO:
                self._offer_next(entries, 0)
            else:
                for i in range(len(entries)):
                    self._push(entries, i)
        heap = self._heap
        while heap:
            key = heapq.heappop(heap)
            entries, i = key[-2].entries, key[-1]
            e = entries[i]
            if key[1] == 0 and self._borrows(e):
                heapq.heappush(heap, (key[0], 1) + key[2:])  # usage grew: now it would borrow
                continue
            yield e, entries, i

    def _push(self, entries: list[Entry], i: int) -> None:
        e = entries[i]
        j = e.job
        heapq.heappush(self._heap, (0 if e.sticky else 1, 1 if self._borrows(e) else 0,
                                    -j.priority, j.submit_time, j.seq, j.id, _Ref(entries), i))

    def _borrows(self, e: Entry) -> bool:
        req = e.job.request
        return self.state.quota.would_borrow(e.spec.name, req.resource, req.total)

    def _offer_next(self, entries: list[Entry], start: int) -> None:
        if start < len(entries):
            self._push(entries, start)

    def _block(self, head: Entry, entries: list[Entry], start: int) -> None:
        reason = reasons.blocked_reason(head.spec.name, head.job.id)
        for e in entries[start:]:
            self.pending.append(Pending(e.job.id, e.unschedulable or reason))

    # --- one job ---------------------------------------------------------------------------------

    def _process(self, e: Entry) -> Outcome:
        if e.unschedulable is not None:
            self.pending.append(Pending(e.job.id, e.unschedulable))
            return Outcome.UNSCHEDULABLE
        own = self.reservations.pop(e.job.id, None)
        if own:
            self.state.devices.unreserve(own, e.job.id)
            self.epoch += 1
        outcome = self._try(e)
        if outcome is Outcome.FAILED and own:
            self.reservations[e.job.id] = self.state.devices.reserve(own, e.job.id)
        return outcome

    def _try(self, e: Entry) -> Outcome:
        state, job, spec = self.state, e.job, e.spec
        req, q = job.request, spec.name
        # quota fit, then placement
        quota_ok = state.quota_fits(q, req)
        if quota_ok:
            raw = self._place(req)
            if raw is not None:
                placement = state.assume(job.id, q, req, raw)
                self.admitted.append(Admit(job.id, placement))
                return Outcome.ADMITTED
        # a preemptor whose earlier victims are still leaving: does it fit once they are gone?
        live = [v for v in e.live_victims if v not in self.chosen_victims]
        if live:
            with state.without(live):
                raw = state.place(req) if state.quota_fits(q, req) else None
            if raw is not None:
                self._wait_for(e, live, raw)
                return Outcome.WAITING
        # preemption search
        searchable = may_search(state, spec, job)
        if searchable and not self._search_known_to_fail(e):
            with state.without(live):
                found = find_victims(state, spec, job, self.chosen_victims)
            if found is not None:
                victims, raw = found
                self.preempted.append(Preempt(job.id, tuple(live + victims), self._preempt_text(e, victims)))
                self._wait_for(e, live + victims, raw)
                return Outcome.WAITING
            if not live:
                self._record_search_fail(e)
        # stays pending
        if not quota_ok:
            reason = reasons.quota_reason(state.quota, q, req, self.held.get((q, req.resource), 0))
            if searchable and spec.reclaim_within_cohort is not ReclaimWithinCohort.ANY:
                self._hold_quota(e)
        else:
            reason = self._capacity_reason(req)
        self.pending.append(Pending(job.id, reason))
        return Outcome.FAILED

    def _wait_for(self, e: Entry, victims: list[str], raw: RawPlacement) -> None:
        """The preemptor keeps its room: its usage is counted and its devices reserved."""
        req = e.job.request
        self._add_held(e.spec.name, req.resource, req.total)
        self.state.devices.reserve([d for _, ds in raw for d in ds], e.job.id)
        self.chosen_victims.update(victims)
        self.pending.append(Pending(e.job.id, reasons.waiting_reason(victims)))

    def _hold_quota(self, e: Entry) -> None:
        """Kueue's "reserve capacity for an unreclaimable preempt": a head that found no victims
        and whose queue cannot always reclaim later holds its queue's idle quota this cycle."""
        q, req = e.spec.name, e.job.request
        if q in self.held_queues:
            return
        self.held_queues.add(q)
        quota = self.state.quota
        u, n = quota.usage(q, req.resource), quota.nominal(q, req.resource)
        if u + req.total > n:
            limit = quota.borrowing_limit(q, req.resource)
            held = req.total if limit is None else min(req.total, n + limit - u)
        else:
            held = min(req.total, n - u)
        if held > 0:
            self._add_held(q, req.resource, held)

    def _add_held(self, queue: str, res: str, n: int) -> None:
        self.state.quota.add(queue, res, n)
        self.held[(queue, res)] = self.held.get((queue, res), 0) + n

    # --- placement with a failure cache --------------------------------------------------------

    def _place(self, req: JobRequest) -> RawPlacement | None:
        key = (req.resource, req.gpu_model, req.nodes)
        known = self._place_fails.get(key)
        if known is not None and known[0] == self.epoch:
            for p, w in known[1]:
                if req.per_worker >= p and req.workers >= w:
                    return None
        raw = self.state.place(req)
        if raw is None:
            if known is None or known[0] != self.epoch:
                known = (self.epoch, [])
                self._place_fails[key] = known
            known[1].append((req.per_worker, req.workers))
        return raw

    def _search_key(self, e: Entry) -> tuple:
        req = e.job.request
        return (e.spec.name, req.resource, req.gpu_model, req.nodes)

    def _search_known_to_fail(self, e: Entry) -> bool:
        """True when a job of the same queue, at least as strong and no larger, found no victims.

        Valid because within one cycle room only shrinks: usage grows, victims get taken.
        """
        if e.live_victims:
            return False
        known = self._search_fails.get(self._search_key(e))
        if known is None or known[0] != self.epoch:
            return False
        j = e.job
        return any(j.priority <= prio and j.submit_time >= submit and j.request.per_worker >= p
                   and j.request.workers >= w for prio, submit, p, w in known[1])

    def _record_search_fail(self, e: Entry) -> None:
        key = self._search_key(e)
        known = self._search_fails.get(key)
        if known is None or known[0] != self.epoch:
            known = (self.epoch, [])
            self._search_fails[key] = known
        j = e.job
        known[1].append((j.priority, j.submit_time, j.request.per_worker, j.request.workers))

    # --- reasons -----------------------------------------------------------------------------------

    def _capacity_reason(self, req: JobRequest) -> PendingReason:
        ix = self.state.index(req)
        key = (req, self.epoch, ix.total)
        cached = self._reason_cache.get(key)
        if cached is not None:
            return cached
        reason = reasons.capacity_reason(ix.total, ix.largest(), req)
        holders = self._reservation_holders(req, ix)
        if holders:
            reason = reasons.reserved_reason(holders)
        self._reason_cache[key] = reason
        return reason

    def _reservation_holders(self, req: JobRequest, ix: FreeIndex) -> list[str]:
        """Holders of reservations without which ``req`` would fit now (empty when none)."""
        book = self.state.devices
        model = req.gpu_model.lower() if req.gpu_model else None
        reserved = [d for d in book.by_resource.get(req.resource, ())
                    if book.reserved_for[d] is not None and book.owner[d] is None
                    and (model is None or model in book.model[d])]
        if not reserved:
            return []
        wider = FreeIndex(len(book.node_names), [d for n in ix.free for d in n] + reserved, book.node_of)
        if not feasible(wider, req.workers, req.per_worker, req.nodes):
            return []
        return sorted({book.reserved_for[d] for d in reserved if book.reserved_for[d]})

    def _preempt_text(self, e: Entry, victims: list[str]) -> str:
        running = self.state.running
        parts = [f"{v} ({running[v].queue}, priority {running[v].priority})" for v in victims]
        req = e.job.request
        return (f"{e.job.id} (queue {e.spec.name}, priority {e.job.priority}) needs "
                f"{reasons.describe_request(req)}; stopping " + ", ".join(parts))


class _Ref:
    """Wraps a queue's entry list inside heap keys so it never takes part in comparisons."""

    __slots__ = ("entries",)

    def __init__(self, entries: list[Entry]) -> None:
        self.entries = entries

    def __lt__(self, other: object) -> bool:  # heap keys are unique before this field
        return False
