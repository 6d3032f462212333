"""Job-array rules: which pending tasks of an array a scheduling cycle looks at (docs/arrays.md).

The scheduler treats every task as an ordinary job (quota, priority, preemption). Two rules
decide which of an array's pending tasks are put in a cycle's snapshot, lowest index first:

* **the ``%N`` cap**: with N of its tasks holding devices (admitted, running or terminating),
  no more is admitted; the tasks over the cap stay pending with reason ``ARRAY_LIMIT``.
* **the window**: tasks of one array are one class to the scheduler (same queue, request,
  priority and submit time), so a cycle can admit at most as many of them as there is room for:
  ``(devices of the resource - devices the array already holds) // devices per task``, and no
  more than the queue's hard quota cap leaves. One more than that is fed; the rest would get
  the very answer the last fed task gets (once one member of a class fails, the cycle answers
  the later members with the same reason, ``launcher/scheduler/cycle.py``), so they take that
  reason (:func:`follow_reasons`) without being fed. A 10,000-task array on 8 GPUs costs a cycle 9 tasks, not 10,000.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.lifecycle.rules import started_groups_request
from labgang.launcher.model import QueueSpec
from labgang.launcher.scheduler.decisions import CycleResult, Pending, PendingReason, ReasonCode


@dataclass(slots=True, unsafe_hash=True)
class ArrayGate:
    """What the array rules let into one cycle.

    A value, not changed after construction; equality and hash by fields (not ``frozen`` only for
    its cheaper ``__init__``).

    Attributes:
        fed: the pending jobs to put in the snapshot (every job that is not an array task, and
            the array tasks the rules let through), in the order given.
        capped: array tasks over their ``%N`` cap whose reason is not ``ARRAY_LIMIT`` yet.
        followers: the id of an array's last fed task → the array's tasks that take its cycle
            reason without being fed (index order).
    """

    fed: tuple[JobRecord, ...]
    capped: tuple[Pending, ...] = ()
    followers: Mapping[str, Sequence[JobRecord]] = field(default_factory=dict)


def cap_reason(array_id: str, limit: int) -> PendingReason:
    """The ``ARRAY_LIMIT`` reason of a task of array ``array_id`` held back by its ``%limit`` cap."""
    tasks = "task" if limit == 1 else "tasks"
    return PendingReason(ReasonCode.ARRAY_LIMIT, f"array {array_id} runs at most {limit} {tasks} at once (%{limit})")


def _devices(job: JobRecord) -> int:
    """Devices a job holding devices holds (an elastic gang: the size it started with)."""
    if job.spec.groups:
        return (started_groups_request(job) or job.spec.request).total if job.ranks else job.spec.request.total
    workers = len(job.ranks) or job.spec.workers
    return workers * job.spec.per_worker


def gate_pending(
    pending: Sequence[JobRecord],
    holding: Sequence[JobRecord],
    capacity: Mapping[str, int],
    quota_caps: Mapping[str, Mapping[str, int]] | None = None,
) -> ArrayGate:
    """Apply the ``%N`` cap and the window to the array tasks among ``pending``.

    Args:
        pending: pending jobs eligible for a cycle, in submission order (an array's tasks in
            index order). A held task (``labgang hold``) is fed as a job of no array is: it takes
            no room of its array's cap or window.
        holding: every job that holds devices (admitted, running, terminating).
        capacity: resource name → allocatable devices of that resource in the cluster.
        quota_caps: queue → resource → the most devices the queue's jobs may ever hold at once
            (``nominal + borrowing_limit``, or ``nominal`` without a cohort); a queue or
            resource missing has no cap but the cluster. The window is then also bounded by
            that cap less what the queue's jobs of the array's priority or higher hold (jobs
            of lower priority might be preempted, so they do not count).

    Returns:
        The gate: ``fed`` keeps the order of ``pending``.
    """
    if not any(job.spec.array is not None for job in pending):
        return ArrayGate(tuple(pending), (), {})  # no array task: every job is fed, none capped or following
    active: dict[str, int] = {}
    held: dict[str, int] = {}
    # the tasks running and the devices held per array matter only to array tasks
    for job in holding:
        task = job.spec.array
        if task is not None:
            active[task.array_id] = active.get(task.array_id, 0) + 1
            held[task.array_id] = held.get(task.array_id, 0) + _devices(job)
    fed: list[JobRecord] = []
    capped: list[Pending] = []
    followers: dict[str, list[JobRecord]] = {}
    usage: dict[tuple[str, str, int], int] = {}  # (queue, resource, priority) -> _queue_usage
    room: dict[str, int] = {}  # array id -> tasks it may still feed this cycle
    by_cap: dict[str, bool] = {}  # array id -> the %N cap (not the window) bounds what it feeds
    leader: dict[str, list[JobRecord]] = {}  # array id -> the followers of its last fed task
    tail: list[JobRecord] | None = None  # the followers list while a run of one array's tasks follows
    tail_array = ""
    for job in pending:
        task = job.spec.array
        if task is None or job.status.hold is not None:
            # a held task is fed for the cycle to tell it is held, and takes none of its array's
            # room: the %N cap counts tasks that run, as Slurm's does, not tasks held back
            fed.append(job)
            tail = None
            continue
        aid = task.array_id
        if tail is not None and aid == tail_array:  # the common case of a big array: its tail, in a row
            tail.append(job)
            continue
        tail = None
        if aid not in room:
            size = max(1, job.spec.request.floor().total)
            devices = capacity.get(job.spec.resource, 0) - held.get(aid, 0)
            cap = (quota_caps or {}).get(job.spec.queue, {}).get(job.spec.resource)
            if cap is not None:
                key = (job.spec.queue, job.spec.resource, job.spec.priority)
                if key not in usage:  # arrays of one queue and priority share it
                    usage[key] = _queue_usage(holding, job)
                devices = min(devices, cap - usage[key])
            window = max(0, devices) // size + 1
            free = None if task.limit is None else max(0, task.limit - active.get(aid, 0))
            by_cap[aid] = free is not None and free <= window
            room[aid] = window if free is None else min(window, free)
        if room[aid] > 0:
            room[aid] -= 1
            fed.append(job)
            leader[aid] = followers[job.id] = []
        elif by_cap[aid] and task.limit is not None:
            reason = cap_reason(aid, task.limit)
            st = job.status
            if st.reason_code != reason.code.value or st.reason_message != reason.message:
                capped.append(Pending(job.id, reason))
        elif aid in leader:
            tail, tail_array = leader[aid], aid
            tail.append(job)
    return ArrayGate(tuple(fed), tuple(capped), {lead: tail for lead, tail in followers.items() if tail})


def queue_caps(queues: Iterable[QueueSpec]) -> dict[str, dict[str, int]]:
    """Queue -> resource -> the most devices its jobs may hold at once, for the window of
    :func:`gate_pending`: ``nominal + borrowing_limit`` for a queue in a cohort with a borrowing
    limit, ``nominal`` for a queue without a cohort (it cannot borrow); no entry = no cap but the
    cluster. The coordinator and ``labgang simulate`` both take it from here."""
    caps: dict[str, dict[str, int]] = {}
    for queue in queues:
        if queue.cohort is None:
            caps[queue.name] = dict(queue.nominal)
        else:
            caps[queue.name] = {r: queue.nominal.get(r, 0) + n for r, n in queue.borrowing_limit.items()}
    return caps


def _queue_usage(holding: Sequence[JobRecord], task: JobRecord) -> int:
    """Devices of ``task``'s resource held in its queue by jobs it could not preempt (its
    priority or higher)."""
    spec = task.spec
    return sum(
        _devices(job)
        for job in holding
        if job.spec.queue == spec.queue and job.spec.resource == spec.resource and job.spec.priority >= spec.priority
    )


def follow_reasons(gate: ArrayGate, result: CycleResult) -> CycleResult:
    """``result`` with the gate's held-back tasks added to its pending decisions: capped tasks
    with ``ARRAY_LIMIT``, and each follower with its leader's reason when the leader stayed
    pending for a reason of its own (not waiting for victims, which is that task's alone).
    Only reasons that change a task's current one are added, so a cycle over a big array does
    not rewrite thousands of unchanged reasons."""
    if not gate.capped and not gate.followers:
        return result
    followers = gate.followers
    reasons = {p.job_id: p.reason for p in result.pending if p.job_id in followers}
    added: list[Pending] = list(gate.capped)
    for leader_id, tail in followers.items():
        reason = reasons.get(leader_id)
        if reason is None or reason.code == ReasonCode.WAITING_FOR_VICTIMS:
            continue
        code, message = reason.code.value, reason.message
        for job in tail:
            st = job.status
            if st.reason_message != message or st.reason_code != code:
                added.append(Pending(job.id, reason))
    if not added:
        return result
    return CycleResult(result.admitted, result.preempted, result.pending + tuple(added), result.held, result.tenants)
