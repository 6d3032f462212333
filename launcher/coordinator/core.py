"""The coordinator's state and the operations the API and the agent link call.

:class:`Coordinator` holds the jobs (loaded from the store at start; the store stays
the truth), the agent registry, and the effect queue: anything that touches an agent
(launch, stop, signal) is queued with :meth:`Coordinator.effect` and only runs after
:meth:`Coordinator.flush` has committed the state change that motivated it. Gang
lifecycle rules live in :mod:`.lifecycle`, the scheduling loop in :mod:`.scheduling`,
dispatch in :mod:`.dispatch`.
"""

from __future__ import annotations

import asyncio
import base64
import logging
import time
from typing import Any, Awaitable, Callable

from labgang.agent import labgang_version
from labgang.launcher.config import ClusterConfig
from labgang.launcher.coordinator.sharing import SharingState
from labgang.launcher.coordinator import lifecycle
from labgang.launcher.coordinator.agents import AgentCallError, AgentConn, AgentRegistry
from labgang.launcher.coordinator.errors import BadRequest, Conflict, Forbidden, NotFound, ServiceUnavailable
from labgang.launcher.coordinator.requests import Caller, build_spec
from labgang.launcher.model import JobState
from labgang.launcher.store import JobRecord, JobStatus, Store

log = logging.getLogger("labgang.coordinator")

LOG_CHUNK_BYTES = 1 << 20


def _scheduling_state(job: JobRecord) -> str:
    """A job's state as the scheduler tells them apart (admitted and running are the same to it)."""
    state = job.status.state
    return "holding" if state in (JobState.ADMITTED, JobState.RUNNING) else state.value


class Coordinator:
    """Jobs, agents and the rules that connect them.

    Args:
        config: the validated cluster configuration.
        store: the open database.
        clock: unix-seconds clock (injected so tests can pin it).
    """

    def __init__(self, config: ClusterConfig, store: Store, *, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.store = store
        self.clock = clock
        self.version = labgang_version()
        self.agents = AgentRegistry()
        self.jobs: dict[str, JobRecord] = {job.id: job for job in store.load_jobs()}
        self.started_at = clock()
        self.cycles = 0
        self.last_cycle_at = 0.0
        self._wake: asyncio.Event | None = None
        self._effects: list[Callable[[], Awaitable[Any]]] = []
        self._stops: dict[str, list[tuple[str, float, bool]]] = {}  # node -> stops sent as one command
        self._tasks: set[asyncio.Task[Any]] = set()
        # (queue, JobRequest) -> why it could never start (None = it could); cleared when
        # the set of allocatable devices changes.
        self.schedulable_cache: dict[Any, str | None] = {}
        # Receives observe_cycle / observe_admission / count_preemption (labgang.launcher.metrics
        # SchedulerMetrics) when the application serves /metrics; None otherwise.
        self.metrics: Any = None
        self.dispatching: set[str] = set()  # run ids whose dispatch is under way
        self.shutting_down = False  # set by stop_jobs_for_shutdown: no more admissions
        # holds of the last cycle and the tenants' usage histories (fair sharing), persisted
        self.sharing = SharingState(config, store, self.started_at)

    # ----- plumbing ---------------------------------------------------------------------------

    @property
    def wake(self) -> asyncio.Event:
        """Set whenever something happened that the scheduling loop should look at."""
        if self._wake is None:
            self._wake = asyncio.Event()
        return self._wake

    def kick(self) -> None:
        """Ask the scheduling loop for a cycle (coalesced with other kicks)."""
        self.wake.set()

    def effect(self, make: Callable[[], Awaitable[Any]]) -> None:
        """Queue an agent command to run after the next :meth:`flush` commits."""
        self._effects.append(make)

    def stop_after_commit(self, node: str, run_id: str, grace: float, warn: bool) -> None:
        """Queue a stop of ``run_id``'s ranks on ``node``; every stop queued for a node before the
        next :meth:`flush` goes in one ``stop_jobs`` command, so their grace periods end together."""
        self._stops.setdefault(node, []).append((run_id, grace, warn))

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a tracked background task (cancelled at shutdown)."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task failed", exc_info=task.exception())

    async def flush(self) -> None:
        """Commit every state change so far, then start the effects they asked for."""
        # Take the effects queued so far first: their state changes are all buffered now, so
        # this commit covers them; effects queued while it runs wait for their own commit.
        from labgang.launcher.coordinator.dispatch import stop_jobs_on_node

        effects, self._effects = self._effects, []
        stops, self._stops = self._stops, {}
        await self.store.durable()
        for node in sorted(stops):
            self.spawn(stop_jobs_on_node(self, node, stops[node]))
        for make in effects:
            self.spawn(make())

    async def close(self) -> None:
        """Cancel background tasks and wait for them."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def event(self, job: JobRecord, event: str, message: str) -> None:
        """Append to the job's history (and log it)."""
        self.store.add_event(job, self.clock(), event, message)
        log.info("job %s: %s: %s", job.id, event, message)

    def job_for_run(self, run_id: str) -> JobRecord | None:
        """The job whose current or past attempt is ``run_id`` (``"<job id>.<attempt>"``)."""
        job_id, _, _attempt = run_id.rpartition(".")
        return self.jobs.get(job_id)

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
        spec = build_spec(body, caller, self.config)
        self._check_run_as(spec)
        found = self._unschedulable(spec)
        if found is not None:
            reason, field = found
            raise Conflict(f"job can never start: {reason}", field=field)
        now = self.clock()
        job = self.store.insert_job(spec, JobStatus(state=JobState.PENDING, submit_time=now, pending_since=now))
        self.jobs[job.id] = job
        self.event(
            job,
            "submitted",
            f"by {spec.user} to queue {spec.queue}: {spec.workers} x {spec.per_worker} {spec.resource}",
        )
        await self.flush()
        self.kick()
        return job

    def _check_run_as(self, spec: Any) -> None:
        """Refuse a job that no known agent would start as its user (403, field "uid").

        Judged only from agents that stated their policy; with none known yet, nothing is refused.

        Raises:
            Forbidden: every such agent refuses the job's uid; the message says why.
        """
        known = [c for c in self.agents.nodes.values() if c.policy]
        if not known:
            return
        refusals = {c.node: c.refuses_uid(spec.uid) for c in known}
        if all(refusals.values()):
            who = "root" if spec.uid == 0 else f"{spec.user} (uid {spec.uid})"
            why = "; ".join(f"node {n}: {r}" for n, r in sorted(refusals.items()))
            raise Forbidden(f"job can never start: no node runs jobs as {who} ({why})", field="uid")

    def _unschedulable(self, spec: Any) -> tuple[str, str] | None:
        from labgang.launcher.coordinator.scheduling import check_submission

        return check_submission(self, spec)

    def get_job(self, job_id: str) -> JobRecord:
        """The job with ``job_id``.

        Raises:
            NotFound: no such job.
        """
        job = self.jobs.get(str(job_id))
        if job is None:
            raise NotFound(f"no job {job_id!r}", field="id")
        return job

    def list_jobs(self, caller: Caller, *, all_users: bool = False, user: str | None = None) -> list[JobRecord]:
        """Jobs in submission order: the caller's own by default, ``user``'s, or everyone's."""
        jobs = sorted(self.jobs.values(), key=lambda j: j.seq)
        if user:
            return [j for j in jobs if j.spec.user == user]
        if all_users or caller.uid is None:
            return jobs
        return [j for j in jobs if j.spec.uid == caller.uid]

    def _check_owner(self, caller: Caller, job: JobRecord, what: str) -> None:
        if caller.read_only or caller.uid is None:
            raise Forbidden(f"{what} needs the Unix socket of a labgang node (this port is read-only)")
        if not (caller.owns(job.spec) or caller.admin):
            raise Forbidden(f"job {job.id} belongs to {job.spec.user}; only its owner or an admin may {what}")

    async def cancel(self, caller: Caller, job_id: str) -> JobRecord:
        """Cancel a job: a pending one at once, a running one by stopping its ranks with grace.

        Raises:
            NotFound: no such job. Forbidden: not the owner and not an admin.
        """
        job = self.get_job(job_id)
        self._check_owner(caller, job, "cancel it")
        state = job.status.state
        if state.finished:
            return job
        if state == JobState.PENDING:
            now = self.clock()
            job.status.state = JobState.CANCELLED
            job.status.end_time = now
            job.status.reason_code, job.status.reason_message = "cancelled", f"cancelled by {caller.user}"
            self.store.save_status(job)
            self.event(job, "cancelled", f"by {caller.user} while pending")
        else:
            lifecycle.begin_termination(self, job, "cancel", f"cancelled by {caller.user}")
        await self.flush()
        self.kick()
        return job

    async def stop_jobs_for_shutdown(self, why: str) -> list[str]:
        """labgang is shutting down and its agent will stop the ranks: record that first, so
        their exits are not the jobs' failures (each is requeued, or cancelled with
        ``requeue = false``, once its ranks are gone). Nothing is admitted from now on.

        Args:
            why: the reason recorded in each job's history, e.g. "stopped: labgang up shut down".

        Returns:
            The ids of the jobs that were admitted, running or terminating.
        """
        self.shutting_down = True
        stopped = []
        for job in lifecycle.active_jobs(self):
            stopped.append(job.id)
            if job.status.state == JobState.TERMINATING:
                continue  # already stopping for its own reason (cancel, preemption, failure)
            lifecycle.begin_termination(self, job, "shutdown", why)
        await self.flush()
        return stopped

    async def read_log(self, caller: Caller, job_id: str, rank: int, offset: int) -> tuple[bytes, int, bool]:
        """Read a rank's output from the agent that holds it.

        Args:
            rank: the global rank (0..workers-1).
            offset: byte offset to read from.

        Returns:
            (data, next offset, True when the job has ended and ``data`` reached the end of the log).

        Raises:
            NotFound / Forbidden / BadRequest / ServiceUnavailable (node not connected).
        """
        job = self.get_job(job_id)
        self._check_owner(caller, job, "read its logs")
        if rank < 0 or rank >= job.spec.workers:
            raise BadRequest(f"rank {rank} out of range", field="rank", allowed=list(range(job.spec.workers)))
        if offset < 0:
            raise BadRequest("offset must be >= 0", field="offset")
        record = job.ranks.get(rank)
        run_id = job.run_id
        if record is None:
            # Requeued and not placed again: show the previous attempt's log if there was one.
            # Off the event loop: the store's lock may be held by a group commit syncing to disk.
            attempts = await asyncio.get_running_loop().run_in_executor(None, self.store.rank_attempts, job.id)
            past = [row for row in attempts if row[1] == rank]
            if not past:
                return b"", offset, job.status.state.finished
            attempt, _, node, _, _ = past[-1]
            run_id = f"{job.id}.{attempt}"
        else:
            node = record.node
            if record.state == "assigned":
                return b"", offset, False
        finished = job.status.state.finished
        try:
            result = await self.agents.call(
                node, "read_log", {"job_id": run_id, "rank": rank, "offset": offset, "limit": LOG_CHUNK_BYTES}
            )
        except AgentCallError as exc:
            raise ServiceUnavailable(f"cannot read the log of rank {rank}: {exc}", field="rank") from None
        data = base64.b64decode(result.get("data", ""))
        next_offset = int(result.get("next_offset", offset + len(data)))
        at_end = next_offset >= int(result.get("size", next_offset))
        return data, next_offset, finished and at_end

    # ----- agent link -------------------------------------------------------------------------

    async def on_hello(self, conn: AgentConn, message: dict[str, Any]) -> None:
        """A node (re)connected: take its inventory and reconcile its ranks with the store."""
        self._take_inventory(conn, message)
        was_lost = conn.lost
        conn.lost = False
        if was_lost:
            log.warning("node %s is back", conn.node)
        lifecycle.reconcile_node(self, conn, message.get("ranks") or [])
        await self.flush()
        self.kick()

    async def on_inventory(self, conn: AgentConn, message: dict[str, Any]) -> None:
        """Periodic or changed inventory; a node that was lost and speaks again is reconciled."""
        changed = self._take_inventory(conn, message)
        if conn.lost:
            conn.lost = False
            log.warning("node %s answers again after being lost", conn.node)
            lifecycle.reconcile_node(self, conn, message.get("ranks") or [])
            await self.flush()
            changed = True
        else:
            ranks = message.get("ranks") or []
            touched = {job.id: job for r in ranks if (job := self.job_for_run(str(r.get("job_id")))) is not None}
            before = {job_id: _scheduling_state(job) for job_id, job in touched.items()}
            lifecycle.update_pids(self, conn, ranks)
            changed = changed or any(_scheduling_state(job) != before[job_id] for job_id, job in touched.items())
            if self.store.dirty or self._effects:
                await self.flush()  # a rank list can end or stop a gang too (a missed event)
        if changed:
            self.kick()

    def _take_inventory(self, conn: AgentConn, message: dict[str, Any]) -> bool:
        """Keep the node's inventory and rank list; True when scheduling could decide differently:
        its allocatable devices changed, or devices no job holds started or stopped showing
        processes (foreign processes, a context NVML still shows)."""
        from labgang.agent.inventory import NodeInventory

        conn.last_seen = self.clock()
        ranks = message.get("ranks")
        if ranks is not None:
            conn.ranks = {(r["job_id"], int(r["rank"])): r for r in ranks}
        inv = message.get("inventory")
        if inv is None:
            return False
        new = NodeInventory.from_dict(inv)
        old = conn.inventory
        conn.inventory_dict = inv
        conn.inventory = new
        if old is None or old.allocatable() != new.allocatable():
            self.schedulable_cache.clear()
            return True
        old_pids, new_pids = old.device_pids(), new.device_pids()
        if old_pids == new_pids:
            return False
        from labgang.launcher.coordinator.scheduling import busy_unheld, held_devices

        held = held_devices(self)
        return busy_unheld(old_pids, held) != busy_unheld(new_pids, held)

    async def on_rank_events(
        self, conn: AgentConn, events: list[dict[str, Any]], inventory: dict[str, Any] | None = None
    ) -> None:
        """Apply rank events (at least once; applying one twice changes nothing) and commit.

        Args:
            inventory: the node's inventory read right after the ranks were released (the
                ``NodeInventory.to_dict()`` schema), taken before the events so that a device a
                ``gone`` rank frees is not still shown busy with its pids.
        """
        changed = inventory is not None and self._take_inventory(conn, {"inventory": inventory})
        conn.last_seen = self.clock()
        log.debug(
            "rank events from %s: %s",
            conn.node,
            ", ".join(f"{e.get('job_id')}/{e.get('rank')} {e.get('kind')}" for e in events),
        )
        touched = {job.id: job for ev in events if (job := self.job_for_run(str(ev.get("job_id")))) is not None}
        before = {job_id: _scheduling_state(job) for job_id, job in touched.items()}
        for ev in events:
            lifecycle.apply_rank_event(self, conn.node, ev)
        # Only what the scheduler sees matters: a job starting to stop or leaving its devices
        # (lifecycle kicks for the latter too). A rank starting or exiting alone changes nothing.
        if changed or any(
            _scheduling_state(job) != before[job_id] and not lifecycle.awaited_by_waiting_preemptor(self, job)
            for job_id, job in touched.items()
        ):
            self.kick()  # the cycle runs while this commit is written; its own commit follows
        await self.flush()

    def on_disconnect(self, conn: AgentConn) -> None:
        """The node's websocket closed; it becomes lost after ``node_timeout_s`` unless it returns."""
        conn.connected = False
        conn.ws = None
        conn.fail_pending("disconnected")
        log.warning("node %s disconnected", conn.node)
        self.kick()
