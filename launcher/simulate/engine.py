"""The discrete-event simulation behind ``labgang simulate``: a simulated clock and simulated
ranks around the coordinator's own lifecycle model.

No processes, no sleeps. Every job is a :class:`~labgang.launcher.lifecycle.records.JobRecord`
in the same :class:`~labgang.launcher.lifecycle.machine.Lifecycle` the coordinator drives, and
the scheduler gets the snapshot the coordinator would build (the same
:func:`~labgang.launcher.lifecycle.view.running_job` and ``pending_job`` views, through the
same array gate). So admission order, "most recently
admitted", victim order, requeue, grace and completion have one definition. What the
simulation adds is what agents and time would do (``docs/scenarios.md``, "How time moves"):

- A submission is a ``JobSubmitted`` event at its ``submit`` time (t=0 when negative).
- An admitted gang's launch is answered at once: every rank starts at the instant of its
  admission. After ``duration`` seconds every rank exits 0 (``exited``, then ``gone``).
- A stop (a ``Stop`` effect: preemption) leaves the ranks running for the job's ``grace``; if
  they have not exited by then they are killed (exit status 137, 128 + SIGKILL) and gone.
- **The model decides a stopped gang** (``docs/scenarios.md``): a preempted gang whose
  ``duration`` ends within its grace period exits 0 on every rank and has finished (it is not
  requeued), exactly as the coordinator decides a gang whose ranks all exit 0 after a stop.
- At one instant: its events are applied (rank exits and stops first, then submissions in
  file order); then, when something woke the scheduler (a lifecycle ``WakeScheduler``, a job
  changing what the scheduler sees, a pending job starting to starve), cycles run until one
  decides nothing new, through the coordinator's own cycle driver
  (:class:`~labgang.launcher.lifecycle.driver.CycleDriver`: the simulation is its clock, its
  effect executor and its observer); then the gangs admitted are launched, and cycles run
  again while a launch wakes the scheduler. Anything this creates at the same instant (a
  victim with ``grace = 0``) is handled after that, before time moves on.
- ``running = true`` jobs are admitted at their ``submit`` time, before anything else, where
  the scheduler would place them, in order of ``submit``, then file order.
- **Arrays and dependencies are the model's and the coordinator's** (docs/scenarios.md, "Arrays
  and dependencies"): the lifecycle model's jobs carry the coordinator's ids and the scheduler
  sees the file's names (``launcher/simulate/naming.py``), an
  array's tasks are submitted together, each cycle sees the pending tasks the array rules let
  through (:func:`~labgang.launcher.lifecycle.arrays.gate_pending`, the ``%N`` cap and the
  window, as the coordinator's ``gated_snapshot``), and a held job is not admissible.
- **Node loss is the model's fencing** (docs/scenarios.md, "Node loss";
  ``launcher/simulate/node_events.py``): a node going down stops being offered and hears
  nothing more from its ranks; the coordinator's timer checks (each wake, and every
  ``timer_interval_s`` while a node is silent) mark it lost past ``node_timeout`` with the
  lifecycle's ``NodeLost``, its fences expire on ``Tick``, and a node coming back is a
  ``NodeJoined`` with no ranks.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.cycle_memory import CycleMemory
from labgang.launcher.lifecycle.dependency import Target, matches, parse_dependency, task_dependency
from labgang.launcher.lifecycle.dependents import target
from labgang.launcher.lifecycle.driver import CycleDriver
from labgang.launcher.lifecycle.fencing import lease_expired
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec
from labgang.launcher.lifecycle.rules import group_layout, ranks_in_order
from labgang.launcher.lifecycle.states import EndReason, JobState, RankPhase
from labgang.launcher.lifecycle.view import scheduling_state
from labgang.launcher.model import CohortSpec, GpuSharing, QueueSpec, SharingPolicy
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler import tenants as afs
from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.decisions import Admit, CycleResult, ReasonCode
from labgang.launcher.scheduler.groups import place_groups
from labgang.launcher.scheduler.hostres import capped_index
from labgang.launcher.scheduler.placement import place
from labgang.launcher.scheduler.snapshot import Node, RankPlacement, Snapshot
from labgang.launcher.simulate.jobs import SimJob, devices_held, group_ends, job_record
from labgang.launcher.simulate.node_events import lease_check_after
from labgang.launcher.simulate.scenario import Scenario, ScenarioError

MAX_CYCLES_PER_INSTANT = 10_000
"""A guard against a scheduler that keeps deciding new things at one instant."""

KILLED = 137
"""The exit status of a rank still running when its grace period ends (128 + SIGKILL)."""

SIM_POLICY = LifecyclePolicy(
    startup_timeout_s=math.inf,
    requeue_backoff_s=0.0,
    requeue_backoff_max_s=0.0,
    max_start_failures=1,
    default_grace_s=0.0,
)
"""Simulated launches never fail, so start timeouts and backoff never apply."""

_HELD = (EndReason.DEPENDENCY.value, EndReason.DEPENDENCY_NEVER.value)
"""Reasons the lifecycle model gives a pending job its dependency holds (a cycle gives the others)."""

_JOB_SAVED = (fx.SaveStatus, fx.SaveSpec, fx.AddHistory)
"""Effects (the store's) the simulation carries out by noting that their job changed, nothing more."""

_SAVED, _ACCOUNTED, _RANK_SAVED, _WAKE_NOW = range(4)
_COMMON: dict[type, int] = {
    **dict.fromkeys(_JOB_SAVED, _SAVED),
    fx.SaveAttempt: _ACCOUNTED,
    fx.SaveRank: _RANK_SAVED,
    fx.WakeScheduler: _WAKE_NOW,
}
"""How :meth:`Simulation._handle` carries out the effects most events ask for (about 80 % of them),
found by their exact class in one look-up instead of a chain of ``isinstance`` tests; each as the
chain does (a ``SaveRank``: its job and its rank changed; a ``WakeScheduler``: names no job)."""

AGENT_REPORTS = (RankPhase.EXITED, RankPhase.GONE)
"""What an agent reports when a rank's main process exits: ``exited``, then ``gone``."""

EXIT_REPORTS: tuple[RankPhase, ...] = (RankPhase.GONE,)
"""What a rank of a plain gang (no group success policy) exiting 0 is reported as: one ``gone``
report carrying its exit status (a phase may be skipped, ``RankPhase``), one model event instead
of :data:`AGENT_REPORTS`' two. The lifecycle gives both the same outcome there: the first report
past ``exited`` sets the rank's exit status, end time and ``rank-exited`` line, and a plain gang
none of whose ranks failed is only moved on once every rank is ``gone``. Not for a non-zero exit
(a failed rank stops its gang at ``exited``, and its ``gone`` finishes it) nor under a success
policy (it may end the gang at its last rank's ``exited``): those keep the agent's two reports.
``tests/simulate/test_exit_reports.py`` replays with both and compares every history, outcome,
trace line and cycle count."""

_EXIT, _SUBMIT, _WAKE = 0, 1, 2  # event classes: at one instant exits and stops, then submissions, then wakes


Tracer = Callable[[dict[str, Any]], None]


@dataclass(frozen=True)
class ScenarioCluster:
    """The cycle driver's :class:`~labgang.launcher.lifecycle.driver.Cluster` of a scenario: its
    nodes and queues never change, only the devices of nodes that are down are not offered, and
    a job's tenant is the file's ``tenant`` (numbered as the job record's ``uid``).

    Attributes:
        down: names of the nodes down now (``[[events]]``), kept by the simulation.
    """

    scenario: Scenario
    tenant_names: Mapping[int, str]
    down: set[str] = field(default_factory=set)

    def nodes(self) -> tuple[Node, ...]:
        """The scenario's nodes (the same tuple every time)."""
        return self.scenario.nodes

    def queues(self) -> tuple[QueueSpec, ...]:
        """The scenario's queues."""
        return self.scenario.queues

    def cohorts(self) -> tuple[CohortSpec, ...]:
        """The scenario's cohorts."""
        return self.scenario.cohorts

    def sharing(self) -> SharingPolicy:
        """The scenario's fair sharing settings."""
        return self.scenario.sharing

    def gpu_sharing(self) -> GpuSharing:
        """The scenario's ``[sharing]`` table."""
        return self.scenario.gpu_sharing

    def unavailable(self, holding: Sequence[JobRecord]) -> frozenset[str]:
        """The devices of the nodes that are down (as the coordinator withholds a disconnected
        or lost node's); otherwise only simulated jobs use the simulated devices."""
        if not self.down:
            return frozenset()
        return frozenset(d.uuid for n in self.scenario.nodes if n.name in self.down for d in n.devices)

    def tenant(self, spec: JobSpec) -> str | None:
        """The file's tenant of a job (None: its queue's default tenant)."""
        return self.tenant_names.get(spec.uid)


@dataclass
class Simulation:
    """Runs one scenario; call :meth:`run_instant` until :meth:`next_time` is None, and read the state.

    Args:
        scenario: the validated scenario.
        trace: called with one JSON-able dict per event (``--trace``), or None.
    """

    scenario: Scenario
    trace: Tracer | None = None
    now: float = 0.0
    jobs: dict[str, SimJob] = field(default_factory=dict)  # by name (``SimJob.id``)
    by_model: dict[str, SimJob] = field(default_factory=dict)  # by the coordinator's id (the record's)
    model: Lifecycle = field(default_factory=lambda: Lifecycle(SIM_POLICY))
    _events: list[tuple[float, int, int, str, str, str]] = field(default_factory=list)
    _order: int = 0
    _wake: bool = False
    _to_start: list[tuple[str, str]] = field(default_factory=list)
    _invariant_hooks: list[Callable[[Simulation], None]] = field(default_factory=list)
    _cycle_hooks: list[Callable[[Snapshot, CycleResult], None]] = field(default_factory=list)
    _finished: list[SimJob] = field(default_factory=list)  # in the order they finished
    _targets: dict[tuple[str, int], tuple[Target, ...]] = field(default_factory=dict)
    _cancel_by: dict[str, str] = field(default_factory=dict)  # job id -> who cancels it (:meth:`cancel`)
    _down: set[str] = field(default_factory=set)  # nodes down now ([[events]] lost = true, not yet back)
    _down_at: dict[str, float] = field(default_factory=dict)  # node -> the last word from it (its loss event)
    _lost: set[str] = field(default_factory=set)  # down nodes the coordinator's timer has marked lost

    def __post_init__(self) -> None:
        f = self.scenario.file
        if f.scenario.node_timeout != self.model.policy.node_timeout_s:  # the fences count with the file's
            self.model = Lifecycle(replace(self.model.policy, node_timeout_s=f.scenario.node_timeout))
        tenants = {t.name: k + 1 for k, t in enumerate(f.tenants)}
        self._tenant_names = {k: name for name, k in tenants.items()}
        usage = {(t.queue, t.name): t for t in afs.initial(self.scenario.tenants)}
        self.memory = CycleMemory(self.scenario.sharing.admission, usage, 0.0)
        self.driver = CycleDriver(
            self.model,
            lambda: self.now,
            self,
            ScenarioCluster(self.scenario, self._tenant_names, self._down),
            self.memory,
            max_cycles=MAX_CYCLES_PER_INSTANT,
            decide=self._decide,
            observer=self,
            cache_views=True,
            track_jobs=True,  # every effect's job is reported (:meth:`_handle`)
        )
        ordinal: dict[int, int] = {}  # [[jobs]] index -> tasks of it so far (its ``durations`` entry)
        for t in self.scenario.ids.tasks:
            j = t.job
            priority = self.scenario.priorities[j.id]
            uid = tenants.get(j.tenant, 0) if j.tenant else 0
            dependency = self.scenario.dependencies.get(t.index)
            if t.task is not None:  # aftercorr: each task waits for its counterpart
                dependency = task_dependency(dependency, t.task.index)
            request = j.request()  # one build a job (a pydantic table's: not cheap), for both
            record = job_record(j, t.seq, priority, t, dependency, uid, request)
            k = ordinal[t.index] = ordinal.get(t.index, -1) + 1
            run = j.duration if j.durations is None else j.durations[k]
            sim_job = SimJob(j, t.seq, priority, request, record, task=t, duration=run)
            self.by_model[t.model_id] = self.jobs[t.name] = sim_job
        for e in self.scenario.file.events:  # before anything else of their instant
            self._push(e.at, _EXIT, "down" if e.lost else "back", e.node, "")
        self._place_running()
        for sj in self.jobs.values():
            if not sj.spec.running:
                self._push(max(0.0, sj.spec.submit), _SUBMIT, "submit", sj.record.id, "")
            if sj.spec.release is not None:
                self._push(sj.spec.release, _SUBMIT, "release", sj.record.id, "")

    # --- events ----------------------------------------------------------------------------------

    def _push(self, t: float, cls: int, kind: str, job_id: str, run_id: str) -> None:
        self._order += 1
        heapq.heappush(self._events, (t, cls, self._order, kind, job_id, run_id))

    def _emit(self, event: str, **fields: Any) -> None:
        if self.trace is not None:
            self.trace({"t": self.now, "event": event, **fields})

    def cancel(self, job: str, at: float, by: str) -> None:
        """``labgang cancel JOB`` by user ``by`` at ``at`` seconds (t=0 when negative), after that
        instant's submissions: a pending job is cancelled at once, a running one stopped with its
        grace. Nothing happens when the job has finished by then.

        Raises:
            KeyError: no job (or array task) of the scenario is named ``job``.
        """
        record = self.jobs[job].record
        self._cancel_by[record.id] = by
        self._push(max(0.0, at), _SUBMIT, "cancel", record.id, "")

    def next_time(self) -> float | None:
        """Time of the next event, or None when nothing is left."""
        return self._events[0][0] if self._events else None

    def add_invariant_hook(self, hook: Callable[[Simulation], None]) -> None:
        """Call ``hook(sim)`` after every cycle and every instant (invariant checks)."""
        self._invariant_hooks.append(hook)

    def add_cycle_hook(self, hook: Callable[[Snapshot, CycleResult], None]) -> None:
        """Call ``hook(snapshot, result)`` after every scheduling cycle, before its decisions apply:
        the scheduler's own snapshot and result, jobs named as the file names them (``SimJob.id``)."""
        self._cycle_hooks.append(hook)

    def run_instant(self) -> None:
        """Apply every event of the next instant, schedule when woken, launch what was admitted;
        repeat while that creates more at the same instant.

        Raises:
            RuntimeError: the scheduler kept deciding new things at one instant.
        """
        t = self.next_time()
        if t is None:
            return
        self.now = t
        # Admission fair sharing samples what was held up to now, before this instant changes it
        # (the coordinator samples before it applies each event, too).
        self.driver.sample(t)
        cycles_before = self.cycles
        while True:
            progressed = False
            while self._events and self._events[0][0] == t:
                _, _, _, kind, job_id, run_id = heapq.heappop(self._events)
                self._apply(kind, job_id, run_id)
                progressed = True
            # As the coordinator's loop settles: cycles, then the launches they admitted, and cycles
            # again when a launch woke the scheduler (a victim named by a waiting preemptor started),
            # before anything those created (a stop's exit) is applied.
            while self._wake or self._to_start:
                if self._wake:
                    self._wake = False
                    self._schedule()
                if self._to_start:
                    self._start_admitted()
                progressed = True
                if self.cycles - cycles_before > MAX_CYCLES_PER_INSTANT:
                    raise RuntimeError(f"the scheduler kept deciding new things at t={self.now}")
            if not progressed:
                break
        self._check_hooks()

    def _apply(self, kind: str, job_id: str, run_id: str) -> None:
        if kind == "wake":  # a wake the lifecycle or a starving job asked for: the coordinator's timer
            self._check_timers()
            self._wake = True
            return
        if kind in ("down", "back", "timer"):
            self._node_event(kind, job_id)
            return
        job = self.by_model[job_id]
        if kind == "submit":
            job.submitted = True
            self._emit("submit", job=job.id, queue=job.spec.queue)
            self._handle(self.model.apply(ev.JobSubmitted(self.now, job.record, self._finished_targets(job))))
            if job.spec.hold:  # labgang submit --hold
                self._handle(self.model.apply(ev.HoldRequested(self.now, job.record.id, "the scenario")))
        elif kind == "cancel":  # labgang cancel (Simulation.cancel)
            if not job.record.status.state.finished:
                self._handle(self.model.apply(ev.CancelRequested(self.now, job.record.id, self._cancel_by[job_id])))
        elif kind == "release":  # labgang release
            self._emit("release", job=job.id)
            self._handle(self.model.apply(ev.ReleaseRequested(self.now, job.record.id, "the scenario")))
        elif kind == "end":
            self._ranks_exit(job, run_id, 0)
        elif kind.startswith("end:"):  # one group's run time (``[[jobs.groups]]`` ``duration``)
            layout = group_layout(job.record)
            self._ranks_exit(job, run_id, 0, frozenset(layout.ranks_of(int(kind[4:]))))
        elif kind == "limit":
            # the coordinator's timer at the time limit: the lifecycle stops the gang (TIMEOUT)
            if job.record.run_id == run_id:
                self._check_timers()
        else:  # "stop": the grace period of a stop ended
            self._ranks_exit(job, run_id, KILLED)

    def _node_event(self, kind: str, node: str) -> None:
        """``[[events]]``: ``node`` goes down (its link drops: the coordinator withholds its devices
        and wakes its scheduler; its timer is checked every ``timer_interval_s`` until the node is
        lost), the timer checks its lease, or it joins again with no ranks (a ``NodeJoined``)."""
        if kind == "down":
            self._emit("node_down", node=node)
            self._down.add(node)
            self._down_at[node] = self.now
            self._wake = True
            self._push(lease_check_after(self.now, self.scenario.file.scenario.node_timeout), _WAKE, "timer", node, "")
        elif kind == "timer":
            if node in self._down and node not in self._lost:
                self._check_timers()
        else:  # back: the node's agent says hello, knowing no ranks (they died with the node)
            self._emit("node_back", node=node)
            self._down.discard(node)
            self._lost.discard(node)
            self._handle(self.model.apply(ev.NodeJoined(self.now, node, (), self._connected())))
            self._wake = True

    def _connected(self) -> frozenset[str]:
        """The nodes whose link is up (neither down nor lost)."""
        return frozenset(n.name for n in self.scenario.nodes if n.name not in self._down)

    def _check_timers(self) -> None:
        """The coordinator's timer check (``Coordinator.check_timers``): node leases (a down node
        silent longer than ``node_timeout`` is lost: the lifecycle's ``NodeLost``), then ``Tick``
        (time limits, fences of lost nodes' ranks)."""
        timeout = self.scenario.file.scenario.node_timeout
        for n in self.scenario.nodes:
            node = n.name
            if node in self._down and node not in self._lost and self.now - self._down_at[node] > timeout:
                self._lost.add(node)
                why = lease_expired(False, self.now - self._down_at[node], timeout)
                self._emit("node_lost", node=node, why=why)
                self._handle(self.model.apply(ev.NodeLost(self.now, node, why, self._down_at[node])))
        self._handle(self.model.apply(ev.Tick(self.now, 0.0, self._connected())))

    def _finished_targets(self, job: SimJob) -> tuple[Target, ...]:
        """The finished jobs ``job``'s dependency names: the model keeps only active jobs, so a
        driver hands it these at submission, as the coordinator reads them from its store."""
        text = job.record.spec.dependency
        if not text:
            return ()
        key = (text, len(self._finished))  # an array's tasks share one text: one search while nothing ends
        if key not in self._targets:
            names = parse_dependency(text).job_ids
            self._targets = {
                key: tuple(
                    target(done.record) for done in self._finished if any(matches(n, done.record.id) for n in names)
                )
            }
        return self._targets[key]

    def _ranks_exit(self, job: SimJob, run_id: str, status: int, only: frozenset[int] | None = None) -> None:
        """Every live rank of attempt ``run_id`` (of ``only`` when given: one group's) exits with
        ``status`` and is gone, node by node, as agents report it; nothing when that attempt is
        over (a stale end or stop). A rank on a node that is down reports nothing (its fate is the
        fence's)."""
        record = job.record
        if record.run_id != run_id or not record.status.state.holds_devices:
            return
        before = scheduling_state(record)
        phases = EXIT_REPORTS if status == 0 and record.spec.plain_policy else AGENT_REPORTS
        for rank in ranks_in_order(record):
            if rank.ended or rank.node in self._down or (only is not None and rank.rank not in only):
                continue
            for phase in phases:
                obs = ev.RankObserved(self.now, rank.node, run_id, rank.rank, phase, exit_status=status)
                self._handle(self.model.apply(obs))
        # The coordinator wakes its scheduler when a job changes for it, unless the job is a
        # requeued victim whose preemptor still waits for another victim.
        if scheduling_state(record) != before and not self.model.awaited_by_waiting_preemptor(record):
            self._wake = True

    def _handle(self, effects: Iterable[fx.Effect]) -> None:
        """Carry out the lifecycle's effects the way agents and the coordinator's timers would."""
        changed = self.driver.job_changed
        for effect in effects:
            kind = _COMMON.get(type(effect))  # the most frequent effects, by their exact class
            if kind is _SAVED:  # the job changed, nothing else to do here
                changed(effect.job.id)  # type: ignore[union-attr]  # a _JOB_SAVED effect names its job
                continue
            if kind is _ACCOUNTED:  # the store's accounting: nothing to do here
                continue
            if kind is _RANK_SAVED:
                changed(effect.job.id)  # type: ignore[union-attr]
                self.driver.rank_changed(effect.job.id)  # type: ignore[union-attr]
                continue
            if kind is _WAKE_NOW:
                self._wake = True
                continue
            if isinstance(effect, _JOB_SAVED):  # (a subclass of one: as its class)
                changed(effect.job.id)
                continue
            if isinstance(effect, fx.SaveAttempt):
                continue
            named = getattr(effect, "job", None)
            if named is not None:
                changed(named.id)
            elif (named_id := getattr(effect, "job_id", None)) is not None:
                changed(named_id)
            if isinstance(effect, fx.SaveRank):
                self.driver.rank_changed(effect.job.id)
            elif isinstance(effect, fx.WakeScheduler):
                self._wake = True
            elif isinstance(effect, fx.WakeAt):
                self._push(effect.time, _WAKE, "wake", "", "")
            elif isinstance(effect, fx.Dispatch):
                job = self.by_model[effect.job.id]
                self._admitted(job, self.now)
                self._to_start.append((job.record.id, job.record.run_id))  # launched after this instant's cycles
            elif isinstance(effect, fx.Stop):
                if effect.job_id is not None:  # every run here is a job's
                    self._push(self.now + effect.grace, _EXIT, "stop", effect.job_id, effect.run_id)
            elif isinstance(effect, fx.RecordDecision) and effect.kind is fx.DecisionKind.VICTIM:
                self.by_model[effect.job_id].preempted = True
            elif isinstance(effect, fx.RecordDecision) and effect.code in _HELD:  # held by its dependency
                self._emit(
                    "pending",
                    job=self.by_model[effect.job_id].id,
                    code=effect.code,
                    message=self._shown(effect.message),
                )
            elif isinstance(effect, fx.Requeued):
                job = self.by_model[effect.job.id]
                self._release(job)
                self._emit("requeue", job=job.id)
            elif isinstance(effect, fx.Finished):
                job = self.by_model[effect.job.id]
                self._release(job)
                job.end_time = self.now
                self._finished.append(job)
                st = job.record.status
                if job.cancelled:
                    self._emit("cancel", job=job.id, code=st.reason_code, message=self._shown(st.reason_message or ""))
                elif st.state in (JobState.TIMEOUT, JobState.NODE_FAIL):
                    self._emit("finish", job=job.id, state=st.state.value)
                else:
                    self._emit("finish", job=job.id)

    def _release(self, job: SimJob) -> None:
        if job.placement:
            job.device_seconds += (self.now - max(0.0, job.admit_time)) * devices_held(
                job.held, self.scenario.gpu_sharing
            )
        job.placement = ()

    def _admitted(self, job: SimJob, at: float, *, initial: bool = False) -> None:
        """Bookkeeping of an admission the lifecycle made at ``at`` (its ``Dispatch``)."""
        record = job.record
        job.placement = tuple(RankPlacement(r.rank, r.node, tuple(r.devices)) for r in ranks_in_order(record))
        job.admit_time = at
        job.reason = None
        if not initial:
            job.waits.append(at - max(0.0, record.status.pending_since))
        if job.first_admit is None:
            job.first_admit = at
        started = {"started": len(job.placement)} if job.request.elastic else {}
        self._emit(
            "admit",
            job=job.id,
            placement=[{"rank": r.rank, "node": r.node, "devices": list(r.devices)} for r in job.placement],
            **started,
            **({"initial": True} if initial else {}),
        )

    def _start_admitted(self) -> None:
        """Launch every gang admitted so far, as an agent answering at once: rank 0's node first."""
        pending, self._to_start = self._to_start, []
        for job_id, run_id in pending:
            job = self.by_model[job_id]
            record = job.record
            if record.run_id != run_id or record.status.state != JobState.ADMITTED:
                continue  # stopped before its launch went out
            nodes: list[str] = []
            for rank in ranks_in_order(record):
                if rank.node not in nodes:
                    nodes.append(rank.node)
            for i, node in enumerate(nodes):
                self._handle(self.model.apply(ev.LaunchSent(self.now, node, run_id, node if i == 0 else None)))
                observed = tuple(
                    ev.RankObserved(self.now, node, run_id, r.rank, RankPhase.RUNNING)
                    for r in ranks_in_order(record)
                    if r.node == node
                )
                answer = ev.LaunchAnswered(self.now, node, run_id, 29500 if i == 0 else None, (), False, observed)
                self._handle(self.model.apply(answer))
            ends = group_ends(job)
            if ends is not None:  # a job of groups whose groups run for their own times
                for g, run in enumerate(ends):
                    if run is not None:
                        self._push(self.now + run, _EXIT, f"end:{g}", job.record.id, run_id)
            elif job.duration is not None:
                self._push(self.now + job.duration, _EXIT, "end", job.record.id, run_id)
            if job.spec.time_limit is not None:
                self._push(self.now + job.spec.time_limit, _EXIT, "limit", job.record.id, run_id)

    # --- scheduling ----------------------------------------------------------------------------

    def _shown(self, message: str) -> str:
        return self.scenario.ids.shown(message)

    def snapshot(self) -> Snapshot:
        """The scheduler's view of the simulation now (what the coordinator's ``build_snapshot``
        gives, without taking a fair-sharing sample)."""
        nodes = self.scenario.nodes
        holding, gate = self.driver.split(self.now, nodes)
        return self.driver.snapshot_of(self.now, nodes, holding, gate)

    @property
    def cycles(self) -> int:
        """Scheduling cycles run so far."""
        return self.driver.cycles

    @property
    def held(self) -> set[str]:
        """Jobs that held their queue's idle quota in the last cycle."""
        return self.memory.held

    # --- the cycle driver's seams ---------------------------------------------------------------

    def apply(self, event: ev.Event) -> list[fx.Effect]:
        """The effect executor: apply ``event`` to the lifecycle model and carry out its effects
        as agents and the coordinator's timers would (:meth:`_handle`)."""
        effects = self.model.apply(event)
        self._handle(effects)
        return effects

    def wake_at(self, when: float) -> None:
        """The scheduler runs again at ``when`` (a pending job starts starving)."""
        self._push(when, _WAKE, "wake", "", "")

    def _decide(self, snap: Snapshot) -> CycleResult:
        """The scheduler sees the file's names (its reasons name jobs as people read them); the
        lifecycle model, the coordinator's ids."""
        named = self.scenario.ids.named_snapshot(snap, self.driver.running_change)
        decided = run_cycle(named)
        for cycle_hook in self._cycle_hooks:
            cycle_hook(named, decided)
        return self.scenario.ids.model_result(decided)

    def cycle(self, snapshot: Snapshot, result: CycleResult, effects: Sequence[fx.Effect], seconds: float) -> None:
        """The cycle observer: trace the cycle's preemptions (victims it stopped now) and changed
        reasons, then check the invariants."""
        victims = {e.job_id for e in effects if isinstance(e, fx.RecordDecision) and e.kind is fx.DecisionKind.VICTIM}
        for pre in result.preempted:
            fresh = [v for v in pre.victims if v in victims]
            if fresh:
                self._emit(
                    "preempt",
                    job=self.by_model[pre.job_id].id,
                    victims=[self.by_model[v].id for v in pre.victims],
                    reason=pre.reason,
                )
            for v in fresh:
                self._emit("terminate", job=self.by_model[v].id, stop_at=self.now + self.by_model[v].spec.grace)
        self._emit_reasons(result)
        self._check_hooks()

    def gated(self, result: CycleResult) -> None:
        """The cycle observer, when only capped array tasks got a reason: trace it."""
        self._emit_reasons(result)

    def _schedule(self) -> None:
        """A burst of cycles (the coordinator's ``run_cycles``), through the shared cycle driver."""
        if not self.driver.burst().settled:
            raise RuntimeError(f"the scheduler kept deciding new things at t={self.now}")

    def _emit_reasons(self, result: CycleResult) -> None:
        """A ``pending`` trace line for each job whose reason (its code and words, what the line
        shows) this cycle changed; a change only in what the line does not show (``no_preemption``)
        is kept without a second, identical line."""
        for p in result.pending:
            job = self.by_model[p.job_id]
            before = job.reason
            job.reason = p.reason
            if before is None or (before.code, before.message) != (p.reason.code, p.reason.message):
                message = p.reason.message  # the scheduler's, in the file's names; the array cap's, in ids
                if p.reason.code == ReasonCode.ARRAY_LIMIT:
                    message = self._shown(message)
                self._emit("pending", job=job.id, code=p.reason.code.value, message=message)

    def _place_running(self) -> None:
        """Admit ``running = true`` jobs at their submit time, in that order, then file order."""
        initial = sorted((j for j in self.jobs.values() if j.spec.running), key=lambda j: (j.spec.submit, j.seq))
        for job in initial:
            book = DeviceBook(self.snapshot())
            req = job.request
            model = req.gpu_model.lower() if req.gpu_model else None
            ix = book.index(req.resource, model)
            capped = capped_index(book, ix, req)
            if req.groups:
                raw = place_groups(book, req)
            else:
                raw = place(book, ix, req.workers, req.per_worker, req.nodes, req.topology, capped)
            if raw is None:
                where = job.task.index if job.task else job.seq
                raise ScenarioError(
                    self.scenario.source,
                    [f"jobs[{where}] ({job.id!r}): running = true but the cluster has no room left for it"],
                )
            placement = tuple(
                RankPlacement(i, book.node_names[n], tuple(book.uuid[d] for d in ds)) for i, (n, ds) in enumerate(raw)
            )
            at = job.spec.submit
            job.submitted = True
            self.model.apply(ev.JobSubmitted(at, job.record))
            self.model.apply(ev.CycleDecided(at, CycleResult((Admit(job.record.id, placement),), (), ())))
            self._admitted(job, at, initial=True)
            run_id = job.record.run_id
            for rank in ranks_in_order(job.record):
                self.model.apply(ev.RankObserved(at, rank.node, run_id, rank.rank, RankPhase.RUNNING))
            self.driver.rank_changed(job.record.id)  # these effects are not handled: its view is built anew
            if job.duration is not None:
                self._push(max(0.0, at + job.duration), _EXIT, "end", job.record.id, run_id)
            if job.spec.time_limit is not None:
                self._push(max(0.0, at + job.spec.time_limit), _EXIT, "limit", job.record.id, run_id)

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
