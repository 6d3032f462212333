"""Pending reasons with numbers, in squeue's spirit.

Each function returns a :class:`PendingReason` whose message names the queue, cohort or
devices involved and the counts a person needs to act ("team-a uses 5 gpu of the 5 it may use").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from labgang.launcher.model import JobRequest, ReclaimWithinCohort
from labgang.launcher.scheduler.decisions import PendingReason, ReasonCode

if TYPE_CHECKING:
    from labgang.launcher.scheduler.quota import QuotaBook


def describe_request(req: JobRequest) -> str:
    """``"4 x 2 gpu"``, ``"3 x 1 mig-1g.10gb"``, with the model and node constraints; a job of
    groups: ``"groups launcher 1 x 0 + worker 4 x 2 gpu"``."""
    if req.groups:
        return (
            "groups "
            + " + ".join(f"{g.name} {g.request.workers} x {g.request.per_worker}" for g in req.groups)
            + (f" {req.resource}")
        )
    text = f"{req.workers} x {req.per_worker} {req.resource}"
    if req.gpu_model:
        text += f" ({req.gpu_model})"
    if req.nodes is not None:
        text += f" on exactly {req.nodes} nodes"
    return text


def held_reason(job_id: str, by: str, admin: bool = False) -> PendingReason:
    """HELD: ``"held by alice; `labgang release 12` lets it be scheduled"``. For a task of a job
    array (``12_3``) it names the array, whose id releases every held task (``submit --array --hold``
    holds them all): ``"held by alice; `labgang release 12` lets array 12 be scheduled (one task:
    `labgang release 12_N`)"`` (the same words for every task, so ``queue`` folds them in one row).
    An admin's hold (``admin``) says so: its owner may not release it (Slurm's JobHeldAdmin):
    ``"held by the admin root; only an admin may release it (`labgang release 12`)"``."""
    array_id, sep, index = job_id.partition("_")
    if admin:
        target = f"array {array_id}" if sep and array_id.isdigit() and index.isdigit() else "it"
        release = array_id if target != "it" else job_id
        return PendingReason(
            ReasonCode.HELD, f"held by the admin {by}; only an admin may release {target} (`labgang release {release}`)"
        )
    if sep and array_id.isdigit() and index.isdigit():
        return PendingReason(
            ReasonCode.HELD,
            f"held by {by}; `labgang release {array_id}` lets array {array_id} be scheduled "
            f"(one task: `labgang release {array_id}_N`)",
        )
    return PendingReason(ReasonCode.HELD, f"held by {by}; `labgang release {job_id}` lets it be scheduled")


def quota_reason(
    book: QuotaBook, queue: str, req: JobRequest, held: int = 0, holders: Sequence[str] = (), need: str = ""
) -> PendingReason:
    """Why ``req`` does not fit ``queue``'s quota now: OVER_QUOTA or COHORT_EXHAUSTED.

    Args:
        book: the cycle's quota book.
        queue: the job's queue.
        req: the job's request.
        held: devices of the queue's usage in ``book`` that are held this cycle for waiting
            jobs (preemptors, a head holding quota) rather than used by running jobs.
        holders: for whom and until when ``held`` is kept, e.g. ``"job 7 until its victims
            exit"``, ``"job 3 for this cycle only"`` (a head's hold lasts one cycle).
        need: the words for what the job needs (default :func:`needed`; the cycle passes a
            placeholder to keep one reason for jobs of groups that differ only there).
    """
    res, need = req.resource, need or needed(req)
    u = book.usage(queue, res)
    n = book.nominal(queue, res)
    spec = book.queues[queue]
    who = ", ".join(holders) or "waiting jobs"
    used = f"{u - held}" + (f" (+{held} held for {who})" if held else "")
    if spec.cohort is None:
        return PendingReason(ReasonCode.OVER_QUOTA, f"{queue} uses {used} of {n} {res}; job needs {need}")
    limit = spec.borrowing_limit.get(res)
    if limit is not None and u + req.total > n + limit:
        uses = f"{u - held} {res}" + (f" (+{held} held for {who})" if held else "")
        return PendingReason(
            ReasonCode.OVER_QUOTA,
            f"{queue} uses {uses} of the {n + limit} it may use (nominal quota {n} + borrowing limit {limit}); "
            f"job needs {need}",
        )
    pool, pool_used = book.pool(spec.cohort, res), book.pool_usage(spec.cohort, res)
    avail = book.available(queue, res)
    return PendingReason(
        ReasonCode.COHORT_EXHAUSTED,
        f"cohort {spec.cohort} has {max(0, pool - pool_used)} of {pool} lendable {res} unused; "
        f"{queue} uses {used} of {n} {res} and can get {avail} more{lent_out(book, queue, res, avail)}; "
        f"job needs {need}",
    )


def lent_out(book: QuotaBook, queue: str, res: str, avail: int) -> str:
    """What a queue that can get only ``avail`` more of ``res`` is told when part of its own unused
    nominal quota is used by borrowing queues of its cohort, or "": ``: shared's 2 unused nominal gpu
    are lent to vision (borrowing); shared does not reclaim (reclaim_within_cohort = never): it waits
    for them to end`` (a queue that may reclaim is told by its preemption search instead)."""
    spec = book.queues[queue]
    unused = max(0, book.nominal(queue, res) - book.usage(queue, res))
    out = unused - avail
    borrowers = [
        name
        for name, other in book.queues.items()
        if name != queue and other.cohort == spec.cohort and book.borrowed(name, res) > 0
    ]
    if out <= 0 or not borrowers:
        return ""
    some = f"{queue}'s {unused}" if out == unused else f"{out} of {queue}'s {unused}"
    text = f": {some} unused nominal {res} are lent to {', '.join(borrowers)} (borrowing)"
    if spec.reclaim_within_cohort is ReclaimWithinCohort.NEVER:
        text += f"; {queue} does not reclaim (reclaim_within_cohort = never): it waits for them to end"
    return text


def needed(req: JobRequest) -> str:
    """The devices ``req`` counts in its queue, as a quota reason says it: ``"8"``; a job of
    groups names the sum over its groups: ``"8 (groups launcher 1 x 0 + worker 4 x 2 = 0 + 8)"``."""
    if not req.groups:
        return str(req.total)
    shapes = " + ".join(f"{g.name} {g.request.workers} x {g.request.per_worker}" for g in req.groups)
    sums = " + ".join(str(g.request.total) for g in req.groups)
    return f"{req.total} (groups {shapes} = {sums})"


def capacity_reason(free_total: int, largest: int, req: JobRequest) -> PendingReason:
    """Why ``req`` has no placement: NO_CAPACITY (too few free) or FRAGMENTED (spread out)."""
    what = describe_request(req)
    if free_total < req.total:
        return PendingReason(ReasonCode.NO_CAPACITY, f"{free_total} {req.resource} free; job needs {what}")
    return PendingReason(
        ReasonCode.FRAGMENTED,
        f"{free_total} {req.resource} free, largest node has {largest}; job needs {what}",
    )


def reserved_reason(starving: list[str], preempting: list[str]) -> PendingReason:
    """The job would fit on devices reserved for starving gangs or for preemptors waiting
    for their victims."""
    parts = []
    if starving:
        parts.append("starving job(s) " + ", ".join(starving))
    if preempting:
        parts.append("job(s) waiting for their victims " + ", ".join(preempting))
    return PendingReason(ReasonCode.RESERVED_FOR_STARVING, "free devices are reserved for " + " and ".join(parts))


def waiting_reason(victims: list[str], reclaimed_from: tuple[str, ...] = ()) -> PendingReason:
    """The job preempted ``victims`` and waits until they are gone; ``reclaimed_from`` (one per victim:
    the queue of a job of another queue of the cohort it reclaims from, "" for one of its own queue)
    names the reclaims: ``waiting for 2 preempted job(s) to exit: 34 (reclaimed from queue vision), 35``.
    Only what stays true while it waits (the victims' queues), so the reason does not change each cycle."""
    froms = reclaimed_from or ("",) * len(victims)
    named = [v + (f" (reclaimed from queue {q})" if q else "") for v, q in zip(victims, froms, strict=True)]
    return PendingReason(
        ReasonCode.WAITING_FOR_VICTIMS, f"waiting for {len(victims)} preempted job(s) to exit: " + ", ".join(named)
    )


def blocked_reason(queue: str, head: str) -> PendingReason:
    """A strict-fifo queue's later job waits behind its head."""
    return PendingReason(ReasonCode.BLOCKED_BY_HEAD, f"strict-fifo queue {queue} waits for its head {head}")


def user_limit_reason(user: str, queue: str, used: float, limit: int, unit: str, need: float) -> PendingReason:
    """USER_LIMIT: ``user``'s jobs in ``queue`` hold ``used`` of the ``limit`` ``unit`` (``"gpu"``: devices,
    ``"jobs"``: running jobs) one user may hold there; the job needs ``need`` more
    (``user lab1 runs 4 of 4 gpu allowed in queue vision; job needs 2``)."""
    key = "max_gpus_per_user" if unit == "gpu" else "max_running_jobs_per_user"
    return PendingReason(
        ReasonCode.USER_LIMIT,
        f"user {user} runs {used} of {limit} {unit} allowed in queue {queue} ({key}); job needs {need}",
    )


def user_queue_order_reason(user: str, queue: str, earlier: str) -> PendingReason:
    """USER_LIMIT in a strict-fifo queue: ``user``'s earlier job ``earlier`` waits for the user's limit,
    and their later jobs keep their order behind it (other users' jobs are not held)."""
    return PendingReason(
        ReasonCode.USER_LIMIT,
        f"user {user}'s earlier job {earlier} in strict-fifo queue {queue} waits for the user's limit; "
        "their later jobs keep their order behind it",
    )


SIMULATED_EPOCH_LIMIT = 315_360_000.0
"""Times below this (10 years of seconds) are a simulation's clock (``labgang simulate`` starts at
0), shown as seconds; later ones are unix times, shown as a local date and time."""


def begin_reason(begin_time: float) -> PendingReason:
    """The job waits for its ``--begin`` time (Slurm's ``BeginTime``): ``"BeginTime: not before
    2026-12-02T02:00:00+0000 (--begin)"``, or ``"... not before t=600s ..."`` on a simulated clock.
    The message names the instant, not the time left, so it does not change from cycle to cycle."""
    if begin_time < SIMULATED_EPOCH_LIMIT:
        when = f"t={begin_time:g}s"
    else:
        import time

        when = time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(begin_time))
    return PendingReason(ReasonCode.BEGIN_TIME, f"BeginTime: not before {when} (--begin)")
