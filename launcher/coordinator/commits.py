"""The shell around the lifecycle model: an event in, its effects out, the store first.

:class:`Commits` applies a lifecycle event to the model (``launcher/lifecycle/``), buffers the
persisting effects in the store, and queues the ones that touch agents (launch, stop, signal);
:meth:`Commits.flush` commits the store, then sends them, so a crash never leaves an agent doing
something the store does not know. It is the coordinator part that every other part changes the
model through (``NodeEvents``, ``JobOperations``, the ``Dispatcher`` it owns, the cycle driver
as its effect executor, the scheduling and timer loops).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from labgang.launcher.coordinator.dispatch import Dispatcher
from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev

if TYPE_CHECKING:
    from labgang.launcher.accounting import UsageTotals
    from labgang.launcher.config.cluster import ClusterConfig
    from labgang.launcher.coordinator.agents import AgentRegistry
    from labgang.launcher.coordinator.jobindex import JobMemory
    from labgang.launcher.coordinator.metrics import SchedulerMetrics
    from labgang.launcher.coordinator.notifier import Notifier
    from labgang.launcher.coordinator.store import Store
    from labgang.launcher.coordinator.tasks import BackgroundTasks
    from labgang.launcher.coordinator.timers import Kicks, Wakes
    from labgang.launcher.lifecycle.machine import Lifecycle

log = logging.getLogger("labgang.coordinator")


class Commits:
    """Applies lifecycle events and carries out their typed effects: store writes buffered now,
    agent commands sent (through its :class:`~labgang.launcher.coordinator.dispatch.Dispatcher`)
    after the next :meth:`flush` commits them.

    Args:
        model: the lifecycle model (changed only through :meth:`apply`).
        store: the open database the persisting effects are written to.
        memory: the finished jobs kept and the submission order (``jobindex.JobMemory``).
        keep_finished: how many finished jobs ``memory`` keeps (``core.RECENT_FINISHED``).
        usage: GPU-seconds of the ended attempts (``SaveAttempt`` of a closed attempt adds to it).
        notifier: ``--mail-type`` notifications of history lines.
        agents: the agent registry the dispatcher's commands go through.
        clock: unix seconds.
        config: the cluster configuration (the dispatcher's ``max_signal_lead_s``).
        kicks: the scheduling loop's wake-up (``WakeScheduler``; the dispatcher's failed launches).
        wakes: the scheduler's wakes at instants (``WakeAt``).
        tasks: where agent commands run after a commit.
        sample: called with an event's time before the event is applied: admission fair sharing
            samples what was held up to it (``CycleDriver.sample``, as ``labgang simulate`` does).
        metrics: the /metrics collectors admissions and preemptions are reported to, asked at each
            effect (None: none served).
    """

    def __init__(
        self,
        model: Lifecycle,
        store: Store,
        memory: JobMemory,
        keep_finished: int,
        usage: UsageTotals,
        notifier: Notifier,
        agents: AgentRegistry,
        clock: Callable[[], float],
        config: ClusterConfig,
        *,
        kicks: Kicks,
        wakes: Wakes,
        tasks: BackgroundTasks,
        sample: Callable[[float], object],
        metrics: Callable[[], SchedulerMetrics | None],
    ) -> None:
        self._model = model
        self._store = store
        self._memory = memory
        self._keep_finished = keep_finished
        self._usage = usage
        self._notifier = notifier
        self._kicks = kicks
        self._wakes = wakes
        self._tasks = tasks
        self._sample = sample
        self._metrics = metrics
        self._effects: list[Callable[[], Awaitable[Any]]] = []
        # node -> stops sent as one stop_jobs command after the next commit, so their grace periods end together
        self._stops: dict[str, list[tuple[str, float, bool]]] = {}
        # launch, stop and signal commands; it applies the agents' answers through this shell
        self._dispatcher = Dispatcher(agents, self, kicks, tasks, clock, config)

    def apply(self, event: ev.Event) -> list[fx.Effect]:
        """Apply one lifecycle event and carry out its effects: persisting ones are buffered in
        the store now; agent commands are queued for after the next :meth:`flush` commits.

        Admission fair sharing first samples what was held up to the event, before it changes
        anything (``sample``)."""
        self._sample(event.now)
        effects = self._model.apply(event)
        if isinstance(event, ev.JobSubmitted):
            self._memory.submitted(event.job)
        for effect in effects:
            self._execute(effect)
        return effects

    def _execute(self, effect: fx.Effect) -> None:
        store = self._store
        if isinstance(effect, fx.SaveStatus):
            store.save_status(effect.job)
        elif isinstance(effect, fx.SaveSpec):
            store.save_spec(effect.job)
        elif isinstance(effect, fx.SaveRank):
            store.save_rank(effect.job, effect.rank, attempt=effect.attempt)
        elif isinstance(effect, fx.SaveAttempt):
            store.save_attempt(effect.record)
            if effect.record.end_time is not None:  # closed: once per attempt (lifecycle/gang.py)
                self._usage.attempt_ended(effect.record)
        elif isinstance(effect, fx.AddHistory):
            store.save_event(effect.job.id, effect.entry)
            self._notifier.observe(effect.job, effect.entry)  # --mail-type: queued, never awaited here
            log.info("job %s: %s: %s", effect.job.id, effect.entry.event, effect.entry.message)
        elif isinstance(effect, fx.RecordDecision):
            store.add_decision(effect.time, effect.job_id, effect.kind.value, effect.code, effect.message)
        elif isinstance(effect, fx.Stop):
            self._stops.setdefault(effect.node, []).append((effect.run_id, effect.grace, effect.warn))
        elif isinstance(effect, fx.Signal):
            self.effect(
                partial(self._dispatcher.signal_on_node, effect.node, effect.run_id, effect.signum, effect.shell_only)
            )
        elif isinstance(effect, fx.Dispatch):
            self.effect(partial(self._dispatcher.dispatch_job, effect.job))
        elif isinstance(effect, fx.Launch):
            self.effect(partial(self._dispatcher.launch_on_node, effect.job, effect.node, effect.run_id))
        elif isinstance(effect, fx.Requeued):
            pass  # its history line and status are saved by their own effects
        elif isinstance(effect, fx.Finished):
            self._memory.finished(effect.job, self._keep_finished)
        elif isinstance(effect, fx.WakeScheduler):
            self._kicks.kick()
        elif isinstance(effect, fx.WakeAt):
            self._wakes.at(effect.time)
        elif isinstance(effect, fx.AdmissionObserved):
            metrics = self._metrics()
            if metrics is not None:
                metrics.observe_admission(effect.queue, effect.wait_s)
        elif (metrics := self._metrics()) is not None:  # PreemptionCounted
            metrics.count_preemption(effect.queue, effect.why)

    def wake_at(self, when: float) -> None:
        """Kick the scheduler at ``when`` (unix seconds), once per instant (``timers.Wakes``)."""
        self._wakes.at(when)

    def kick(self) -> None:
        """Ask the scheduling loop for a cycle (``timers.Kicks``)."""
        self._kicks.kick()

    @property
    def pending(self) -> bool:
        """True when store writes or agent commands wait for the next :meth:`flush`."""
        return bool(self._store.dirty or self._effects)

    def effect(self, make: Callable[[], Awaitable[Any]]) -> None:
        """Queue an agent command to run after the next :meth:`flush` commits."""
        self._effects.append(make)

    async def flush(self) -> None:
        """Commit every state change so far, then start the effects they asked for."""
        # Take the effects queued so far first: their state changes are all buffered now, so
        # this commit covers them; effects queued while it runs wait for their own commit.
        effects, self._effects = self._effects, []
        stops, self._stops = self._stops, {}
        await self._store.durable()
        for node in sorted(stops):
            self._tasks.spawn(self._dispatcher.stop_jobs_on_node(node, stops[node]))
        for make in effects:
            self._tasks.spawn(make())
