"""The lifecycle model: typed events in, typed effects out, every state change guarded.

Rules (torchrun's and Kueue's waitForPodsReady, docs/queue-semantics.md §A5):

* ADMITTED → RUNNING once every rank confirmed its start; not within ``startup_timeout_s``
  → every rank stopped, the job requeued with backoff (intent RETRY), the reason naming the
  node(s) and rank(s) that failed.
* a rank exits non-zero (or vanishes) → the other ranks are stopped with the job's grace →
  the job fails with that rank's exit status.
* every rank exits 0 → succeeded, once every rank is *gone* (its devices free). From the moment
  every rank has exited the job is *completing*: never a victim, never requeued.
* preempted → stopped with grace → requeued with its original submit time (intent PREEMPT);
  a gang whose ranks all exit 0 within the grace period has finished instead (succeeded).
  A gang is never evicted by the cycle that admitted it.
* a node is lost → the ranks elsewhere are stopped; its own ranks are fenced: they count as
  lost only at the node's last contact + ``node_timeout_s`` + the job's grace (by then its
  agent stopped them on its own lease), or end earlier on the exits the agent reports when it
  comes back; then the job is requeued (or failed with ``requeue = false``).
* labgang itself shuts down → stopped, requeued (intent SHUTDOWN), or cancelled with
  ``requeue = false``; never the job's failure.
* a finished job never runs again: any stop that would requeue (preemption, lost node or
  lease, failed start, shutdown) ends the job as succeeded when every rank exited 0 on its own
  (not killed, not of unknown exit, not stopped on its node's lease; §A3.6). Cancel and time
  limit never requeue and keep their outcome.
* every requeue starts a new attempt; ``restart_count`` rises only when the attempt ran.

Pure: no I/O, no clock. :meth:`Lifecycle.apply` changes the records it holds and returns the
effects the driver must carry out (persist first, then talk to agents).

The model is composed of rule objects it holds, which share its jobs and one
:class:`~labgang.launcher.lifecycle.context.RuleContext` (the event's instant and the effects
out): the gang rules (:class:`~labgang.launcher.lifecycle.gang.GangRules`), the dependency
rules (:class:`~labgang.launcher.lifecycle.dependents.DependencyRules`) and the fences on lost
nodes (:class:`~labgang.launcher.lifecycle.fencing.FenceRules`).
"""

from __future__ import annotations

from collections.abc import Iterable

from labgang.agent.mem_size import size_text
from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.context import RuleContext
from labgang.launcher.lifecycle.dependency import Target
from labgang.launcher.lifecycle.dependents import DependencyRules
from labgang.launcher.lifecycle.fencing import FenceRules
from labgang.launcher.lifecycle.gang import GangRules, LifecyclePolicy
from labgang.launcher.lifecycle.records import (
    JobRecord,
    JobSpec,
    RankRecord,
    parse_warning,
    signal_name,
    warns_batch_shell_only,
)
from labgang.launcher.lifecycle.rules import (
    completing,
    elastic_sizes,
    job_nodes,
    launchable,
    may_be_victim,
    ranks_in_order,
)
from labgang.launcher.lifecycle.states import EndIntent, EndReason, JobState, RankPhase, transition
from labgang.launcher.scheduler.reasons import held_reason

__all__ = ["Lifecycle", "LifecyclePolicy"]


class Lifecycle:
    """The lifecycle model: :meth:`apply` takes one typed event and returns the typed effects it
    asks for. It holds the gang rules (:class:`~labgang.launcher.lifecycle.gang.GangRules`), the
    job dependencies (:class:`~labgang.launcher.lifecycle.dependents.DependencyRules`) and the
    fences on lost nodes (:class:`~labgang.launcher.lifecycle.fencing.FenceRules`).

    ``jobs`` holds the active jobs only (pending, admitted, running, terminating): a job that
    reaches a final state leaves it (effect :class:`~labgang.launcher.lifecycle.effects.Finished`),
    so memory follows active work, not history.

    Args:
        policy: the configured timeouts and limits.
        jobs: the jobs to start from (e.g. loaded from the store); finished ones are left out,
            and a pending one starts with no ranks.
        finished: finished jobs that the dependencies of ``jobs`` name (e.g. read from the store
            at a restart); a named job neither in ``jobs`` nor here counts as unknown.
    """

    def __init__(
        self, policy: LifecyclePolicy, jobs: Iterable[JobRecord] = (), finished: Iterable[Target] = ()
    ) -> None:
        self.policy = policy
        self.jobs: dict[str, JobRecord] = {job.id: job for job in jobs if not job.status.state.finished}
        for job in self.jobs.values():
            if job.status.state == JobState.PENDING:
                # A pending job's next attempt has no ranks until it is admitted. Stores written
                # before SaveRank carried its attempt may hold the last attempt's ranks under it.
                job.ranks = {}
        self.admissions = max((job.status.admit_seq for job in self.jobs.values()), default=0)
        """How many admissions so far: the last one's ``admit_seq``."""
        self._ctx = RuleContext()
        self._deps = DependencyRules(policy, self.jobs, self._ctx, finished)
        # a job that ends leaves through the dependency rules (DependencyRules.retire), which
        # hold no reference back: none of the rules holds this model, so a model dropped is
        # freed at once, with its jobs, not at the cyclic collector's next full pass
        self._gang = GangRules(policy, self.jobs, self._ctx, self._deps.retire)
        self._fences = FenceRules(policy, self._ctx, self._gang)

    # ----- queries --------------------------------------------------------------------------

    def job_for_run(self, run_id: str) -> JobRecord | None:
        """The job whose current or past attempt is ``run_id`` (``"<job id>.<attempt>"``)."""
        return self._gang.job_for_run(run_id)

    def active(self) -> list[JobRecord]:
        """Jobs that hold devices (admitted, running, terminating), in submission order."""
        return self._gang.active()

    def awaited_by_waiting_preemptor(self, job: JobRecord) -> bool:
        """True when ``job`` is a requeued victim a pending preemptor still waits on another
        victim for (:meth:`GangRules.awaited_by_waiting_preemptor`)."""
        return self._gang.awaited_by_waiting_preemptor(job)

    def admissible(self, job: JobRecord, now: float) -> bool:
        """May a scheduling cycle at ``now`` consider ``job``? (:meth:`DependencyRules.admissible`)."""
        return self._deps.admissible(job, now)

    @property
    def preemptors(self) -> dict[str, JobRecord]:
        """Active jobs that name victims, by id (:attr:`GangRules.preemptors`; may still hold a few
        that no longer do until the next scan drops them)."""
        return self._gang.preemptors

    @property
    def held(self) -> dict[str, str]:
        """Pending jobs not offered to the scheduler because of their dependency: id -> why."""
        return self._deps.held

    @property
    def finished_targets(self) -> dict[str, Target]:
        """Finished jobs some held job's dependency names, by id."""
        return self._deps.finished_targets

    # ----- entry point --------------------------------------------------------------------

    def apply(self, event: ev.Event) -> list[fx.Effect]:
        """Apply one event; return the effects it asks for, in order.

        Raises:
            IllegalTransition: a rule tried an arrow the transitions table refuses (a bug).
        """
        self._ctx.begin(event.now)
        # The submissions, the agents' rank reports and the cycles' decisions first: most events
        # are those (each type is tested in turn; the event types are unrelated classes).
        if isinstance(event, ev.JobSubmitted):
            self._submitted(event)
        elif isinstance(event, ev.RankObserved):
            self._observe(event)
        elif isinstance(event, ev.CycleDecided):
            self._cycle(event)
        elif isinstance(event, ev.CancelRequested):
            self._cancel(event)
        elif isinstance(event, ev.HoldRequested):
            self._hold_job(event.job_id, event.by, event.admin)
        elif isinstance(event, ev.ReleaseRequested):
            self._release_job(event)
        elif isinstance(event, ev.RequeueRequested):
            self._requeue_requested(event)
        elif isinstance(event, ev.UpdateRequested):
            self._update(event)
        elif isinstance(event, ev.LaunchSent):
            self._launch_sent(event)
        elif isinstance(event, ev.LaunchAnswered):
            self._launch_answered(event)
        elif isinstance(event, ev.LaunchFailed):
            self._launch_failed(event)
        elif isinstance(event, ev.NodeJoined):
            self._node_joined(event)
        elif isinstance(event, ev.NodeLost):
            self._fences.node_lost(event, self.active())
        elif isinstance(event, ev.Tick):
            self._tick(event)
        elif isinstance(event, ev.DeviceViolationSeen):
            self._violation(event)
        else:
            self._shutdown(event)
        self._deps.after_event(event)
        return self._ctx.take()

    # ----- submission and cancel ------------------------------------------------------------

    def _submitted(self, e: ev.JobSubmitted) -> None:
        job, spec = e.job, e.job.spec
        self.jobs[job.id] = job
        if job.status.nominated:
            self._gang.preemptors[job.id] = job
        after = f", dependency {spec.dependency}" if spec.dependency else ""
        self._ctx.history(
            job,
            "submitted",
            f"by {spec.user} to queue {spec.queue}: {_asked(spec)}{after}",
        )
        self._ctx.emit(fx.WakeScheduler())

    def _cancel(self, e: ev.CancelRequested) -> None:
        job = self.jobs.get(e.job_id)
        if job is None or job.status.state.finished:
            return
        st = job.status
        if st.state == JobState.PENDING:
            transition(st, JobState.CANCELLED)
            st.end_time = self._ctx.now
            st.hold, st.hold_admin = None, False
            st.reason_code, st.reason_message = EndReason.CANCELLED.value, f"cancelled by {e.by}"
            self._ctx.save(job)
            self._ctx.history(job, "cancelled", f"by {e.by} while pending")
            self._deps.retire(job)
        else:
            self._gang.begin_termination(job, EndIntent.CANCEL, f"cancelled by {e.by}")
        self._ctx.emit(fx.WakeScheduler())

    # ----- scontrol's verbs (verbs.py says who may do what; these apply what was allowed) -------

    def _hold_job(self, job_id: str, by: str, admin: bool) -> None:
        """Hold a pending job: no cycle admits it (reason ``held``) until it is released."""
        job = self.jobs.get(job_id)
        if job is None or job.status.state != JobState.PENDING:
            return
        st = job.status
        first = st.hold is None or (admin and not st.hold_admin)  # an admin's hold over a user's is news
        # a user's hold never renames an admin's (only an admin releases it)
        holder = st.hold if st.hold is not None and st.hold_admin and not admin else by
        st.hold, st.hold_admin = holder, st.hold_admin or admin
        st.nominated = ()  # a held preemptor waits for no victim: the devices it reserved go back
        if job.id not in self._deps.held:  # a job waiting for its dependency keeps saying so
            reason = held_reason(job.id, holder, st.hold_admin)
            st.reason_code, st.reason_message, st.no_preemption = reason.code.value, reason.message, None
        self._ctx.save(job)
        if first:
            kind = " (an admin hold: only an admin may release it)" if st.hold_admin else ""
            self._ctx.history(job, "held", f"by {by}{kind}")
        self._ctx.emit(fx.WakeScheduler())  # it no longer blocks its queue's head or holds quota

    def _release_job(self, e: ev.ReleaseRequested) -> None:
        job = self.jobs.get(e.job_id)
        if job is None or job.status.hold is None:
            return
        st = job.status
        st.hold, st.hold_admin = None, False
        if st.reason_code == EndReason.HELD.value:
            st.reason_code = st.reason_message = None
        self._ctx.save(job)
        self._ctx.history(job, "released", f"by {e.by}")
        self._ctx.emit(fx.WakeScheduler())

    def _requeue_requested(self, e: ev.RequeueRequested) -> None:
        """Stop an admitted or running job with its grace; once its ranks are gone it is pending
        again as a new attempt (held too with ``hold``), unless every rank exited 0 on its own."""
        job = self.jobs.get(e.job_id)
        if job is None or job.status.state not in (JobState.ADMITTED, JobState.RUNNING):
            return
        if e.hold:
            st = job.status
            st.hold, st.hold_admin = e.by, st.hold_admin or e.admin
        then = " and held" if e.hold else ""
        self._gang.begin_termination(job, EndIntent.REQUEUE, f"requeue{then} requested by {e.by}")
        self._ctx.emit(fx.WakeScheduler())

    def _update(self, e: ev.UpdateRequested) -> None:
        """Replace the job's spec with the update's values; a new name or dependency is indexed
        again (``dependents.py``) and a new dependency judged from scratch."""
        job = self.jobs.get(e.job_id)
        if job is None or job.status.state.finished:
            return
        changes = e.update.changes(job.spec)
        if not changes:
            return
        old = job.spec
        reindex = "name" in changes or "dependency" in changes
        if reindex:
            self._deps.untrack(job)
        job.spec = e.update.applied(old)
        self._ctx.emit(fx.SaveSpec(job))
        st = job.status
        if "dependency" in changes:
            st.dependency_met = False
            if st.reason_code in (EndReason.DEPENDENCY.value, EndReason.DEPENDENCY_NEVER.value):
                st.reason_code = st.reason_message = None
            for done in e.targets:
                if done.id not in self.jobs:
                    self._deps.remember(done)
        if reindex:
            self._deps.track(job)
            self._deps.forget_unnamed([t.id for t in e.targets])
        self._ctx.save(job)  # also has the dependency rules judge it again
        words = {
            "priority": "priority",
            "time_limit_s": "time limit",
            "name": "name",
            "dependency": "dependency",
            "queue": "queue",
        }

        def shown(name: str, value: object) -> str:
            if value is None:
                return "none"
            return f"{value:g} s" if name == "time_limit_s" and isinstance(value, float) else str(value)

        told = ", ".join(f"{words[k]} {shown(k, getattr(old, k))} -> {shown(k, v)}" for k, v in changes.items())
        self._ctx.history(job, "updated", f"by {e.by}: {told}")
        self._ctx.emit(fx.WakeScheduler())

    def _shutdown(self, e: ev.ShutdownRequested) -> None:
        for job in self.active():
            if job.status.state != JobState.TERMINATING:  # else already stopping for its own reason
                self._gang.begin_termination(job, EndIntent.SHUTDOWN, e.why)

    # ----- scheduling decisions -------------------------------------------------------------

    def _cycle(self, e: ev.CycleDecided) -> None:
        result, now = e.result, e.now
        # A gang chosen as a victim by the cycle that admits it never started: it is not admitted
        # (it stays pending) rather than admitted and evicted in the same instant.
        victims_now = {v for pre in result.preempted for v in pre.victims}
        admitted_now = frozenset(a.job_id for a in result.admitted)
        protected = admitted_now | e.admitted_before
        for adm in result.admitted:
            job = self.jobs.get(adm.job_id)
            if job is None or job.status.state != JobState.PENDING:
                continue
            if job.id in victims_now:
                self._ctx.history(job, "not-admitted", "the same cycle gave its devices to a preemptor")
                self._ctx.emit(fx.WakeScheduler())
                continue
            st = job.status
            transition(st, JobState.ADMITTED)
            st.admit_time = now
            self.admissions += 1
            st.admit_seq = self.admissions
            st.nominated = ()
            st.ran = False
            st.lease_stopped = False
            st.unheard_exits = ()  # admitted again: what the last attempt's ranks report now changes nothing
            job.requeued_ranks = {}
            st.reason_code = st.reason_message = None
            st.no_preemption = None
            job.ranks = {rp.rank: RankRecord.assigned(rp.rank, rp.node, tuple(rp.devices)) for rp in adm.placement}
            self._ctx.save(job)
            self._gang.open_attempt(job, adm.whole)
            for rank in job.ranks.values():
                self._ctx.emit(fx.SaveRank(job, rank, job.attempt))
            where = ", ".join(job_nodes(job))
            self._ctx.emit(fx.RecordDecision(now, job.id, fx.DecisionKind.ADMIT, "admitted", f"on {where}"))
            size = f"{len(job.ranks)} rank{'s' if len(job.ranks) != 1 else ''}"
            if job.spec.request.elastic:
                size = f"started with {len(job.ranks)} of {job.spec.workers} ranks (min {job.spec.min_workers})"
                if job.spec.groups:
                    size = f"started with {len(job.ranks)} of {job.spec.workers} ranks ({elastic_sizes(job)})"
            self._ctx.history(job, "admitted", f"{size} on {where}")
            if adm.note:  # a share of a card: whether it joined a shared card or took a whole one, and why
                self._ctx.history(job, "share-placed", adm.note)
            self._ctx.emit(fx.AdmissionObserved(job.spec.queue, now - st.pending_since))
            self._ctx.emit(fx.Dispatch(job))
        for pre in result.preempted:
            preemptor = self.jobs.get(pre.job_id)
            if preemptor is None:
                continue
            if tuple(preemptor.status.nominated) != tuple(pre.victims):
                preemptor.status.nominated = tuple(pre.victims)
                self._gang.preemptors[preemptor.id] = preemptor
                self._ctx.save(preemptor)
                self._ctx.emit(
                    fx.RecordDecision(
                        now,
                        preemptor.id,
                        fx.DecisionKind.PREEMPT,
                        "preempt",
                        f"victims {', '.join(pre.victims)}: {pre.reason}",
                    )
                )
                waiting = ", ".join(f"job {v}" for v in pre.victims)
                self._ctx.history(preemptor, "preempting", f"waiting for {waiting} to stop: {pre.reason}")
            for i, victim_id in enumerate(pre.victims):
                victim = self.jobs.get(victim_id)
                if victim is None or not may_be_victim(victim, protected):
                    continue
                reclaim = pre.reclaims[i] if i < len(pre.reclaims) else ""
                if reclaim:  # taken back by another queue of the cohort: a reclaim, not a priority preemption
                    why_text = f"by queue {preemptor.spec.queue} for job {preemptor.id}: {reclaim}; {pre.reason}"
                    stop = f"reclaimed {why_text}"
                else:
                    why_text = f"by job {preemptor.id}: {pre.reason}"
                    stop = f"preempted {why_text}"
                self._ctx.emit(fx.RecordDecision(now, victim.id, fx.DecisionKind.VICTIM, "preempted", why_text))
                self._gang.begin_termination(victim, EndIntent.PREEMPT, stop)
                why = "in_queue" if victim.spec.queue == preemptor.spec.queue else "reclaim"
                self._ctx.emit(fx.PreemptionCounted(victim.spec.queue, why))
        jobs, waiting = self.jobs, JobState.PENDING
        for pend in result.pending:  # every waiting job, every cycle
            job = jobs.get(pend.job_id)
            if job is None:
                continue
            st, reason = job.status, pend.reason
            if st.state != waiting:
                continue
            code = reason.code.value
            if st.reason_code != code:
                # A new kind of reason is a decision worth keeping; a new number in the same
                # reason only updates memory (and goes to disk with the next status write).
                st.reason_code, st.reason_message = code, reason.message
                st.no_preemption = reason.no_preemption
                self._ctx.emit(fx.RecordDecision(now, job.id, fx.DecisionKind.PENDING, code, reason.message))
                self._ctx.save(job)
            else:
                # most cycles say the same again: written (and counted) only when it differs, as
                # CountsChanges would judge it (an equal value of another type is a change)
                message, no_preemption = reason.message, reason.no_preemption
                was = st.reason_message
                if type(was) is not type(message) or was != message:
                    st.reason_message = message
                had = st.no_preemption
                if had is not no_preemption and (type(had) is not type(no_preemption) or had != no_preemption):
                    st.no_preemption = no_preemption

    # ----- ranks ----------------------------------------------------------------------------

    def _observe(self, e: ev.RankObserved) -> bool:
        """Apply one rank observation; False when no current rank matches it."""
        job, rank = self._gang.lookup(e.node, e.run_id, e.rank)
        if job is None or rank is None:
            self._gang.late_exit(e)  # a requeued job's last attempt, heard after its fence ran out
            return False
        if (
            e.phase == RankPhase.RUNNING
            or e.phase == RankPhase.EXITED
            or (e.phase == RankPhase.GONE and e.exit_status is not None)
        ) and not job.status.ran:
            job.status.ran = True
            self._ctx.save(job)
        # Its lines dated when the fence stopped it, or when it ended, heard only at its node's
        # rejoin; a report that is neither (the usual one) writes its lines now.
        at = self._fences.fence_time(job, e) if e.fenced else None
        if at is None and e.ended_at is not None:
            at = self._gang.heard_late(job, e.node, e.ended_at)
        if at is not None:
            self._ctx.date_history(at)
        if e.fenced and rank.exit_status is None and not rank.ended:
            # Its agent stopped it on its lease (docs/queue-semantics.md §A5): its exit, even
            # status 0, is not its own (§A3.6), so this attempt can never count as finished.
            if not job.status.lease_stopped:
                job.status.lease_stopped = True
                self._ctx.save(job)
            if job.status.state in (JobState.ADMITTED, JobState.RUNNING):
                # The node was cut off: the job goes back to its queue, as for a lost node, rather than failing.
                why = f"node {e.node} stopped rank {e.rank} itself: its lease ran out (no answer from the coordinator)"
                self._gang.begin_termination(job, EndIntent.LOST, why)
        was, starting = rank.state, job.status.state == JobState.ADMITTED
        if self._gang.set_rank(
            job, rank, e.phase, pid=e.pid, exit_status=e.exit_status, started_at=e.started_at, ended_at=e.ended_at
        ):
            self._gang.mark_running(job)  # "running" before this rank's "rank-exited"
            # Once per rank, when it first passes "exited" (a later report adding its pid, or
            # its "gone", is no new exit). A rank that exits while the gang is starting gets its
            # line from GangRules.held_exits, after "running" (or before "stopping").
            exited_now = was.order < RankPhase.EXITED.order <= rank.state.order and rank.state != RankPhase.LOST
            if exited_now and rank.exit_status is not None and not starting:
                self._ctx.history(job, "rank-exited", self._gang.exit_line(rank))
            if at is not None:
                self._ctx.date_history(None)  # what follows (requeued, admitted again) happens now
            self._gang.evaluate(job)
        if at is not None:
            self._ctx.date_history(None)
        return True

    # ----- launches -------------------------------------------------------------------------

    def _launch_sent(self, e: ev.LaunchSent) -> None:
        job = self.job_for_run(e.run_id)
        if job is None or job.run_id != e.run_id or job.status.state != JobState.ADMITTED:
            return
        if e.master_addr is not None and job.status.master_addr is None:
            job.status.master_addr = e.master_addr
            self._ctx.save(job)
        ready = launchable(job)  # --startup-order: the later groups' ranks are not sent yet
        for rank in ranks_in_order(job):
            if rank.node == e.node and rank.state == RankPhase.ASSIGNED and rank.rank in ready:
                self._gang.set_rank(job, rank, RankPhase.LAUNCHING)

    def _launch_answered(self, e: ev.LaunchAnswered) -> None:
        job = self.job_for_run(e.run_id)
        if job is None:
            return
        current = job.run_id == e.run_id
        if e.master_port is not None and current and job.status.master_port is None:
            job.status.master_port = e.master_port
            self._ctx.save(job)
            if job.spec.startup_order:
                self._gang.evaluate(job)  # the first group may have reported started before the port came
        if e.refused and current:
            # First the gang's fate, then the refused ranks count as gone. A permanent refusal
            # would only repeat: the job fails at once. Others are a failed start, retried with backoff.
            detail = "; ".join(f"rank {rank}: {error}" for rank, error in e.refused)
            if e.permanent:
                if job.status.state == JobState.ADMITTED:
                    why = f"node {e.node} refused the launch (retrying would not help): {detail}"
                    self._gang.begin_termination(job, EndIntent.FAIL, why)
            else:
                self._gang.start_failed(job, f"node {e.node} refused the launch: {detail}")
            for rank_no, _ in e.refused:
                rank = job.ranks.get(rank_no)
                if job.run_id == e.run_id and rank is not None and self._gang.set_rank(job, rank, RankPhase.GONE):
                    self._gang.evaluate(job)
        for obs in e.observed:
            if not self._observe(obs) and obs.phase != RankPhase.GONE:
                # The job moved on while the command was in flight: do not leave the rank behind.
                self._ctx.emit(fx.Stop(e.node, e.run_id, job.spec.grace_s, False, job.id))

    def _launch_failed(self, e: ev.LaunchFailed) -> None:
        job = self.job_for_run(e.run_id)
        if job is None:
            return
        if job.run_id == e.run_id and job.status.state == JobState.ADMITTED:
            self._gang.start_failed(job, e.message)
        elif job.run_id != e.run_id:
            self._ctx.emit(fx.Stop(e.node, e.run_id, job.spec.grace_s, False, job.id))

    # ----- nodes ----------------------------------------------------------------------------

    def _node_joined(self, e: ev.NodeJoined) -> None:
        """Compare what the agent runs with what the records say should run on its node.

        Reported ranks update the records; expected ranks the agent does not know are
        (re)launched when their job is still starting, or count as gone; ranks the agent runs
        that no current job expects there are stopped.
        """
        node = e.node
        self._fences.node_back(node)  # its fenced ranks now end on what the agent reports
        self._gang.node_joined(node)  # ranks it reports ended before now ended unheard (GangRules.gone_at)
        by_key = {(r.run_id, r.rank): r for r in e.reported}
        matched: set[tuple[str, int]] = set()
        for job in self.active():
            relaunch = False
            adopted: list[int] = []
            for rank in [r for r in ranks_in_order(job) if r.node == node]:
                key = (job.run_id, rank.rank)
                reported = by_key.get(key)
                if reported is not None:
                    if rank.state != RankPhase.LOST:
                        matched.add(key)
                        if reported.phase == RankPhase.RUNNING and rank.state == RankPhase.RUNNING:
                            adopted.append(rank.rank)
                        self._observe(reported)
                    continue
                if rank.state in (RankPhase.ASSIGNED, RankPhase.LAUNCHING):
                    if job.status.state == JobState.ADMITTED:
                        relaunch = True
                    else:
                        self._gang.set_rank(job, rank, RankPhase.GONE)
                elif rank.state in (RankPhase.RUNNING, RankPhase.EXITED):
                    self._gang.set_rank(job, rank, RankPhase.GONE)
                    self._ctx.history(job, "rank-gone", f"node {node} no longer knows rank {rank.rank}")
            if adopted and job.status.state == JobState.RUNNING:
                ranks = ", ".join(str(r) for r in adopted)
                self._ctx.history(job, "re-adopted", f"node {node} rejoined with rank(s) {ranks} still running")
            if relaunch and job.status.master_port is not None:
                self._ctx.emit(fx.Launch(job, node, job.run_id))
            elif relaunch and all(n in e.connected for n in job_nodes(job)):
                # Admitted before a coordinator crash, never dispatched: dispatch it once every
                # node of the gang is back (the startup timeout bounds the wait).
                self._ctx.emit(fx.Dispatch(job))
            if job.status.state == JobState.TERMINATING:
                self._gang.stop_live_ranks(job, only_node=node)
            self._gang.evaluate(job)
        for key, reported in by_key.items():
            if key in matched:
                continue
            self._gang.late_exit(reported)  # a requeued job's last attempt, heard after its fence ran out
            if reported.phase == RankPhase.GONE:
                continue
            owner = self.job_for_run(key[0])
            grace = owner.spec.grace_s if owner is not None else self.policy.default_grace_s
            self._ctx.emit(fx.Stop(node, key[0], grace, False, owner.id if owner is not None else None))

    def _violation(self, e: ev.DeviceViolationSeen) -> None:
        """A rank's process on a device it was not given: a history line (once per process and
        device), and with ``violation = "kill"`` the job is stopped and fails, saying why."""
        job, rank = self._gang.lookup(e.node, e.run_id, e.rank)
        if job is None or rank is None:
            return
        if e.budget is not None:
            self._over_budget(job, e)
            return
        line = (
            f"rank {e.rank} on {e.node} (pid {e.pid}) used device {e.device}, "
            f"which it was not given (its devices: {', '.join(e.allowed) or 'none'})"
        )
        if any(h.event == "device-violation" and h.message == line for h in job.history):
            return  # reported again (every inventory while it lasts, or after a coordinator restart)
        self._ctx.history(job, "device-violation", line)
        if self.policy.violation == "kill" and job.status.state != JobState.TERMINATING:
            self._gang.begin_termination(job, EndIntent.FAIL, f'device violation (violation = "kill"): {line}')
            self._ctx.emit(fx.WakeScheduler())

    def _over_budget(self, job: JobRecord, e: ev.DeviceViolationSeen) -> None:
        """A sharing rank over its ``--gpu-mem`` budget: a history line (once per process), and with
        ``violation = "kill"`` the job is stopped and fails, naming the process, its usage and budget."""
        who = f"rank {e.rank} on {e.node} (pid {e.pid})"
        used, budget = size_text(e.used or 0), size_text(e.budget or 0)
        line = f"{who} uses {used} of device {e.device}, over its --gpu-mem budget of {budget}"
        if any(h.event == "gpu-mem-violation" and h.message.startswith(who + " ") for h in job.history):
            return  # reported again, maybe with another usage, while it lasts
        self._ctx.history(job, "gpu-mem-violation", line)
        if self.policy.violation == "kill" and job.status.state != JobState.TERMINATING:
            reason = f'device-memory budget exceeded (violation = "kill"): {line}'
            self._gang.begin_termination(job, EndIntent.FAIL, reason)
            self._ctx.emit(fx.WakeScheduler())

    # ----- timers ---------------------------------------------------------------------------

    def _tick(self, e: ev.Tick) -> None:
        now = e.now
        self._fences.expire_all(self.active)
        # the driver's list when it gave one (an idle coordinator ticks twice a second over every job)
        for job in self.active() if e.holders is None else e.holders:
            st, spec = job.status, job.spec
            if (
                st.state == JobState.ADMITTED
                and st.admit_time is not None
                and now - max(st.admit_time, e.started_at) > self.policy.startup_timeout_s
            ):
                waiting = [r for r in ranks_in_order(job) if r.state.order < RankPhase.RUNNING.order]
                detail = ", ".join(
                    f"rank {r.rank} on {r.node} ({r.state.value if r.node in e.connected else 'node not connected'})"
                    for r in waiting
                )
                timeout = self.policy.startup_timeout_s
                self._gang.start_failed(job, f"not started within startup_timeout_s {timeout:g}: {detail}")
            elif (
                st.state == JobState.RUNNING and spec.time_limit_s and st.start_time is not None and not completing(job)
            ):
                # Slurm's --signal SIG@N: SIG at N s before the time limit T (the job keeps running
                # and may still finish on its own), then at T SIGTERM, the grace period, SIGKILL.
                elapsed, limit = now - st.start_time, spec.time_limit_s
                if elapsed >= limit:
                    self._gang.begin_termination(job, EndIntent.TIMEOUT, f"time limit of {limit:g} s reached")
                elif spec.signal and not st.warned:
                    signum, before = parse_warning(spec.signal)
                    if elapsed >= max(0.0, limit - before):
                        self._send_warning(job, signum, f"{before:g} s before the time limit of {limit:g} s")

    def _send_warning(self, job: JobRecord, signum: int, why: str) -> None:
        job.status.warned = True
        self._ctx.save(job)
        shell_only = warns_batch_shell_only(job.spec.signal)
        whom = "every rank's batch shell (B:)" if shell_only else "every rank"
        self._ctx.history(job, "signal", f"signal {signal_name(signum)} sent to {whom}, {why}")
        for node in sorted({r.node for r in job.ranks.values() if not r.ended}):
            self._ctx.emit(fx.Signal(node, job.run_id, signum, shell_only))


def _asked(spec: JobSpec) -> str:
    """What a submission asks for: ``4 x 2 gpu``; a job of groups: each group's shape, ``1 x 0 +
    4 x 2 gpu`` (docs/job-groups.md); a share of one card as Slurm's gres names it, the queue
    table's GANG alike: ``1 x mps:50``, ``1 x shard:2`` (not a whole gpu; docs/sharing.md)."""
    if spec.shards or spec.mps:
        return f"{spec.workers} x {f'shard:{spec.shards}' if spec.shards else f'mps:{spec.mps}'}"
    if spec.groups:
        return " + ".join(f"{g.workers} x {g.per_worker}" for g in spec.groups) + f" {spec.resource}"
    return f"{spec.workers} x {spec.per_worker} {spec.resource}"
