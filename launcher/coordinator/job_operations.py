"""The user operations on jobs: submit, cancel, find, list, history, attempts, report, read a
rank's log. :class:`JobOperations` is a coordinator part and a
:class:`~labgang.launcher.coordinator.desk.JobDesk` (the verbs and array cancellation act through
it); it is handed the configuration, the store, the lifecycle model and the jobs kept in memory
(read), the agent registry (a rank's log, who runs jobs as whom), the submission check, the clock,
and the ``Commits`` part that applies events and commits them (``commits.py``).
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

from labgang.launcher import accounting
from labgang.launcher.accounting import team_lookup
from labgang.launcher.coordinator import arrays, errors
from labgang.launcher.coordinator.agents import AgentCallError
from labgang.launcher.coordinator.depends import submission_targets
from labgang.launcher.coordinator.errors import BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable
from labgang.launcher.coordinator.jobindex import JobIndex
from labgang.launcher.coordinator.policy import check_submitted_limit
from labgang.launcher.coordinator.requests import build_spec, requested_array
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.records import JobStatus
from labgang.launcher.lifecycle.states import RankPhase

if TYPE_CHECKING:
    from labgang.launcher.config.cluster import ClusterConfig
    from labgang.launcher.coordinator.agents import AgentRegistry
    from labgang.launcher.coordinator.commits import Commits
    from labgang.launcher.coordinator.jobindex import JobMemory
    from labgang.launcher.coordinator.requests import Caller
    from labgang.launcher.coordinator.scheduling import SubmissionCheck
    from labgang.launcher.coordinator.store import Store
    from labgang.launcher.lifecycle import effects as fx
    from labgang.launcher.lifecycle.attempts import AttemptRecord
    from labgang.launcher.lifecycle.machine import Lifecycle
    from labgang.launcher.lifecycle.records import JobRecord, JobSpec

LOG_CHUNK_BYTES = 1 << 20
"""The most bytes of a rank's log one ``read_log`` asks its agent for."""


class JobOperations:
    """What users ask of their jobs (``handlers.py`` serves these; ``labgang`` commands call them).

    Args:
        config: the validated cluster configuration.
        store: the open database (jobs, attempts, rank placements), read and written.
        model: the lifecycle model: the active jobs, read here (changed only through ``shell``).
        memory: the finished jobs kept in memory and the submission order (``jobindex.JobMemory``), read.
        agents: the agent registry: a rank's log is read from its node; the agents' run-as policies.
        submission_check: why a job could never start (``scheduling.SubmissionCheck``).
        clock: unix seconds.
        shell: applies lifecycle events and commits them (the coordinator's ``Commits``).
    """

    def __init__(
        self,
        config: ClusterConfig,
        store: Store,
        model: Lifecycle,
        memory: JobMemory,
        agents: AgentRegistry,
        submission_check: SubmissionCheck,
        clock: Callable[[], float],
        shell: Commits,
    ) -> None:
        self._config = config
        self._store = store
        self._model = model
        self._memory = memory
        self._agents = agents
        self._submission_check = submission_check
        self._clock = clock
        self._shell = shell

    # ----- the JobDesk the verbs act through ------------------------------------------------

    def clock(self) -> float:
        """Unix seconds now, on the coordinator's clock."""
        return self._clock()

    def apply(self, event: ev.Event) -> list[fx.Effect]:
        """Apply ``event`` to the lifecycle model (``Commits.apply``); its store writes are buffered
        until :meth:`flush`."""
        return self._shell.apply(event)

    async def flush(self) -> None:
        """Commit every change so far, then send the agent commands they asked for."""
        await self._shell.flush()

    @property
    def jobs(self) -> JobIndex:
        """The jobs in memory by id: active ones (the lifecycle model's) and the recently finished."""
        return JobIndex(self._model.jobs, self._memory.recent)

    # ----- user operations --------------------------------------------------------------------

    async def submit(self, caller: Caller, body: Any) -> JobRecord:
        """Validate, refuse the unschedulable, record durably, and wake the scheduler.

        Raises:
            Forbidden: read-only caller, or a queue the caller may not use.
            BadRequest: a bad field.
            Conflict: the job could never start (its reason says why).
        """
        if caller.read_only or caller.uid is None:
            raise Forbidden("this port is read-only; submit through the Unix socket of a labgang node")
        spec = build_spec(body, caller, self._config)
        array = requested_array(body, self._config)
        self._check_submitted_limit(spec, len(array.indices) if array is not None else 1)
        self._check_run_as(spec)
        found = self._unschedulable(spec)
        if found is not None:
            reason, field = found
            raise Conflict(f"job can never start: {reason}", field=field)
        targets = submission_targets(self._store, self._model.jobs, self._memory.recent, spec)
        now = self.clock()
        if array is not None:  # one task per index, all in this one commit (coordinator/arrays.py)
            tasks = arrays.insert_tasks(self._store, self.apply, spec, array, now, targets)
        else:
            tasks = [self._store.insert_job(spec, JobStatus.submitted(now))]
            self.apply(ev.JobSubmitted(now, tasks[0], targets))
        if isinstance(body, dict) and body.get("hold") is True:  # submit --hold (Slurm's -H)
            for task in tasks:
                self.apply(ev.HoldRequested(now, task.id, caller.user))
        job = tasks[0]
        await self.flush()
        return job

    def check_moved(self, spec: JobSpec) -> None:
        """Refuse a pending job moved into ``spec.queue`` (``update Partition=``) as a submission
        to that queue would be refused: its user's ``max_submitted_jobs_per_user`` there, or a
        request the queue could never start.

        Raises:
            Forbidden: the user's submitted-jobs limit in that queue would be passed.
            Conflict: the job could never start in that queue (the message says why).
        """
        self._check_submitted_limit(spec, 1)
        found = self._unschedulable(spec)
        if found is not None:
            raise Conflict(f"job can never start in queue {spec.queue}: {found[0]}", field="queue")

    def _check_submitted_limit(self, spec: JobSpec, adding: int) -> None:
        """Refuse a submission that takes its user over the queue's ``max_submitted_jobs_per_user``
        (403, no field; launcher/coordinator/policy.py), counting their unfinished jobs in memory.

        Raises:
            Forbidden: the limit would be passed; the message gives the numbers.
        """
        queue = self._config.queue(spec.queue)
        if queue is None or queue.max_submitted_jobs_per_user is None:
            return
        unfinished = sum(
            1
            for j in self._model.jobs.values()
            if j.spec.queue == spec.queue and j.spec.user == spec.user and not j.status.state.finished
        )
        refusal = check_submitted_limit(queue, spec.user, unfinished, adding)
        if refusal is not None:
            raise Forbidden(refusal.message, field=refusal.field, allowed=refusal.allowed)

    def _check_run_as(self, spec: JobSpec) -> None:
        """Refuse a job that no known agent would start as its user (403, field "uid").

        Judged only from agents that stated their policy; with none known yet, nothing is refused.

        Raises:
            Forbidden: every such agent refuses the job's uid; the message says why.
        """
        known = [c for c in self._agents.nodes.values() if c.policy]
        if not known:
            return
        refusals = {c.node: c.refuses_uid(spec.uid) for c in known}
        if all(refusals.values()):
            who = "root" if spec.uid == 0 else f"{spec.user} (uid {spec.uid})"
            why = "; ".join(f"node {n}: {r}" for n, r in sorted(refusals.items()))
            raise Forbidden(f"job can never start: no node runs jobs as {who} ({why})", field="uid")

    def _unschedulable(self, spec: JobSpec) -> tuple[str, str] | None:
        return self._submission_check(spec)

    def get_job(self, job_id: str) -> JobRecord:
        """The job with ``job_id``: from memory, or from the store for a job finished long ago.

        A task of a job array also answers to its own numeric id, as in Slurm (array 12's task
        12_1 is job 13: its ``SLURM_JOB_ID``); an array's own id (12) names the array, not its first
        task, so it is not found here (``show`` and ``logs`` say which tasks it has).

        Raises:
            NotFound: no such job.
        """
        job = self.jobs.get(str(job_id)) or self._store.load_job(str(job_id))
        if job is None and str(job_id).isdigit() and not arrays.task_ids(self._store, self.jobs, str(int(job_id))):
            task = self._store.task_with_seq(int(job_id))
            if task is not None:
                job = self.jobs.get(task) or self._store.load_job(task)
        if job is None:
            raise NotFound(arrays.no_job_message(self._store, self.jobs, str(job_id)), field="id")
        return job

    def list_jobs(
        self, caller: Caller, *, all_users: bool = False, user: str | None = None, after: int = 0
    ) -> Iterator[JobRecord]:
        """Jobs in memory (active, and the last ``core.RECENT_FINISHED`` finished) in submission order,
        read lazily: the caller's own by default, ``user``'s, or everyone's; only those submitted
        after sequence number ``after`` (a page cursor; 0 = all). Older jobs: ``labgang history``."""
        jobs = self._memory.order.after(self.jobs, after)
        if user:
            return (j for j in jobs if j.spec.user == user)
        if all_users or caller.uid is None:
            return jobs
        uid = caller.uid
        return (j for j in jobs if j.spec.uid == uid)

    async def history(
        self,
        caller: Caller,
        *,
        user: str | None = None,
        queue: str | None = None,
        states: tuple[str, ...] = (),
        since: float | None = None,
        until: float | None = None,
        limit: int = 1000,
        ids: tuple[str, ...] = (),
    ) -> list[JobRecord]:
        """Finished and current jobs from the store (``labgang history``), oldest first.

        Args:
            user: whose jobs: None = the default (every user's for an admin or an anonymous read-only
                caller, as in ``GET /v1/jobs``; else the caller's own), a user name, or "all".
            queue / states: only that queue / those states (JobState values).
            since / until: unix seconds; jobs waiting or running at some point in [since, until].
            limit: at most this many, the most recently submitted.
            ids: only these jobs; an array id names its tasks (``Store.find_jobs``).

        Any caller may read every user's history, as in ``queue``, ``show`` and ``report``
        (:meth:`Caller.history_user`): nothing is refused.
        """
        who = caller.history_user(user)
        window = {"since": since, "until": until, "now": self.clock()}  # a job not ended runs until now
        find = partial(self._store.find_jobs, user=who, queue=queue, states=states, limit=limit, ids=ids, **window)
        rows = await asyncio.get_running_loop().run_in_executor(None, find)
        # Jobs in memory are fresher than their last committed row.
        fresh = [self.jobs.get(job.id) or job for job in rows]
        return [job for job in fresh if not states or job.status.state.value in states]

    async def attempts_of(self, jobs: list[JobRecord]) -> dict[str, list[AttemptRecord]]:
        """Every attempt record of each of ``jobs``, oldest first (read from the store on a worker
        thread; a job's current record in memory replaces its stored copy, being fresher)."""
        found = await asyncio.get_running_loop().run_in_executor(
            None, self._store.attempts_of, [job.id for job in jobs]
        )
        for job in jobs:
            rec = job.attempt_record
            if rec is not None:
                found[job.id] = [*(r for r in found.get(job.id, []) if r.attempt != rec.attempt), rec]
                found[job.id].sort(key=lambda r: r.attempt)
        return found

    def open_attempts(self) -> list[AttemptRecord]:
        """The accounting records of the attempts holding devices now (the active jobs' current ones)."""
        out = []
        for job in self._model.jobs.values():
            rec = job.attempt_record
            if rec is not None and rec.end_time is None and rec.attempt == job.status.attempt:
                out.append(rec)
        return out

    async def report(self, *, group: str, since: float | None = None, until: float | None = None) -> dict[str, Any]:
        """``labgang report``: GPU-hours allocated and used per ``group`` (user, queue or team) over
        [since, until] (unix seconds; None: unbounded), from the attempt records
        (:func:`labgang.launcher.accounting.report`); the open attempts are taken from memory.

        Raises:
            ValueError: ``group`` is not user, queue or team.
        """
        now = self.clock()
        found = await asyncio.get_running_loop().run_in_executor(None, self._store.attempts_between, since, until)
        live = {(r.job_id, r.attempt): r for r in self.open_attempts()}
        merged = {(r.job_id, r.attempt): r for r in found} | live
        return accounting.report(
            merged.values(),
            group=group,
            since=since,
            until=until,
            now=now,
            team=team_lookup(self._config.queue_specs()),
        )

    async def cancel(self, caller: Caller, job_id: str) -> JobRecord:
        """Cancel a job: a pending one at once, a running one by stopping its ranks with grace.

        Raises:
            NotFound: no such job. Forbidden: not the owner and not an admin.
        """
        job = self.get_job(job_id)
        caller.check_may_act(job, "cancel it")
        if job.status.state.finished:
            return job
        self.apply(ev.CancelRequested(self.clock(), job.id, caller.user))
        await self.flush()
        return job

    async def read_log(
        self, caller: Caller, job_id: str, rank: int, offset: int, attempt: int | None = None, stream: str | None = None
    ) -> tuple[bytes, int, bool]:
        """Read a rank's output from the agent that holds it: :meth:`read_log_of_attempt` without the
        attempt read."""
        data, next_offset, finished, _, _ = await self.read_log_of_attempt(
            caller, job_id, rank, offset, attempt, stream
        )
        return data, next_offset, finished

    async def read_log_of_attempt(
        self,
        caller: Caller,
        job_id: str,
        rank: int,
        offset: int,
        attempt: int | None = None,
        stream: str | None = None,
        follower: int | None = None,
    ) -> tuple[bytes, int, bool, int, int]:
        """Read a rank's output from the agent that holds it, and say which attempt's log it was.

        Args:
            rank: the global rank (0..workers-1).
            offset: byte offset to read from.
            attempt: which start attempt (0 = the first; every requeue starts a new one); None =
                the current one, or the last that placed this rank. Each attempt's output is kept
                on its node.
            stream: ``"stdout"`` or ``"stderr"``: only that stream's bytes (the offsets stay the whole
                log's; ``agent/supervisor/log_streams.py``); None: both, as they arrived.
            follower: ``labgang run`` follows this log live and has still to read it from this logical
                offset (its lowest over the streams it follows): the agent holds the log's rotation back
                until it has read the older file (``agent/supervisor/log_generations.py``). None: not so.

        Returns:
            (data, next offset, True when the job (with ``attempt``: that attempt) has ended and
            ``data`` reached the end of the log, the attempt whose log was read: with ``attempt``
            None, a follower sees a requeued job's new attempt here and starts it from offset 0, the
            bytes from ``offset`` on that rotation discarded before they were read: ``data`` starts
            that many bytes further on; offsets are logical, across the log's rotation).

        Raises:
            NotFound / Forbidden / BadRequest (rank, offset or attempt out of range) /
            ServiceUnavailable (node not connected).
        """
        job = self.get_job(job_id)
        caller.check_may_act(job, "read its logs")
        size = len(job.ranks) or job.spec.workers  # an elastic gang has the ranks it started with
        if rank < 0 or rank >= size:
            raise BadRequest(f"rank {rank} out of range", field="rank", allowed=list(range(size)))
        if offset < 0:
            raise BadRequest("offset must be >= 0", field="offset")
        record = job.ranks.get(rank) if attempt in (None, job.attempt) else None
        run_id = job.run_id
        over = job.status.state.finished
        if record is None:
            # An earlier attempt, or requeued and not placed again: that attempt's log if it had one.
            # Off the event loop: the store's lock may be held by a group commit syncing to disk.
            rows = await asyncio.get_running_loop().run_in_executor(None, self._store.rank_attempts, job.id)
            past = [row for row in rows if row[1] == rank and (attempt is None or row[0] == attempt)]
            if attempt is not None and not past:
                placed = sorted({row[0] for row in rows if row[1] == rank})
                message = errors.no_attempt_message(job.id, attempt, job.attempt, rank)
                raise BadRequest(message, field="attempt", allowed=placed)
            if not past:
                return b"", offset, over, job.attempt, 0
            number, _, node, _, _ = past[-1]
            run_id = f"{job.id}.{number}"
            if attempt is not None:
                over = over or number != job.attempt  # an earlier attempt has ended for good
        else:
            number, node = job.attempt, record.node
            if record.state == RankPhase.ASSIGNED:
                return b"", offset, False, number, 0
        try:
            args: dict[str, object] = {"job_id": run_id, "rank": rank, "offset": offset, "limit": LOG_CHUNK_BYTES}
            if stream is not None:
                args["stream"] = stream
            if follower is not None and record is not None:
                args["follower"] = follower
            result = await self._agents.call(node, "read_log", args)
        except AgentCallError as exc:
            raise ServiceUnavailable(f"cannot read the log of rank {rank}: {exc}", field="rank") from None
        data = base64.b64decode(result.get("data", ""))
        next_offset = int(result.get("next_offset", offset + len(data)))
        if stream == "stderr" and result.get("stream") != stream:
            data = b""  # an agent from before streams sent both: all of it as stdout, none twice
        at_end = next_offset >= int(result.get("size", next_offset))
        return data, next_offset, over and at_end, number, int(result.get("lost", 0))
