"""One job of ``labgang simulate``: its lifecycle record (the coordinator's model) and the figures
the reports need. An array's tasks are one :class:`SimJob` each, sharing their ``[[jobs]]`` table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from labgang.launcher.jobgroups import GroupSpec
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.model import GpuSharing, JobRequest
from labgang.launcher.scheduler.decisions import PendingReason
from labgang.launcher.scheduler.shares import share_units
from labgang.launcher.scheduler.snapshot import Placement
from labgang.launcher.simulate.naming import SimTask
from labgang.launcher.simulate.scenario import JobModel


def devices_held(held: JobRequest, sharing: GpuSharing) -> float:
    """Devices ``held`` counts in device-seconds and utilization: its devices, or a share's GPU
    fraction (a shard is ``1/shards_per_gpu`` gpu, ``--mps 25`` is 0.25 gpu; docs/sharing.md)."""
    return float(share_units(held, sharing.shards_per_gpu)) if held.shared else float(held.total)


@dataclass
class SimJob:
    """One job's life in the simulation: its lifecycle record plus the figures the reports need.

    Attributes:
        spec: the job's table from the file (an array's tasks share it).
        seq: submission order (the coordinator's ``seq``: file order, an array's tasks in index order).
        priority: integer priority.
        request: what it asks the scheduler for.
        record: the job as the lifecycle model holds it (state, attempts, history).
        submitted: it has been submitted (or placed at t=0).
        placement: devices of its current admission (() when it holds none).
        admit_time: start of its current admission, seconds.
        preempted: chosen as a victim at least once.
        end_time: when it finished.
        first_admit: its first admission time.
        waits: seconds pending before each admission: submit to first admission, then each
            requeue to the readmission that follows (for wait statistics; a ``running = true``
            job has no entry for its initial placement).
        device_seconds: device-seconds used so far (finished admissions).
        reason: its latest pending reason.
        task: its name and the coordinator's id (which array task it is, for a task).
        duration: its run time once admitted, seconds (None: forever): the table's ``duration``,
            or for an array task its entry of ``durations``.
    """

    spec: JobModel
    seq: int
    priority: int
    request: JobRequest
    record: JobRecord
    submitted: bool = False
    placement: Placement = ()
    admit_time: float = 0.0
    preempted: bool = False
    end_time: float | None = None
    first_admit: float | None = None
    waits: list[float] = field(default_factory=list)
    device_seconds: float = 0.0
    reason: PendingReason | None = None
    task: SimTask | None = None
    duration: float | None = None

    id: str = field(init=False, repr=False, compare=False)
    """The job's name: its id in the file, ``<id>_<index>`` for an array task; set once at construction
    from ``spec`` and ``task``, which never change (read for every event the engine traces)."""

    def __post_init__(self) -> None:
        self.id = self.spec.id if self.task is None else self.task.name

    @property
    def cancelled(self) -> bool:
        """True when it ended cancelled (its dependency can never hold, or ``Simulation.cancel``)."""
        return self.record.status.state == JobState.CANCELLED

    @property
    def state(self) -> str:
        """``"new"`` (not submitted yet), ``"pending"``, ``"running"`` (admitted, running or being
        stopped: it holds its devices) or ``"finished"``."""
        st = self.record.status.state
        if not self.submitted:
            return "new"
        if st == JobState.PENDING:
            return "pending"
        return "running" if st.holds_devices else "finished"

    @property
    def held(self) -> JobRequest:
        """The request at the size it runs with: an elastic gang counts as a gang of its started size."""
        if self.request.elastic and self.placement:
            return self.request.at_size(len(self.placement))
        return self.request


def job_record(
    spec: JobModel,
    seq: int,
    priority: int,
    task: SimTask | None = None,
    dependency: str | None = None,
    uid: int = 0,
    request: JobRequest | None = None,
) -> JobRecord:
    """The lifecycle record of a scenario job (simulated user, no command).

    Args:
        spec: its table. seq: submission order. priority: integer priority.
        task: its name and the coordinator's id (None: the table's ``id`` is both).
        dependency: its ``dependency`` in the coordinator's ids (``naming.JobIds.model_dependency``).
        uid: 1 + the index of its tenant in ``[[tenants]]``, 0 without one (how the simulation
            finds a job's tenant, as the coordinator finds it from the submitting user).
        request: ``spec.request()`` when the caller has built it already (None: built here).
    """
    req = spec.request() if request is None else request
    job_spec = JobSpec(
        name=spec.name or spec.id,
        user=spec.user,
        uid=uid,
        gid=None,
        queue=spec.queue,
        priority=priority,
        workers=req.workers,
        per_worker=req.per_worker,
        resource=req.resource,
        gpu_model=req.gpu_model,
        nodes=req.nodes,
        argv=[],
        env={},
        cwd="/",
        grace_s=spec.grace,
        time_limit_s=spec.time_limit,
        requeue=spec.requeue,
        signal=None,
        topology=req.topology,
        min_workers=req.min_workers,
        array=None if task is None else task.task,
        dependency=dependency,
        begin_time=spec.begin,
        cpus_per_task=req.cpus_per_task,
        mem=req.mem,
        mem_per_gpu=req.mem_per_gpu,
        exclusive=req.exclusive,
        groups=tuple(GroupSpec.of_request(g) for g in req.groups),
        colocate=req.colocate,
        success_policy=spec.success_policy or "all",
        shards=req.shards,
        mps=req.mps,
        gpu_mem=req.gpu_mem,
    )
    status = JobStatus.submitted(spec.submit)
    return JobRecord(id=spec.id if task is None else task.model_id, seq=seq, spec=job_spec, status=status)


def group_ends(job: SimJob) -> list[float | None] | None:
    """Each group's run time (seconds; None: forever) of a job of groups some of whose
    ``[[jobs.groups]]`` give a ``duration`` (the others run the job's ``duration``), in group
    order; None for any other job (it ends whole after its ``duration``). What then ends the job
    is its ``success_policy``, applied by the lifecycle as in the coordinator."""
    groups = job.spec.groups
    if not groups or all(g.duration is None for g in groups):
        return None
    return [g.duration if g.duration is not None else job.duration for g in groups]
