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

Dependencies are judged again only when a job they can concern changed (one they name, one
with a ``singleton`` job's name and user, or a held job itself), so jobs without dependencies
cost nothing. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
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
from labgang.launcher.lifecycle.gang import GangRules, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.lifecycle.states import EndReason, JobState, transition

_HELD_CODES = (EndReason.DEPENDENCY.value, EndReason.DEPENDENCY_NEVER.value)
_UNPARSABLE = Dependency((Condition(DependencyKind.AFTEROK, "0"),))  # names no job: never holds


def target(job: JobRecord) -> Target:
    """What a dependency needs to know of ``job``: id, state, and whether some attempt started."""
    st = job.status
    return Target(job.id, st.state, st.ran or st.restart_count > 0 or st.start_time is not None)


class DependencyRules(GangRules):
    """:class:`GangRules` plus job dependencies (see the module docstring).

    Args:
        policy: the configured timeouts and limits (``kill_invalid_depend`` among them).
        jobs: the jobs to start from (finished ones are left out).
        finished: finished jobs that the dependencies of ``jobs`` name (e.g. read from the store
            at a restart); a named job neither in ``jobs`` nor here counts as unknown.
    """

    def __init__(
        self, policy: LifecyclePolicy, jobs: Iterable[JobRecord] = (), finished: Iterable[Target] = ()
    ) -> None:
        super().__init__(policy, jobs)
        self.finished_targets: dict[str, Target] = {t.id: t for t in finished}
        """Finished jobs some held job's dependency names, by id."""
        self.held: dict[str, str] = {}
        """Pending jobs not offered to the scheduler because of their dependency: id -> why."""
        self._dependents: dict[str, Dependency] = {}
        self._referenced: set[str] = set()
        self._singletons: set[tuple[str, str]] = set()
        for job in self.jobs.values():
            self._track(job)
        # Holds only, no effects, so that no driver offers a held job before its first event;
        # the first event's round then records what changed (a cancel, a release).
        self._judge_all(emit=False)
        self._stale = bool(self._dependents)

    # ----- queries --------------------------------------------------------------------------

    def admissible(self, job: JobRecord, now: float) -> bool:
        """May a scheduling cycle at ``now`` consider ``job``? Pending, out of any requeue
        backoff (``not_before``), and not held by its dependency."""
        st = job.status
        return st.state == JobState.PENDING and st.not_before <= now and job.id not in self.held

    # ----- bookkeeping ----------------------------------------------------------------------

    def _track(self, job: JobRecord) -> None:
        text = job.spec.dependency
        if not text or job.status.state.finished:
            return
        try:
            self._dependents[job.id] = parse_dependency(text)
        except BadDependency:  # a stored text that no longer parses: it can never hold
            self._dependents[job.id] = _UNPARSABLE

    def _concerns(self, job: JobRecord) -> bool:
        """Could a change of ``job`` change some dependent's verdict?"""
        return (
            job.id in self._dependents
            or (job.spec.name, job.spec.user) in self._singletons
            or any(t in self._referenced for t in targets_of(job.id))
        )

    def _retire(self, job: JobRecord) -> None:
        if any(t in self._referenced for t in targets_of(job.id)):
            self.finished_targets[job.id] = target(job)
        self._dependents.pop(job.id, None)
        self.held.pop(job.id, None)
        super()._retire(job)

    def _dependencies_after(self, event: ev.Event) -> None:
        """Judge dependencies again when ``event`` changed a job they can concern (called at the
        end of :meth:`Lifecycle.apply`); cancels cascade (a cancelled job fails its dependents)."""
        changed = [e.job for e in self._out if isinstance(e, fx.SaveStatus | fx.Finished)]
        if isinstance(event, ev.JobSubmitted):
            for t in event.targets:
                self.finished_targets.setdefault(t.id, t)
            self._track(event.job)
            changed.append(event.job)
        if not (self._stale or any(self._concerns(job) for job in changed)):
            return
        self._stale = False
        while self._judge_all(emit=True):
            pass

    # ----- judging --------------------------------------------------------------------------

    def _pending_dependents(self) -> list[JobRecord]:
        out = []
        for job_id in list(self._dependents):
            job = self.jobs.get(job_id)
            if job is None:
                del self._dependents[job_id]
            elif job.status.state == JobState.PENDING:
                out.append(job)
        return sorted(out, key=lambda j: j.seq)

    def _judge_all(self, *, emit: bool) -> bool:
        """Judge every pending dependent, in submission order; True when one was cancelled
        (its own dependents must then be judged again)."""
        pending = self._pending_dependents()
        names = {i for job in pending if not job.status.dependency_met for i in self._dependents[job.id].job_ids}
        keys = {(j.spec.name, j.spec.user) for j in pending if self._dependents[j.id].singleton}
        self._referenced |= names  # a job cancelled below is remembered for the dependents that name it
        found: dict[str, list[Target]] = {}
        holders: dict[tuple[str, str], JobRecord] = {}
        if names or keys:
            for job in self.jobs.values():
                for name in targets_of(job.id):
                    if name in names:
                        found.setdefault(name, []).append(target(job))
                key = (job.spec.name, job.spec.user)
                if key in keys and job.status.state.holds_devices:
                    holders.setdefault(key, job)
            for done in self.finished_targets.values():
                for name in targets_of(done.id):
                    if name in names:
                        found.setdefault(name, []).append(done)
        first: dict[tuple[str, str], str] = {}  # singleton key -> the released job that goes first
        cancelled = False
        for job in pending:
            dep = self._dependents[job.id]
            key = (job.spec.name, job.spec.user)
            holder = None
            if dep.singleton:
                h = holders.get(key)
                if h is not None:
                    holder = f"job {h.id} of the same name is {h.status.state.value}"
                elif key in first:
                    holder = f"job {first[key]} of the same name goes first"
            verdict = judge(dep, found, holder, met_before=job.status.dependency_met)
            if verdict.outcome == Outcome.MET:
                if dep.singleton:
                    first[key] = job.id
                if emit or job.id not in self.held:
                    self._release(job, dep, verdict, emit=emit)
            elif verdict.outcome == Outcome.WAITING or not self.policy.kill_invalid_depend:
                code = EndReason.DEPENDENCY if verdict.outcome == Outcome.WAITING else EndReason.DEPENDENCY_NEVER
                self._hold(job, code, verdict.message, emit=emit)
            elif emit:
                self._cancel_invalid(job, verdict)
                cancelled = True
            else:
                self.held[job.id] = verdict.message
        self._remember(pending)
        return cancelled

    def _remember(self, pending: list[JobRecord]) -> None:
        """Which ids and singleton keys the pending dependents name now; forget finished targets
        no held job names any more."""
        live = [j for j in pending if j.id in self._dependents and j.status.state == JobState.PENDING]
        self._referenced = {i for j in live if not j.status.dependency_met for i in self._dependents[j.id].job_ids}
        self._singletons = {(j.spec.name, j.spec.user) for j in live if self._dependents[j.id].singleton}
        for job_id in [i for i in self.finished_targets if not any(t in self._referenced for t in targets_of(i))]:
            del self.finished_targets[job_id]

    def _hold(self, job: JobRecord, code: EndReason, message: str, *, emit: bool) -> None:
        self.held[job.id] = message
        st = job.status
        if not emit or (st.reason_code, st.reason_message) == (code.value, message):
            return
        if st.reason_code != code.value:
            self._out.append(fx.RecordDecision(self._now, job.id, "pending", code.value, message))
        st.reason_code, st.reason_message = code.value, message
        self._save(job)

    def _release(self, job: JobRecord, dep: Dependency, verdict: Verdict, *, emit: bool) -> None:
        was_held = self.held.pop(job.id, None) is not None
        if not dep.singleton:  # what it waited for happened for good: never judged again
            self._dependents.pop(job.id, None)
        st = job.status
        if not emit or (st.dependency_met and not was_held):
            return
        first_time = not st.dependency_met
        st.dependency_met = True
        if st.reason_code in _HELD_CODES:
            st.reason_code = st.reason_message = None
        self._save(job)
        if first_time or was_held:
            self._history(job, "dependency-met", verdict.message)
        self._out.append(fx.WakeScheduler())

    def _cancel_invalid(self, job: JobRecord, verdict: Verdict) -> None:
        st = job.status
        transition(st, JobState.CANCELLED)
        st.end_time = self._now
        st.reason_code, st.reason_message = EndReason.DEPENDENCY_NEVER.value, verdict.message
        self._save(job)
        self._history(job, "cancelled", f"dependency {verdict.message}")
        self._retire(job)
