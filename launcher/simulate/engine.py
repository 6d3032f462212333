"""The discrete-event simulation behind ``labgang simulate``.

A simulated clock, no processes, no sleeps: the same :func:`run_cycle` the coordinator
runs decides every admission and preemption. Semantics (``docs/scenarios.md``):

- At one instant, all its events are applied first (exits and victim stops, then
  submissions in file order), then the scheduler runs until a cycle decides nothing new;
  events created at that instant (a victim with ``grace = 0``) are applied the same way.
- A preempted job gets SIGTERM, keeps its devices for ``grace`` seconds, then goes back to
  its queue with its original submit time and runs its full ``duration`` again when
  readmitted; if its duration ends during the grace period it has finished instead.
- A pending job of a queue with ``starvation_after`` wakes the scheduler when it starts
  starving (the coordinator has a timer for this), so its reservation takes effect then.
- ``running = true`` jobs are placed at t=0 as the scheduler would place them, in order of
  their ``submit`` (their admission time), then file order.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler import tenants as afs
from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.decisions import CycleResult, PendingReason
from labgang.launcher.scheduler.placement import place
from labgang.launcher.scheduler.snapshot import PendingJob, Placement, RankPlacement, RunningJob, Snapshot, TenantUsage
from labgang.launcher.simulate.scenario import JobModel, Scenario, ScenarioError

MAX_CYCLES_PER_INSTANT = 10_000
"""A guard against a scheduler that keeps deciding new things at one instant."""

_EXIT, _SUBMIT = 0, 1  # event classes: exits and stops before submissions at one instant


@dataclass
class SimJob:
    """One job's life in the simulation.

    Attributes:
        spec: the job's table from the file.
        seq: file order.
        priority: integer priority.
        request: what it asks the scheduler for.
        state: "new" (not yet submitted), "pending", "running" or "finished".
        pending_since: submit time, or the time it was last requeued, seconds.
        admit_time: start of its current admission, seconds.
        admit_seq: admission order (tie-break for "most recently admitted").
        placement: devices of its current admission.
        terminating: told to stop, still holding its devices.
        nominated: victims it waits for (as a preemptor).
        epoch: bumped at each admission and requeue, so stale events are ignored.
        preempted: preempted at least once.
        end_time: when it finished.
        first_admit: its first admission time.
        waits: seconds pending before each admission: submit to first admission, then each
            requeue to the readmission that follows (for wait statistics; a ``running = true``
            job has no entry for its initial placement).
        device_seconds: device-seconds used so far (finished admissions).
        reason: its latest pending reason.
    """

    spec: JobModel
    seq: int
    priority: int
    request: JobRequest
    state: str = "new"
    pending_since: float = 0.0
    admit_time: float = 0.0
    admit_seq: int = 0
    placement: Placement = ()
    terminating: bool = False
    nominated: tuple[str, ...] = ()
    epoch: int = 0
    preempted: bool = False
    end_time: float | None = None
    first_admit: float | None = None
    waits: list[float] = field(default_factory=list)
    device_seconds: float = 0.0
    reason: PendingReason | None = None

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def held(self) -> JobRequest:
        """The request at the size it runs with: an elastic gang counts as a gang of its started size."""
        if self.request.elastic and self.placement:
            return self.request.at_size(len(self.placement))
        return self.request


Tracer = Callable[[dict[str, Any]], None]


@dataclass
class Simulation:
    """Runs one scenario; call :meth:`step_until` / :meth:`run` and read the state.

    Args:
        scenario: the validated scenario.
        trace: called with one JSON-able dict per event (``--trace``), or None.
    """

    scenario: Scenario
    trace: Tracer | None = None
    now: float = 0.0
    jobs: dict[str, SimJob] = field(default_factory=dict)
    cycles: int = 0
    _events: list[tuple[float, int, int, str, str, int]] = field(default_factory=list)
    _order: int = 0
    _admissions: int = 0
    _invariant_hooks: list[Callable[[Simulation], None]] = field(default_factory=list)
    _cycle_hooks: list[Callable[[Snapshot, CycleResult], None]] = field(default_factory=list)
    held: set[str] = field(default_factory=set)  # jobs that held idle quota in the last cycle
    tenant_usage: dict[afs.TenantKey, TenantUsage] = field(default_factory=dict)
    _last_sample: float = 0.0

    def __post_init__(self) -> None:
        f = self.scenario.file
        self.tenant_usage = {(t.queue, t.name): t for t in afs.initial(self.scenario.tenants)}
        for i, j in enumerate(f.jobs):
            self.jobs[j.id] = SimJob(j, i, self.scenario.priorities[j.id], j.request())
        self._place_running()
        for sj in self.jobs.values():
            if not sj.spec.running:
                self._push(max(0.0, sj.spec.submit), _SUBMIT, "submit", sj.id, 0)

    # --- events ----------------------------------------------------------------------------------

    def _push(self, t: float, cls: int, kind: str, job_id: str, epoch: int) -> None:
        self._order += 1
        heapq.heappush(self._events, (t, cls, self._order, kind, job_id, epoch))

    def _emit(self, event: str, **fields: Any) -> None:
        if self.trace is not None:
            self.trace({"t": self.now, "event": event, **fields})

    def next_time(self) -> float | None:
        """Time of the next event, or None when nothing is left."""
        return self._events[0][0] if self._events else None

    def add_invariant_hook(self, hook: Callable[[Simulation], None]) -> None:
        """Call ``hook(sim)`` after every cycle and every instant (invariant checks)."""
        self._invariant_hooks.append(hook)

    def add_cycle_hook(self, hook: Callable[[Snapshot, CycleResult], None]) -> None:
        """Call ``hook(snapshot, result)`` after every scheduling cycle, before its decisions apply."""
        self._cycle_hooks.append(hook)

    def run_instant(self) -> None:
        """Apply every event of the next instant and schedule until nothing new is decided."""
        t = self.next_time()
        if t is None:
            return
        self._sample_tenants(t)
        self.now = t
        while self._events and self._events[0][0] == t:
            while self._events and self._events[0][0] == t:
                _, _, _, kind, job_id, epoch = heapq.heappop(self._events)
                self._apply(kind, self.jobs[job_id], epoch)
            self._schedule()
        self._check_hooks()

    def _sample_tenants(self, t: float) -> None:
        """Admission fair sharing: update every tenant at each sampling instant up to ``t``."""
        policy = self.scenario.sharing.admission
        if policy is None:
            return
        due = afs.due_samples(self._last_sample, t, policy.sampling_interval)
        if not due:
            return
        held = afs.held_by_tenant(self.snapshot().running)
        for at in due:
            self.tenant_usage = afs.sample(self.tenant_usage, at, held, policy.half_life)
        self._last_sample = due[-1]

    def _apply(self, kind: str, job: SimJob, epoch: int) -> None:
        if kind == "starving":
            return  # only wakes the scheduler, as the coordinator's timer does
        if kind == "submit":
            job.state = "pending"
            job.pending_since = job.spec.submit
            self._emit("submit", job=job.id, queue=job.spec.queue)
            self._starvation_timer(job)
        elif epoch != job.epoch or job.state != "running":
            return  # a stale end or stop of an earlier admission
        elif kind == "end":
            self._release(job)
            job.state = "finished"
            job.end_time = self.now
            self._emit("finish", job=job.id)
        elif kind == "stop":
            self._release(job)
            job.state = "pending"
            job.pending_since = self.now
            job.epoch += 1
            self._emit("requeue", job=job.id)
            self._starvation_timer(job)

    def _starvation_timer(self, job: SimJob) -> None:
        """Wake the scheduler when ``job`` starts starving (its queue's ``starvation_after``)."""
        spec = next((q for q in self.scenario.queues if q.name == job.spec.queue), None)
        if spec is not None and spec.starvation_after is not None:
            at = job.pending_since + spec.starvation_after
            if at > self.now:
                self._push(at, _SUBMIT, "starving", job.id, job.epoch)

    def _release(self, job: SimJob) -> None:
        job.device_seconds += (self.now - max(0.0, job.admit_time)) * job.held.total
        job.placement = ()
        job.terminating = False

    # --- scheduling ----------------------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The scheduler's view of the simulation now."""
        running = sorted((j for j in self.jobs.values() if j.state == "running"), key=lambda j: j.admit_seq)
        pending = sorted((j for j in self.jobs.values() if j.state == "pending"), key=lambda j: j.seq)
        return Snapshot(
            now=self.now,
            nodes=self.scenario.nodes,
            queues=self.scenario.queues,
            running=tuple(
                RunningJob(
                    j.id,
                    j.spec.queue,
                    j.held,
                    j.priority,
                    j.spec.submit,
                    j.admit_time,
                    j.placement,
                    j.spec.grace,
                    j.terminating,
                    j.admit_seq,
                    j.spec.tenant,
                )
                for j in running
            ),
            pending=tuple(
                PendingJob(
                    j.id,
                    j.spec.queue,
                    j.request,
                    j.priority,
                    j.spec.submit,
                    j.seq,
                    j.pending_since,
                    j.nominated,
                    j.spec.tenant,
                    j.id in self.held,
                )
                for j in pending
            ),
            cohorts=self.scenario.cohorts,
            sharing=self.scenario.sharing,
            tenants=tuple(self.tenant_usage[k] for k in sorted(self.tenant_usage)),
        )

    def _schedule(self) -> None:
        for _ in range(MAX_CYCLES_PER_INSTANT):
            snap = self.snapshot()
            result = run_cycle(snap)
            self.cycles += 1
            for cycle_hook in self._cycle_hooks:
                cycle_hook(snap, result)
            # a hold lasts one cycle: a cycle that starts holding is followed by one without it
            changed = bool(result.held) and not self.held
            self.held = set(result.held)
            if self.scenario.sharing.admission is not None:
                self.tenant_usage = {(t.queue, t.name): t for t in result.tenants}
            for adm in result.admitted:
                self._admit(self.jobs[adm.job_id], adm.placement)
                changed = True
            for pre in result.preempted:
                preemptor = self.jobs[pre.job_id]
                preemptor.nominated = pre.victims
                fresh = [v for v in pre.victims if not self.jobs[v].terminating]
                if fresh:
                    self._emit("preempt", job=pre.job_id, victims=list(pre.victims), reason=pre.reason)
                for v in fresh:
                    self._terminate(self.jobs[v])
                    changed = True
            for p in result.pending:
                job = self.jobs[p.job_id]
                if job.reason != p.reason:
                    job.reason = p.reason
                    self._emit("pending", job=job.id, code=p.reason.code.value, message=p.reason.message)
            self._check_hooks()
            if not changed:
                return
        raise RuntimeError(f"the scheduler kept deciding new things at t={self.now}")

    def _admit(self, job: SimJob, placement: Placement) -> None:
        job.state = "running"
        job.placement = placement
        job.admit_time = self.now
        self._admissions += 1
        job.admit_seq = self._admissions
        job.nominated = ()
        job.reason = None
        job.epoch += 1
        job.waits.append(self.now - max(0.0, job.pending_since))
        if job.first_admit is None:
            job.first_admit = self.now
        if job.spec.duration is not None:
            self._push(self.now + job.spec.duration, _EXIT, "end", job.id, job.epoch)
        started = {"started": len(placement)} if job.request.elastic else {}
        self._emit(
            "admit",
            job=job.id,
            placement=[{"rank": r.rank, "node": r.node, "devices": list(r.devices)} for r in placement],
            **started,
        )

    def _terminate(self, job: SimJob) -> None:
        job.terminating = True
        job.preempted = True
        stop_at = self.now + job.spec.grace
        ends = None if job.spec.duration is None else job.admit_time + job.spec.duration
        self._emit("terminate", job=job.id, stop_at=stop_at)
        if ends is not None and ends <= stop_at:
            return  # its own end comes first: it finishes, it is not requeued
        self._push(stop_at, _EXIT, "stop", job.id, job.epoch)

    def _place_running(self) -> None:
        """Place ``running = true`` jobs at t=0 in order of their submit time, then file order."""
        initial = sorted((j for j in self.jobs.values() if j.spec.running), key=lambda j: (j.spec.submit, j.seq))
        for job in initial:
            book = DeviceBook(self.snapshot())
            req = job.request
            model = req.gpu_model.lower() if req.gpu_model else None
            raw = place(book, book.index(req.resource, model), req.workers, req.per_worker, req.nodes, req.topology)
            if raw is None:
                raise ScenarioError(
                    self.scenario.source,
                    [f"jobs[{job.seq}] ({job.id!r}): running = true but the cluster has no room left for it"],
                )
            placement = tuple(
                RankPlacement(i, book.node_names[n], tuple(book.uuid[d] for d in ds)) for i, (n, ds) in enumerate(raw)
            )
            job.state = "running"
            job.placement = placement
            job.admit_time = job.spec.submit
            self._admissions += 1
            job.admit_seq = self._admissions
            job.epoch = 1
            job.first_admit = job.spec.submit
            if job.spec.duration is not None:
                self._push(max(0.0, job.spec.submit + job.spec.duration), _EXIT, "end", job.id, job.epoch)
            self._emit(
                "admit",
                job=job.id,
                placement=[{"rank": r.rank, "node": r.node, "devices": list(r.devices)} for r in placement],
                initial=True,
            )

    def _check_hooks(self) -> None:
        for hook in self._invariant_hooks:
            hook(self)

    # --- views -----------------------------------------------------------------------------------

    def ids_in(self, state: str) -> set[str]:
        """Ids of jobs in ``state`` ("pending", "running", "finished")."""
        return {j.id for j in self.jobs.values() if j.state == state}

    def usage(self, queue: str, resource: str) -> int:
        """Devices of ``resource`` held by ``queue``'s running (and terminating) jobs."""
        return sum(
            j.held.total
            for j in self.jobs.values()
            if j.state == "running" and j.spec.queue == queue and j.request.resource == resource
        )
