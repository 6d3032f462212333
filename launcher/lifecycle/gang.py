"""The gang rules every lifecycle event ends in: how ranks move a job, how a job stops, ends
or goes back to its queue. :class:`GangRules` is the base of
:class:`~labgang.launcher.lifecycle.machine.Lifecycle`, which turns events into calls to these.

Pure: no I/O, no clock. Every change is recorded as an effect in ``self._out``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle.attempts import AttemptRecord
from labgang.launcher.lifecycle.records import HistoryEntry, JobRecord, RankRecord, parse_warning, signal_name
from labgang.launcher.lifecycle.rules import completing, exited_zero_on_their_own, job_nodes, ranks_in_order
from labgang.launcher.lifecycle.states import (
    INTENT_REASON,
    EndIntent,
    EndReason,
    JobState,
    RankPhase,
    advance,
    transition,
)
from labgang.launcher.scheduler.reasons import held_reason

_REQUEUE_OUTCOME = {EndIntent.PREEMPT: "preempted", EndIntent.LOST: "node_fail"}
"""The outcome of an attempt that ends in a requeue, by its stop's intent (else ``"requeued"``)."""


@dataclass(frozen=True, slots=True)
class LifecyclePolicy:
    """The configured numbers the lifecycle rules use (seconds unless named otherwise)."""

    startup_timeout_s: float
    requeue_backoff_s: float
    requeue_backoff_max_s: float
    max_start_failures: int
    default_grace_s: float
    node_timeout_s: float = 30.0
    """A node's lease: silent this long, it is lost (its ranks are fenced, ``fencing.py``)."""
    violation: str = "report"
    """A rank on a device it was not given: ``"report"`` it, or also ``"kill"`` its job."""
    kill_invalid_depend: bool = True
    """Cancel a job whose dependency can never hold (else it stays pending), ``dependents.py``."""


class GangRules:
    """Jobs and the rules that move them (the state and the rules; events come in through ``Lifecycle.apply``).

    ``jobs`` holds the active jobs only (pending, admitted, running, terminating): a job that
    reaches a final state leaves it (effect :class:`~labgang.launcher.lifecycle.effects.Finished`),
    so memory follows active work, not history.

    Args:
        policy: the configured timeouts and limits.
        jobs: the jobs to start from (e.g. loaded from the store); finished ones are left out,
            and a pending one starts with no ranks.
    """

    def __init__(self, policy: LifecyclePolicy, jobs: Iterable[JobRecord] = ()) -> None:
        self.policy = policy
        self.jobs: dict[str, JobRecord] = {job.id: job for job in jobs if not job.status.state.finished}
        for job in self.jobs.values():
            if job.status.state == JobState.PENDING:
                # A pending job's next attempt has no ranks until it is admitted. Stores written
                # before SaveRank carried its attempt may hold the last attempt's ranks under it.
                job.ranks = {}
        self.preemptors: dict[str, JobRecord] = {job.id: job for job in self.jobs.values() if job.status.nominated}
        """Every active job that names victims (``status.nominated`` not empty), and maybe some
        that no longer do: whoever sets ``nominated`` adds the job (the scans of preemptors look
        here, not at every active job, and drop the jobs that no longer name victims)."""
        self.admissions = max((job.status.admit_seq for job in self.jobs.values()), default=0)
        """How many admissions so far: the last one's ``admit_seq``."""
        self.lost_nodes: dict[str, float] = {}
        """Node → its last contact (the driver's clock), for every node now lost."""
        self._out: list[fx.Effect] = []
        self._now = 0.0
        # When set, the time the history lines written now are dated (a fenced rank's report: when it
        # was stopped, not when the report arrived).
        self._history_at: float | None = None

    # ----- queries --------------------------------------------------------------------------

    def job_for_run(self, run_id: str) -> JobRecord | None:
        """The job whose current or past attempt is ``run_id`` (``"<job id>.<attempt>"``)."""
        job_id, _, _attempt = run_id.rpartition(".")
        return self.jobs.get(job_id)

    def active(self) -> list[JobRecord]:
        """Jobs that hold devices (admitted, running, terminating), in submission order."""
        return sorted((j for j in self.jobs.values() if j.status.state.holds_devices), key=lambda j: j.seq)

    def awaited_by_waiting_preemptor(self, job: JobRecord) -> bool:
        """True when ``job`` is a requeued (pending) victim some pending preemptor nominated and
        that preemptor still waits for another of its victims to free its devices.

        Until the last victim is gone no cycle can admit the preemptor, and the victim just
        requeued should not take the devices it was evicted from: its requeue alone is no reason
        for a cycle; the last victim's is, and that cycle decides for every victim too.
        """
        if job.status.state != JobState.PENDING:
            return False
        for other in self._naming_victims():
            st = other.status
            if st.state != JobState.PENDING or job.id not in st.nominated:
                continue
            if any(
                (v := self.jobs.get(vid)) is not None and v.status.state.holds_devices
                for vid in st.nominated
                if vid != job.id
            ):
                return True
        return False

    def _nominated_by_pending(self, job: JobRecord) -> bool:
        return any(o.status.state == JobState.PENDING and job.id in o.status.nominated for o in self._naming_victims())

    def _naming_victims(self) -> list[JobRecord]:
        """The active jobs whose ``nominated`` is not empty (from :attr:`preemptors`, which
        forgets the jobs finished or naming no victim): a few, however many jobs are active."""
        jobs, preemptors = self.jobs, self.preemptors
        out: list[JobRecord] = []
        for job_id, job in list(preemptors.items()):
            if jobs.get(job_id) is job and job.status.nominated:
                out.append(job)
            else:
                del preemptors[job_id]
        return out

    # ----- small helpers --------------------------------------------------------------------

    def _save(self, job: JobRecord) -> None:
        self._out.append(fx.SaveStatus(job))

    def _history(self, job: JobRecord, event: str, message: str) -> None:
        entry = HistoryEntry(self._now if self._history_at is None else self._history_at, event, message)
        job.history.append(entry)
        self._out.append(fx.AddHistory(job, entry))

    def _set_rank(
        self,
        job: JobRecord,
        rank: RankRecord,
        phase: RankPhase,
        *,
        pid: int | None = None,
        exit_status: int | None = None,
    ) -> bool:
        changed = advance(rank, phase)
        if pid is not None and rank.pid != pid:
            rank.pid = pid
            changed = True
        if exit_status is not None and rank.exit_status is None and phase in (RankPhase.EXITED, RankPhase.GONE):
            rank.exit_status = exit_status
            changed = True
        if changed:
            self._out.append(fx.SaveRank(job, rank, job.attempt))
        return changed

    @staticmethod
    def _exit_line(rank: RankRecord) -> str:
        """The ``rank-exited`` history message of ``rank``."""
        return f"rank {rank.rank} on {rank.node} exited with status {rank.exit_status}"

    def _held_exits(self, job: JobRecord) -> None:
        """The ``rank-exited`` lines of ranks that exited while the gang was still starting.

        A rank may exit before another rank's start is reported; its exit is recorded once the
        job is running (or stopping), so the history reads in causal order: "running" (every
        rank started) before any rank's exit. Called while the job is still ADMITTED, after
        "running" was recorded or before "stopping" is.
        """
        for rank in ranks_in_order(job):
            if rank.state in (RankPhase.EXITED, RankPhase.GONE) and rank.exit_status is not None:
                self._history(job, "rank-exited", self._exit_line(rank))

    def _lookup(self, node: str, run_id: str, rank: int) -> tuple[JobRecord | None, RankRecord | None]:
        job = self.job_for_run(run_id)
        if job is None or job.run_id != run_id or not job.status.state.holds_devices:
            return None, None
        record = job.ranks.get(rank)
        if record is None or record.node != node:
            return None, None
        return job, record

    # ----- gang rules ------------------------------------------------------------------------

    def _evaluate(self, job: JobRecord) -> None:
        """Move the job along after its ranks changed (start confirmed, a rank failed, all gone)."""
        st = job.status
        ranks = ranks_in_order(job)
        self._mark_running(job)
        if st.state in (JobState.ADMITTED, JobState.RUNNING):
            failed = next((r for r in ranks if r.state.order >= RankPhase.EXITED.order and r.exit_status != 0), None)
            if failed is not None:
                if failed.state == RankPhase.LOST:
                    self._begin_termination(job, EndIntent.LOST, f"rank {failed.rank}'s node {failed.node} was lost")
                else:
                    self._begin_termination(
                        job,
                        EndIntent.FAIL,
                        f"rank {failed.rank} on {failed.node} exited with status {failed.exit_status}",
                        exit_status=failed.exit_status,
                    )
                return
        if st.state.holds_devices and ranks and all(r.ended for r in ranks):
            self._finish(job)

    def _mark_running(self, job: JobRecord) -> None:
        """ADMITTED → RUNNING once every rank has started (even if one already exited: the history
        then says "running" before that rank's "rank-exited")."""
        st = job.status
        ranks = ranks_in_order(job)
        if st.state == JobState.ADMITTED and ranks and all(r.state.order >= RankPhase.RUNNING.order for r in ranks):
            transition(st, JobState.RUNNING)
            st.start_time = self._now
            rec = job.attempt_record
            if rec is not None and rec.attempt == st.attempt and rec.start_time is None:
                rec.start_time = self._now
                self._out.append(fx.SaveAttempt(rec))
            st.reason_code = st.reason_message = None
            self._save(job)
            n = len(ranks)
            started = f"{'all ' if n > 1 else ''}{n} rank{'s' if n != 1 else ''} started on {', '.join(job_nodes(job))}"
            self._history(job, "running", started)
            self._held_exits(job)
            if self._nominated_by_pending(job):
                self._out.append(fx.WakeScheduler())  # a preemptor waits for it: it may be evicted now

    def _begin_termination(
        self, job: JobRecord, intent: EndIntent, message: str, *, exit_status: int | None = None
    ) -> None:
        """Stop every rank of the job with its grace; what follows depends on ``intent``.

        A completing job (every rank exited on its own) keeps no intent: its exits decide.
        """
        st = job.status
        if st.state == JobState.TERMINATING:
            if intent == EndIntent.CANCEL and st.end_intent not in (EndIntent.CANCEL, None):
                st.end_intent = intent
                st.reason_code, st.reason_message = INTENT_REASON[intent].value, message
                self._save(job)
                self._history(job, "cancel", message)
            return
        if not st.state.holds_devices:
            return
        decided_by_exits = completing(job)
        if st.state == JobState.ADMITTED:
            self._held_exits(job)  # exits seen while the gang was starting, before "stopping"
        transition(st, JobState.TERMINATING)
        if decided_by_exits:
            st.end_intent = None
            self._save(job)
            self._history(job, "stopping", f"{message}; every rank already exited: stopping what remains")
        else:
            st.end_intent = intent
            st.reason_code, st.reason_message = INTENT_REASON[intent].value, message
            if exit_status is not None:
                st.exit_status = exit_status
            self._save(job)
            self._history(job, "stopping", f"{message}; stopping every rank")
            if intent.warned and job.spec.signal and st.start_time is not None:
                signum, before = parse_warning(job.spec.signal)
                self._history(
                    job, "signal", f"signal {signal_name(signum)} sent to every rank, {before:g} s before SIGTERM"
                )
        for rank in job.ranks.values():
            if rank.state == RankPhase.ASSIGNED:  # never sent to an agent: nothing to stop
                self._set_rank(job, rank, RankPhase.GONE)
        self._stop_live_ranks(job)
        self._evaluate(job)

    def _stop_live_ranks(self, job: JobRecord, only_node: str | None = None) -> None:
        # The --signal warning precedes a preemption or cancel stop (the supervisor sends it
        # warn_before seconds ahead of SIGTERM). A time limit's warning was already sent at
        # T - warn_before by the tick; failures, lost nodes and shutdowns stop at once.
        warn = job.status.end_intent is not None and job.status.end_intent.warned
        for node in sorted({r.node for r in job.ranks.values() if not r.ended}):
            if only_node is None or node == only_node:
                self._out.append(fx.Stop(node, job.run_id, job.spec.grace_s, warn, job.id))

    def _finish(self, job: JobRecord) -> None:
        """Every rank is gone: end the job, or put it back in its queue, according to its intent.

        * no intent (every rank exited on its own before any stop): the exits decide.
        * CANCEL, FAIL, TIMEOUT: these stops never requeue; the job ends cancelled, failed or
          timeout even when its ranks exit 0 within the grace period (Slurm's CANCELLED and
          TIMEOUT alike).
        * REQUEUE (``labgang requeue``), PREEMPT, LOST, SHUTDOWN, RETRY, the stops that would
          requeue: succeeded when every rank exited 0 on its own
          (:func:`~labgang.launcher.lifecycle.rules.exited_zero_on_their_own`), else requeued
          (RETRY with backoff), or ended when the job asked for no requeue (a lost node:
          NODE_FAIL; never for REQUEUE: asked for by name, it requeues even a job submitted with
          no requeue).

        Either way the attempt's accounting record is closed (:meth:`_close_attempt`).
        """
        st = job.status
        intent = st.end_intent
        message = st.reason_message or (INTENT_REASON[intent].value if intent else "")
        no_requeue = f"{message} (not requeued: the job asked for no requeue)"
        if intent is None:
            bad = next((r for r in ranks_in_order(job) if r.exit_status != 0), None)
            if bad is None:
                self._end(job, JobState.SUCCEEDED, 0, EndReason.COMPLETED, "all ranks exited with status 0")
            else:
                where = f"rank {bad.rank} on {bad.node} exited with status {bad.exit_status}"
                self._end(job, JobState.FAILED, bad.exit_status, EndReason.FAILED, where)
        elif intent == EndIntent.CANCEL:
            self._end(job, JobState.CANCELLED, st.exit_status, EndReason.CANCELLED, st.reason_message or "cancelled")
        elif intent == EndIntent.FAIL:
            self._end(job, JobState.FAILED, st.exit_status, INTENT_REASON[intent], message)
        elif intent == EndIntent.TIMEOUT:
            self._end(job, JobState.TIMEOUT, st.exit_status, INTENT_REASON[intent], message)
        elif exited_zero_on_their_own(job):
            # A stop that would requeue (preemption, lost node or lease, shutdown, failed start),
            # but every rank exited 0 on its own: the job has finished, and a finished job never
            # runs again (docs/queue-semantics.md §A3.6). A killed rank, one whose exit is unknown
            # (lost, never started) or one stopped on its node's lease does not count: requeued.
            self._end(job, JobState.SUCCEEDED, 0, EndReason.COMPLETED, f"all ranks exited with status 0 ({message})")
        elif intent == EndIntent.REQUEUE:
            # `labgang requeue` asked for it by name: requeued even with requeue = false (scontrol requeue).
            self._requeue(job, message, not_before=self._now)
        elif intent in (EndIntent.PREEMPT, EndIntent.LOST):
            if job.spec.requeue:
                self._requeue(job, message, not_before=self._now)
            else:
                final = JobState.FAILED if intent == EndIntent.PREEMPT else JobState.NODE_FAIL
                self._end(job, final, st.exit_status, INTENT_REASON[intent], no_requeue)
        elif intent == EndIntent.SHUTDOWN:
            # Not the job's failure: it runs again at the next start, unless it asked never to be requeued.
            if job.spec.requeue:
                self._requeue(job, st.reason_message or "stopped: labgang shut down", not_before=self._now)
            else:
                self._end(job, JobState.CANCELLED, None, EndReason.SHUTDOWN, no_requeue)
        else:  # RETRY
            st.start_failures += 1
            if st.start_failures >= self.policy.max_start_failures:
                why = f"could not start after {st.start_failures} attempts: {st.reason_message}"
                self._end(job, JobState.FAILED, st.exit_status, EndReason.START_FAILED, why)
            else:
                p = self.policy
                delay = min(p.requeue_backoff_s * 2 ** (st.start_failures - 1), p.requeue_backoff_max_s)
                self._requeue(job, f"{st.reason_message}; retry in {delay:g} s", not_before=self._now + delay)

    def _end(self, job: JobRecord, state: JobState, exit_status: int | None, reason: EndReason, message: str) -> None:
        st = job.status
        preempted = st.end_intent == EndIntent.PREEMPT and state != JobState.SUCCEEDED
        self._close_attempt(job, "preempted" if preempted else state.value, message)
        transition(st, state)
        st.exit_status = exit_status
        st.end_time = self._now
        st.reason_code, st.reason_message = reason.value, message
        st.end_intent = None
        st.hold, st.hold_admin = None, False
        self._save(job)
        self._history(job, state.value, message + (f" (exit status {exit_status})" if exit_status is not None else ""))
        self._retire(job)
        self._out.append(fx.WakeScheduler())

    def _retire(self, job: JobRecord) -> None:
        """A finished job leaves the active jobs."""
        del self.jobs[job.id]
        self._out.append(fx.Finished(job))

    def _requeue(self, job: JobRecord, message: str, *, not_before: float) -> None:
        """Back to the queue as a new attempt: original submit time; ``restart_count`` + 1 only when
        the attempt ran."""
        st = job.status
        ran = st.ran
        outcome = _REQUEUE_OUTCOME.get(st.end_intent) if st.end_intent is not None else None
        self._close_attempt(job, outcome or "requeued", message)
        transition(st, JobState.PENDING)
        st.attempt += 1
        if ran:
            st.restart_count += 1
        st.ran = False
        st.pending_since = self._now
        st.not_before = not_before
        st.admit_time = st.start_time = None
        st.end_intent = None
        st.exit_status = None
        st.master_addr = st.master_port = None
        st.nominated = ()
        st.warned = False
        st.lease_stopped = False
        st.reason_message = message
        job.ranks = {}
        if st.hold is not None:  # requeue --hold
            reason = held_reason(job.id, st.hold)
            st.reason_code, st.reason_message = reason.code.value, f"{message}; {reason.message}"
        self._save(job)
        counted = f"restart {st.restart_count}" if ran else f"attempt {st.attempt} (the last one never ran)"
        self._history(job, "requeued", f"{message}; {counted}")
        self._out.append(fx.Requeued(job))
        if not_before > self._now:
            self._out.append(fx.WakeAt(not_before))
        elif not self.awaited_by_waiting_preemptor(job):
            self._out.append(fx.WakeScheduler())

    def _open_attempt(self, job: JobRecord) -> None:
        """A cycle admitted ``job`` (its ranks placed): begin its current attempt's accounting record."""
        st = job.status
        ranks = ranks_in_order(job)
        job.attempt_record = AttemptRecord(
            job_id=job.id,
            attempt=st.attempt,
            user=job.spec.user,
            queue=job.spec.queue,
            pending_since=st.pending_since,
            admit_time=self._now,
            nodes=tuple(job_nodes(job)),
            devices=tuple(f"{r.node}/{d}" for r in ranks for d in r.devices),
        )
        self._out.append(fx.SaveAttempt(job.attempt_record))

    def _close_attempt(self, job: JobRecord, outcome: str, reason: str) -> None:
        """The current attempt ended with ``outcome`` (an ``ATTEMPT_OUTCOMES`` key): close its record."""
        rec = job.attempt_record
        if rec is None or rec.attempt != job.status.attempt or rec.end_time is not None:
            return  # never admitted (cancelled while pending), or closed already
        rec.end_time = self._now
        rec.outcome = outcome
        rec.reason = reason
        self._out.append(fx.SaveAttempt(rec))

    def _start_failed(self, job: JobRecord, message: str) -> None:
        if job.status.state == JobState.ADMITTED:
            self._begin_termination(job, EndIntent.RETRY, f"start failed: {message}")
