"""Dispatch: turning an admission recorded in the store into commands to node agents.

Called only after the admission is committed (:meth:`Commits.flush`). Every
command is idempotent on the agent (``launch`` per (run id, rank); ``stop_job`` of a
job that is already stopping or unknown does nothing), so the coordinator may resend
any of them after a reconnect or a restart.

:class:`Dispatcher` is the part that sends them, owned by the coordinator's ``Commits``
(``commits.py``): it is handed the agent registry, that ``Commits`` (apply the answers, commit),
the scheduler's ``Kicks``, the ``BackgroundTasks``, the clock and the cluster configuration.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from labgang.agent.inventory import NodeInventory
from labgang.agent.supervisor.errors import InvalidSpec
from labgang.agent.supervisor.spec import LaunchSpec, ShareGrant
from labgang.launcher.arrays import task_environment
from labgang.launcher.coordinator.agents import AgentCallError, AgentRegistry
from labgang.launcher.coordinator.group_ranks import group_placement
from labgang.launcher.coordinator.slurm_env import het_environment, slurm_environment
from labgang.launcher.coordinator.topology import rank_cpus
from labgang.launcher.coordinator.translate import launch_answer
from labgang.launcher.jobgroups import GroupSpec
from labgang.launcher.lifecycle.events import LaunchFailed, LaunchSent
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, parse_warning, warns_batch_shell_only
from labgang.launcher.lifecycle.rules import job_nodes, launchable
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.output_pattern import expand, per_rank

if TYPE_CHECKING:
    from labgang.launcher.config.cluster import ClusterConfig
    from labgang.launcher.coordinator.commits import Commits
    from labgang.launcher.coordinator.tasks import BackgroundTasks
    from labgang.launcher.coordinator.timers import Kicks

log = logging.getLogger("labgang.coordinator.dispatch")


def launch_specs(
    job: JobRecord,
    node: str,
    inventory: NodeInventory | None = None,
    max_signal_lead_s: float | None = None,
    addresses: Mapping[str, str] | None = None,
) -> list[LaunchSpec]:
    """The typed launch contract for the job's ranks on ``node`` (torchrun's variables), as the
    agent parses it back (``LaunchSpec.to_dict``/``from_dict`` on the wire).

    With ``cpu_bind`` "numa" and the node's ``inventory``, each rank gets ``cpus``: the CPUs of
    its GPUs' NUMA node(s) (:func:`~labgang.launcher.coordinator.topology.rank_cpus`).

    NODE_RANK is the node's index in order of first appearance by rank; LOCAL_RANK the
    rank's index among the job's ranks on that node. ``master_port`` None (not chosen yet) asks
    the agent of rank 0's node to pick a free port, or reuse the one its ranks of the run
    already have, and to report it in its reply. The warning lead is at most
    ``max_signal_lead_s`` (the cluster's bound; None = as submitted).

    A job of groups (``launcher/jobgroups.py``): each rank runs its group's command, with the job's
    environment and its group's on top, and gets its ``group`` (name, rank and size in the group,
    every group's rank-0 host: ``addresses[node]``, else the node's name) and Slurm's het-job
    variables. With ``--startup-order`` only the ranks whose group's turn has come are included
    (:func:`~labgang.launcher.lifecycle.rules.launchable`); ``[]`` when none is on ``node``.

    Raises:
        InvalidSpec: a field the job record holds is not a valid launch (named by the error).
    """
    nodes = job_nodes(job)
    mine = [job.ranks[r] for r in sorted(job.ranks) if job.ranks[r].node == node]
    warn_signal, warn_before = (None, 0.0)
    if job.spec.signal:
        warn_signal, warn_before = parse_warning(job.spec.signal)
        if max_signal_lead_s is not None:  # a job stored before the admin lowered the bound
            warn_before = min(warn_before, max_signal_lead_s)
    env = dict(job.spec.env)
    task = job.spec.array
    array_env = (
        None
        if task is None
        else task_environment(task.array_id, task.index, task.count, task.low, task.high, task.step)
    )  # LABGANG_ARRAY_* and SLURM_ARRAY_*, docs/arrays.md
    groups = job.spec.groups
    placed = group_placement(job, addresses) if groups else None

    def group_of(rank: int) -> GroupSpec:
        assert placed is not None
        return groups[placed.index(rank)]

    ready = launchable(job)
    return [
        LaunchSpec(
            job_id=job.run_id,
            rank=r.rank,
            local_rank=i,
            world_size=len(job.ranks),  # an elastic gang: the size it started with
            local_world_size=len(mine),
            node_rank=nodes.index(node),
            master_addr=job.status.master_addr or "127.0.0.1",
            master_port=job.status.master_port,  # None: rank 0's agent picks a free port
            devices=tuple(r.devices),
            argv=tuple(group_of(r.rank).argv or job.spec.argv) if placed else tuple(job.spec.argv),
            env=env | group_of(r.rank).env if placed else env,
            cwd=job.spec.cwd,
            uid=job.spec.uid,
            gid=job.spec.gid,
            restart_count=job.status.restart_count,
            grace=job.spec.grace_s,
            warn_signal=warn_signal,
            warn_before=warn_before,
            warn_shell_only=warns_batch_shell_only(job.spec.signal),
            user_job_id=job.id,
            cpus=_cpus(job, inventory, r.devices),
            array_env=array_env,
            slurm_env=slurm_environment(job, r.rank) | (het_environment(job, placed, r.rank) if placed else {}),
            **_output_paths(job, node, r.rank),
            stdin=job.spec.stdin if r.rank == 0 else None,
            pty=r.rank == 0 and job.spec.pty,
            stdin_stream=r.rank == 0 and job.spec.stdin_stream and job.status.restart_count == 0,
            **_host_limits(job, len(mine), len(r.devices), group_of(r.rank) if placed else None),
            group=placed.launch_group(r.rank) if placed else None,
            share=share_grant(job.spec),
            log_hold=job.spec.attached,
            umask=job.spec.umask,
        )
        for i, r in enumerate(mine)
        if r.rank in ready
    ]


def share_grant(spec: JobSpec) -> ShareGrant | None:
    """The rank's part of its one card (``--shards``/``--mps``/``--gpu-mem``, docs/sharing.md), or None
    for whole devices."""
    if spec.shards:
        return ShareGrant("shard", shards=spec.shards, gpu_mem=spec.gpu_mem or None)
    if spec.mps:
        return ShareGrant("mps", sm_percent=spec.mps, gpu_mem=spec.gpu_mem or None)
    return None


def _output_paths(job: JobRecord, node: str, rank: int) -> dict[str, Any]:
    """``output_path``/``error_path`` of one rank (``--output``/``--error``, launcher/output_pattern.py):
    rank 0's, or every rank's when the pattern holds ``%t``; {} without them."""
    out: dict[str, Any] = {}
    task = job.spec.array
    for key, pattern in (("output_path", job.spec.output), ("error_path", job.spec.error)):
        if pattern is None or (rank != 0 and not per_rank(pattern)):
            continue
        out[key] = expand(
            pattern,
            cwd=job.spec.cwd,
            number=job.seq,
            array_id=None if task is None else task.array_id,
            index=None if task is None else task.index,
            name=job.spec.name,
            user=job.spec.user,
            node=node,
            rank=rank,
        )
    return out


def _host_limits(
    job: JobRecord, ranks_on_node: int, rank_devices: int, group: GroupSpec | None = None
) -> dict[str, Any]:
    """``cpu_limit``/``memory_limit`` of one rank (``-c``; ``--mem`` split over the node's ranks, or
    ``--mem-per-gpu`` × its devices; ``agent/confine/hostlimits.py``); {} when the job asked for neither.
    A rank of a job of groups: its ``group``'s requests."""
    from labgang.agent.confine.hostlimits import rank_limits

    spec: JobSpec | GroupSpec = job.spec if group is None else group
    limits = rank_limits(
        cpus_per_task=spec.cpus_per_task or None,
        mem_per_node_bytes=spec.mem or None,
        mem_per_gpu_bytes=spec.mem_per_gpu or None,
        ranks_on_node=ranks_on_node,
        rank_gpus=rank_devices,
    )
    out: dict[str, Any] = {}
    if limits.cpus is not None:
        out["cpu_limit"] = limits.cpus
    if limits.memory_bytes is not None:
        out["memory_limit"] = limits.memory_bytes
    return out


def _cpus(job: JobRecord, inventory: NodeInventory | None, devices: tuple[str, ...]) -> tuple[int, ...] | None:
    if job.spec.cpu_bind == "none":
        return None
    cpus = rank_cpus(inventory, devices)
    return None if cpus is None else tuple(cpus)


def _refused(job: JobRecord, node: str, exc: InvalidSpec) -> list[dict[str, Any]]:
    """What the agent would answer for a launch it cannot parse: every rank of ``job`` on
    ``node`` refused for good (the same record would be refused again)."""
    return [
        {"job_id": job.run_id, "rank": r, "error": str(exc), "permanent": True}
        for r in sorted(job.ranks)
        if job.ranks[r].node == node
    ]


class Dispatcher:
    """Launch, stop and signal commands to node agents, for the coordinator; a part of its
    :class:`~labgang.launcher.coordinator.commits.Commits`, which sends the commands after each commit.

    Args:
        agents: the connected agents (the commands go through ``AgentRegistry.call``).
        commits: applies the agents' answers as lifecycle events and commits them.
        kicks: the scheduling loop's wake-up (a launch that changed what the scheduler sees).
        tasks: where the launches of a gang's other nodes run.
        clock: unix seconds, the time of the events the replies become.
        config: the cluster configuration (``max_signal_lead_s``).
    """

    def __init__(
        self,
        agents: AgentRegistry,
        commits: Commits,
        kicks: Kicks,
        tasks: BackgroundTasks,
        clock: Callable[[], float],
        config: ClusterConfig,
    ) -> None:
        self._agents = agents
        self._commits = commits
        self._kicks = kicks
        self._tasks = tasks
        self._clock = clock
        self._config = config
        self._dispatching: set[str] = set()  # run ids whose dispatch is under way

    async def dispatch_job(self, job: JobRecord) -> None:
        """Start an admitted gang: launch rank 0's node first, whose agent picks MASTER_PORT as it
        launches (no separate round trip), record the port, then launch every other node.

        Failures (node gone, launch refused) stop the gang and requeue it with backoff.
        """
        run_id = job.run_id
        if job.status.state != JobState.ADMITTED or run_id in self._dispatching:
            return
        self._dispatching.add(run_id)
        try:
            await self._dispatch(job, run_id)
        finally:
            self._dispatching.discard(run_id)

    async def _dispatch(self, job: JobRecord, run_id: str) -> None:
        ready = launchable(job)  # --startup-order: the first group's nodes now, the others as it starts
        nodes = [n for n in job_nodes(job) if any(r.node == n and r.rank in ready for r in job.ranks.values())]
        # A gang over several nodes: each node's agent parks its ranks at their start gate and
        # answers (``hold``); once every node answered, one ``release_gate`` to each starts them together.
        hold = len(nodes) > 1
        held = list(nodes)
        if job.status.master_port is None:
            node0 = job.ranks[0].node
            conn = self._agents.get(node0)
            master_addr = conn.address if conn is not None and conn.address else node0
            await self.launch_on_node(job, node0, run_id, master_addr=master_addr, hold=hold)
            if job.run_id != run_id or job.status.state != JobState.ADMITTED or job.status.master_port is None:
                return  # the launch failed (the gang is stopping) or the job moved on
            nodes = [n for n in nodes if n != node0]
        if not hold:
            for node in nodes:
                self._tasks.spawn(self.launch_on_node(job, node, run_id))
            return
        await asyncio.gather(*(self.launch_on_node(job, node, run_id, hold=True) for node in nodes))
        if job.run_id != run_id or job.status.state != JobState.ADMITTED:
            return  # a launch failed: the gang is stopping, and each stop aborts that node's gate
        await asyncio.gather(*(self._release(node, run_id) for node in held))

    async def _release(self, node: str, run_id: str) -> None:
        """Send ``release_gate`` for ``run_id``'s ranks held parked on ``node``. Not delivered: the
        agent releases them itself after its hold timeout (``agent/commands.py``)."""
        try:
            await self._agents.call(node, "release_gate", {"job_id": run_id})
        except AgentCallError as exc:
            log.warning("job %s: release_gate on %s not answered (%s); its agent releases itself", run_id, node, exc)

    async def launch_on_node(
        self, job: JobRecord, node: str, run_id: str, *, master_addr: str | None = None, hold: bool = False
    ) -> None:
        """Send the ``launch`` command for the job's ranks on one node and apply the reply.

        Args:
            master_addr: rank 0's node address, recorded with the first launch of the run.
            hold: the agent parks the ranks at their start gate and answers; they start on ``release_gate``.
        """
        if job.run_id != run_id or job.status.state != JobState.ADMITTED:
            return
        before = job.status.state
        self._commits.apply(LaunchSent(self._clock(), node, run_id, master_addr))
        conn = self._agents.get(node)
        addresses = {n: c.address for n in job_nodes(job) if (c := self._agents.get(n)) is not None and c.address}
        try:
            specs = launch_specs(
                job, node, conn.inventory if conn is not None else None, self._config.max_signal_lead_s, addresses
            )
        except InvalidSpec as exc:
            log.warning("job %s: no launch on %s: %s", job.id, node, exc)
            self._commits.apply(launch_answer(node, run_id, _refused(job, node, exc), self._clock()))
            await self._commits.flush()
            self._kick_if_changed(job, run_id, before)
            return
        if not specs:
            return  # --startup-order: no rank of this node's groups may start yet
        try:
            args: dict[str, Any] = {"specs": [s.to_dict() for s in specs]}
            if hold:
                args["hold"] = True
            statuses = await self._agents.call(node, "launch", args)
        except AgentCallError as exc:
            # Not delivered or no answer: the ranks stay "launching"; a reconnect reconciles them,
            # a lost node loses them, and the startup timeout bounds the wait.
            self._commits.apply(LaunchFailed(self._clock(), node, run_id, str(exc)))
            await self._commits.flush()
            self._kick_if_changed(job, run_id, before)
            return
        log.debug("job %s: launch on %s answered", job.id, node)
        self._commits.apply(launch_answer(node, run_id, statuses or [], self._clock()))
        await self._commits.flush()
        self._kick_if_changed(job, run_id, before)

    def _kick_if_changed(self, job: JobRecord, run_id: str, before: JobState) -> None:
        """A cycle only when the launch changed what the scheduler sees (a failed start stops the gang);
        a launch that went as planned changes nothing it could decide."""
        if job.run_id != run_id or job.status.state not in (before, JobState.RUNNING):
            self._kicks.kick()

    async def stop_on_node(self, node: str, run_id: str, grace: float, warn: bool = False) -> None:
        """Ask ``node`` to stop every rank of ``run_id`` with ``grace`` seconds (idempotent).

        Args:
            warn: let the supervisor send the job's ``--signal`` warning ``warn_before`` seconds
                ahead of SIGTERM (preemption and cancel stops); False: SIGTERM now.
        """
        try:
            await self._agents.call(node, "stop_job", {"job_id": run_id, "grace": grace, "warn": warn})
        except AgentCallError as exc:
            log.warning("stop of %s on %s not delivered (%s); it is resent when the node reconnects", run_id, node, exc)

    async def stop_jobs_on_node(self, node: str, stops: list[tuple[str, float, bool]]) -> None:
        """Ask ``node`` to stop several runs at one instant: ``stops`` = [(run_id, grace, warn)] (idempotent)."""
        try:
            await self._agents.call(
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

    async def signal_on_node(self, node: str, run_id: str, signum: int, shell_only: bool = False) -> None:
        """Send ``signum`` to every rank of ``run_id`` on ``node`` (with ``shell_only``, to each
        rank's own process alone: ``--signal B:``)."""
        args: dict[str, Any] = {"job_id": run_id, "signal": signum}
        if shell_only:
            args["shell_only"] = True
        try:
            await self._agents.call(node, "signal_job", args)
        except AgentCallError as exc:
            log.warning("signal %d to %s on %s not delivered: %s", signum, run_id, node, exc)
