"""The gang rules every lifecycle event ends in: how ranks move a job, how a job stops, ends
or goes back to its queue. :class:`GangRules` is a part of
:class:`~labgang.launcher.lifecycle.machine.Lifecycle`, which turns events into calls to these.

Pure: no I/O, no clock. Every change is recorded as an effect in the model's
:class:`~labgang.launcher.lifecycle.context.RuleContext`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle.attempts import AttemptRecord
from labgang.launcher.lifecycle.context import RuleContext
from labgang.launcher.lifecycle.group_policy import restart_allowed, success_reached
from labgang.launcher.lifecycle.records import JobRecord, RankRecord, parse_warning, signal_name
from labgang.launcher.lifecycle.rules import (
    completing,
    exited_zero_on_their_own,
    group_layout,
    job_nodes,
    launchable,
    ranks_in_order,
)
from labgang.launcher.lifecycle.states import (
    INTENT_REASON,
    PAST_EXIT,
    EndIntent,
    EndReason,
    JobState,
    RankPhase,
    advance,
    transition,
)
from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler.reasons import held_reason

if TYPE_CHECKING:
    from labgang.launcher.lifecycle.events import RankObserved

_REQUEUE_OUTCOME = {EndIntent.PREEMPT: "preempted", EndIntent.LOST: "node_fail", EndIntent.RESTART: "failed"}
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
    shards_per_gpu: int = 0
    """``[sharing] shards_per_gpu``: what part of a card one shard is, for an attempt's accounting
    record (``AttemptRecord.share``; 0 = no shards)."""


def attempt_share(req: JobRequest, shards_per_gpu: int) -> float:
    """The part of each device an attempt of ``req`` holds (``AttemptRecord.share``): 1.0 for whole
    devices, ``shards/shards_per_gpu`` for ``--shards``, ``P/100`` for ``--mps P`` (docs/sharing.md)."""
    if not req.shared:
        return 1.0
    # imported here: the shares' book and the device book under it are the cycle's; a model that
    # never admits a share does not load them (bench/README.md, "Issue 23, sixth pass")
    from labgang.launcher.scheduler.shares import share_units

    return float(share_units(req, shards_per_gpu))


def unheard_exits(job: JobRecord) -> tuple[tuple[str, int, str], ...]:
    """The ranks of ``job``'s current attempt, as ``(run id, rank, node)``, whose exits were never heard
    (their node lost, its fence ran out: ``RankPhase.LOST``) when every other rank of it exited 0 on its
    own: had those exited 0 too, the attempt finished (``JobStatus.unheard_exits``). () when there is
    none, or when another rank did not exit 0 on its own (killed by the stop, failed, stopped on its
    node's lease): the attempt did not finish, whatever those report later."""
    ranks = list(job.ranks.values())
    unheard = {r.rank for r in ranks if r.state == RankPhase.LOST and r.exit_status is None}
    if not unheard or job.status.lease_stopped or any(r.exit_status != 0 for r in ranks if r.rank not in unheard):
        return ()
    return tuple((job.run_id, r.rank, r.node) for r in ranks_in_order(job) if r.rank in unheard)


class GangRules:
    """The rules that move a job by its ranks (state is the model's; events come in through ``Lifecycle.apply``).

    Args:
        policy: the configured timeouts and limits.
        jobs: the model's active jobs by id (pending, admitted, running, terminating); the rules
            read and change the records, and a job that ends leaves through ``retire``.
        ctx: the event under way (its instant, the effects out).
        retire: takes a job that reached a final state out of the model (effect
            :class:`~labgang.launcher.lifecycle.effects.Finished`), ``DependencyRules.retire``.
    """

    def __init__(
        self,
        policy: LifecyclePolicy,
        jobs: dict[str, JobRecord],
        ctx: RuleContext,
        retire: Callable[[JobRecord], None],
    ) -> None:
        self.policy = policy
        self.jobs = jobs
        self._ctx = ctx
        self._retire = retire
        self.preemptors: dict[str, JobRecord] = {job.id: job for job in jobs.values() if job.status.nominated}
        """Every active job that names victims (``status.nominated`` not empty), and maybe some
        that no longer do: whoever sets ``nominated`` adds the job (the scans of preemptors look
        here, not at every active job, and drop the jobs that no longer name victims)."""
        self.linked_since: dict[str, float] = {}
        """Node → when its agent's current link began (its last ``NodeJoined``, the model's clock): a
        rank that ended before then ended while nobody could hear of it (``labgang up`` killed, an agent
        restarted), and the agent's report of it came at the rejoin (:meth:`gone_at`)."""

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

    def node_joined(self, node: str) -> None:
        """``node``'s agent (re)joined now: what it reports of ranks that ended before now was
        learned late (:attr:`linked_since`)."""
        self.linked_since[node] = self._ctx.now

    def gone_at(self, job: JobRecord) -> float:
        """When the current attempt's ranks were all gone, as far as the coordinator can tell (unix s):
        the end of its attempt and of its accounting (README: GPU-H and ELAPSED run from admission
        until the ranks were all gone).

        Now, when the last rank's end was heard as it happened. When every started rank ended before
        its node's current link began (they ended while the coordinator or their agent was down, and
        the agent reported them, with their end instants, at its rejoin): the latest of those
        reported ends, never before the admission and never after now (the agent's clock may differ).
        """
        now = self._ctx.now
        latest = None
        for rank in job.ranks.values():
            if rank.start_time is None:
                continue  # never started: it held its devices only as long as the others
            since = self.linked_since.get(rank.node)
            if rank.end_time is None or since is None or rank.end_time >= since:
                return now
            latest = rank.end_time if latest is None else max(latest, rank.end_time)
        if latest is None:
            return now
        admitted = job.status.admit_time
        return min(now, latest if admitted is None else max(latest, admitted))

    def heard_late(self, job: JobRecord, node: str, ended_at: float | None) -> float | None:
        """When a rank's end that ``node`` reports happened (``ended_at``, its agent's clock), to date its
        history lines, when it happened before the node's current link began (heard only at its rejoin)
        and between the job's last history line and now (another clock's time never reorders the
        history); else None."""
        since = self.linked_since.get(node)
        if ended_at is None or since is None or ended_at >= since:
            return None
        last = job.history[-1].time if job.history else float("-inf")
        return ended_at if last <= ended_at <= self._ctx.now else None

    # ----- small helpers --------------------------------------------------------------------

    def set_rank(
        self,
        job: JobRecord,
        rank: RankRecord,
        phase: RankPhase,
        *,
        pid: int | None = None,
        exit_status: int | None = None,
        started_at: float | None = None,
        ended_at: float | None = None,
    ) -> bool:
        """Move ``rank`` forward to ``phase`` (never back), taking its pid and exit status when
        given; persist it and return True when anything changed.

        The rank's start instant is set once: ``started_at`` (the agent's), or now when it is
        first reported running without one. Its end instant is set once it has ended, if it had
        started: ``ended_at``, or now.
        """
        changed = advance(rank, phase)
        if pid is not None and rank.pid != pid:
            rank.pid = pid
            changed = True
        if exit_status is not None and rank.exit_status is None and phase in (RankPhase.EXITED, RankPhase.GONE):
            rank.exit_status = exit_status
            changed = True
        if rank.start_time is None and (started_at is not None or phase == RankPhase.RUNNING):
            rank.start_time = self._ctx.now if started_at is None else started_at
            changed = True
        if rank.end_time is None and rank.start_time is not None and rank.state in PAST_EXIT:
            rank.end_time = self._ctx.now if ended_at is None else ended_at
            changed = True
        if changed:
            self._ctx.emit(fx.SaveRank(job, rank, job.attempt))
        return changed

    @staticmethod
    def exit_line(rank: RankRecord) -> str:
        """The ``rank-exited`` history message of ``rank``."""
        return f"rank {rank.rank} on {rank.node} exited with status {rank.exit_status}"

    def held_exits(self, job: JobRecord) -> None:
        """The ``rank-exited`` lines of ranks that exited while the gang was still starting.

        A rank may exit before another rank's start is reported; its exit is recorded once the
        job is running (or stopping), so the history reads in causal order: "running" (every
        rank started) before any rank's exit. Called while the job is still ADMITTED, after
        "running" was recorded or before "stopping" is.
        """
        for rank in ranks_in_order(job):
            if rank.state in (RankPhase.EXITED, RankPhase.GONE) and rank.exit_status is not None:
                self._ctx.history(job, "rank-exited", self.exit_line(rank))

    def lookup(self, node: str, run_id: str, rank: int) -> tuple[JobRecord | None, RankRecord | None]:
        """The job holding devices whose current attempt is ``run_id`` and its rank ``rank`` on
        ``node``, or ``(None, None)`` when no current rank matches."""
        job = self.job_for_run(run_id)
        if job is None or job.run_id != run_id or not job.status.state.holds_devices:
            return None, None
        record = job.ranks.get(rank)
        if record is None or record.node != node:
            return None, None
        return job, record

    # ----- gang rules ------------------------------------------------------------------------

    def evaluate(self, job: JobRecord) -> None:
        """Move the job along after its ranks changed (start confirmed, a rank failed, all gone)."""
        st = job.status
        ranks = ranks_in_order(job)
        self.mark_running(job)
        if st.state in (JobState.ADMITTED, JobState.RUNNING):
            failed = next((r for r in ranks if r.state.order >= RankPhase.EXITED.order and r.exit_status != 0), None)
            if failed is not None:
                if failed.state == RankPhase.LOST:
                    self.begin_termination(job, EndIntent.LOST, f"rank {failed.rank}'s node {failed.node} was lost")
                else:
                    self._rank_failed(job, failed)
                return
            if not job.spec.plain_policy and not all(r.ended for r in ranks):
                policy = job.spec.group_policy
                exits = {r.rank: r.exit_status for r in ranks if r.state.order >= RankPhase.EXITED.order}
                done = success_reached(group_layout(job), policy, exits)
                if done is not None:
                    self.begin_termination(job, EndIntent.SUCCEED, done)
                    return
            if st.state == JobState.ADMITTED and job.spec.startup_order:
                self._launch_next_groups(job)
        if st.state.holds_devices and ranks and all(r.ended for r in ranks):
            self._finish(job)

    def _rank_failed(self, job: JobRecord, failed: RankRecord) -> None:
        """A rank exited non-zero: stop the job, to fail it, or under ``--failure-policy restart``
        with restarts left, to start the whole job again (``group_policy.py``)."""
        policy, st = job.spec.group_policy, job.status
        what = f"rank {failed.rank} on {failed.node} exited with status {failed.exit_status}"
        if restart_allowed(policy, st.failure_restarts):
            why = f"{what}; restart {st.failure_restarts + 1} of {policy.max_restarts} (--failure-policy restart)"
            self.begin_termination(job, EndIntent.RESTART, why, exit_status=failed.exit_status)
            return
        if policy.failure == "restart":
            what += f" (--failure-policy restart: {st.failure_restarts} of {policy.max_restarts} restarts used)"
        self.begin_termination(job, EndIntent.FAIL, what, exit_status=failed.exit_status)

    def _launch_next_groups(self, job: JobRecord) -> None:
        """``--startup-order``: launch the ranks whose groups' turn has come (every rank of the
        groups before them started) and that were not sent yet, node by node."""
        ready = launchable(job)
        waiting = [r for r in ranks_in_order(job) if r.rank in ready and r.state == RankPhase.ASSIGNED]
        if not waiting or job.status.master_port is None:
            return  # nothing new, or the first launch (dispatch) has not picked MASTER_PORT yet
        layout = group_layout(job)
        nodes = sorted({r.node for r in waiting})
        groups = sorted({layout.rank_groups[r.rank] for r in waiting})
        started = ", ".join(layout.names[g] for g in groups)
        self._ctx.history(
            job, "group-launching", f"group {started}: the groups before it started; launching on {', '.join(nodes)}"
        )
        for rank in waiting:  # sent now: a later report does not send them again
            self.set_rank(job, rank, RankPhase.LAUNCHING)
        for node in nodes:
            self._ctx.emit(fx.Launch(job, node, job.run_id))

    def mark_running(self, job: JobRecord) -> None:
        """ADMITTED → RUNNING once every rank has started (even if one already exited: the history
        then says "running" before that rank's "rank-exited")."""
        st = job.status
        if st.state != JobState.ADMITTED:  # most calls: a running or stopping gang (no sort of its ranks)
            return
        ranks = ranks_in_order(job)
        if ranks and all(r.state.order >= RankPhase.RUNNING.order for r in ranks):
            transition(st, JobState.RUNNING)
            st.start_time = self._ctx.now
            rec = job.attempt_record
            if rec is not None and rec.attempt == st.attempt and rec.start_time is None:
                rec.start_time = self._ctx.now
                self._ctx.emit(fx.SaveAttempt(rec))
            st.reason_code = st.reason_message = None
            self._ctx.save(job)
            n = len(ranks)
            started = f"{'all ' if n > 1 else ''}{n} rank{'s' if n != 1 else ''} started on {', '.join(job_nodes(job))}"
            self._ctx.history(job, "running", started)
            self.held_exits(job)
            if self._nominated_by_pending(job):
                self._ctx.emit(fx.WakeScheduler())  # a preemptor waits for it: it may be evicted now

    def _started_before_running(self, job: JobRecord) -> None:
        """A rank started (or already exited) but the gang stops before every rank reported
        running: the job did start (sacct's Start), so it gets a start time, now, when the stop
        begins (for a rank that fails at once, the moment it was first seen), and its time is
        accounted from then. Its history gets the ``running`` line it would have had, saying
        which ranks started and which never reported running."""
        st = job.status
        if st.start_time is not None:
            return
        st.start_time = self._ctx.now
        rec = job.attempt_record
        if rec is not None and rec.attempt == st.attempt and rec.start_time is None:
            rec.start_time = self._ctx.now
            self._ctx.emit(fx.SaveAttempt(rec))
        ranks = ranks_in_order(job)
        started = [r for r in ranks if r.start_time is not None or r.state in (RankPhase.RUNNING, RankPhase.EXITED)]
        began = {r.rank for r in started}
        missing = [str(r.rank) for r in ranks if r.rank not in began]
        nodes = ", ".join(dict.fromkeys(r.node for r in started)) or "-"
        line = f"{len(started)} of {len(ranks)} rank{'s' if len(ranks) != 1 else ''} started on {nodes}"
        if missing:
            line += f"; rank{'s' if len(missing) > 1 else ''} {', '.join(missing)} never reported running"
        self._ctx.history(job, "running", line)

    def begin_termination(
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
                self._ctx.save(job)
                self._ctx.history(job, "cancel", message)
            return
        if not st.state.holds_devices:
            return
        # Every rank exited on its own: the exits decide, unless --failure-policy restart starts
        # the job again or says its restarts are used up (the failed rank may be the last one
        # left: a 1-rank job, every rank failing at once).
        restarting = job.spec.group_policy.failure == "restart" and intent in (EndIntent.RESTART, EndIntent.FAIL)
        decided_by_exits = completing(job) and not restarting
        if st.state == JobState.ADMITTED:
            if st.ran:
                self._started_before_running(job)  # its "running" line first
            self.held_exits(job)  # exits seen while the gang was starting, before "stopping"
        transition(st, JobState.TERMINATING)
        if decided_by_exits:
            st.end_intent = None
            self._ctx.save(job)
            self._ctx.history(job, "stopping", f"{message}; every rank already exited: stopping what remains")
        else:
            st.end_intent = intent
            st.reason_code, st.reason_message = INTENT_REASON[intent].value, message
            if exit_status is not None:
                st.exit_status = exit_status
            self._ctx.save(job)
            self._ctx.history(job, "stopping", f"{message}; stopping every rank")
            if intent.warned and job.spec.signal and st.start_time is not None:
                signum, before = parse_warning(job.spec.signal)
                self._ctx.history(
                    job, "signal", f"signal {signal_name(signum)} sent to every rank, {before:g} s before SIGTERM"
                )
        for rank in job.ranks.values():
            if rank.state == RankPhase.ASSIGNED:  # never sent to an agent: nothing to stop
                self.set_rank(job, rank, RankPhase.GONE)
        self.stop_live_ranks(job)
        self.evaluate(job)

    def stop_live_ranks(self, job: JobRecord, only_node: str | None = None) -> None:
        """Ask each node with a rank of the job not yet ended (or only ``only_node``) to stop them."""
        # The --signal warning precedes a preemption or cancel stop (the supervisor sends it
        # warn_before seconds ahead of SIGTERM). A time limit's warning was already sent at
        # T - warn_before by the tick; failures, lost nodes and shutdowns stop at once.
        warn = job.status.end_intent is not None and job.status.end_intent.warned
        for node in sorted({r.node for r in job.ranks.values() if not r.ended}):
            if only_node is None or node == only_node:
                self._ctx.emit(fx.Stop(node, job.run_id, job.spec.grace_s, warn, job.id))

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
        if job.spec.attached:  # labgang run's job: nobody would be attached to a rerun (srun's rule)
            no_requeue = f"{message}; a `labgang run` job is not requeued, as srun's is not"
        else:
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
        elif intent == EndIntent.SUCCEED:
            # --success-policy: its group succeeded; the ranks stopped after it do not count
            self._end(job, JobState.SUCCEEDED, 0, EndReason.COMPLETED, f"{message}; the other ranks were stopped")
        elif intent == EndIntent.RESTART:
            st.failure_restarts += 1  # --failure-policy restart: the whole job again, at once
            self._requeue(job, message, not_before=self._ctx.now)
        elif exited_zero_on_their_own(job):
            # A stop that would requeue (preemption, lost node or lease, shutdown, failed start),
            # but every rank exited 0 on its own: the job has finished, and a finished job never
            # runs again (docs/queue-semantics.md §A3.6). A killed rank, one whose exit is unknown
            # (lost, never started) or one stopped on its node's lease does not count: requeued.
            self._end(job, JobState.SUCCEEDED, 0, EndReason.COMPLETED, f"all ranks exited with status 0 ({message})")
        elif intent == EndIntent.REQUEUE:
            # `labgang requeue` asked for it by name: requeued even with requeue = false (scontrol requeue).
            self._requeue(job, message, not_before=self._ctx.now)
        elif intent in (EndIntent.PREEMPT, EndIntent.LOST):
            if job.spec.requeue:
                self._requeue(job, message, not_before=self._ctx.now)
            else:
                # A preemption that does not requeue cancels the job (Slurm's PreemptMode=CANCEL, whose
                # PREEMPTED labgang has not): CANCELLED, not FAILED, which would blame its own command;
                # the attempt's outcome says "preempted" (_end).
                final = JobState.CANCELLED if intent == EndIntent.PREEMPT else JobState.NODE_FAIL
                self._end(job, final, st.exit_status, INTENT_REASON[intent], no_requeue)
        elif intent == EndIntent.SHUTDOWN:
            # Not the job's failure: it runs again at the next start, unless it asked never to be requeued.
            if job.spec.requeue:
                self._requeue(job, st.reason_message or "stopped: labgang shut down", not_before=self._ctx.now)
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
                self._requeue(job, f"{st.reason_message}; retry in {delay:g} s", not_before=self._ctx.now + delay)

    def _end(
        self,
        job: JobRecord,
        state: JobState,
        exit_status: int | None,
        reason: EndReason,
        message: str,
        *,
        end_time: float | None = None,
    ) -> None:
        """End ``job`` in the final ``state``; its end time is ``end_time`` (unix s) when given, else
        :meth:`gone_at`."""
        st = job.status
        preempted = st.end_intent == EndIntent.PREEMPT and state != JobState.SUCCEEDED
        self._close_attempt(job, "preempted" if preempted else state.value, message)
        transition(st, state)
        st.exit_status = exit_status
        st.end_time = self.gone_at(job) if end_time is None else end_time
        st.reason_code, st.reason_message = reason.value, message
        st.end_intent = None
        st.hold, st.hold_admin = None, False
        st.unheard_exits = ()
        job.requeued_ranks = {}
        self._ctx.save(job)
        last = job.history[-1].time if job.history else float("-inf")
        if last <= st.end_time < self._ctx.now:  # its ranks ended unheard: the line dated as its end
            self._ctx.date_history(st.end_time)
        self._ctx.history(
            job, state.value, message + (f" (exit status {exit_status})" if exit_status is not None else "")
        )
        self._ctx.date_history(None)  # what follows (its dependents' lines) happens now
        self._retire(job)
        self._ctx.emit(fx.WakeScheduler())

    def _requeue(self, job: JobRecord, message: str, *, not_before: float) -> None:
        """Back to the queue as a new attempt: original submit time; ``restart_count`` + 1 only when
        the attempt ran."""
        st = job.status
        ran = st.ran
        outcome = _REQUEUE_OUTCOME.get(st.end_intent) if st.end_intent is not None else None
        self._close_attempt(job, outcome or "requeued", message)
        st.unheard_exits = unheard_exits(job)  # before the attempt number moves on (their run id)
        # its ranks, should their late exits make this attempt the job's last (late_exit)
        job.requeued_ranks = job.ranks if st.unheard_exits else {}
        transition(st, JobState.PENDING)
        st.attempt += 1
        if ran:
            st.restart_count += 1
        # kept while its exits are awaited: late_exit then knows whether this requeue counted a restart
        st.ran = ran and bool(st.unheard_exits)
        st.pending_since = self._ctx.now
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
            reason = held_reason(job.id, st.hold, st.hold_admin)
            st.reason_code, st.reason_message = reason.code.value, f"{message}; {reason.message}"
        self._ctx.save(job)
        counted = f"restart {st.restart_count}" if ran else f"attempt {st.attempt} (the last one never ran)"
        self._ctx.history(job, "requeued", f"{message}; {counted}")
        self._ctx.emit(fx.Requeued(job))
        if not_before > self._ctx.now:
            self._ctx.emit(fx.WakeAt(not_before))
        elif not self.awaited_by_waiting_preemptor(job):
            self._ctx.emit(fx.WakeScheduler())

    def late_exit(self, e: RankObserved) -> bool:
        """A rank of a requeued job's last attempt reported ended after its fence ran out (its agent
        was down, and came back): one of ``JobStatus.unheard_exits``. True when it was one.

        Its exit counts now, as a lost node's rank's real exit does (docs/queue-semantics.md §A3.6):
        when it exited 0 on its own and it was the last of them, that attempt had finished (every
        rank exited 0 on its own) and the job, which has not been admitted again, ends succeeded
        and never runs again; its attempt's accounting record says so. A rank that exited non-zero,
        or that its agent stopped on the node's lease (``fenced``), leaves the requeue standing.
        """
        job = self.job_for_run(e.run_id)
        if job is None or job.status.state != JobState.PENDING:
            return False
        st = job.status
        key = (e.run_id, e.rank, e.node)
        if key not in st.unheard_exits or e.exit_status is None or e.phase.order < RankPhase.EXITED.order:
            return False
        attempt = e.run_id.rpartition(".")[2]
        line = f"rank {e.rank} on {e.node} exited with status {e.exit_status}"
        line += f" (attempt {attempt}, heard as {e.node} rejoined)"
        rank = job.requeued_ranks.get(e.rank)
        if rank is not None:  # its real exit, and when it happened (its agent's clock), in place of "lost"
            rank.state, rank.exit_status = e.phase, e.exit_status
            rank.end_time = self._ctx.now if e.ended_at is None else min(e.ended_at, self._ctx.now)
            self._ctx.emit(fx.SaveRank(job, rank, int(attempt)))
        if e.fenced or e.exit_status != 0:
            st.unheard_exits = ()
            job.requeued_ranks = {}
            st.ran = False
            self._ctx.save(job)
            why = "stopped by its node on the lease" if e.fenced else "not 0"
            self._ctx.history(job, "rank-exited", f"{line}: {why}, so the requeue stands")
            return True
        st.unheard_exits = tuple(k for k in st.unheard_exits if k != key)
        self._ctx.save(job)
        self._ctx.history(job, "rank-exited", line)
        if st.unheard_exits:
            return True
        why = f"all ranks of attempt {attempt} exited with status 0, the last heard after its fence ran out"
        why += "; not run again"
        # The attempt that ran is the job's last again: its number, its ranks (show's nodes and rank
        # table, read back from the store by that number), and the requeue's restart taken back.
        st.attempt = int(attempt)
        if st.ran:
            st.restart_count -= 1
        job.ranks, job.requeued_ranks = job.requeued_ranks, {}
        # It ended when its last rank did, heard before or late (README), not when the last report came.
        ends = [r.end_time for r in job.ranks.values() if r.end_time is not None]
        end = self._ctx.now if not ends else min(max(ends), self._ctx.now)
        rec = job.attempt_record
        if rec is not None and rec.attempt == st.attempt:
            rec.outcome, rec.reason = JobState.SUCCEEDED.value, why
            rec.end_time = end if rec.start_time is None else max(end, rec.start_time)
            self._ctx.emit(fx.SaveAttempt(rec))
            st.admit_time, st.start_time = rec.admit_time, rec.start_time  # the attempt that ran (show's times)
            end = rec.end_time
        self._end(job, JobState.SUCCEEDED, 0, EndReason.COMPLETED, why, end_time=end)
        return True

    def open_attempt(self, job: JobRecord, whole: tuple[str, ...] = ()) -> None:
        """A cycle admitted ``job`` (its ranks placed): begin its current attempt's accounting record.

        ``whole``: an ``--exclusive`` job's whole nodes' devices (``"node/uuid"``,
        ``Admit.whole``): the attempt holds, and accounts, all of them."""
        st = job.status
        ranks = ranks_in_order(job)
        held = tuple(f"{r.node}/{d}" for r in ranks for d in r.devices)
        job.attempt_record = AttemptRecord(
            job_id=job.id,
            attempt=st.attempt,
            user=job.spec.user,
            queue=job.spec.queue,
            pending_since=st.pending_since,
            admit_time=self._ctx.now,
            nodes=tuple(job_nodes(job)),
            devices=held + tuple(d for d in whole if d not in held),
            share=attempt_share(job.spec.request, self.policy.shards_per_gpu),
        )
        self._ctx.emit(fx.SaveAttempt(job.attempt_record))

    def _close_attempt(self, job: JobRecord, outcome: str, reason: str) -> None:
        """The current attempt ended with ``outcome`` (an ``ATTEMPT_OUTCOMES`` key): close its record."""
        rec = job.attempt_record
        if rec is None or rec.attempt != job.status.attempt or rec.end_time is not None:
            return  # never admitted (cancelled while pending), or closed already
        rec.end_time = self.gone_at(job)
        rec.outcome = outcome
        rec.reason = reason
        self._ctx.emit(fx.SaveAttempt(rec))

    def start_failed(self, job: JobRecord, message: str) -> None:
        """A starting (admitted) job could not start: stop it, to be retried with backoff (intent RETRY)."""
        if job.status.state == JobState.ADMITTED:
            self.begin_termination(job, EndIntent.RETRY, f"start failed: {message}")
