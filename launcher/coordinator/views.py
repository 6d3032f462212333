"""JSON views the user API returns: JobView, queue usage, node and device state.

Shapes are the "Coordinator user API" contract (docs/openapi.json). Times are unix seconds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from labgang.launcher.coordinator.policy import UserUsage, at_limits, limits_of, usable_classes
from labgang.launcher.coordinator.violations import violation_views
from labgang.launcher.host_quota import host_demand, is_host_resource, placed_demand
from labgang.launcher.lifecycle.attempts import AttemptRecord, job_wait_s
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.lifecycle.rules import job_nodes
from labgang.launcher.lifecycle.states import EndReason
from labgang.launcher.lifecycle.view import scheduler_jobs, started_request
from labgang.launcher.model import JobRequest, JobState
from labgang.launcher.scheduler.quota import QuotaBook
from labgang.launcher.scheduler.reasons import held_reason
from labgang.launcher.scheduler.shares import quota_usage
from labgang.launcher.scheduler.snapshot import Node

if TYPE_CHECKING:
    from labgang.launcher.config.cluster import ClusterConfig, QueueConfig
    from labgang.launcher.coordinator.agents import AgentRegistry
    from labgang.launcher.coordinator.drains import Drain
    from labgang.launcher.coordinator.sharing import SharingState


#: The fields of a JobView that ``labgang queue``'s table reads (launcher/jobtable.py: its
#: columns, the folding of pending array tasks, the order of ``active_jobs``): what
#: ``GET /v1/jobs?view=queue`` lists per job, about half the bytes of a whole JobView
#: (docs/openapi.json, ``JobRow``), in the order :func:`queue_row` gives them.
QUEUE_VIEW_FIELDS = (
    "id",
    "name",
    "user",
    "queue",
    "state",
    "workers",
    "gpus_per_worker",
    "resource",
    "priority",
    "submit_time",
    "reason",
    "nodes",
    "array_id",
    "array_index",
    "array_limit",
    "shards",
    "mps",
)


def queue_row(job: JobRecord) -> dict[str, Any]:
    """The ``view=queue`` row of one job: its JobView's :data:`QUEUE_VIEW_FIELDS`, in that order,
    with the values :func:`job_view` gives them but for ``reason``, which keeps only its ``code``,
    ``message`` and, for a held job that also waits for its dependency, ``dependency``
    (:func:`pending_reason`: the table says both); ``reason.no_preemption`` is for ``labgang explain``.
    Built directly: a whole JobView costs ten times more, and ``view=table`` builds a row of
    every job on each call."""
    st, spec = job.status, job.spec
    return {
        "id": job.id,
        "name": spec.name,
        "user": spec.user,
        "queue": spec.queue,
        "state": st.state.value,
        "workers": spec.workers,
        "gpus_per_worker": spec.per_worker,
        "resource": spec.resource,
        "priority": spec.priority,
        "submit_time": st.submit_time,
        "reason": (
            None
            if st.reason_code is None
            else {"code": st.reason_code, "message": st.reason_message or ""}
            if st.hold is None  # the common case inline, as before (a row of every job per listing)
            else pending_reason(job)
        ),
        "nodes": job_nodes(job),
        **_array_fields(job),
        "shards": spec.shards,
        "mps": spec.mps,
        **_group_fields(job, brief=True),
    }


def _group_fields(job: JobRecord, *, brief: bool = False) -> dict[str, Any]:
    """``groups`` of a job of groups (docs/job-groups.md): each group's name, ranks, devices per
    rank, resource and first global rank (``brief``: the table's shape only; else also its
    command, extra environment names, placement constraints); nothing for a one-group job,
    whose views are what they were before groups existed."""
    if not job.spec.groups:
        return {}
    out = []
    first = 0
    for g in job.spec.groups:
        row: dict[str, Any] = {
            "name": g.name,
            "workers": g.workers,
            "gpus_per_worker": g.per_worker,
            "resource": g.resource,
        }
        if not brief:
            row.update(
                first_rank=first,
                gpu_model=g.gpu_model,
                nodes=g.nodes,
                topology=g.topology,
                cpus_per_task=g.cpus_per_task,
                mem=g.mem,
                mem_per_gpu=g.mem_per_gpu,
                argv=list(g.argv),
                env=sorted(g.env),
            )
        out.append(row)
        first += g.workers
    fields: dict[str, Any] = {"groups": out}
    if not brief:
        fields["colocate"] = [list(c) for c in job.spec.colocate]
    return fields


_DEPENDENCY_CODES = frozenset({EndReason.DEPENDENCY.value, EndReason.DEPENDENCY_NEVER.value})


def pending_reason(job: JobRecord) -> dict[str, Any] | None:
    """The JobView's ``reason`` (``{"code", "message"}``, None without one). A pending job both held
    (``submit --hold``, ``labgang hold``) and waiting for its dependency has the hold first, as
    Slurm's ``JobHeldUser`` comes before ``Dependency``: code ``held``, the hold's message with
    ``; also waits for afterok:22 (running)``, and the dependency's own reason under
    ``dependency`` (the lifecycle keeps only the dependency's, since it alone is offered no cycle)."""
    st = job.status
    if st.reason_code is None:
        return None
    reason = {"code": st.reason_code, "message": st.reason_message or ""}
    if st.hold is None or st.reason_code not in _DEPENDENCY_CODES or st.state is not JobState.PENDING:
        return reason
    held = held_reason(job.id, st.hold, st.hold_admin)
    return {"code": held.code.value, "message": f"{held.message}; also {reason['message']}", "dependency": reason}


def job_view(job: JobRecord) -> dict[str, Any]:
    """The JobView of one job."""
    st, spec = job.status, job.spec
    reason = pending_reason(job)
    if reason is not None and st.no_preemption is not None and st.state is JobState.PENDING:
        reason["no_preemption"] = st.no_preemption.facts()
    return {
        "id": job.id,
        "name": spec.name,
        "user": spec.user,
        "uid": spec.uid,
        "queue": spec.queue,
        "state": st.state.value,
        "workers": spec.workers,
        "min_workers": spec.min_workers,
        "started_workers": len(job.ranks) if job.ranks else None,
        "gpus_per_worker": spec.per_worker,
        "resource": spec.resource,
        "priority": spec.priority,
        "submit_time": st.submit_time,
        "admit_time": st.admit_time,
        "start_time": st.start_time,
        "end_time": st.end_time,
        "reason": reason,
        "nodes": job_nodes(job),
        "exit_status": st.exit_status,
        "restart_count": st.restart_count,
        "grace_s": spec.grace_s,
        "time_limit_s": spec.time_limit_s,
        "begin_time": spec.begin_time,
        "dependency": spec.dependency,
        "hold": None if st.hold is None else {"by": st.hold, "admin": st.hold_admin},
        "argv": list(spec.argv),
        "cwd": spec.cwd,
        "umask": spec.umask,
        "output": spec.output,
        "error": spec.error,
        "cpus_per_task": spec.cpus_per_task,
        "mem": spec.mem,
        "mem_per_gpu": spec.mem_per_gpu,
        "exclusive": spec.exclusive,
        "shards": spec.shards,
        "mps": spec.mps,
        "gpu_mem": spec.gpu_mem,
        "numeric_id": job.seq,
        "lifecycle_policy": {
            "success": spec.success_policy,
            "failure": spec.failure_policy,
            "max_restarts": spec.max_restarts,
            "restarts_used": st.failure_restarts,
            "startup_order": list(spec.startup_order),
        },
        "ranks": [
            {
                "rank": r.rank,
                "node": r.node,
                "devices": list(r.devices),
                "state": r.state,
                "pid": r.pid,
                "exit_status": r.exit_status,
                "start_time": r.start_time,
                "end_time": r.end_time,
            }
            for r in (job.ranks[i] for i in sorted(job.ranks))
        ],
        "history": [{"time": h.time, "event": h.event, "message": h.message} for h in job.history],
        **_array_fields(job),
        **_group_fields(job),
    }


def _array_fields(job: JobRecord) -> dict[str, Any]:
    """``array_id``, ``array_index`` and ``array_limit`` (the ``%N`` cap) of an array task; nulls otherwise."""
    task = job.spec.array
    if task is None:
        return {"array_id": None, "array_index": None, "array_limit": None}
    return {"array_id": task.array_id, "array_index": task.index, "array_limit": task.limit}


def queue_views(
    config: ClusterConfig, active: Collection[JobRecord], sharing: SharingState, now: float, nodes: Sequence[Node] = ()
) -> list[dict[str, Any]]:
    """Per queue: nominal, used, borrowed, lent, limits, pending/running counts, reclaim time.

    Args:
        config: the cluster configuration (queues, cohorts, limits).
        active: the jobs not finished (the lifecycle model's).
        sharing: the admission fair sharing state (the tenants' decayed usage).
        now: unix seconds.
        nodes: the nodes with a known inventory (an ``--exclusive`` job counts their whole
            devices, CPUs and memory; one not among them counts what the job asked on it).

    ``used`` counts jobs holding devices (terminating ones too); ``borrowed`` is used above
    nominal; ``lent`` is how much of the queue's unused nominal borrowers in its cohort are
    using now (borrowed amounts are charged to lenders in queue order, each up to what it
    may lend). The numbers come from the scheduler's :class:`QuotaBook` (:func:`held_quota`).
    ``reclaim_time_s`` is the longest grace among the queue's jobs while it borrows: how long a
    reclaim of its borrowed devices would take.
    """
    pending: dict[str, int] = defaultdict(int)
    running: dict[str, int] = defaultdict(int)
    grace: dict[str, float] = defaultdict(float)
    # One pass over every job; what the quota and fair shares count are the jobs holding devices
    # alone (10,000 pending jobs: the pitfall watch builds this view every 2 s).
    holding: list[JobRecord] = []
    for job in active:
        q, state = job.spec.queue, job.status.state
        if state.holds_devices:
            holding.append(job)
            running[q] += 1
            grace[q] = max(grace[q], job.spec.grace_s)
        elif state == JobState.PENDING:
            pending[q] += 1
    book, held = held_quota(config, holding, now, nodes)
    queues = config.queues
    used = {q.name: {res: book.usage(qn, res) for qn, res in sorted(held) if qn == q.name} for q in queues}
    borrowed = {q.name: {res: n for res in used[q.name] if (n := book.borrowed(q.name, res))} for q in queues}
    # What borrowers in a cohort use is charged to its lenders in queue order, each up to what it may lend.
    lent: dict[str, dict[str, int]] = {q.name: {} for q in queues}
    for cohort in sorted({q.cohort for q in queues if q.cohort}):
        members = book.members(cohort)
        for res in sorted({res for m in members for res in borrowed[m]}):
            to_cover = sum(borrowed[m].get(res, 0) for m in members)
            for m in members:
                take = min(book.unused_lendable(m, res), to_cover)
                if take:
                    lent[m][res] = take
                    to_cover -= take
    fair = _fair_shares(config, holding, sharing, nodes, now)
    standing = user_standing(config, active)
    return [
        {
            **fair[q.name],
            **policy_view(config, q, standing.get(q.name, {})),
            "name": q.name,
            "cohort": q.cohort,
            "nominal": dict(q.nominal),
            "used": used[q.name],
            "borrowed": borrowed[q.name],
            "lent": lent[q.name],
            "borrowing_limit": dict(q.borrowing_limit),
            "lending_limit": dict(q.lending_limit),
            "pending": pending[q.name],
            "running": running[q.name],
            "reclaim_time_s": grace[q.name] if borrowed[q.name] else 0.0,
            # Whom this queue may take capacity back from (the TUI's borrowed-at-risk pitfall).
            "reclaim_within_cohort": q.reclaim_within_cohort.value,
            # Whether shares decide between its cohort's queues (explain's fair-sharing sentences).
            "fair_sharing": config.fair_sharing,
            "borrow_within_cohort": {
                "policy": q.borrow_within_cohort.policy.value,
                "max_priority_threshold": q.borrow_within_cohort.max_priority_threshold,
            },
        }
        for q in queues
    ]


def user_standing(config: ClusterConfig, active: Iterable[JobRecord]) -> dict[str, dict[str, UserUsage]]:
    """Queue → user → what that user's unfinished jobs there hold (devices, jobs holding devices,
    unfinished jobs), for the queues of ``config`` that set a per-user limit (launcher/coordinator/policy.py);
    ``active``: the lifecycle model's jobs."""
    limited = {q.name for q in config.queues if limits_of(q)}
    if not limited:
        return {}
    counts: dict[str, dict[str, list[int]]] = defaultdict(dict)
    for job in active:
        st = job.status.state
        if job.spec.queue not in limited or st.finished:
            continue
        c = counts[job.spec.queue].setdefault(job.spec.user, [0, 0, 0])
        c[2] += 1
        if st.holds_devices:
            c[0] += started_request(job).total
            c[1] += 1
    return {q: {u: UserUsage(u, *c) for u, c in sorted(users.items())} for q, users in counts.items()}


def policy_view(config: ClusterConfig, queue: QueueConfig, standing: Mapping[str, UserUsage]) -> dict[str, Any]:
    """A queue's priority policy and per-user limits for ``GET /v1/queues``: ``priority_classes``
    (name → value, the classes a non-admin may use), ``default_priority_class``, ``user_limits``
    (key → limit; {} without any), ``users`` (each user with unfinished jobs there: ``gpus``,
    ``running``, ``submitted``, and ``at``: the limits they are at), ``at_limits`` (limit → users) and
    ``submitters`` (who may submit there: ``{"users": [...] | None, "groups": [...] | None}``, both None
    for anyone; admins always may)."""
    return {
        "submitters": {
            "users": None if queue.users is None else list(queue.users),
            "groups": None if queue.groups is None else list(queue.groups),
        },
        "priority_classes": {n: config.priority_classes[n] for n in usable_classes(config, queue)},
        "default_priority_class": queue.default_priority_class,
        "user_limits": limits_of(queue),
        "users": [
            {
                "user": u.user,
                "gpus": u.gpus,
                "running": u.running,
                "submitted": u.submitted,
                "at": [k for k, users in at_limits(queue, {u.user: u}).items() if users],
            }
            for u in standing.values()
        ],
        "at_limits": at_limits(queue, standing),
    }


def held_quota(
    config: ClusterConfig, active: Iterable[JobRecord], now: float, nodes: Iterable[Node] = ()
) -> tuple[QuotaBook, set[tuple[str, str]]]:
    """The scheduler's :class:`QuotaBook` of what jobs holding devices use at ``now`` (terminating
    ones too; an elastic gang at its started size; a queue's shares of a card as the scheduler charges
    them in whole GPUs (a card held alone whole, mixed cards' shares rounded up),
    :func:`.shares.quota_usage`; an ``--exclusive`` job its whole nodes, as the scheduler counts it,
    launcher/host_quota.py), and the (queue, resource) pairs in use.

    Args:
        config: the cluster configuration (queues, cohorts).
        active: the lifecycle model's jobs, or any part of them that holds every job holding
            devices (only those count: :func:`queue_views` hands it those alone).
        now: the coordinator's clock, unix seconds.
        nodes: the nodes with a known inventory (``scheduling.cluster_nodes``): their devices,
            CPUs and memory make an ``--exclusive`` job's whole nodes; one not among them adds
            what the job asked for on it.
    """
    running, _ = scheduler_jobs(active, now, lambda job, now: False, lambda spec: None, ())
    usage = quota_usage(config.gpu_sharing(), running)  # shares of a card in whole GPUs, as the scheduler
    listed = {(q.name, res) for q in config.queues for res in q.nominal if is_host_resource(res)}
    by_name = {n.name: n for n in nodes}
    for job in running:
        req = job.request
        if not (req.exclusive or (listed and req.host)):
            continue
        demand = node_demand(req, {rp.node for rp in job.placement}, by_name)
        for res, n in demand.items():
            if res == req.resource:  # quota_usage counted the devices asked for already
                n -= req.total
            elif (job.queue, res) not in listed:  # cpu/memory only where the queue's quota lists them
                continue
            if n:
                usage[(job.queue, res)] = usage.get((job.queue, res), 0) + n
    return QuotaBook(config.queue_specs(), usage, config.cohort_specs()), set(usage)


def node_demand(req: JobRequest, names: Iterable[str], by_name: Mapping[str, Node]) -> dict[str, int]:
    """What ``req`` counts in its queue's quota on the nodes ``names`` (launcher/host_quota.py): its
    devices, ``cpu`` and ``memory``; for ``--exclusive`` the whole nodes (``by_name``: the nodes with
    a known inventory; one not among them adds what the job asked on it). Host resources are
    returned whether or not the queue lists them."""
    ordered = sorted(set(names))
    if not req.exclusive:
        return {req.resource: req.total, **host_demand(req, len(ordered))}
    known = [by_name.get(name) for name in ordered]
    per_node = {i: sum(d.resource == req.resource for d in n.devices) for i, n in enumerate(known) if n}
    cpus = [None if n is None else n.cpus for n in known]
    memory = [None if n is None else n.memory for n in known]
    return placed_demand(req, range(len(ordered)), per_node, cpus, memory)


def _fair_shares(
    config: ClusterConfig,
    active: Iterable[JobRecord],
    sharing: SharingState,
    nodes: Sequence[Node] = (),
    now: float = 0.0,
) -> dict[str, dict[str, Any]]:
    """Per queue: its fair share (dominant resource share / weight; None when infinite), the
    unweighted ratio, the weight, the capacity its cohort could reach per resource, and with
    admission fair sharing its tenants' decayed usage and scores (scheduler/explain.py).

    The usage is the scheduler's fair-sharing usage (``CycleState.shares``): jobs holding devices and
    not told to leave, their shares of a card (``--shards``, ``--mps``) in whole GPUs per queue as
    :func:`.shares.quota_usage` charges them (a card a queue's shares hold alone whole, shares on cards
    mixed with other queues' summed and rounded up), never one GPU per share. ``active``: the lifecycle
    model's jobs, or any part of them that holds every job holding devices (only those count;
    :func:`queue_views` hands it those alone). ``now``: the coordinator's clock."""
    from labgang.launcher.scheduler import tenants as afs
    from labgang.launcher.scheduler.explain import queue_shares

    usage: dict[tuple[str, str], int] = {}
    listed = {(q.name, res) for q in config.queues for res in q.nominal if is_host_resource(res)}
    by_name = {n.name: n for n in nodes}
    active = list(active)
    for job in active:
        if job.status.state in (JobState.ADMITTED, JobState.RUNNING) and not job.spec.request.shared:
            key = (job.spec.queue, job.spec.resource)
            usage[key] = usage.get(key, 0) + job.spec.workers * job.spec.per_worker
            req = job.spec.request
            if listed and req.host:  # cpu/memory where the quota lists them, as the scheduler's shares
                for res, n in node_demand(req, job_nodes(job), by_name).items():
                    if (job.spec.queue, res) in listed:
                        usage[(job.spec.queue, res)] = usage.get((job.spec.queue, res), 0) + n
    # Only the jobs holding a share of a card are converted (not every pending job: this runs in every
    # pitfall sample of an idle coordinator); the state first, as the request costs more to read.
    sharers = [job for job in active if job.status.state.holds_devices and job.spec.request.shared]
    live = list(scheduler_jobs(sharers, now, lambda job, now: False, lambda spec: None, ())[0])
    live = [j for j in live if not j.terminating]  # not ones told to leave, as above
    for key, n in quota_usage(config.gpu_sharing(), live).items():
        usage[key] = usage.get(key, 0) + n
    shares = queue_shares(config.queue_specs(), config.cohort_specs(), usage)
    tenants: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in sharing.snapshot_tenants():
        score = afs.score(t)
        tenants[t.queue].append(
            {
                "name": t.name or "(default)",
                "weight": t.weight,
                "usage": round(t.history, 6),
                "score": None if math.isinf(score) else round(score, 6),
            }
        )
    return {
        name: {
            "fair_share": None if math.isinf(s.share) else round(s.share, 6),
            "fair_share_ratio": round(s.ratio, 6),
            "fair_weight": s.weight,
            "fair_share_basis": dict(s.basis),
            "tenants": tenants.get(name, []),
        }
        for name, s in shares.items()
    }


def host_allocated(jobs: Iterable[JobRecord]) -> dict[str, tuple[int, int]]:
    """Host CPUs and memory (bytes) held per node by those of ``jobs`` that hold devices, from their
    ranks: ``cpus_per_task`` and ``per_worker * mem_per_gpu`` per rank, ``mem`` once per node."""
    out: dict[str, tuple[int, int]] = {}
    for job in jobs:
        spec = job.spec
        if not job.status.state.holds_devices or not (spec.cpus_per_task or spec.mem or spec.mem_per_gpu):
            continue
        nodes = set()
        for r in job.ranks.values():
            cpus, mem = out.get(r.node, (0, 0))
            mem += spec.per_worker * spec.mem_per_gpu + (spec.mem if r.node not in nodes else 0)
            nodes.add(r.node)
            out[r.node] = (cpus + spec.cpus_per_task, mem)
    return out


def _shards_per_gpu(config: ClusterConfig, node: str) -> int | None:
    """The node's ``shards_per_gpu`` from the cluster's ``[sharing]`` table, or None where there is none."""
    sharing = getattr(config, "sharing", None)  # [sharing] of cluster.toml (docs/sharing.md)
    return int(sharing.node(node).shards_per_gpu) if sharing is not None else None


def _mps_allowed(config: ClusterConfig, node: str) -> bool | None:
    """Whether the cluster's ``[sharing]`` table lets the node's cards serve MPS, or None where there is none."""
    sharing = getattr(config, "sharing", None)
    return bool(sharing.node(node).mps) if sharing is not None else None


def node_views(
    agents: AgentRegistry,
    config: ClusterConfig,
    jobs: Mapping[str, JobRecord],
    held: Mapping[str, JobRecord],
    job_for_run: Callable[[str], JobRecord | None],
    drained: Mapping[str, Drain] | None = None,
) -> list[dict[str, Any]]:
    """Per node: connection, last report, the full inventory, each device's state, and its drain.

    Args:
        agents: the agent registry (each node's inventory and link).
        config: the cluster configuration (its ``[sharing]`` table).
        jobs: the jobs in memory by id, active and recently finished.
        held: device UUID → the job holding it (``Coordinator.held_devices``).
        job_for_run: the job of a run id (``<job>.<attempt>``), or None (for the violations).
        drained: node name -> its drain (``Coordinator.drains``); a node's ``drain`` is its
            ``{reason, by, since}``, or None (not drained). A drained node's free devices stay
            "free" here (no job holds them) while no new job is placed on them.

    Device state: "allocated" (a job holds it), "lost" (node lost or disconnected, or the GPU
    fell off the bus), "held" (free, but a process of a finished labgang rank still shows on
    it), "foreign" (free, but a process labgang did not start shows on it), "free".
    ``cpus``/``memory_bytes``: host CPUs and memory the node offers to jobs (after its agent's
    reserve; None: not reported); ``cpus_allocated``/``memory_allocated_bytes``: what jobs hold.
    """
    # One pass over every job in memory (10,000 pending jobs: the pitfall watch builds this view every 2 s).
    holding: list[JobRecord] = []
    finished_pids: set[tuple[str, int]] = set()
    for j in jobs.values():
        if j.status.state.holds_devices:
            holding.append(j)
        elif j.ranks:
            finished_pids.update((r.node, r.pid) for r in j.ranks.values() if r.pid is not None)
    host_held = host_allocated(holding)
    drains = drained or {}
    out = []
    for name in sorted(agents.nodes):
        conn = agents.nodes[name]
        inv = conn.inventory
        devices = []
        if inv is not None:
            pids = inv.device_pids()
            lost_gpus = {g.uuid for g in inv.gpus if g.lost}
            offered = conn.connected and not conn.lost
            for d in inv.allocatable():
                job = held.get(d.uuid)
                if job is not None:
                    state = "allocated"
                elif not offered or d.uuid in lost_gpus or d.parent_uuid in lost_gpus:
                    state = "lost"
                elif pids.get(d.uuid):
                    state = "held" if any((name, p) in finished_pids for p in pids[d.uuid]) else "foreign"
                else:
                    state = "free"
                devices.append(
                    {
                        "uuid": d.uuid,
                        "resource": d.resource,
                        "model": d.model,
                        "job": job.id if job else None,
                        "user": job.spec.user if job else None,
                        "queue": job.spec.queue if job else None,
                        "state": state,
                    }
                )
        out.append(
            {
                "name": name,
                "connected": conn.connected and not conn.lost,
                "last_seen": conn.last_seen,
                "address": conn.address,
                "version": conn.version,
                "inventory": conn.inventory_dict,
                "devices": devices,
                "cpus": inv.host_cpus if inv is not None else None,
                "memory_bytes": inv.host_memory if inv is not None else None,
                "cpus_allocated": host_held.get(name, (0, 0))[0],
                "memory_allocated_bytes": host_held.get(name, (0, 0))[1],
                "confinement": conn.confinement,
                "host_limits": conn.host_limits,
                "sharing": conn.sharing,
                "shards_per_gpu": _shards_per_gpu(config, name),
                "mps_allowed": _mps_allowed(config, name),
                "violations": violation_views(conn, job_for_run),
                "drain": drains[name].to_dict() if name in drains else None,
            }
        )
    return out


def history_view(
    job: JobRecord, now: float, attempts: list[AttemptRecord] | None = None, *, per_attempt: bool = False
) -> dict[str, Any]:
    """One row of ``labgang history`` (``GET /v1/history``); times are unix seconds, durations seconds.

    With the job's accounting records (``attempts``, oldest first; ``lifecycle/attempts.py``):
    ``wait_s`` is the time it was pending, summed over its pending periods; ``elapsed_s`` the
    time it held devices, summed over its attempts (admission to end, ``now`` for one still
    running); ``gpu_hours`` the allocated device-hours of every attempt (a job preempted after
    10 s on 3 GPUs and then cancelled counts those 30 device-seconds); ``used_gpu_hours`` the
    same weighted by the devices' activity, ``activity_pct`` their mean activity (None before
    any sample). A job never admitted has ``gpu_hours`` None. ``start_time`` is the start of the
    last attempt that started (as sacct shows a requeued job's last start), so a job that ran and
    was then requeued or preempted and cancelled while pending keeps it; ``admitted_attempts``
    counts the records (more than 1: ``elapsed_s`` and ``gpu_hours`` span that many attempts).
    ``attempt_records`` lists the attempts (:meth:`AttemptRecord.view`) when ``per_attempt``.

    Without records (a view of one job outside the store): ``wait_s`` runs from submission to
    the last attempt's start, ``elapsed_s`` from that start to the end, ``gpu_hours`` is the
    gang's devices x ``elapsed_s``. ``start_time``/``end_time`` are the last attempt's.
    ``attempts`` counts start attempts, ``restart_count`` those that ran.
    """
    st, spec = job.status, job.spec
    stop = st.end_time if st.end_time is not None else now
    elapsed = None if st.start_time is None else max(0.0, stop - st.start_time)
    waited_until = st.start_time if st.start_time is not None else stop
    reason = None if st.reason_code is None else {"code": st.reason_code, "message": st.reason_message or ""}
    return {
        "id": job.id,
        "name": spec.name,
        "user": spec.user,
        "queue": spec.queue,
        "state": st.state.value,
        "workers": spec.workers,
        "gpus_per_worker": spec.per_worker,
        "resource": spec.resource,
        "submit_time": st.submit_time,
        "start_time": st.start_time,
        "end_time": st.end_time,
        "wait_s": max(0.0, waited_until - st.submit_time),
        "elapsed_s": elapsed,
        "gpu_hours": None if elapsed is None else _gang_devices(job) * elapsed / 3600.0,
        "exit_status": st.exit_status,
        "restart_count": st.restart_count,
        "attempts": st.attempt + 1,
        "reason": reason,
        **_array_fields(job),
        **_group_fields(job, brief=True),
        **({} if attempts is None else _accounting(job, attempts, now, per_attempt)),
    }


def _gang_devices(job: JobRecord) -> int:
    """Devices the gang holds: its started ranks' (a job of groups: every group's), else as asked."""
    if job.spec.groups:
        return job.spec.request.total
    return (len(job.ranks) or job.spec.workers) * job.spec.per_worker


def _accounting(job: JobRecord, attempts: list[AttemptRecord], now: float, per_attempt: bool) -> dict[str, Any]:
    """The history row's fields from the job's attempt records (see :func:`history_view`)."""
    measured = sum(a.measured_gpu_s for a in attempts)
    busy = sum(a.busy_gpu_s for a in attempts)
    out: dict[str, Any] = {
        "wait_s": job_wait_s(attempts, job.status.pending_since, job.status.end_time, now),
        "elapsed_s": sum(a.elapsed_s(now) for a in attempts) if attempts else None,
        "gpu_hours": sum(a.gpu_seconds(now) for a in attempts) / 3600.0 if attempts else None,
        "used_gpu_hours": busy / 3600.0,
        "activity_pct": None if measured <= 0 else 100.0 * busy / measured,
        "admitted_attempts": len(attempts),
    }
    started = [a.start_time for a in attempts if a.start_time is not None]
    if started:
        out["start_time"] = started[-1]
    if per_attempt:
        out["attempt_records"] = [a.view(now) for a in attempts]
    return out
