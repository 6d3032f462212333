"""The scheduler's view of the lifecycle's jobs, and when a burst of cycles is done: the one
definition the coordinator (``coordinator/scheduling.py``) and ``labgang simulate``
(``simulate/engine.py``) both use, so both hand the scheduler the same snapshot and stop
cycling at the same point.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle.records import JobRecord, JobSpec
from labgang.launcher.lifecycle.rules import leaving, started_groups_request
from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler.decisions import CycleResult
from labgang.launcher.scheduler.snapshot import PendingJob, RankPlacement, RunningJob

TenantOf = Callable[[JobSpec], "str | None"]
"""A job's tenant for admission fair sharing (None: its queue's default tenant)."""
Admissible = Callable[[JobRecord, float], bool]
"""May a cycle at a time consider a pending job (the lifecycle model's ``admissible``)?"""


def started_request(job: JobRecord) -> JobRequest:
    """What a job holds: an elastic gang counts as a gang of the size it started with (a job of
    groups: each group at the size it started with)."""
    req = job.spec.request
    if not (req.elastic and job.ranks):
        return req
    if req.groups:
        return started_groups_request(job) or req
    return req.at_size(len(job.ranks))


def scheduling_state(job: JobRecord) -> str:
    """A job's state as the scheduler tells them apart: ``"leaving"`` (terminating, or every rank
    exited), ``"holding"`` (admitted or running: the same to it), else the state's value. A driver
    wakes its scheduler when this changes for a job."""
    if leaving(job):
        return "leaving"
    return "holding" if job.status.state.holds_devices else job.status.state.value


def running_job(job: JobRecord, tenant: str | None) -> RunningJob:
    """The scheduler's view of a job holding devices (admitted, running, terminating); a job
    leaving its devices counts as terminating, an elastic gang at its started size."""
    st = job.status
    return RunningJob(
        id=job.id,
        queue=job.spec.queue,
        request=started_request(job),
        priority=job.spec.priority,
        submit_time=st.submit_time,
        # 0.0 is a real admission time on a simulated clock
        admit_time=st.admit_time if st.admit_time is not None else st.submit_time,
        placement=tuple(
            RankPlacement(rank=r.rank, node=r.node, devices=tuple(r.devices))
            for r in (job.ranks[i] for i in sorted(job.ranks))
        ),
        grace=job.spec.grace_s,
        terminating=leaving(job),
        seq=st.admit_seq,
        tenant=tenant,
        user=job.spec.user,
    )


def pending_job(job: JobRecord, tenant: str | None, held_last_cycle: bool) -> PendingJob:
    """The scheduler's view of a pending job (original submit time, submission order ``seq``)."""
    st = job.status
    return PendingJob(
        id=job.id,
        queue=job.spec.queue,
        request=job.spec.request,
        priority=job.spec.priority,
        submit_time=st.submit_time,
        seq=job.seq,
        pending_since=st.pending_since,
        nominated=tuple(st.nominated),
        tenant=tenant,
        held_last_cycle=held_last_cycle,
        user=job.spec.user,
        begin_time=job.spec.begin_time,
        on_hold=st.hold,
        hold_admin=st.hold_admin,
    )


def scheduler_jobs(
    jobs: Iterable[JobRecord],
    now: float,
    admissible: Admissible,
    tenant_of: TenantOf,
    held_last_cycle: Container[str],
) -> tuple[tuple[RunningJob, ...], tuple[PendingJob, ...]]:
    """The snapshot's ``running`` and ``pending`` jobs at ``now``, in submission order (``seq``):
    :func:`running_job` for every job holding devices, :func:`pending_job` for every job
    ``admissible(job, now)`` (the lifecycle model's rule: out of requeue backoff, not held by its
    dependency). The coordinator also gates array tasks (``coordinator/scheduling.py``).

    Args:
        jobs: the lifecycle model's active jobs.
        now: the cycle's time, seconds.
        admissible: the lifecycle model's ``admissible``.
        tenant_of: a job's tenant (admission fair sharing).
        held_last_cycle: ids of the jobs that held idle quota in the previous cycle.
    """
    running: list[RunningJob] = []
    pending: list[PendingJob] = []
    for job in sorted(jobs, key=lambda j: j.seq):
        if job.status.state.holds_devices:
            running.append(running_job(job, tenant_of(job.spec)))
        elif admissible(job, now):
            pending.append(pending_job(job, tenant_of(job.spec), job.id in held_last_cycle))
    return tuple(running), tuple(pending)


def decided_something(result: CycleResult, effects: Sequence[fx.Effect], held_before: bool) -> bool:
    """Did this cycle decide something new, so that another cycle at the same instant may decide more?

    True when it admitted a gang (a ``Dispatch``), stopped a new victim, or started holding idle
    quota while the previous cycle held none (a hold lasts one cycle: the next one runs without it).

    Args:
        result: the cycle's result. effects: what the lifecycle model returned for it.
        held_before: whether the previous cycle held any quota.
    """
    if bool(result.held) and not held_before:
        return True
    return any(
        isinstance(e, fx.Dispatch) or (isinstance(e, fx.RecordDecision) and e.kind is fx.DecisionKind.VICTIM)
        for e in effects
    )
