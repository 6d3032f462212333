"""Jobs that could never start, even on an empty cluster.

Such a job never preempts, never blocks a strict-fifo queue, and the coordinator refuses it
at submission (HTTP 409). Two causes: its queue can never hold the request (Kueue's
"exceeds max quota": more than ``min(N + B, private + cohort pool)``, or a resource the
queue does not list), or no set of nodes holds every rank with every device free.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from labgang.launcher.model import CohortSpec, JobRequest, QueueSpec, is_valid_resource
from labgang.launcher.scheduler.capacity import DeviceBook, FreeIndex
from labgang.launcher.scheduler.decisions import PendingReason, ReasonCode
from labgang.launcher.scheduler.groups import place_groups
from labgang.launcher.scheduler.hostquota import host_never_fits_quota
from labgang.launcher.scheduler.hostres import capped_index
from labgang.launcher.scheduler.placement import feasible, topology_reason
from labgang.launcher.scheduler.quota import QuotaBook
from labgang.launcher.scheduler.reasons import describe_request
from labgang.launcher.scheduler.snapshot import Node, Snapshot


def quota_never_fits(book: QuotaBook, queue: str, req: JobRequest) -> PendingReason | None:
    """UNSCHEDULABLE when ``queue`` could never hold ``req`` (or the request is malformed)."""
    if req.workers < 1 or req.per_worker < 1:
        return PendingReason(
            ReasonCode.UNSCHEDULABLE, f"workers and gpus per worker must be >= 1 (got {req.workers} x {req.per_worker})"
        )
    if req.nodes is not None and not 1 <= req.nodes <= req.workers:
        return PendingReason(
            ReasonCode.UNSCHEDULABLE, f"nodes must be between 1 and workers ({req.workers}); got {req.nodes}"
        )
    if not is_valid_resource(req.resource):
        return PendingReason(
            ReasonCode.UNSCHEDULABLE, f"unknown resource {req.resource!r}; allowed: gpu, mig-<profile>"
        )
    if not book.lists(queue, req.resource):
        listed = ", ".join(sorted(book.queues[queue].nominal)) or "nothing"
        return PendingReason(
            ReasonCode.UNSCHEDULABLE, f"queue {queue} has no quota for {req.resource} (it lists {listed})"
        )
    most = book.potential(queue, req.resource)
    if req.total > most:
        return PendingReason(
            ReasonCode.UNSCHEDULABLE, f"job needs {req.total} {req.resource} but queue {queue} can hold at most {most}"
        )
    host = host_never_fits_quota(book, queue, req)  # cpu/memory where the queue's quota lists them
    if host is not None:
        return host[0]
    return user_limit_never_fits(book.queues[queue], req)


def groups_never_fit(
    book: QuotaBook, queue: str, devices: DeviceBook, req: JobRequest
) -> tuple[PendingReason, str] | None:
    """UNSCHEDULABLE, with the submission field at fault, when a job of groups could never
    start: its summed devices are over what ``queue`` can ever hold, or a group (or all of them
    together) has no placement even on an empty cluster. The message names the group.

    Args:
        book: the quota book (the queue's potential and per-user limits).
        devices: a device book of the cluster's nodes (only its static layout is used).
        req: a job of groups (``req.groups`` not empty), at its floor when elastic.
    """
    memo = devices.static.host_verdicts
    key = ("groups", queue, req)
    if key in memo:
        return memo[key]  # type: ignore[no-any-return]
    memo[key] = found = _groups_never_fit(book, queue, devices, req)
    return found


def _groups_never_fit(
    book: QuotaBook, queue: str, devices: DeviceBook, req: JobRequest
) -> tuple[PendingReason, str] | None:
    if req.total:
        reason = quota_never_fits(book, queue, JobRequest(workers=1, per_worker=req.total, resource=req.resource))
        if reason is not None:
            return reason, quota_fault_field(book, queue, req) if req.per_worker else "queue"
    layout = devices.static
    # an idle book over the same nodes: every device free, nothing reserved or withheld; one per
    # layout (placing on it leaves it as it was found)
    empty = layout.host_verdicts.get(_EMPTY_BOOK)
    if empty is None:
        empty = layout.host_verdicts[_EMPTY_BOOK] = DeviceBook(
            Snapshot(now=0.0, nodes=layout.nodes, queues=(), running=(), pending=())
        )
    for g in req.groups:
        alone = g.request
        if alone.per_worker == 0:
            if not layout.node_names:
                return PendingReason(ReasonCode.UNSCHEDULABLE, f"group {g.name}: the cluster has no node"), "nodes"
            host = _deviceless_host_never_fits(empty, alone)
            if host is not None:
                return replace(host[0], message=f"group {g.name}: {host[0].message}"), host[1]
            continue
        model = alone.gpu_model.lower() if alone.gpu_model else None
        ix = empty.all_devices_index(alone.resource, model, skip_unavailable=False)
        reason = placement_never_fits(ix, alone)
        field = "workers"
        if reason is None and alone.topology is not None and place_groups(empty, _only(req, g.name)) is None:
            why = topology_reason(empty, ix, alone, describe_request(alone)).message
            reason, field = PendingReason(ReasonCode.UNSCHEDULABLE, f"{why}, even on an empty cluster"), "topology"
        if reason is None and alone.host:
            host = host_never_fits(empty, ix, alone)
            if host is not None:
                reason, field = host
        if reason is not None:
            return replace(reason, message=f"group {g.name}: {reason.message}"), field
    if place_groups(empty, req) is None:
        what = describe_request(req)
        together = " (with --colocate)" if req.colocate else ""
        return (
            PendingReason(
                ReasonCode.UNSCHEDULABLE,
                f"no placement for all the groups at once{together} even on an empty cluster; job needs {what}",
            ),
            "colocate" if req.colocate else "workers",
        )
    return None


def _deviceless_host_never_fits(devices: DeviceBook, req: JobRequest) -> tuple[PendingReason, str] | None:
    """UNSCHEDULABLE, with the field at fault (``cpus_per_task`` or ``mem``), when one rank of a group
    with no device asks more CPUs, or more memory per node, than the largest node with a device has
    (such a group runs only where its job holds devices); None otherwise (nodes that report no CPUs
    or memory do not limit it)."""
    nodes = [n for n in devices.static.nodes if n.devices]
    cpus = [n.cpus for n in nodes if n.cpus is not None]
    mems = [n.memory for n in nodes if n.memory is not None]
    if req.cpus_per_task and cpus and req.cpus_per_task > max(cpus):
        text = f"job needs {req.cpus_per_task} cpus per rank but the largest node with devices has {max(cpus)}"
        return PendingReason(ReasonCode.UNSCHEDULABLE, text + ", even on an empty cluster"), "cpus_per_task"
    if req.mem and mems and req.mem > max(mems):
        most = mem_size(max(mems))
        text = f"job needs {mem_size(req.mem)} of memory per node but the largest node with devices has {most}"
        return PendingReason(ReasonCode.UNSCHEDULABLE, text + ", even on an empty cluster"), "mem"
    return None


_EMPTY_BOOK = ("groups", "empty book")
"""Where :func:`_groups_never_fit` keeps the idle device book of a layout (in its memo dict)."""


def _only(req: JobRequest, name: str) -> JobRequest:
    """``req`` cut to its one group ``name``."""
    return replace(req, groups=tuple(g for g in req.groups if g.name == name), colocate=())


def user_limit_never_fits(spec: QueueSpec, req: JobRequest) -> PendingReason | None:
    """UNSCHEDULABLE when ``req`` alone is over ``spec``'s per-user limits (``max_gpus_per_user``,
    or a ``max_running_jobs_per_user`` of 0), so no user could ever run it there."""
    if spec.max_gpus_per_user is not None and req.total > spec.max_gpus_per_user:
        return PendingReason(
            ReasonCode.UNSCHEDULABLE,
            f"job needs {req.total} {req.resource} but queue {spec.name} allows {spec.max_gpus_per_user} "
            "per user (max_gpus_per_user)",
        )
    if spec.max_running_jobs_per_user == 0:
        return PendingReason(
            ReasonCode.UNSCHEDULABLE, f"queue {spec.name} runs no job of any user (max_running_jobs_per_user = 0)"
        )
    return None


def placement_never_fits(empty: FreeIndex, req: JobRequest) -> PendingReason | None:
    """UNSCHEDULABLE when no placement exists even with every device of the resource free."""
    if feasible(empty, req.workers, req.per_worker, req.nodes):
        return None
    what = describe_request(req)
    return PendingReason(
        ReasonCode.UNSCHEDULABLE,
        f"no placement for {what} even on an empty cluster "
        f"({empty.total} {req.resource} in all, largest node has {empty.largest()})",
    )


def quota_fault_field(book: QuotaBook, queue: str, req: JobRequest) -> str:
    """The request field :func:`quota_never_fits` objects to (the submission body's name)."""
    if req.workers < 1:
        return "workers"
    if req.per_worker < 1:
        return "gpus_per_worker"
    if req.nodes is not None and not 1 <= req.nodes <= req.workers:
        return "nodes"
    mig = req.resource != "gpu"
    if not is_valid_resource(req.resource) or not book.lists(queue, req.resource):
        return "mig" if mig else "queue"
    most = book.potential(queue, req.resource)
    per_user = book.queues[queue].max_gpus_per_user
    if per_user is not None:
        most = min(most, per_user)
    if req.per_worker > most:
        return "gpus_per_worker"
    host = host_never_fits_quota(book, queue, req) if req.total <= book.potential(queue, req.resource) else None
    if host is not None:
        return host[1]
    if book.queues[queue].max_running_jobs_per_user == 0:
        return "queue"
    return "workers"


def _placement_field(devices: DeviceBook, req: JobRequest, model: str | None) -> str:
    """The request field that makes every placement impossible, asking which relaxation helps:
    any device of the model at all, the per-rank count on one node, then the node count."""
    every_model = devices.all_devices_index(req.resource, None, skip_unavailable=False)
    if every_model.total == 0:
        return "mig" if req.resource != "gpu" else "gpus_per_worker"
    empty = devices.all_devices_index(req.resource, model, skip_unavailable=False)
    if model is not None and (empty.total == 0 or feasible(every_model, req.workers, req.per_worker, req.nodes)):
        return "gpu_model"
    if req.per_worker > empty.largest():
        return "gpus_per_worker"
    if req.nodes is not None and feasible(empty, req.workers, req.per_worker, None):
        return "nodes"
    return "workers"


def model_never_matches(nodes: Iterable[Node], req: JobRequest) -> PendingReason | None:
    """UNSCHEDULABLE when ``req.gpu_model`` matches no device of its resource while others exist,
    listing the models there are (``no gpu matches model 'A100'; models here: NVIDIA H100 80GB HBM3``).

    None when the request names no model, a device matches, or no device of the resource is known
    at all (then the count checks say so).
    """
    if not req.gpu_model:
        return None
    wanted = req.gpu_model.lower()
    models = sorted({d.model or "unknown" for n in nodes for d in n.devices if d.resource == req.resource})
    if not models or any(wanted in m.lower() for m in models):
        return None
    return PendingReason(
        ReasonCode.UNSCHEDULABLE,
        f"no {req.resource} matches model {req.gpu_model!r}; models here: {', '.join(models)}",
    )


def check_schedulable(
    request: JobRequest,
    queue: QueueSpec,
    all_queues: Iterable[QueueSpec],
    nodes: Iterable[Node],
    cohorts: Iterable[CohortSpec] = (),
) -> PendingReason | None:
    """Could ``request`` in ``queue`` ever start? See :func:`never_schedulable`, which also
    names the request field at fault."""
    found = never_schedulable(request, queue, all_queues, nodes, cohorts)
    return None if found is None else found[0]


def never_schedulable(
    request: JobRequest,
    queue: QueueSpec,
    all_queues: Iterable[QueueSpec],
    nodes: Iterable[Node],
    cohorts: Iterable[CohortSpec] = (),
) -> tuple[PendingReason, str] | None:
    """Could ``request`` in ``queue`` ever start? For the coordinator's submission check.

    Args:
        request: the job's request.
        queue: the queue it is submitted to (must be one of ``all_queues`` by name).
        all_queues: every queue (the cohort's pool depends on its members).
        nodes: the cluster's nodes with all their allocatable devices.
        cohorts: cohort specs (parents, cohort quota, limits) of the cohort tree.

    Returns:
        None when the job could start on an empty cluster, else an UNSCHEDULABLE reason and
        the submission field at fault: "workers", "gpus_per_worker", "mig", "gpu_model",
        "nodes", "topology" (a required level no node reaches with all its devices free, e.g.
        ``nvlink`` where no node has topology facts) or "queue" (the one whose change could make it fit).
    """
    queues = {q.name: q for q in all_queues}
    queues[queue.name] = queue
    book = QuotaBook(queues.values(), {}, cohorts)
    if request.groups:
        nodes = tuple(nodes)
        book_of_nodes = DeviceBook(Snapshot(now=0.0, nodes=nodes, queues=(), running=(), pending=()))
        return groups_never_fit(book, queue.name, book_of_nodes, request)
    reason = quota_never_fits(book, queue.name, request)
    if reason is not None:
        return reason, quota_fault_field(book, queue.name, request)
    nodes = tuple(nodes)
    devices = DeviceBook(Snapshot(now=0.0, nodes=nodes, queues=(), running=(), pending=()))
    model = request.gpu_model.lower() if request.gpu_model else None
    unmatched = model_never_matches(nodes, request)
    if unmatched is not None:
        return unmatched, "gpu_model"
    empty = devices.all_devices_index(request.resource, model, skip_unavailable=False)
    reason = placement_never_fits(empty, request)
    if reason is not None:
        return reason, _placement_field(devices, request, model)
    whole = exclusive_never_fits(book, queue.name, empty, request)
    if whole is not None:
        return whole, "exclusive"
    if request.topology is not None and not feasible(
        empty, request.workers, request.per_worker, request.nodes, devices.topology, request.topology
    ):
        why = topology_reason(devices, empty, request, describe_request(request)).message
        return PendingReason(ReasonCode.UNSCHEDULABLE, f"{why}, even on an empty cluster"), "topology"
    return host_never_fits(devices, empty, request)


def exclusive_never_fits(book: QuotaBook, queue: str, empty: FreeIndex, req: JobRequest) -> PendingReason | None:
    """UNSCHEDULABLE when an ``--exclusive`` job's whole nodes always count more devices against
    ``queue``'s quota than it can ever hold: every node it runs on counts whole, so it uses at least
    the smallest node that holds one of its ranks (and at least what it asks for)."""
    if not req.exclusive:
        return None
    sizes = [len(devs) for devs in empty.free if len(devs) >= req.per_worker]
    if not sizes:
        return None
    least = max(req.total, min(sizes))
    most = book.potential(queue, req.resource)
    if least <= most:
        return None
    return PendingReason(
        ReasonCode.UNSCHEDULABLE,
        f"--exclusive takes whole nodes: job needs {least} {req.resource} (the smallest node that fits it, whole) "
        f"but queue {queue} can hold at most {most}",
    )


def host_never_fits(devices: DeviceBook, empty: FreeIndex, req: JobRequest) -> tuple[PendingReason, str] | None:
    """UNSCHEDULABLE, with the field at fault (``cpus_per_task``, ``mem`` or ``mem_per_gpu``), when
    ``req``'s host CPUs or memory fit no placement even with every node idle; None otherwise.
    Nodes that report no CPUs (memory) do not limit CPU (memory) requests. ``empty`` must hold
    every device of the request's resource and model (the answer is kept per request while the
    snapshot's nodes stay the same)."""
    memo = devices.static.host_verdicts
    if req in memo:
        return memo[req]  # type: ignore[no-any-return]
    memo[req] = found = _host_never_fits(devices, empty, req)
    return found


def mem_size(size: int) -> str:
    """``size`` bytes as a size a person reads (as ``--mem`` takes them): ``"100T"``, ``"23.5G"``,
    ``"512M"``: the largest unit it reaches, at most one decimal."""
    for unit, factor in (("T", 1024**4), ("G", 1024**3), ("M", 1024**2), ("K", 1024)):
        if size >= factor:
            return f"{round(size / factor, 1):g}{unit}"
    return f"{size}B"


def _host_never_fits(devices: DeviceBook, empty: FreeIndex, req: JobRequest) -> tuple[PendingReason, str] | None:
    capped = capped_index(devices, empty, req, idle=True)
    if capped is None or feasible(capped, req.workers, req.per_worker, req.nodes):
        return None
    cpus = [c for n, c in enumerate(devices.node_cpus) if empty.free[n] and c is not None]
    mems = [m for n, m in enumerate(devices.node_memory) if empty.free[n] and m is not None]
    what = describe_request(req)
    if req.cpus_per_task and cpus and req.cpus_per_task > max(cpus):
        text, field = (
            f"job needs {req.cpus_per_task} cpus per rank but the largest node has {max(cpus)}",
            "cpus_per_task",
        )
    elif req.mem and mems and req.mem > max(mems):
        text, field = (
            f"job needs {mem_size(req.mem)} of memory per node but the largest node has {mem_size(max(mems))}",
            "mem",
        )
    elif req.mem_per_gpu and mems and req.rank_mem() > max(mems):
        text, field = (
            f"job needs {mem_size(req.rank_mem())} of memory per rank but the largest node has {mem_size(max(mems))}",
            "mem_per_gpu",
        )
    else:
        field = (
            "cpus_per_task"
            if req.cpus_per_task
            else "mem"
            if req.mem
            else "mem_per_gpu"
            if req.mem_per_gpu
            else "exclusive"
        )
        text = f"the nodes' cpus and memory hold no placement for {what}"
    return PendingReason(ReasonCode.UNSCHEDULABLE, text + ", even on an empty cluster"), field
