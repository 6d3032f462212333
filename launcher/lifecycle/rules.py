"""Pure rules over job records: node order, who may be a victim, whether an attempt ran.

These are the lifecycle's answers to "may this job be stopped for another?" and "does this
requeue count as a restart?" (issue: a finished gang must never run twice; a gang admitted
and evicted in the same instant never ran).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from labgang.launcher.lifecycle.group_policy import GroupLayout, launchable_ranks
from labgang.launcher.lifecycle.records import JobRecord, RankRecord
from labgang.launcher.lifecycle.states import JobState, RankPhase
from labgang.launcher.model import JobRequest, QueueSpec
from labgang.launcher.scheduler.snapshot import PendingJob


def job_nodes(job: JobRecord) -> list[str]:
    """The job's nodes in NODE_RANK order (order of first appearance by rank)."""
    nodes: list[str] = []
    for r in sorted(job.ranks):
        if job.ranks[r].node not in nodes:
            nodes.append(job.ranks[r].node)
    return nodes


def ranks_in_order(job: JobRecord) -> list[RankRecord]:
    """The current attempt's ranks, rank 0 first."""
    ranks = job.ranks
    if len(ranks) == 1:  # most jobs: nothing to sort
        return list(ranks.values())
    return [ranks[r] for r in sorted(ranks)]


def group_layout(job: JobRecord) -> GroupLayout:
    """The groups of the job's current attempt (names in group order, the group of each rank):
    what the success, failure and startup-order rules read (``group_policy.py``). A one-group
    job is one group ``g0`` of all its ranks."""
    names = tuple(g.name for g in job.spec.group_specs())
    if len(names) == 1:
        return GroupLayout(names, tuple(0 for _ in job.ranks))
    sizes = started_group_sizes(job)
    if sizes is None:  # never from a cycle's placement; the submitted sizes, as far as the ranks go
        return GroupLayout(names, tuple(job.spec.rank_group(r).index for r in sorted(job.ranks)))
    return GroupLayout.from_sizes(names, sizes)


def started_group_sizes(job: JobRecord) -> list[int] | None:
    """How many ranks each group of a job of groups has in the current attempt, in group order:
    the groups' sizes, or for an elastic job that started smaller the sizes the scheduler gave
    it. None when no set of sizes the scheduler tries adds up to the attempt's ranks."""
    sized = started_groups_request(job)
    return None if sized is None else [g.request.workers for g in sized.groups]


def started_groups_request(job: JobRecord) -> JobRequest | None:
    """The request of a job of groups at the size its current attempt started with: each group
    at the size the scheduler gave it. The attempt's rank count is stored (its rank rows) and
    decides the sizes: ``scheduler/groups.py`` ``group_sizes`` is the only way a cycle sizes a job
    of groups down, and it shrinks every elastic group one rank at a time, so each total it yields
    is smaller than the one before (one total, one set of sizes). None when no size it yields
    adds up to the attempt's ranks (or ``job`` is not a job of groups)."""
    from labgang.launcher.scheduler.groups import group_sizes  # only for a job of groups

    if not job.spec.groups:
        return None
    count = len(job.ranks)
    for req in group_sizes(job.spec.request):
        if req.workers == count:
            return req
    return None


def elastic_sizes(job: JobRecord) -> str:
    """Each group's started size of an elastic job of groups, for its history:
    ``"launcher 1 of 1, worker 3 of 4 (min 2)"``."""
    sizes = started_group_sizes(job)
    parts = []
    for i, g in enumerate(job.spec.groups):
        got = "?" if sizes is None else str(sizes[i])
        floor = f" (min {g.min_workers})" if g.min_workers is not None else ""
        parts.append(f"{g.name} {got} of {g.workers}{floor}")
    return ", ".join(parts)


def launchable(job: JobRecord) -> frozenset[int]:
    """The ranks of the current attempt that may be launched now: all of them, or with a
    ``--startup-order`` those of the groups whose turn has come (every rank of the groups
    before them reported started)."""
    order = job.spec.startup_order
    if not order:
        return frozenset(job.ranks)
    started = frozenset(r.rank for r in job.ranks.values() if r.state.order >= RankPhase.RUNNING.order)
    return launchable_ranks(group_layout(job), order, started)


def completing(job: JobRecord) -> bool:
    """True when every rank of a job holding devices has exited on its own (main process gone,
    exit status known; a node lost after its rank exited does not change that): the job's
    outcome is decided by those exits. Its devices are leaving; it is never a victim and never
    requeued."""
    ranks = job.ranks.values()
    return (
        job.status.state.holds_devices
        and bool(job.ranks)
        and all(r.state.order >= RankPhase.EXITED.order and r.exit_status is not None for r in ranks)
    )


def exited_zero_on_their_own(job: JobRecord) -> bool:
    """True when every rank of the job's current attempt exited with status 0 on its own: the
    attempt finished, whatever stop was under way (docs/queue-semantics.md §A3.6), so a stop that
    would requeue the job ends it as succeeded instead.

    A rank killed by the stop's SIGTERM or SIGKILL has a non-zero status; a rank whose exit is
    unknown (its node lost, a launch refused, a rank its node no longer knows) has none; a rank its
    agent stopped on the node's lease (``JobStatus.lease_stopped``) did not exit on its own, even
    with status 0. None of these counts.
    """
    return bool(job.ranks) and not job.status.lease_stopped and all(r.exit_status == 0 for r in job.ranks.values())


def leaving(job: JobRecord) -> bool:
    """True when the job's devices are on their way to free: terminating, or completing."""
    return job.status.state == JobState.TERMINATING or completing(job)


def may_be_victim(job: JobRecord, protected: frozenset[str]) -> bool:
    """May a cycle's preemption stop ``job``?

    Only an admitted or running job that is not completing (its ranks have not all exited),
    and not one admitted by the burst of cycles that would evict it (``protected``: ids this
    cycle or an earlier cycle of the same burst admitted). Such a gang never started: evicting
    it would requeue it at once, the next cycle could admit it again and the one after evict
    it again, without end. Once it runs (its start wakes the scheduler when a preemptor names
    it), a later cycle may stop it like any other.
    """
    st = job.status.state
    if st not in (JobState.ADMITTED, JobState.RUNNING):
        return False
    return job.id not in protected and not completing(job)


def next_starvation(pending: Iterable[PendingJob], queues: Iterable[QueueSpec], now: float) -> float | None:
    """The next instant after ``now`` at which a pending job starts starving (``pending_since`` +
    its queue's ``starvation_after``), or None. Time alone changes a cycle's decisions only then,
    so a driver wakes its scheduler at exactly that instant (the coordinator and the simulator alike)."""
    after = {q.name: q.starvation_after for q in queues if q.starvation_after is not None}
    if not after:  # no queue starves (most clusters): no pass over the waiting jobs
        return None
    times = [j.pending_since + after[j.queue] for j in pending if j.queue in after]
    return min((t for t in times if t > now), default=None)


def next_begin(pending: Iterable[PendingJob], now: float) -> float | None:
    """The next ``--begin`` time after ``now`` among ``pending``, or None: the scheduler admits
    such a job from that instant on, so a driver wakes its scheduler then."""
    return min((j.begin_time for j in pending if j.begin_time is not None and j.begin_time > now), default=None)


def next_wake(pending: Sequence[PendingJob], queues: Iterable[QueueSpec], now: float) -> float | None:
    """The next instant after ``now`` at which time alone changes a cycle's decisions: a pending
    job starts starving (:func:`next_starvation`) or reaches its ``--begin`` time (:func:`next_begin`);
    None when neither comes. Both drivers (the coordinator and ``labgang simulate``) wake then."""
    times = [t for t in (next_starvation(pending, queues, now), next_begin(pending, now)) if t is not None]
    return min(times, default=None)
