"""The cycle driver: one definition of how a scheduling cycle is fed and how its decisions are
carried out, shared by the coordinator (``coordinator/scheduling.py``: real clock, real agents,
the store) and ``labgang simulate`` (``simulate/engine.py``: virtual clock, simulated ranks).

It owns what both did alike:

- **Snapshot gating**: the jobs holding devices, and the admissible pending jobs through the
  array gate (``lifecycle/arrays.py``: the ``%N`` cap and the window), in submission order, seen
  through ``lifecycle/view.py``'s views;
- **tenant sampling** (admission fair sharing) before each cycle, from the accounting records
  (``lifecycle/cycle_memory.py``);
- **the burst**: cycles at one instant until one decides nothing new
  (:func:`~labgang.launcher.lifecycle.view.decided_something`), gangs admitted by the burst never
  its victims, then a wake for the instant the first pending job starts starving.

The differences are behind small typed seams: a :class:`Clock`, an :class:`EffectExecutor`
(applies a lifecycle event and carries out its typed effects: the coordinator writes the store
and commands agents, the simulator simulates ranks), the :class:`Cluster` facts a snapshot needs,
and an optional :class:`CycleObserver` (metrics and logs; the simulator's trace).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass
from operator import attrgetter, is_
from typing import Protocol

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.arrays import ArrayGate, follow_reasons, gate_pending, queue_caps
from labgang.launcher.lifecycle.cycle_memory import CycleMemory, held_by_attempts
from labgang.launcher.lifecycle.machine import Lifecycle
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.rules import next_wake
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.lifecycle.view import decided_something, pending_job, running_job
from labgang.launcher.model import CohortSpec, GpuSharing, QueueSpec, SharingPolicy
from labgang.launcher.scheduler.capacity import RunningChange
from labgang.launcher.scheduler.cycle import run_cycle
from labgang.launcher.scheduler.decisions import CycleResult
from labgang.launcher.scheduler.snapshot import Node, PendingJob, RunningJob, Snapshot, TenantUsage

_HOLDING = frozenset(s for s in JobState if s.holds_devices)
"""The states in which a job holds devices (``JobState.holds_devices``, as a set to test against)."""

_SEQ = attrgetter("seq")

_NO_DECISIONS = CycleResult((), (), ())


class Clock(Protocol):
    """The driver's time: seconds (unix time in the coordinator, scenario time in the simulator)."""

    def __call__(self) -> float: ...


class EffectExecutor(Protocol):
    """Applies lifecycle events to the model and carries out the typed effects they return."""

    def apply(self, event: ev.Event) -> list[fx.Effect]:
        """Apply ``event`` to the lifecycle model, carry out its effects, and return them."""
        ...

    def wake_at(self, when: float) -> None:
        """Run the scheduler again at ``when`` (seconds, the driver's clock)."""
        ...


class Cluster(Protocol):
    """What a snapshot needs besides the jobs: the nodes, the queue configuration, tenants."""

    def nodes(self) -> tuple[Node, ...]:
        """Every node with a known inventory and its allocatable devices, in name order."""
        ...

    def queues(self) -> tuple[QueueSpec, ...]:
        """Every queue's configuration."""
        ...

    def cohorts(self) -> tuple[CohortSpec, ...]:
        """Every cohort's configuration."""
        ...

    def sharing(self) -> SharingPolicy:
        """Fair sharing and admission fair sharing settings."""
        ...

    def gpu_sharing(self) -> GpuSharing:
        """The ``[sharing]`` table: which nodes' cards may be shared by shards or MPS (docs/sharing.md)."""
        ...

    def unavailable(self, holding: Sequence[JobRecord]) -> frozenset[str]:
        """Device UUIDs not offered to new jobs; ``holding``: the jobs holding devices now."""
        ...

    def tenant(self, spec: JobSpec) -> str | None:
        """A job's tenant (None: its queue's default tenant)."""
        ...


class CycleObserver(Protocol):
    """Told what each cycle decided, after its effects were carried out (metrics, logs, a trace)."""

    def cycle(self, snapshot: Snapshot, result: CycleResult, effects: Sequence[fx.Effect], seconds: float) -> None:
        """A cycle ran over ``snapshot``: ``seconds`` covers building the snapshot and deciding."""
        ...

    def gated(self, result: CycleResult) -> None:
        """No cycle ran (no job let through the array gate), but capped array tasks got a reason."""
        ...


@dataclass(slots=True, unsafe_hash=True)
class Burst:
    """What one :meth:`CycleDriver.burst` did.

    A value, not changed after construction; equality and hash by fields (not ``frozen`` only for
    its cheaper ``__init__``).

    Attributes:
        admitted: gangs admitted (their dispatch is an effect already carried out).
        cycles: cycles run.
        settled: False when it stopped at ``max_cycles`` while cycles still decided new things.
    """

    admitted: int
    cycles: int
    settled: bool


Decide = Callable[[Snapshot], CycleResult]
"""The scheduler: ``run_cycle``, or a wrapper around it (the simulator renames jobs for it)."""

Remembered = Callable[[list[TenantUsage], bool], None]
"""Told the tenant histories a cycle changed, and whether a sample was taken (then all changed)."""


class CycleDriver:
    """Feeds the scheduler from the lifecycle model and hands its decisions back, in bursts.

    Args:
        model: the lifecycle model whose jobs are scheduled (read only here: every change goes
            through ``executor``).
        clock: the driver's time.
        executor: applies the ``CycleDecided`` events and carries out their effects.
        cluster: nodes, queues, cohorts, sharing settings, unavailable devices, tenants.
        memory: holds of the last cycle and the tenants' usage histories.
        max_cycles: the most cycles one burst runs.
        decide: the scheduler (default ``run_cycle``).
        remembered: told what the cycle memory's histories changed (the coordinator persists it).
        observer: told about each cycle.
        cache_views: keep each running job's view until its status, spec or ranks change (its
            rank changes must be reported with :meth:`rank_changed`); without it every snapshot
            builds them anew.
        track_jobs: keep the jobs holding devices and the pending ones up to date from the jobs
            reported changed (:meth:`job_changed`, :meth:`rank_changed`) instead of scanning
            every active job each cycle: the caller must report every job an effect names (and
            every job it changes without effects). Needs ``cache_views``. It also hands a pending
            job's unchanged view again (:meth:`_pending_views`) and says how each new running
            tuple differs from the last (``running_change``, for the scheduler's memos).
    """

    verify_tracking = False
    """Tests set it: each tracked split is compared with a full scan (``AssertionError`` on a
    difference: a change that was not reported)."""

    def __init__(
        self,
        model: Lifecycle,
        clock: Clock,
        executor: EffectExecutor,
        cluster: Cluster,
        memory: CycleMemory,
        *,
        max_cycles: int,
        decide: Decide = run_cycle,
        remembered: Remembered | None = None,
        observer: CycleObserver | None = None,
        cache_views: bool = False,
        track_jobs: bool = False,
    ) -> None:
        self.model = model
        self.clock = clock
        self.executor = executor
        self.cluster = cluster
        self.memory = memory
        self.max_cycles = max_cycles
        self.decide = decide
        self.remembered = remembered
        self.observer = observer
        self.cycles = 0
        self._cache_views = cache_views
        # by job id: (the status and spec it was built from, the status's change count, ranks, view)
        self._views: dict[str, tuple[JobStatus, JobSpec, int, int, RunningJob]] = {}
        self._ranks_changed: set[str] = set()
        self._capacity: tuple[tuple[Node, ...], dict[str, int]] | None = None
        self._caps: tuple[Sequence[QueueSpec], dict[str, dict[str, int]]] | None = None  # :meth:`_caps_of`
        # the last snapshot's running views: handed out again (the same tuple) while they are the
        # same objects, so the scheduler's per-cycle memos can tell "nothing changed" by identity
        self._running: tuple[RunningJob, ...] = ()
        self._track = track_jobs and cache_views
        self._dirty: set[str] = set()  # jobs reported changed since the last split
        self._holding: dict[str, JobRecord] = {}  # tracked: jobs holding devices, by id
        self._pending: dict[str, JobRecord] = {}  # tracked: pending jobs, by id
        # tracked: ``_pending`` in submission order, kept until a job begins or stops waiting (a
        # job's ``seq`` never changes); None: to sort
        self._pending_sorted: list[JobRecord] | None = None
        # tracked: the holding jobs in submission order, their ``seq`` and running views (None: to
        # build), kept in step by insertion and removal; ``_holding_list``: the copy handed out
        self._hold_jobs: list[JobRecord] = []
        self._hold_seqs: list[int] = []
        self._hold_views: list[RunningJob | None] = []
        self._holding_list: list[JobRecord] = []
        self._members_changed = False  # the holding jobs changed since the last running tuple
        self._view_check: set[str] = set()  # tracked: jobs reported changed since the last snapshot
        # tracked: the running views gone and new since the last running tuple, and the last
        # change (the previous tuple, the new one, the views gone, the views new): what
        # :func:`~labgang.launcher.scheduler.capacity.note_running_change` is told
        self._views_gone: list[RunningJob] = []
        self._views_new: list[RunningJob] = []
        self.running_change: RunningChange | None = None
        # tracked: the last snapshot's pending jobs by id, with what their views were built from and
        # their view per held-quota flag (:meth:`_pending_views`)
        self._pending_cache: dict[
            str, tuple[JobRecord, JobSpec, JobStatus, tuple[object, ...], dict[bool, PendingJob]]
        ] = {}
        if self._track:
            self._dirty.update(model.jobs)

    # ----- the snapshot ---------------------------------------------------------------------

    def rank_changed(self, job_id: str) -> None:
        """A rank of job ``job_id`` changed (a ``SaveRank`` effect): its cached view is stale."""
        self._ranks_changed.add(job_id)
        self._dirty.add(job_id)

    def job_changed(self, job_id: str) -> None:
        """Job ``job_id`` may have changed (an effect names it: submitted, saved, finished...):
        with ``track_jobs``, the next split looks at it again."""
        self._dirty.add(job_id)

    def _tracked(self) -> tuple[list[JobRecord], list[JobRecord]]:
        """The jobs holding devices and the pending ones, in submission order, updated for the
        jobs reported changed (the work grows with them, not with the active jobs: a job that
        starts or stops holding devices is inserted or removed at its ``seq`` by bisection)."""
        if self._dirty:
            jobs, holding, pending = self.model.jobs, self._holding, self._pending
            pending_state = JobState.PENDING
            members = False
            for job_id in self._dirty:
                was = holding.pop(job_id, None)
                waited = pending.pop(job_id, None)
                job = jobs.get(job_id)
                if job is not None:
                    state = job.status.state
                    if state in _HOLDING:
                        holding[job_id] = job
                    elif state is pending_state:
                        pending[job_id] = job
                if pending.get(job_id) is not waited:
                    self._pending_sorted = None  # a job began or stopped waiting: sorted again
                if job is not None and was is job and holding.get(job_id) is job:
                    continue  # still holding, in its place (its view is checked)
                if was is not None:
                    self._hold_remove(was)
                    members = True
                if job is not None and holding.get(job_id) is job:
                    self._hold_insert(job)
                    members = True
            self._view_check |= self._dirty
            self._dirty.clear()
            if members:
                self._holding_list = list(self._hold_jobs)
                self._members_changed = True
        if self._pending_sorted is None:
            self._pending_sorted = sorted(self._pending.values(), key=_SEQ)
        return self._holding_list, self._pending_sorted

    def _hold_insert(self, job: JobRecord) -> None:
        """Put ``job`` among the holding jobs at its ``seq`` (jobs' ``seq`` are distinct; an equal
        one would go first: ``verify_tracking`` compares the order with a full sort)."""
        seqs = self._hold_seqs
        i = bisect_left(seqs, job.seq)
        while i < len(seqs) and seqs[i] == job.seq:
            i += 1
        self._hold_jobs.insert(i, job)
        seqs.insert(i, job.seq)
        self._hold_views.insert(i, None)

    def _hold_remove(self, job: JobRecord) -> None:
        """Take ``job`` (the very record) out of the holding jobs."""
        jobs = self._hold_jobs
        i = bisect_left(self._hold_seqs, job.seq)
        while jobs[i] is not job:
            i += 1
        view = self._hold_views[i]
        if view is not None:
            self._views_gone.append(view)
        del jobs[i], self._hold_seqs[i], self._hold_views[i]

    def split(self, now: float, nodes: tuple[Node, ...]) -> tuple[list[JobRecord], ArrayGate]:
        """The jobs holding devices (submission order) and the :class:`ArrayGate` over the
        admissible pending ones at ``now``: what a snapshot is built from. Cheap next to the
        snapshot (no views), so a burst builds the snapshot only when some job is let through."""
        holding: list[JobRecord] = []
        waiting: list[JobRecord] = []
        admissible = self.model.admissible
        pending_state = JobState.PENDING
        if self._track:
            holding, pending = self._tracked()
            waiting = [job for job in pending if admissible(job, now)]
            if self.verify_tracking:
                full = sorted(self.model.jobs.values(), key=_SEQ)
                assert holding == [j for j in full if j.status.state in _HOLDING], "holding jobs not tracked"
                assert pending == [j for j in full if j.status.state is pending_state], "pending jobs not tracked"
        else:
            for job in sorted(self.model.jobs.values(), key=_SEQ):
                state = job.status.state
                if state in _HOLDING:
                    holding.append(job)
                elif state is pending_state and admissible(job, now):
                    waiting.append(job)
        return holding, gate_pending(waiting, holding, self._capacity_of(nodes), self._caps_of(self.cluster.queues()))

    def _caps_of(self, queues: Sequence[QueueSpec]) -> dict[str, dict[str, int]]:
        """:func:`queue_caps` of ``queues`` (remembered while the same queues are given; the gate
        only reads it)."""
        if self._caps is not None and self._caps[0] is queues:
            return self._caps[1]
        caps = queue_caps(queues)
        self._caps = (queues, caps)
        return caps

    def _capacity_of(self, nodes: tuple[Node, ...]) -> dict[str, int]:
        """Resource name → devices of it in ``nodes`` (remembered while the same nodes are given)."""
        if self._capacity is not None and self._capacity[0] is nodes:
            return self._capacity[1]
        capacity: dict[str, int] = {}
        for node in nodes:
            for device in node.devices:
                capacity[device.resource] = capacity.get(device.resource, 0) + 1
        self._capacity = (nodes, capacity)
        return capacity

    def snapshot_of(self, now: float, nodes: tuple[Node, ...], holding: list[JobRecord], gate: ArrayGate) -> Snapshot:
        """The scheduler's snapshot at ``now`` of :meth:`split`'s result."""
        cluster, memory = self.cluster, self.memory
        tenant = cluster.tenant
        if self._track:
            running_views = self._tracked_views(holding)
        elif self._cache_views:
            views, changed = self._views, self._ranks_changed
            running: list[RunningJob] = []
            for job in holding:
                # :meth:`_running_view`, its cache hit inlined: this runs for every job holding
                # devices in every cycle
                st = job.status
                hit = views.get(job.id)
                if (
                    hit is None
                    or hit[0] is not st
                    or hit[1] is not job.spec
                    or hit[2] != st.changes
                    or hit[3] != len(job.ranks)
                    or job.id in changed
                ):
                    running.append(self._running_view(job))
                else:
                    running.append(hit[4])
            last = self._running
            if len(last) == len(running) and all(map(is_, last, running)):
                running_views = last
            else:
                running_views = self._running = tuple(running)
                if len(views) > 2 * len(running_views) + 64:  # forget the views of jobs gone
                    kept = {j.id for j in holding}
                    self._views = {i: v for i, v in views.items() if i in kept}
                    self._ranks_changed &= kept  # a job not holding devices has no view to mark stale
        else:
            running_views = tuple(running_job(job, tenant(job.spec)) for job in holding)
        held = memory.held
        if self._track:
            pending = self._pending_views(gate.fed, held)
        else:
            pending = [pending_job(job, tenant(job.spec), job.id in held) for job in gate.fed]
        return Snapshot(
            now=now,
            nodes=nodes,
            queues=cluster.queues(),
            running=running_views,
            pending=tuple(pending),
            unavailable=cluster.unavailable(holding),
            cohorts=cluster.cohorts(),
            sharing=cluster.sharing(),
            tenants=memory.tenants(),
            gpu_sharing=cluster.gpu_sharing(),
        )

    def _tracked_views(self, holding: list[JobRecord]) -> tuple[RunningJob, ...]:
        """The running views of ``holding`` (a :meth:`_tracked` list): the last tuple again when
        no job was reported changed since, else the changed jobs' views checked
        (:meth:`_running_view`) and the others' taken from the cache."""
        check, slots = self._view_check, self._hold_views
        changed = self._members_changed
        if check:
            hold, seqs, by_id, view = self._hold_jobs, self._hold_seqs, self._holding, self._running_view
            for job_id in check:
                job = by_id.get(job_id)
                if job is None:
                    continue  # not holding devices: no view
                i = bisect_left(seqs, job.seq)
                while hold[i] is not job:
                    i += 1
                v = view(job)
                old = slots[i]
                if old is not v:
                    if old is not None:
                        self._views_gone.append(old)
                    self._views_new.append(v)
                    slots[i] = v
                    changed = True
            check.clear()
        if changed:
            views, before = self._views, self._running
            self._running = tuple(slots)  # type: ignore[arg-type]  # every slot of a holding job is filled above
            self._members_changed = False
            self.running_change = (before, self._running, self._views_gone, self._views_new)
            self._views_gone, self._views_new = [], []
            if len(views) > 2 * len(self._running) + 64:  # forget the views of jobs gone
                kept = set(self._holding)
                self._views = {i: v for i, v in views.items() if i in kept}
                self._ranks_changed &= kept
        if self.verify_tracking:
            fresh = tuple(running_job(job, self.cluster.tenant(job.spec)) for job in holding)
            assert self._running == fresh, "running views not up to date"
        return self._running

    def _pending_views(self, fed: Sequence[JobRecord], held: Container[str]) -> list[PendingJob]:
        """``pending_job`` of each job of ``fed``: an earlier snapshot's view again (the very object)
        for a job whose record, spec and status object are the ones it was built from and whose
        status fields the view shows (submit time, pending since, nominated victims, hold) are
        equal, one view kept per held-quota flag (a waiting head that held its queue's idle quota
        one cycle holds none the next: its flag alternates); a job's status also carries its
        pending reason, rewritten by most cycles, so its change count cannot say this. Only this
        snapshot's jobs are kept."""
        last, kept = self._pending_cache, {}
        out: list[PendingJob] = []
        tenant = self.cluster.tenant
        for job in fed:
            st = job.status
            shown = (st.submit_time, st.pending_since, st.nominated, st.hold, st.hold_admin)
            hit = last.get(job.id)
            if hit is None or hit[0] is not job or hit[1] is not job.spec or hit[2] is not st or hit[3] != shown:
                hit = (job, job.spec, st, shown, {})
            kept[job.id] = hit
            flag = job.id in held
            view = hit[4].get(flag)
            if view is None:
                view = hit[4][flag] = pending_job(job, tenant(job.spec), flag)
            out.append(view)
        self._pending_cache = kept
        if self.verify_tracking:
            fresh = [pending_job(job, tenant(job.spec), job.id in held) for job in fed]
            assert out == fresh, "pending views not up to date"
        return out

    def _running_view(self, job: JobRecord) -> RunningJob:
        """``running_job`` of ``job``, built again only when the job changed: its status (the record
        counts its changes), its spec, or one of its ranks (:meth:`rank_changed`)."""
        st = job.status
        hit = self._views.get(job.id)
        if (
            hit is None
            or hit[0] is not st
            or hit[1] is not job.spec
            or hit[2] != st.changes
            or hit[3] != len(job.ranks)
            or job.id in self._ranks_changed
        ):
            self._ranks_changed.discard(job.id)
            view = running_job(job, self.cluster.tenant(job.spec))
            self._views[job.id] = (st, job.spec, st.changes, len(job.ranks), view)
            return view
        return hit[4]

    def gated(self, now: float) -> tuple[Snapshot, ArrayGate]:
        """The snapshot a cycle at ``now`` would see (sampling tenants first) and the gate that
        chose its array tasks."""
        self.sample(now)
        nodes = self.cluster.nodes()
        holding, gate = self.split(now, nodes)
        return self.snapshot_of(now, nodes, holding, gate), gate

    # ----- tenants --------------------------------------------------------------------------

    def sample(self, now: float) -> bool:
        """Admission fair sharing: take every sampling instant up to ``now`` with the devices
        held now (before anything at ``now`` changes them); True when one was taken."""
        memory = self.memory
        if memory.policy is None or not memory.due(now):
            return False
        memory.sample(now, held_by_attempts(self.model.jobs.values(), self.cluster.tenant))
        if self.remembered is not None:
            self.remembered([], True)
        return True

    # ----- the burst ------------------------------------------------------------------------

    def burst(self) -> Burst:
        """Run cycles at the clock's instant until one decides nothing new (or ``max_cycles``);
        then ask the executor to wake the scheduler when the first pending job starts starving."""
        admitted = cycles = 0
        settled = False
        burst: frozenset[str] = frozenset()  # gangs admitted by this burst's cycles: never its victims
        pending: tuple[PendingJob, ...] = ()  # the last cycle's (for the starvation wake)
        now = self.clock()
        queues = self.cluster.queues()
        for _ in range(self.max_cycles):
            now = self.clock()
            started = time.perf_counter()
            self.sample(now)
            nodes = self.cluster.nodes()
            holding, gate = self.split(now, nodes)
            if not gate.fed:  # the snapshot would have no pending job: no cycle (and no views built)
                pending = ()
                if gate.capped:  # every waiting task is over its array's cap: say so
                    result = follow_reasons(gate, _NO_DECISIONS)
                    self.executor.apply(ev.CycleDecided(now, result))
                    if self.observer is not None:
                        self.observer.gated(result)
                settled = True
                break
            snapshot = self.snapshot_of(now, nodes, holding, gate)
            pending = snapshot.pending
            queues = snapshot.queues
            result = follow_reasons(gate, self.decide(snapshot))
            seconds = time.perf_counter() - started
            had_held = bool(self.memory.held)
            changed = self.memory.after_cycle(result)
            if self.remembered is not None and changed:
                self.remembered(changed, False)
            self.cycles += 1
            cycles += 1
            effects = self.executor.apply(ev.CycleDecided(now, result, burst))
            if self.observer is not None:
                self.observer.cycle(snapshot, result, effects, seconds)
            dispatched = [e.job.id for e in effects if isinstance(e, fx.Dispatch)]
            admitted += len(dispatched)
            burst |= frozenset(dispatched)
            if not decided_something(result, effects, had_held):
                settled = True
                break
        starving_at = next_wake(pending, queues, now)
        if starving_at is not None:
            self.executor.wake_at(starving_at)
        return Burst(admitted, cycles, settled)
