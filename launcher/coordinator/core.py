"""The coordinator: the composition root of its parts.

Receive (API call, agent message, cycle result, timer) → turn it into a lifecycle event →
apply it to the model (``launcher/lifecycle/``) through the ``Commits`` part (:mod:`.commits`),
which buffers the persisting effects in the store; its ``flush`` commits them, then runs the
effects that touch agents (launch, stop, signal), so a crash never leaves an agent doing
something the store does not know. The rules themselves live in ``launcher/lifecycle/machine.py``;
what agents report and the node timers in :mod:`.node_events`; the user operations in
:mod:`.job_operations`; the scheduling loop in :mod:`.scheduling`, dispatch in :mod:`.dispatch`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from labgang.agent import labgang_version
from labgang.launcher.accounting import UsageTotals
from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.coordinator.agents import AgentRegistry
from labgang.launcher.coordinator.commits import Commits
from labgang.launcher.coordinator.depends import targets_at_start
from labgang.launcher.coordinator.drains import NodeDrains
from labgang.launcher.coordinator.job_operations import JobOperations
from labgang.launcher.coordinator.job_views import JobViews
from labgang.launcher.coordinator.jobindex import JobIndex, JobMemory, SubmissionOrder
from labgang.launcher.coordinator.node_events import NodeEvents, held_devices
from labgang.launcher.coordinator.notifier import Notifier
from labgang.launcher.coordinator.scheduling import (
    AdmissionGate,
    CoordinatorCluster,
    CycleMetrics,
    SubmissionCheck,
    cluster_nodes,
    cycle_driver,
)
from labgang.launcher.coordinator.sharing import SharingState
from labgang.launcher.coordinator.store import Store
from labgang.launcher.coordinator.tasks import BackgroundTasks
from labgang.launcher.coordinator.timers import Kicks, LoopTimer, Timer, Wakes
from labgang.launcher.coordinator.views import node_views, queue_views
from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.driver import CycleDriver
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.lifecycle.states import JobState

if TYPE_CHECKING:
    from labgang.launcher.coordinator.metrics import SchedulerMetrics
    from labgang.launcher.coordinator.pitfall_watch import PitfallWatch
    from labgang.launcher.pitfalls import ClusterSnapshot

log = logging.getLogger("labgang.coordinator")

RECENT_FINISHED = 1000
"""Finished jobs kept in memory (the newest ones), for listings and lookups; older ones are read from the store."""


def lifecycle_policy(config: ClusterConfig) -> LifecyclePolicy:
    """The lifecycle model's numbers from the cluster configuration."""
    return LifecyclePolicy(
        startup_timeout_s=config.startup_timeout_s,
        requeue_backoff_s=config.requeue_backoff_s,
        requeue_backoff_max_s=config.requeue_backoff_max_s,
        max_start_failures=config.max_start_failures,
        default_grace_s=config.default_grace_s,
        node_timeout_s=config.node_timeout_s,
        violation=config.violation,
        kill_invalid_depend=config.kill_invalid_depend,
        shards_per_gpu=config.gpu_sharing().shards_per_gpu,
    )


class Coordinator:
    """Jobs, agents and the rules that connect them: builds its parts (``Commits`` with its
    ``Dispatcher``, ``NodeEvents``, ``JobOperations``, ``JobViews``, ``Kicks``...) and hands each
    what it needs; the parts change the model through ``Commits``, never through the coordinator.
    Its :meth:`apply`, :meth:`flush`, :meth:`kick`... delegate to the part that owns each.

    Args:
        config: the validated cluster configuration.
        store: the open database.
        clock: unix-seconds clock (injected so tests can pin it).
        agents: the agent registry (default: a new one, whose agents are reached over their links;
            a test may hand one whose ``call`` answers as simulated agents).
        timer: runs the scheduler's wakes at the instants they are asked for (default: the event
            loop's on ``clock``, :class:`~labgang.launcher.coordinator.timers.LoopTimer`).
    """

    def __init__(
        self,
        config: ClusterConfig,
        store: Store,
        *,
        clock: Callable[[], float] = time.time,
        agents: AgentRegistry | None = None,
        timer: Timer | None = None,
    ) -> None:
        self._config = config
        self._store = store
        self._clock = clock
        self._version = labgang_version()
        self._agents = AgentRegistry() if agents is None else agents
        self._timer = LoopTimer(clock) if timer is None else timer
        active = store.load_jobs(active_only=True)
        self._model = Lifecycle(lifecycle_policy(config), active, finished=targets_at_start(store, active))
        # the newest finished jobs, the submission order, and finished jobs per (queue, state) for /metrics
        self._memory = JobMemory({key: n for key, n in store.job_counts().items() if JobState(key[1]).finished})
        self._memory.order.rebuild(self.jobs)
        self._started_at = clock()
        self._kicks = Kicks()  # the scheduling loop's wake-up
        self._drains = NodeDrains(store, self._kicks.kick)  # nodes an admin took out of scheduling
        # the scheduler's wakes at instants; the node timers are checked first at each (a fence may expire)
        self._wakes = Wakes(self._timer, self._kicks, self._check_timers)
        self._tasks = BackgroundTasks()  # agent commands after a commit, forwarded requests
        self._admissions = AdmissionGate()  # closed by stop_jobs_for_shutdown: no more admissions
        # why a submission could never start, remembered until the allocatable devices change
        self._submission_check = SubmissionCheck(config, self._agents)
        self._metrics: SchedulerMetrics | None = None  # see report_to
        self._pitfalls: PitfallWatch | None = None  # see watch_pitfalls
        # holds of the last cycle and the tenants' usage histories (fair sharing), persisted
        self._sharing = SharingState(config, store, self._started_at)
        self._cycle_metrics = CycleMetrics(lambda: self._metrics)  # the cycle count, its time and duration
        # GPU-seconds per (queue, user) of the ended attempts, for /metrics (launcher/accounting.py)
        self._usage = UsageTotals(store.ended_gpu_seconds())
        self._notifier = Notifier(config.notify)  # --mail-type notifications (coordinator/notifier.py)
        # the shell every part changes the model through: apply, buffer, commit, then the agent commands
        self._commits = Commits(
            self._model,
            store,
            self._memory,
            RECENT_FINISHED,
            self._usage,
            self._notifier,
            self._agents,
            clock,
            config,
            kicks=self._kicks,
            wakes=self._wakes,
            tasks=self._tasks,
            sample=self._sample,
            metrics=lambda: self._metrics,
        )
        # snapshot, burst and sampling, shared with simulate; the commits carry out the effects
        self._driver = cycle_driver(
            self._model,
            clock,
            self._commits,
            CoordinatorCluster(self._agents, config, self._sharing, self._drains),
            self._sharing,
            self._cycle_metrics,
        )
        # the jobs' views (GET /v1/jobs, `labgang queue`'s table, the pitfall detectors), kept while each is unchanged
        self._views = JobViews(config.private_data)
        # what the agents report (hello, inventories, rank events, disconnects) and the node timers
        self._node_events = NodeEvents(
            self._agents,
            self._model,
            self._commits,
            self._submission_check,
            clock,
            node_timeout_s=config.node_timeout_s,
            started_at=self._started_at,
        )
        # what users ask of their jobs (submit, cancel, find, list, history, report, logs)
        self._desk = JobOperations(
            config, store, self._model, self._memory, self._agents, self._submission_check, clock, self._commits
        )

    def _sample(self, now: float) -> None:
        """Admission fair sharing samples what was held up to ``now`` (the cycle driver's ``sample``),
        before an event at ``now`` changes anything (``Commits`` calls it)."""
        self._driver.sample(now)

    def _check_timers(self) -> None:
        """The node timers, at a scheduler wake (``Wakes`` calls it)."""
        self._node_events.check_timers()

    # ----- its parts, read-only: each is written only by its owner ---------------------------------

    @property
    def config(self) -> ClusterConfig:
        """The validated cluster configuration."""
        return self._config

    @property
    def store(self) -> Store:
        """The open database (jobs, attempts, decisions, history)."""
        return self._store

    @property
    def clock(self) -> Callable[[], float]:
        """The unix-seconds clock it was handed."""
        return self._clock

    @property
    def version(self) -> str:
        """This coordinator's labgang version (checked against each agent's at hello)."""
        return self._version

    @property
    def agents(self) -> AgentRegistry:
        """The node agents it has heard from, and command round-trips to them."""
        return self._agents

    @property
    def model(self) -> Lifecycle:
        """The lifecycle model: the active jobs and the rules that change them (changed only through :meth:`apply`)."""
        return self._model

    @property
    def sharing(self) -> SharingState:
        """The last cycle's holds and the tenants' usage histories (fair sharing), persisted."""
        return self._sharing

    @property
    def driver(self) -> CycleDriver:
        """The cycle driver (snapshot, burst, tenant sampling), shared with ``labgang simulate``."""
        return self._driver

    @property
    def usage(self) -> UsageTotals:
        """GPU-seconds per (queue, user) of the ended attempts, for /metrics."""
        return self._usage

    @property
    def notifier(self) -> Notifier:
        """Where ``--mail-type`` notifications go (``notifier.py``)."""
        return self._notifier

    @property
    def views(self) -> JobViews:
        """The jobs' views, kept while each job is unchanged, and who may see what of them (``job_views.py``)."""
        return self._views

    @property
    def node_events(self) -> NodeEvents:
        """What the agents report and the node timers, as lifecycle events (``node_events.py``)."""
        return self._node_events

    @property
    def desk(self) -> JobOperations:
        """The user operations on jobs, and the ``JobDesk`` the verbs act through (``job_operations.py``)."""
        return self._desk

    @property
    def commits(self) -> Commits:
        """The shell every part changes the model through: apply, buffer, commit, then send (``commits.py``)."""
        return self._commits

    @property
    def drains(self) -> NodeDrains:
        """The drained nodes (``labgang drain``, ``labgang resume``)."""
        return self._drains

    @property
    def kicks(self) -> Kicks:
        """The scheduling loop's wake-up (``timers.py``)."""
        return self._kicks

    @property
    def tasks(self) -> BackgroundTasks:
        """Agent commands after a commit and forwarded requests, cancelled at :meth:`close` (``tasks.py``)."""
        return self._tasks

    @property
    def admissions(self) -> AdmissionGate:
        """Open until :meth:`stop_jobs_for_shutdown` closes it (``scheduling.py``)."""
        return self._admissions

    @property
    def shutting_down(self) -> bool:
        """True once :meth:`stop_jobs_for_shutdown` began: nothing is admitted any more."""
        return self._admissions.closed

    # ----- parts the application attaches -------------------------------------------------------

    @property
    def metrics(self) -> SchedulerMetrics | None:
        """Where cycles, admissions and preemptions are reported (``observe_cycle``, ``observe_admission``,
        ``count_preemption``) when the application serves /metrics; None otherwise."""
        return self._metrics

    def report_to(self, metrics: SchedulerMetrics) -> None:
        """Report cycles, admissions and preemptions to ``metrics`` from now on (``app.py``, with /metrics)."""
        self._metrics = metrics

    @property
    def pitfalls(self) -> PitfallWatch | None:
        """The pitfall watch the application runs beside this coordinator (``pitfall_watch.py``), or None."""
        return self._pitfalls

    def watch_pitfalls(self, watch: PitfallWatch) -> None:
        """Serve ``watch``'s findings (``GET /v1/pitfalls``, /metrics, ``labgang show``) from now on."""
        self._pitfalls = watch

    # ----- views over the parts ---------------------------------------------------------------

    def queue_views(self) -> list[dict[str, Any]]:
        """``GET /v1/queues``: :func:`~labgang.launcher.coordinator.views.queue_views` of the active jobs now."""
        return queue_views(
            self.config, list(self.model.jobs.values()), self.sharing, self.clock(), cluster_nodes(self.agents)
        )

    def node_views(self) -> list[dict[str, Any]]:
        """``GET /v1/nodes``: :func:`~labgang.launcher.coordinator.views.node_views` of the agents and jobs."""
        return node_views(
            self.agents, self.config, self.jobs, self.held_devices(), self.job_for_run, self._drains.drained
        )

    def pitfall_snapshot(self) -> ClusterSnapshot:
        """What the pitfall watch and /metrics read (``metrics.coordinator_snapshot`` over the views)."""
        from labgang.launcher.coordinator.metrics import coordinator_snapshot  # prometheus only when served

        jobs = self.jobs
        return coordinator_snapshot(self.clock(), jobs, self.node_views(), self.queue_views(), self.views.pitfall_views)

    # ----- plumbing, each delegated to the part that owns it ----------------------------------

    @property
    def wake(self) -> asyncio.Event:
        """Set whenever something happened that the scheduling loop should look at (``Kicks.event``)."""
        return self._kicks.event

    def kick(self) -> None:
        """Ask the scheduling loop for a cycle (coalesced with other kicks; ``Kicks.kick``)."""
        self._kicks.kick()

    async def kicked(self) -> None:
        """Return once a kick has come (``Kicks.kicked``)."""
        await self._kicks.kicked()

    @property
    def cycles(self) -> int:
        """Scheduling cycles run so far (``CycleMetrics``)."""
        return self._cycle_metrics.cycles

    @property
    def last_cycle_at(self) -> float:
        """Unix seconds of the last scheduling cycle's snapshot; 0.0 before the first."""
        return self._cycle_metrics.last_cycle_at

    @property
    def jobs(self) -> JobIndex:
        """The jobs in memory by id: active ones (the lifecycle model's) and the recently finished."""
        return JobIndex(self.model.jobs, self._memory.recent)

    @property
    def recent(self) -> Mapping[str, JobRecord]:
        """The newest finished jobs in memory by id, oldest first (``JobMemory.recent``)."""
        return self._memory.recent

    @property
    def order(self) -> SubmissionOrder:
        """The jobs in memory in submission order (``JobMemory.order``)."""
        return self._memory.order

    @property
    def finished_counts(self) -> Mapping[tuple[str, str], int]:
        """Finished jobs per ``(queue, state value)``, for /metrics (``JobMemory.finished_counts``)."""
        return self._memory.finished_counts

    def apply(self, event: ev.Event) -> list[fx.Effect]:
        """Apply one lifecycle event and carry out its effects (``Commits.apply``)."""
        return self._commits.apply(event)

    def wake_at(self, when: float) -> None:
        """Kick the scheduler at ``when`` (unix seconds), once per instant (``Commits.wake_at``)."""
        self._commits.wake_at(when)

    async def flush(self) -> None:
        """Commit every state change so far, then start the effects they asked for (``Commits.flush``)."""
        await self._commits.flush()

    async def close(self) -> None:
        """Cancel background tasks and wait for them; close the notifier."""
        await self._tasks.close()
        await self.notifier.close()

    def job_for_run(self, run_id: str) -> JobRecord | None:
        """The job whose current or past attempt is ``run_id`` (``"<job id>.<attempt>"``)."""
        return self.model.job_for_run(run_id)

    async def stop_jobs_for_shutdown(self, why: str) -> list[str]:
        """labgang is shutting down and its agent will stop the ranks: record that first, so
        their exits are not the jobs' failures (each is requeued, or cancelled with
        ``requeue = false``, once its ranks are gone). Nothing is admitted from now on.

        Args:
            why: the reason recorded in each job's history, e.g. "stopped: labgang up shut down".

        Returns:
            The ids of the jobs that were admitted, running or terminating.
        """
        self._admissions.close()
        stopped = [job.id for job in self.model.active()]
        self.apply(ev.ShutdownRequested(self.clock(), why))
        await self.flush()
        return stopped

    def held_devices(self) -> dict[str, JobRecord]:
        """Device UUID → the job that holds it (admitted, running or terminating)."""
        return held_devices(self.model.active())
