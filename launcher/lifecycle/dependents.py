"""The dependency rules of the lifecycle: which pending jobs wait for their ``--dependency``.

A pending job whose dependency does not hold yet is *held*: it is not admissible
(:meth:`DependencyRules.admissible` is False, so no driver offers it to the scheduler) and its
reason is ``dependency`` with what it waits for (``waits for afterok:12 (running)``). Once the
dependency holds the job is released: ``dependency_met`` is set, the reason cleared, and the
scheduler woken. A dependency that can never hold (``afterok`` on a failed job) cancels the
job with reason ``dependency_never`` naming the condition (Slurm's ``kill_invalid_depend``), or
keeps it held with that reason when the policy says so.

The model keeps only active jobs; a finished job a dependency names is kept as a small
:class:`~labgang.launcher.lifecycle.dependency.Target` while some held job names it. The driver
gives the targets that finished before the model saw them (at start, and with
:class:`~labgang.launcher.lifecycle.events.JobSubmitted`).

``singleton`` (Slurm: at most one job of a name and user runs at once) holds a job while another
job of its name and user holds devices (and is not cancelled: Slurm counts a cancelled job no more,
though its ranks are still stopping) or, submitted before it, is pending and not held; and
:meth:`DependencyRules.admissible` keeps the later jobs of a released ``singleton`` job's name out
of the cycle that may admit it, so one cycle never admits two of them.

Dependencies are judged again only when a job they can concern changed (one they name, one
with a ``singleton`` job's name and user, or a held job itself), so jobs without dependencies
cost nothing. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.context import RuleContext
from labgang.launcher.lifecycle.dependency import (
    BadDependency,
    Condition,
    Dependency,
    DependencyKind,
    Outcome,
    Target,
    Verdict,
    judge,
    parse_dependency,
    targets_of,
)
from labgang.launcher.lifecycle.gang import LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.lifecycle.states import EndIntent, EndReason, JobState, state_phrase, transition

_HELD_CODES = (EndReason.DEPENDENCY.value, EndReason.DEPENDENCY_NEVER.value)
_UNPARSABLE = Dependency((Condition(DependencyKind.AFTEROK, "0"),))
"""Stands for a stored text that no longer parses (a store written by another version): it never holds."""


def target(job: JobRecord) -> Target:
    """What a dependency needs to know of ``job``: id, state, and whether some attempt started."""
    st = job.status
    started = st.ran or st.restart_count > 0 or st.start_time is not None
    at = st.start_time if st.start_time is not None else (st.end_time if st.state.finished else None)
    return Target(job.id, st.state, started, at)


Key = tuple[str, str]
"""A ``singleton`` group: (job name, user)."""


class DependencyRules:
    """Job dependencies (see the module docstring), a part of :class:`~labgang.launcher.lifecycle.machine.Lifecycle`.

    Indexes keep each judgement local: ``_waiters`` (a named id -> the dependents that name it
    and have not held yet), ``_singles`` (a name and user -> its pending ``singleton`` jobs) and
    ``_tasks`` (an array id -> its task ids, for jobs in the model and finished targets), so a
    change to one job judges only the dependents it can concern, by lookups, not scans.

    Args:
        policy: the configured timeouts and limits (``kill_invalid_depend`` among them).
        jobs: the model's active jobs by id (no finished one); the rules read them and change
            the status of the pending ones they hold, release or cancel.
        ctx: the event under way (its instant, the effects out).
        finished: finished jobs that the dependencies of ``jobs`` name (e.g. read from the store
            at a restart); a named job neither in ``jobs`` nor here counts as unknown.
    """

    def __init__(
        self,
        policy: LifecyclePolicy,
        jobs: dict[str, JobRecord],
        ctx: RuleContext,
        finished: Iterable[Target] = (),
    ) -> None:
        self.policy = policy
        self.jobs = jobs
        self._ctx = ctx
        self.finished_targets: dict[str, Target] = {}
        """Finished jobs some held job's dependency names, by id."""
        self.held: dict[str, str] = {}
        """Pending jobs not offered to the scheduler because of their dependency: id -> why."""
        self._dependents: dict[str, Dependency] = {}
        self._released = False  # a job was released by the judgement under way
        self._waiters: dict[str, set[str]] = {}
        self._singles: dict[Key, set[str]] = {}
        self._tasks: dict[str, set[str]] = {}
        for job in self.jobs.values():
            self._index_task(job.id)
            self.track(job)
        for done in finished:
            self.remember(done)
        self.forget_unnamed(list(self.finished_targets))
        # Holds only, no effects, so that no driver offers a held job before its first event;
        # the first event judges them all again and records what changed (a cancel, a release).
        self._judge(set(self._dependents), emit=False)
        self._stale = bool(self._dependents)

    # ----- queries --------------------------------------------------------------------------

    def admissible(self, job: JobRecord, now: float) -> bool:
        """May a scheduling cycle at ``now`` consider ``job``? Pending, out of any requeue
        backoff (``not_before``), not held by its dependency, and not a later job of the name of a
        released ``singleton`` job still pending (unless it waits for the victims it preempted)."""
        st = job.status
        if st.state != JobState.PENDING or st.not_before > now or job.id in self.held:
            return False
        group = self._singles.get((job.spec.name, job.spec.user))
        if group is None or job.id in group or st.nominated:
            # (a preemptor waiting for its victims' devices is not held back: the victim, readmitted
            # in its place, would be preempted again at once, forever)
            return True
        # Not one cycle for two jobs of a singleton's name: a released singleton job goes first,
        # the later jobs of its name wait until it holds devices.
        for other_id in group:
            other = self.jobs.get(other_id)
            if (
                other is not None
                and other.seq < job.seq
                and other.status.state == JobState.PENDING
                and other_id not in self.held
            ):
                return False
        return True

    # ----- indexes --------------------------------------------------------------------------

    def _index_task(self, job_id: str) -> None:
        for name in targets_of(job_id)[1:]:
            self._tasks.setdefault(name, set()).add(job_id)

    def _unindex_task(self, job_id: str) -> None:
        for name in targets_of(job_id)[1:]:
            ids = self._tasks.get(name)
            if ids is not None:
                ids.discard(job_id)
                if not ids:
                    del self._tasks[name]

    def _named(self, job_id: str) -> bool:
        """Does a dependent that has not held yet name ``job_id`` (or its array)?"""
        return any(name in self._waiters for name in targets_of(job_id))

    def remember(self, done: Target) -> None:
        """Keep finished job ``done`` as a target dependencies may name."""
        self.finished_targets[done.id] = done
        self._index_task(done.id)

    def forget_unnamed(self, job_ids: Iterable[str]) -> None:
        """Drop the finished targets among ``job_ids`` that no waiting dependent names any more."""
        for job_id in job_ids:
            if job_id in self.finished_targets and not self._named(job_id):
                del self.finished_targets[job_id]
                self._unindex_task(job_id)

    def track(self, job: JobRecord) -> None:
        """Index ``job``'s dependency (the ids it names, its ``singleton`` group); a stored text that
        no longer parses counts as one that never holds."""
        text = job.spec.dependency
        if not text or job.status.state.finished:
            return
        try:
            dep = parse_dependency(text)
        except BadDependency:  # a stored text that no longer parses: it can never hold
            dep = _UNPARSABLE
        self._dependents[job.id] = dep
        if not job.status.dependency_met:
            for name in dep.job_ids:
                self._waiters.setdefault(name, set()).add(job.id)
        if dep.singleton:
            self._singles.setdefault((job.spec.name, job.spec.user), set()).add(job.id)

    def _stop_waiting(self, job: JobRecord) -> None:
        """``job``'s ``after*`` conditions held (or it left): no named job concerns it any more."""
        dep = self._dependents.get(job.id)
        if dep is None:
            return
        for name in dep.job_ids:
            ids = self._waiters.get(name)
            if ids is not None:
                ids.discard(job.id)
                if not ids:
                    del self._waiters[name]
                    self.forget_unnamed([name, *self._tasks.get(name, ())])

    def untrack(self, job: JobRecord) -> None:
        """Drop ``job`` from every dependency index and from the held jobs."""
        self._stop_waiting(job)
        dep = self._dependents.pop(job.id, None)
        if dep is not None and dep.singleton:
            key = (job.spec.name, job.spec.user)
            group = self._singles.get(key)
            if group is not None:
                group.discard(job.id)
                if not group:
                    del self._singles[key]
        self.held.pop(job.id, None)

    def retire(self, job: JobRecord) -> None:
        """``job`` reached a final state and leaves the model: out of the dependency indexes
        (:meth:`forget`) and the active jobs, effect :class:`~labgang.launcher.lifecycle.effects.Finished`.

        Every rule retires a job through here (the gang rules hold this method, the model calls
        it): a method of the :class:`~labgang.launcher.lifecycle.machine.Lifecycle` held by its
        rules would be a reference cycle (model, rules, model), and a model dropped (a replay,
        each ``labgang simulate`` run) would then wait with all its jobs for the cyclic
        collector's next full pass instead of being freed at once.
        """
        self.forget(job)
        del self.jobs[job.id]
        self._ctx.emit(fx.Finished(job))

    def forget(self, job: JobRecord) -> None:
        """``job`` reached a final state and leaves the model: it waits for nothing any more, and
        stays as a finished target while some waiting dependent names it."""
        self.untrack(job)
        if self._named(job.id):
            self.finished_targets[job.id] = target(job)  # stays in the task index
        else:
            self._unindex_task(job.id)

    def _affected(self, changed: Iterable[JobRecord]) -> set[str]:
        """The dependents whose verdict a change of ``changed`` can change."""
        out: set[str] = set()
        for job in changed:
            if job.id in self._dependents:
                out.add(job.id)
            for name in targets_of(job.id):
                out.update(self._waiters.get(name, ()))
            out.update(self._singles.get((job.spec.name, job.spec.user), ()))
        return out

    # ----- the rule -------------------------------------------------------------------------

    def after_event(self, event: ev.Event) -> None:
        """Judge the dependents that ``event`` (and the effects it asked for so far) can concern
        (called at the end of ``Lifecycle.apply``); cancels cascade (a cancelled job fails its dependents)."""
        submitted = event if isinstance(event, ev.JobSubmitted) else None
        if submitted is not None:  # index the new job first: it may be the first dependent
            self._index_task(submitted.job.id)
            self.track(submitted.job)
            if submitted.targets:
                for done in submitted.targets:
                    if done.id not in self.jobs:
                        self.remember(done)
                self.forget_unnamed([t.id for t in submitted.targets])
        if not self._stale and (
            (submitted is None and not self._ctx.mark()) or not (self._dependents or self._waiters or self._singles)
        ):
            # No job's status changed (no effect asked for: an agent's report that repeats what is
            # known, the usual one), or no dependent at all (a replay's usual case, a plain
            # submission among jobs without dependencies): nothing this event did can concern one.
            return
        changed = [e.job for e in self._ctx.emitted() if isinstance(e, fx.SaveStatus | fx.Finished)]
        if submitted is not None:
            changed.append(submitted.job)
        todo = self._affected(changed)
        if self._stale:
            todo |= set(self._dependents)
            self._stale = False
        while todo:
            mark = self._ctx.mark()
            self._judge(todo, emit=True)
            todo = self._affected(e.job for e in self._ctx.emitted(mark) if isinstance(e, fx.Finished))

    def _found(self, name: str) -> list[Target]:
        """The jobs a dependency on ``name`` covers: the job itself and its array's tasks."""
        out = []
        for job_id in (name, *sorted(self._tasks.get(name, ()))):
            job = self.jobs.get(job_id)
            if job is not None:
                out.append(target(job))
            elif job_id in self.finished_targets:
                out.append(self.finished_targets[job_id])
        return out

    def _judge(self, ids: set[str], *, emit: bool) -> None:
        """Judge the pending dependents among ``ids`` in submission order (a ``singleton`` job
        with its whole group, so the earliest released one goes first)."""
        keys = {
            (job.spec.name, job.spec.user)
            for i in ids
            if (job := self.jobs.get(i)) is not None and i in self._dependents and self._dependents[i].singleton
        }
        for key in keys:
            ids = ids | self._singles.get(key, set())
        pending = sorted(
            (j for i in ids if i in self._dependents and (j := self.jobs.get(i)) is not None),
            key=lambda j: j.seq,
        )
        holders: dict[Key, JobRecord] = {}
        waiting: dict[Key, list[JobRecord]] = {}  # pending jobs of the name that are not singleton dependents
        if keys:
            for job in self.jobs.values():
                key = (job.spec.name, job.spec.user)
                if key in keys:
                    if job.status.state.holds_devices and job.status.end_intent != EndIntent.CANCEL:
                        # A cancelled job no longer counts, though its ranks may still be stopping
                        # (Slurm: CANCELLED while completing is not running): released at the cancel
                        # instant, in every driver, whether or not a cycle runs before its ranks are gone.
                        holders.setdefault(key, job)
                    elif job.status.state == JobState.PENDING and job.id not in self._singles[key]:
                        waiting.setdefault(key, []).append(job)
        self._released = False
        first: dict[Key, str] = {}  # singleton group -> the released job that goes first
        memo: dict[str, Verdict] = {}  # a sweep's jobs share one text: judge it once
        for job in pending:
            if job.status.state != JobState.PENDING:
                continue
            dep = self._dependents[job.id]
            key = (job.spec.name, job.spec.user)
            holder = None
            if dep.singleton:
                h = holders.get(key)
                if h is not None:
                    holder = f"job {h.id} of the same name {state_phrase(h.status.state)}"
                elif key in first:
                    holder = f"job {first[key]} of the same name goes first"
                elif (ahead := _ahead(job, waiting.get(key, ()), self.held)) is not None:
                    # A pending job of the name submitted earlier (or requeued) goes first: one
                    # cycle must not admit both (Slurm: at most one job of a name and user runs).
                    holder = f"job {ahead.id} of the same name is pending and goes first"
                elif (preemptor := _preempting(waiting.get(key, ()), self.held)) is not None:
                    # A job of its name waits for the devices of jobs it preempted: released, a
                    # singleton job would keep it out of the cycles (admissible()), be admitted in
                    # its place and be preempted by it again, forever.
                    holder = f"job {preemptor.id} of the same name is preempting to start and goes first"
            text = job.spec.dependency or ""
            verdict = memo.get(text) if holder is None and not job.status.dependency_met else None
            if dep is _UNPARSABLE:
                verdict = Verdict(Outcome.NEVER, f"the stored dependency {text!r} does not parse")
            if verdict is None:
                found = {} if job.status.dependency_met else {name: self._found(name) for name in dep.job_ids}
                verdict = judge(dep, found, holder, met_before=job.status.dependency_met)
                if holder is None and not job.status.dependency_met:
                    memo[text] = verdict
            if verdict.outcome == Outcome.MET:
                if dep.singleton:
                    first[key] = job.id
                self._release(job, dep, verdict, emit=emit)
            elif verdict.outcome == Outcome.WAITING or not self.policy.kill_invalid_depend:
                code = EndReason.DEPENDENCY if verdict.outcome == Outcome.WAITING else EndReason.DEPENDENCY_NEVER
                self._hold(job, code, verdict.message, emit=emit)
            elif emit:
                self._cancel_invalid(job, verdict)
            else:
                self.held[job.id] = verdict.message
        if self._released:
            self._ctx.emit(fx.WakeScheduler())  # one cycle for every job released together

    def _hold(self, job: JobRecord, code: EndReason, message: str, *, emit: bool) -> None:
        self.held[job.id] = message
        st = job.status
        if emit:
            st.no_preemption = None  # a held job is offered to no cycle: no scheduler reason goes with it
        if not emit or st.reason_message == message:
            return
        if st.reason_code == code.value:
            # As with the scheduler's reasons: new words for the same reason only update memory
            # (and reach the store with the job's next status write), so a target's every step
            # does not rewrite the status of each job of a sweep that waits for it.
            st.reason_message = message
            return
        self._ctx.emit(fx.RecordDecision(self._ctx.now, job.id, fx.DecisionKind.PENDING, code.value, message))
        st.reason_code, st.reason_message = code.value, message
        self._ctx.save(job)

    def _release(self, job: JobRecord, dep: Dependency, verdict: Verdict, *, emit: bool) -> None:
        if not emit:
            return
        was_held = self.held.pop(job.id, None) is not None
        st = job.status
        first_time = not st.dependency_met
        if first_time:
            self._stop_waiting(job)  # what it waited for happened for good: never judged again
            if not dep.singleton:
                self.untrack(job)
        if not (first_time or was_held):
            return
        st.dependency_met = True
        if st.reason_code in _HELD_CODES:
            st.reason_code = st.reason_message = None
        if verdict.not_before > self._ctx.now:  # after:ID+MINUTES: released, not offered before then
            st.not_before = max(st.not_before, verdict.not_before)
            st.reason_code = EndReason.DEPENDENCY.value
            st.reason_message = f"{verdict.message}; holds {_from(verdict.not_before)}"
            self._ctx.emit(fx.WakeAt(verdict.not_before))
        self._ctx.save(job)
        if first_time:
            # Once: the whole dependency held. ``singleton`` is judged again each time the job is
            # pending; its later turns clear the reason without a history line.
            self._ctx.history(job, "dependency-met", verdict.message)
        self._released = True

    def _cancel_invalid(self, job: JobRecord, verdict: Verdict) -> None:
        st = job.status
        transition(st, JobState.CANCELLED)
        st.end_time = self._ctx.now
        st.reason_code, st.reason_message = EndReason.DEPENDENCY_NEVER.value, verdict.message
        self._ctx.save(job)
        self._ctx.history(job, "cancelled", f"dependency {verdict.message}")
        self.retire(job)


def _from(t: float) -> str:
    """``"from t=600s"`` on a simulated clock, ``"from 2026-12-02T02:00:00+0000"`` on a real one."""
    from labgang.launcher.scheduler.reasons import SIMULATED_EPOCH_LIMIT

    if t < SIMULATED_EPOCH_LIMIT:
        return f"from t={t:g}s"
    import time

    return "from " + time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(t))


def _preempting(others: Iterable[JobRecord], held: dict[str, str]) -> JobRecord | None:
    """The first pending job among ``others`` (jobs of a ``singleton`` job's name and user that are
    not ``singleton`` dependents) that waits for the devices of the victims it chose, not held itself."""
    return next((o for o in others if o.status.nominated and o.id not in held), None)


def _ahead(job: JobRecord, others: Iterable[JobRecord], held: dict[str, str]) -> JobRecord | None:
    """The earliest pending job among ``others`` (jobs of ``job``'s name and user that are not
    ``singleton`` dependents) submitted before ``job`` and not held by a dependency of its own."""
    ahead = [o for o in others if o.seq < job.seq and o.id not in held]
    return min(ahead, key=lambda o: o.seq) if ahead else None
