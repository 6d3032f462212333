"""Dispatch: turning an admission recorded in the store into commands to node agents.

Called only after the admission is committed (:meth:`Coordinator.flush`). Every
command is idempotent on the agent (``launch`` per (run id, rank); ``stop_job`` of a
job that is already stopping or unknown does nothing), so the coordinator may resend
any of them after a reconnect or a restart.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from labgang.agent.inventory import NodeInventory
from labgang.launcher.arrays import task_environment
from labgang.launcher.coordinator.agents import AgentCallError
from labgang.launcher.coordinator.topology import rank_cpus
from labgang.launcher.coordinator.translate import launch_answer
from labgang.launcher.lifecycle.events import LaunchFailed, LaunchSent
from labgang.launcher.lifecycle.records import JobRecord, parse_warning
from labgang.launcher.lifecycle.rules import job_nodes
from labgang.launcher.lifecycle.states import JobState

if TYPE_CHECKING:
    from labgang.launcher.coordinator.core import Coordinator

log = logging.getLogger("labgang.coordinator.dispatch")


def launch_specs(
    job: JobRecord, node: str, inventory: NodeInventory | None = None, max_signal_lead_s: float | None = None
) -> list[dict[str, Any]]:
    """The ``LaunchSpec`` dicts for the job's ranks on ``node`` (torchrun's variables).

    With ``cpu_bind`` "numa" and the node's ``inventory``, each rank gets ``cpus``: the CPUs of
    its GPUs' NUMA node(s) (:func:`~labgang.launcher.coordinator.topology.rank_cpus`).

    NODE_RANK is the node's index in order of first appearance by rank; LOCAL_RANK the
    rank's index among the job's ranks on that node. ``master_port`` 0 (not chosen yet) asks
    the agent of rank 0's node to pick a free port, or reuse the one its ranks of the run
    already have, and to report it in its reply. The warning lead is at most
    ``max_signal_lead_s`` (the cluster's bound; None = as submitted).
    """
    nodes = job_nodes(job)
    mine = [job.ranks[r] for r in sorted(job.ranks) if job.ranks[r].node == node]
    warn_signal, warn_before = (None, 0.0)
    if job.spec.signal:
        warn_signal, warn_before = parse_warning(job.spec.signal)
        if max_signal_lead_s is not None:  # a job stored before the admin lowered the bound
            warn_before = min(warn_before, max_signal_lead_s)
    env = dict(job.spec.env)
    return [
        {
            "job_id": job.run_id,
            "rank": r.rank,
            "local_rank": i,
            "world_size": len(job.ranks),  # an elastic gang: the size it started with
            "local_world_size": len(mine),
            "node_rank": nodes.index(node),
            "master_addr": job.status.master_addr or "127.0.0.1",
            "master_port": job.status.master_port or 0,  # 0: rank 0's agent picks a free port
            "devices": list(r.devices),
            "argv": list(job.spec.argv),
            "env": env,
            "cwd": job.spec.cwd,
            "uid": job.spec.uid,
            "gid": job.spec.gid,
            "restart_count": job.status.restart_count,
            "grace": job.spec.grace_s,
            "warn_signal": warn_signal,
            "warn_before": warn_before,
            "user_job_id": job.id,
            **_cpus(job, inventory, r.devices),
            **_array_env(job),
            **({"stdin": job.spec.stdin} if r.rank == 0 and job.spec.stdin is not None else {}),
            **({"pty": True} if r.rank == 0 and job.spec.pty else {}),
        }
        for i, r in enumerate(mine)
    ]


def _array_env(job: JobRecord) -> dict[str, Any]:
    """An array task's ``array_env`` (LABGANG_ARRAY_* and SLURM_ARRAY_*, docs/arrays.md); {} otherwise."""
    task = job.spec.array
    if task is None:
        return {}
    env = task_environment(task.array_id, task.index, task.count, task.low, task.high, task.step)
    return {"array_env": env}


def _cpus(job: JobRecord, inventory: NodeInventory | None, devices: tuple[str, ...]) -> dict[str, Any]:
    if job.spec.cpu_bind == "none":
        return {}
    cpus = rank_cpus(inventory, devices)
    return {} if cpus is None else {"cpus": cpus}


async def dispatch_job(coord: Coordinator, job: JobRecord) -> None:
    """Start an admitted gang: launch rank 0's node first, whose agent picks MASTER_PORT as it
    launches (no separate round trip), record the port, then launch every other node.

    Failures (node gone, launch refused) stop the gang and requeue it with backoff.
    """
    run_id = job.run_id
    if job.status.state != JobState.ADMITTED or run_id in coord.dispatching:
        return
    coord.dispatching.add(run_id)
    try:
        await _dispatch(coord, job, run_id)
    finally:
        coord.dispatching.discard(run_id)


async def _dispatch(coord: Coordinator, job: JobRecord, run_id: str) -> None:
    nodes = job_nodes(job)
    if job.status.master_port is None:
        node0 = job.ranks[0].node
        conn = coord.agents.get(node0)
        master_addr = conn.address if conn is not None and conn.address else node0
        await launch_on_node(coord, job, node0, run_id, master_addr=master_addr)
        if job.run_id != run_id or job.status.state != JobState.ADMITTED or job.status.master_port is None:
            return  # the launch failed (the gang is stopping) or the job moved on
        nodes = [n for n in nodes if n != node0]
    for node in nodes:
        coord.spawn(launch_on_node(coord, job, node, run_id))


async def launch_on_node(
    coord: Coordinator, job: JobRecord, node: str, run_id: str, *, master_addr: str | None = None
) -> None:
    """Send the ``launch`` command for the job's ranks on one node and apply the reply.

    Args:
        master_addr: rank 0's node address, recorded with the first launch of the run.
    """
    if job.run_id != run_id or job.status.state != JobState.ADMITTED:
        return
    before = job.status.state
    coord.apply(LaunchSent(coord.clock(), node, run_id, master_addr))
    conn = coord.agents.get(node)
    specs = launch_specs(job, node, conn.inventory if conn is not None else None, coord.config.max_signal_lead_s)
    try:
        statuses = await coord.agents.call(node, "launch", {"specs": specs})
    except AgentCallError as exc:
        # Not delivered or no answer: the ranks stay "launching"; a reconnect reconciles them,
        # a lost node loses them, and the startup timeout bounds the wait.
        coord.apply(LaunchFailed(coord.clock(), node, run_id, str(exc)))
        await coord.flush()
        _kick_if_changed(coord, job, run_id, before)
        return
    log.debug("job %s: launch on %s answered", job.id, node)
    coord.apply(launch_answer(node, run_id, statuses or [], coord.clock()))
    await coord.flush()
    _kick_if_changed(coord, job, run_id, before)


def _kick_if_changed(coord: Coordinator, job: JobRecord, run_id: str, before: JobState) -> None:
    """A cycle only when the launch changed what the scheduler sees (a failed start stops the gang);
    a launch that went as planned changes nothing it could decide."""
    if job.run_id != run_id or job.status.state not in (before, JobState.RUNNING):
        coord.kick()


async def stop_on_node(coord: Coordinator, node: str, run_id: str, grace: float, warn: bool = False) -> None:
    """Ask ``node`` to stop every rank of ``run_id`` with ``grace`` seconds (idempotent).

    Args:
        warn: let the supervisor send the job's ``--signal`` warning ``warn_before`` seconds
            ahead of SIGTERM (preemption and cancel stops); False: SIGTERM now.
    """
    try:
        await coord.agents.call(node, "stop_job", {"job_id": run_id, "grace": grace, "warn": warn})
    except AgentCallError as exc:
        log.warning("stop of %s on %s not delivered (%s); it is resent when the node reconnects", run_id, node, exc)


async def stop_jobs_on_node(coord: Coordinator, node: str, stops: list[tuple[str, float, bool]]) -> None:
    """Ask ``node`` to stop several runs at one instant: ``stops`` = [(run_id, grace, warn)] (idempotent)."""
    try:
        await coord.agents.call(
            node,
            "stop_jobs",
            {"stops": [{"job_id": run_id, "grace": grace, "warn": warn} for run_id, grace, warn in stops]},
        )
    except AgentCallError as exc:
        log.warning(
            "stop of %s on %s not delivered (%s); it is resent when the node reconnects",
            ", ".join(run_id for run_id, _, _ in stops),
            node,
            exc,
        )


async def signal_on_node(coord: Coordinator, node: str, run_id: str, signum: int) -> None:
    """Send ``signum`` to every rank of ``run_id`` on ``node``."""
    try:
        await coord.agents.call(node, "signal_job", {"job_id": run_id, "signal": signum})
    except AgentCallError as exc:
        log.warning("signal %d to %s on %s not delivered: %s", signum, run_id, node, exc)
