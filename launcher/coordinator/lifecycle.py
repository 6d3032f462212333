"""Gang lifecycle: a job's ranks start together, stop together, and end the job together.

Rules (torchrun's and Kueue's waitForPodsReady, docs/queue-semantics.md §A5):

* ADMITTED → RUNNING once every rank confirmed its start; not within
  ``startup_timeout_s`` → every rank stopped, the job requeued with backoff
  (``end_intent="retry"``) and the reason names the node(s) and rank(s) that failed.
* a rank exits non-zero (or vanishes) → the other ranks are stopped with the job's
  grace → the job fails with that rank's exit status.
* every rank exits 0 → succeeded, once every rank is *gone* (its devices free).
* preempted → stopped with grace → requeued with its original submit time and
  ``restart_count`` + 1 (``end_intent="requeue"``).
* a node is lost → its ranks count as lost, the rest are stopped, the job is
  requeued (or failed with ``requeue = false``).
* labgang itself shuts down and stops its jobs (``labgang up`` without ``--keep-jobs``)
  → stopped without warning, requeued with restart_count + 1 (``end_intent="shutdown"``),
  or cancelled with ``requeue = false``; never the job's failure.

Rank states as the coordinator records them (never moving backwards):
assigned → launching → running → exited → gone, or lost.
"""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING, Any

from labgang.launcher.model import JobState
from labgang.launcher.store import JobRecord, RankRecord

if TYPE_CHECKING:
    from labgang.launcher.coordinator.agents import AgentConn
    from labgang.launcher.coordinator.core import Coordinator

log = logging.getLogger("labgang.coordinator.lifecycle")

_ORDER = {"assigned": 0, "launching": 1, "running": 2, "exited": 3, "gone": 4, "lost": 4}
# Supervisor RankState values grouped by what they mean to the gang.
_LIVE = {"running", "warned", "stopping", "killing"}
# End intents whose stop is preceded by the job's --signal warning (Slurm: preemption, scancel).
WARNED_STOPS = frozenset({"cancel", "requeue"})


def active_jobs(coord: Coordinator) -> list[JobRecord]:
    """Jobs that hold devices (admitted, running, terminating), in submission order."""
    return sorted((j for j in coord.jobs.values() if j.status.state.holds_devices), key=lambda j: j.seq)


def _advance(rank: RankRecord, state: str) -> bool:
    if _ORDER[state] > _ORDER[rank.state]:
        rank.state = state
        return True
    return False


def _set_rank(
    coord: Coordinator,
    job: JobRecord,
    rank: RankRecord,
    state: str,
    *,
    pid: int | None = None,
    exit_status: int | None = None,
) -> bool:
    changed = _advance(rank, state)
    if pid is not None and rank.pid != pid:
        rank.pid = pid
        changed = True
    if exit_status is not None and rank.exit_status is None and state in ("exited", "gone"):
        rank.exit_status = exit_status
        changed = True
    if changed:
        coord.store.save_rank(job, rank)
    return changed


def _lookup(coord: Coordinator, node: str, run_id: str, rank: int) -> tuple[JobRecord | None, RankRecord | None]:
    job = coord.job_for_run(run_id)
    if job is None or job.run_id != run_id or not job.status.state.holds_devices:
        return None, None
    record = job.ranks.get(rank)
    if record is None or record.node != node:
        return None, None
    return job, record


def apply_rank_event(coord: Coordinator, node: str, event: dict[str, Any]) -> None:
    """Apply one supervisor ``RankEvent`` dict (``started`` | ``exited`` | ``gone``) from ``node``."""
    run_id, rank_no, kind = event["job_id"], int(event["rank"]), event["kind"]
    job, rank = _lookup(coord, node, run_id, rank_no)
    if job is None or rank is None:
        return
    status = event.get("exit_status")
    if kind == "started":
        changed = _set_rank(coord, job, rank, "running")
    elif kind == "exited":
        changed = _set_rank(coord, job, rank, "exited", exit_status=status)
        if changed:
            _mark_running(coord, job)
            coord.event(job, "rank-exited", f"rank {rank_no} on {node} exited with status {status}")
    else:
        changed = _set_rank(coord, job, rank, "gone", exit_status=status)
    if changed:
        evaluate(coord, job)


def apply_rank_status(coord: Coordinator, node: str, status: dict[str, Any]) -> bool:
    """Apply one supervisor ``RankStatus`` dict; returns False when no current rank matches it."""
    job, rank = _lookup(coord, node, status["job_id"], int(status["rank"]))
    if job is None or rank is None:
        return False
    state, exit_status, pid = status["state"], status.get("exit_status"), status.get("pid")
    changed = False
    if state == "starting":
        changed = _set_rank(coord, job, rank, "launching")
    elif state in _LIVE and exit_status is None:
        changed = _set_rank(coord, job, rank, "running", pid=pid)
    elif state == "gone":
        changed = _set_rank(coord, job, rank, "gone", pid=pid, exit_status=exit_status)
    else:  # main process exited (releasing, or stopping leftovers)
        changed = _set_rank(coord, job, rank, "exited", pid=pid, exit_status=exit_status)
        if changed:
            _mark_running(coord, job)
            coord.event(job, "rank-exited", f"rank {rank.rank} on {node} exited with status {exit_status}")
    if changed:
        evaluate(coord, job)
    return True


def update_pids(coord: Coordinator, conn: AgentConn, ranks: list[dict[str, Any]]) -> None:
    """Take what a periodic rank list says (pids, states) without treating absences as losses."""
    for status in ranks:
        apply_rank_status(coord, conn.node, status)


def _mark_running(coord: Coordinator, job: JobRecord) -> None:
    """ADMITTED → RUNNING once every rank has started (even if one already exited: the history
    then says "running" before that rank's "rank-exited")."""
    st = job.status
    ranks = [job.ranks[r] for r in sorted(job.ranks)]
    if st.state == JobState.ADMITTED and ranks and all(_ORDER[r.state] >= _ORDER["running"] for r in ranks):
        st.state = JobState.RUNNING
        st.start_time = coord.clock()
        st.reason_code = st.reason_message = None
        coord.store.save_status(job)
        n = len(ranks)
        coord.event(
            job,
            "running",
            f"{'all ' if n > 1 else ''}{n} rank{'s' if n != 1 else ''} started on {', '.join(job_nodes(job))}",
        )


def evaluate(coord: Coordinator, job: JobRecord) -> None:
    """Move the job along after its ranks changed (start confirmed, a rank failed, all gone)."""
    st = job.status
    ranks = [job.ranks[r] for r in sorted(job.ranks)]
    _mark_running(coord, job)
    if st.state in (JobState.ADMITTED, JobState.RUNNING):
        failed = next(
            (r for r in ranks if r.state in ("exited", "gone", "lost") and r.exit_status != 0),
            None,
        )
        if failed is not None:
            if failed.state == "lost":
                begin_termination(coord, job, "lost", f"rank {failed.rank}'s node {failed.node} was lost")
            else:
                begin_termination(
                    coord,
                    job,
                    "fail",
                    f"rank {failed.rank} on {failed.node} exited with status {failed.exit_status}",
                    exit_status=failed.exit_status,
                )
            return
    if st.state.holds_devices and ranks and all(r.ended for r in ranks):
        finish(coord, job)


def job_nodes(job: JobRecord) -> list[str]:
    """The job's nodes in NODE_RANK order (order of first appearance by rank)."""
    nodes: list[str] = []
    for r in sorted(job.ranks):
        if job.ranks[r].node not in nodes:
            nodes.append(job.ranks[r].node)
    return nodes


def begin_termination(
    coord: Coordinator, job: JobRecord, intent: str, message: str, *, exit_status: int | None = None
) -> None:
    """Stop every rank of the job with its grace; what follows depends on ``intent``.

    Args:
        intent: "fail", "cancel", "requeue" (preempted), "retry" (failed start), "lost", "timeout",
            "shutdown" (labgang itself is stopping: requeued, or cancelled with ``requeue = false``).
        message: the reason, recorded in the history and shown as the job's reason.
        exit_status: the status the job will fail with ("fail").
    """
    st = job.status
    if st.state == JobState.TERMINATING:
        if intent == "cancel" and st.end_intent != "cancel":
            st.end_intent = "cancel"
            st.reason_code, st.reason_message = intent, message
            coord.store.save_status(job)
            coord.event(job, intent, message)
        return
    if not st.state.holds_devices:
        return
    st.state = JobState.TERMINATING
    st.end_intent = intent
    st.reason_code, st.reason_message = intent, message
    if exit_status is not None:
        st.exit_status = exit_status
    coord.store.save_status(job)
    coord.event(job, "stopping", f"{message}; stopping every rank")
    if intent in WARNED_STOPS and job.spec.signal and st.start_time is not None:
        from labgang.launcher.coordinator.requests import parse_signal

        signum, before = parse_signal(job.spec.signal)
        coord.event(job, "signal", f"signal {_signal_name(signum)} sent to every rank, {before:g} s before SIGTERM")
    for rank in job.ranks.values():
        if rank.state == "assigned":  # never sent to an agent: nothing to stop
            _set_rank(coord, job, rank, "gone")
    stop_live_ranks(coord, job)
    evaluate(coord, job)


def stop_live_ranks(coord: Coordinator, job: JobRecord, only_node: str | None = None) -> None:
    """Queue a stop (idempotent) on every node where the job still has a live rank; stops queued
    for one node before the next commit go out as one ``stop_jobs`` command."""
    nodes = sorted({r.node for r in job.ranks.values() if not r.ended})
    # The --signal warning precedes a preemption or cancel stop (the supervisor sends it
    # warn_before seconds ahead of SIGTERM). A time limit's warning was already sent at
    # T - warn_before by check_timers; failures, lost nodes and shutdowns stop at once.
    warn = job.status.end_intent in WARNED_STOPS
    for node in nodes:
        if only_node is None or node == only_node:
            coord.stop_after_commit(node, job.run_id, job.spec.grace_s, warn)


def finish(coord: Coordinator, job: JobRecord) -> None:
    """Every rank is gone: end the job, or put it back in its queue, according to its intent."""
    st = job.status
    if not st.state.holds_devices:
        return
    now = coord.clock()
    intent = st.end_intent
    ranks = [job.ranks[r] for r in sorted(job.ranks)]
    if intent is None:
        bad = next((r for r in ranks if r.exit_status != 0), None)
        if bad is None:
            _end(coord, job, JobState.SUCCEEDED, 0, "completed", "all ranks exited with status 0")
        else:
            _end(
                coord,
                job,
                JobState.FAILED,
                bad.exit_status,
                "failed",
                f"rank {bad.rank} on {bad.node} exited with status {bad.exit_status}",
            )
    elif intent == "cancel":
        _end(coord, job, JobState.CANCELLED, st.exit_status, "cancelled", st.reason_message or "cancelled")
    elif intent in ("fail", "timeout"):
        _end(coord, job, JobState.FAILED, st.exit_status, intent, st.reason_message or intent)
    elif intent in ("requeue", "lost"):
        if job.spec.requeue:
            requeue(coord, job, st.reason_message or intent, not_before=now)
        else:
            _end(
                coord,
                job,
                JobState.FAILED,
                st.exit_status,
                intent,
                f"{st.reason_message} (not requeued: the job asked for no requeue)",
            )
    elif intent == "shutdown":
        # Stopped because labgang itself shut down: not the job's failure. It runs again at
        # the next start (original submit time), unless it asked never to be requeued.
        if job.spec.requeue:
            requeue(coord, job, st.reason_message or "stopped: labgang shut down", not_before=now)
        else:
            _end(
                coord,
                job,
                JobState.CANCELLED,
                None,
                "shutdown",
                f"{st.reason_message} (not requeued: the job asked for no requeue)",
            )
    elif intent == "retry":
        st.start_failures += 1
        if st.start_failures >= coord.config.max_start_failures:
            _end(
                coord,
                job,
                JobState.FAILED,
                st.exit_status,
                "start-failed",
                f"could not start after {st.start_failures} attempts: {st.reason_message}",
            )
        else:
            delay = min(
                coord.config.requeue_backoff_s * 2 ** (st.start_failures - 1), coord.config.requeue_backoff_max_s
            )
            requeue(coord, job, f"{st.reason_message}; retry in {delay:g} s", not_before=now + delay)
    else:
        _end(coord, job, JobState.FAILED, st.exit_status, "failed", f"unknown end intent {intent!r}")


def _end(coord: Coordinator, job: JobRecord, state: JobState, exit_status: int | None, code: str, message: str) -> None:
    st = job.status
    st.state = state
    st.exit_status = exit_status
    st.end_time = coord.clock()
    st.reason_code, st.reason_message = code, message
    st.end_intent = None
    coord.store.save_status(job)
    coord.event(job, state.value, message + (f" (exit status {exit_status})" if exit_status is not None else ""))
    coord.kick()


def requeue(coord: Coordinator, job: JobRecord, message: str, *, not_before: float) -> None:
    """Back to the queue as a new attempt: original submit time, ``restart_count`` + 1."""
    st = job.status
    now = coord.clock()
    st.state = JobState.PENDING
    st.restart_count += 1
    st.pending_since = now
    st.not_before = not_before
    st.admit_time = st.start_time = None
    st.end_intent = None
    st.exit_status = None
    st.master_addr = st.master_port = None
    st.nominated = ()
    st.warned = False
    st.reason_code, st.reason_message = "requeued", message
    job.ranks = {}
    coord.store.save_status(job)
    coord.event(job, "requeued", f"{message}; restart {st.restart_count}")
    if not awaited_by_waiting_preemptor(coord, job):
        coord.kick()


def awaited_by_waiting_preemptor(coord: Coordinator, job: JobRecord) -> bool:
    """True when ``job`` is a requeued (pending) victim some pending preemptor nominated and
    that preemptor still waits for another of its victims to free its devices.

    Until the last victim is gone no cycle can admit the preemptor, and the victim just
    requeued should not take the devices it was evicted from: its requeue alone is no reason
    for a cycle; the last victim's is, and that cycle decides for every victim too.
    """
    if job.status.state != JobState.PENDING:
        return False
    for other in coord.jobs.values():
        st = other.status
        if st.state != JobState.PENDING or job.id not in st.nominated:
            continue
        if any(
            (v := coord.jobs.get(vid)) is not None and v.status.state.holds_devices
            for vid in st.nominated
            if vid != job.id
        ):
            return True
    return False


def rank_refused(coord: Coordinator, job: JobRecord, run_id: str, rank_no: int) -> None:
    """An agent refused to launch a rank: it never ran, so it counts as gone at once."""
    rank = job.ranks.get(rank_no)
    if job.run_id == run_id and rank is not None and _set_rank(coord, job, rank, "gone"):
        evaluate(coord, job)


def start_failed(coord: Coordinator, job: JobRecord, message: str) -> None:
    """The gang could not start: stop what started and requeue with backoff."""
    if job.status.state == JobState.ADMITTED:
        begin_termination(coord, job, "retry", f"start failed: {message}")


def mark_node_lost(coord: Coordinator, conn: AgentConn, why: str) -> None:
    """The node is lost: its devices are not offered; its jobs are stopped elsewhere and requeued."""
    if conn.lost:
        return
    conn.lost = True
    log.warning("node %s lost: %s", conn.node, why)
    for job in active_jobs(coord):
        mine = [r for r in job.ranks.values() if r.node == conn.node and not r.ended]
        if not mine and not any(r.node == conn.node for r in job.ranks.values()):
            continue
        for rank in mine:
            _set_rank(coord, job, rank, "lost")
        if job.status.state != JobState.TERMINATING:
            begin_termination(coord, job, "lost", f"node {conn.node} lost ({why})")
        else:
            evaluate(coord, job)
    coord.kick()


def reconcile_node(coord: Coordinator, conn: AgentConn, reported: list[dict[str, Any]]) -> None:
    """Compare what the agent runs with what the store says should run on its node.

    Reported ranks update the store; expected ranks the agent does not know are
    (re)launched when their job is still starting, or count as gone; ranks the agent
    runs that no current job expects there are stopped.
    """
    from labgang.launcher.coordinator.dispatch import launch_on_node, stop_on_node

    by_key = {(s["job_id"], int(s["rank"])): s for s in reported}
    matched: set[tuple[str, int]] = set()
    for job in active_jobs(coord):
        relaunch = False
        for rank in [job.ranks[r] for r in sorted(job.ranks) if job.ranks[r].node == conn.node]:
            key = (job.run_id, rank.rank)
            status = by_key.get(key)
            if status is not None:
                if rank.state != "lost":
                    matched.add(key)
                    apply_rank_status(coord, conn.node, status)
                continue
            if rank.state in ("assigned", "launching"):
                if job.status.state == JobState.ADMITTED:
                    relaunch = True
                else:
                    _set_rank(coord, job, rank, "gone")
            elif rank.state in ("running", "exited"):
                _set_rank(coord, job, rank, "gone")
                coord.event(job, "rank-gone", f"node {conn.node} no longer knows rank {rank.rank}")
        if relaunch and job.status.master_port is not None:
            coord.effect(partial(launch_on_node, coord, job, conn.node, job.run_id))
        elif relaunch and all(coord.agents.connected(n) for n in job_nodes(job)):
            # Admitted before a coordinator crash, never dispatched: dispatch it once every
            # node of the gang is back (the startup timeout bounds the wait).
            from labgang.launcher.coordinator.dispatch import dispatch_job

            coord.effect(partial(dispatch_job, coord, job))
        if job.status.state == JobState.TERMINATING:
            stop_live_ranks(coord, job, only_node=conn.node)
        evaluate(coord, job)
    for key, status in by_key.items():
        if key in matched or status.get("state") == "gone":
            continue
        run_id = key[0]
        owner = coord.job_for_run(run_id)
        grace = owner.spec.grace_s if owner is not None else coord.config.default_grace_s
        log.warning(
            "node %s runs rank %s of %s that no current job expects there: stopping it", conn.node, key[1], run_id
        )
        coord.effect(partial(stop_on_node, coord, conn.node, run_id, grace))


def check_timers(coord: Coordinator) -> None:
    """Timed arrows: lost nodes, startup timeouts, time limits and their warning signals."""
    from labgang.launcher.coordinator.requests import parse_signal

    cfg = coord.config
    now = coord.clock()
    for conn in list(coord.agents.nodes.values()):
        silent = now - conn.last_seen
        if not conn.lost and silent > cfg.node_timeout_s:
            how = "disconnected" if not conn.connected else "silent"
            mark_node_lost(coord, conn, f"{how} for {silent:.1f} s > node_timeout_s {cfg.node_timeout_s:g}")
    if now - coord.started_at > cfg.node_timeout_s:
        # Nodes that held ranks before a coordinator restart and never came back.
        for job in active_jobs(coord):
            for rank in list(job.ranks.values()):
                if rank.node not in coord.agents.nodes and not rank.ended:
                    conn = coord.agents.attach(rank.node)
                    conn.last_seen = coord.started_at
                    mark_node_lost(coord, conn, f"did not reconnect within {cfg.node_timeout_s:g} s of a restart")
    for job in active_jobs(coord):
        st = job.status
        if (
            st.state == JobState.ADMITTED
            and st.admit_time is not None
            and now - max(st.admit_time, coord.started_at) > cfg.startup_timeout_s
        ):
            waiting = [r for r in job.ranks.values() if _ORDER[r.state] < _ORDER["running"]]
            detail = ", ".join(
                f"rank {r.rank} on {r.node} ({'node not connected' if not coord.agents.connected(r.node) else r.state})"
                for r in sorted(waiting, key=lambda r: r.rank)
            )
            start_failed(coord, job, f"not started within startup_timeout_s {cfg.startup_timeout_s:g}: {detail}")
        elif st.state == JobState.RUNNING and job.spec.time_limit_s and st.start_time is not None:
            # Slurm's --signal SIG@N: SIG at N s before the time limit T (the job keeps running
            # and may still finish on its own), then at T SIGTERM, the grace period, SIGKILL.
            # The coordinator owns T, so it sends the warning itself; the stop at T is unwarned.
            elapsed = now - st.start_time
            limit = job.spec.time_limit_s
            if elapsed >= limit:
                begin_termination(coord, job, "timeout", f"time limit of {limit:g} s reached")
            elif job.spec.signal and not st.warned:
                signum, before = parse_signal(job.spec.signal)
                if elapsed >= max(0.0, limit - before):
                    send_warning(coord, job, signum, f"{before:g} s before the time limit of {limit:g} s")


def _signal_name(signum: int) -> str:
    import signal as signal_mod

    try:
        return signal_mod.Signals(signum).name
    except ValueError:
        return str(signum)


def send_warning(coord: Coordinator, job: JobRecord, signum: int, why: str) -> None:
    """Send the job's ``--signal`` warning to every live rank (once per attempt) and record it."""
    from labgang.launcher.coordinator.dispatch import signal_on_node

    job.status.warned = True
    coord.store.save_status(job)
    coord.event(job, "signal", f"signal {_signal_name(signum)} sent to every rank, {why}")
    for node in sorted({r.node for r in job.ranks.values() if not r.ended}):
        coord.effect(partial(signal_on_node, coord, node, job.run_id, signum))
