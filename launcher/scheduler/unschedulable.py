"""Jobs that could never start, even on an empty cluster.

Such a job never preempts, never blocks a strict-fifo queue, and the coordinator refuses it
at submission (HTTP 409). Two causes: its queue can never hold the request (Kueue's
"exceeds max quota": more than ``min(N + B, private + cohort pool)``, or a resource the
queue does not list), or no set of nodes holds every rank with every device free.
"""

from __future__ import annotations

from collections.abc import Iterable

from labgang.launcher.model import JobRequest, QueueSpec, is_valid_resource
from labgang.launcher.scheduler.capacity import DeviceBook, FreeIndex
from labgang.launcher.scheduler.decisions import PendingReason, ReasonCode
from labgang.launcher.scheduler.placement import feasible
from labgang.launcher.scheduler.quota import QuotaBook
from labgang.launcher.scheduler.reasons import describe_request
from labgang.launcher.scheduler.snapshot import Node, Snapshot


def quota_never_fits(book: QuotaBook, queue: str, req: JobRequest) -> PendingReason | None:
    """UNSCHEDULABLE when ``queue`` could never hold ``req`` (or the request is malformed)."""
    if req.workers < 1 or req.per_worker < 1:
        return PendingReason(ReasonCode.UNSCHEDULABLE,
                             f"workers and gpus per worker must be >= 1 (got {req.workers} x {req.per_worker})")
    if req.nodes is not None and not 1 <= req.nodes <= req.workers:
        return PendingReason(ReasonCode.UNSCHEDULABLE,
                             f"nodes must be between 1 and workers ({req.workers}); got {req.nodes}")
    if not is_valid_resource(req.resource):
        return PendingReason(ReasonCode.UNSCHEDULABLE,
                             f"unknown resource {req.resource!r}; allowed: gpu, mig-<profile>")
    if not book.lists(queue, req.resource):
        listed = ", ".join(sorted(book.queues[queue].nominal)) or "nothing"
        return PendingReason(ReasonCode.UNSCHEDULABLE,
                             f"queue {queue} has no quota for {req.resource} (it lists {listed})")
    most = book.potential(queue, req.resource)
    if req.total > most:
        return PendingReason(ReasonCode.UNSCHEDULABLE,
                             f"job needs {req.total} {req.resource} but queue {queue} can hold at most {most}")
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


def check_schedulable(request: JobRequest, queue: QueueSpec, all_queues: Iterable[QueueSpec],
                      nodes: Iterable[Node]) -> PendingReason | None:
    """Could ``request`` in ``queue`` ever start? For the coordinator's submission check.

    Args:
        request: the job's request.
        queue: the queue it is submitted to (must be one of ``all_queues`` by name).
        all_queues: every queue (the cohort's pool depends on its members).
        nodes: the cluster's nodes with all their allocatable devices.

    Returns:
        None when the job could start on an empty cluster, else an UNSCHEDULABLE reason.
    """
    queues = {q.name: q for q in all_queues}
    queues[queue.name] = queue
    book = QuotaBook(queues.values())
    reason = quota_never_fits(book, queue.name, request)
    if reason is not None:
        return reason
    devices = DeviceBook(Snapshot(now=0.0, nodes=tuple(nodes), queues=(), running=(), pending=()))
    model = request.gpu_model.lower() if request.gpu_model else None
    return placement_never_fits(devices.all_devices_index(request.resource, model, skip_unavailable=False), request)
