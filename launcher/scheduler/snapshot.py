"""The scheduler's input: one frozen picture of the cluster at one instant.

The coordinator (and ``labgang simulate``) builds a :class:`Snapshot` and hands it to
:func:`labgang.launcher.scheduler.cycle.run_cycle`. Everything here is an immutable
value; the scheduler never mutates it and keeps its own working copy for a cycle. :class:`Device`,
:class:`DeviceLink`, :class:`Node` and :class:`TenantUsage` are frozen dataclasses; the four built
every cycle (:class:`RankPlacement`, :class:`RunningJob`, :class:`PendingJob`, :class:`Snapshot`) are
slotted dataclasses with the same equality and hash (``unsafe_hash``) that no code assigns to after
construction: Python 3.11's frozen ``__init__`` sets each field through ``object.__setattr__``, 3-5x
the cost of a plain slot write.

Times are seconds on whatever clock the caller uses (unix seconds in the
coordinator, simulated seconds in ``labgang simulate``); the scheduler only
compares and subtracts them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from labgang.launcher.model import CohortSpec, GpuSharing, JobRequest, QueueSpec, SharingPolicy


@dataclass(frozen=True, slots=True)
class Device:
    """One allocatable device: a full GPU (resource ``"gpu"``) or a MIG device
    (resource ``"mig-<profile>"``).

    Attributes:
        uuid: NVML UUID (``GPU-…`` or ``MIG-…``); the only name the scheduler hands out.
        node: name of the node the device is on.
        resource: ``"gpu"`` or ``"mig-<profile>"`` (see :mod:`labgang.launcher.model`).
        model: NVML product name (``nvmlDeviceGetName``), e.g. ``"NVIDIA H100 80GB HBM3"``;
            "" when unknown. A request's ``gpu_model`` matches it case-insensitively as a substring.
        group: locality key inside the node (same NVLink domain / PCIe switch, or the parent
            GPU of a MIG device); "" when unknown. Placement prefers devices of one group per rank.
        numa: the device's NUMA key (e.g. ``"numa0"``, or ``"cpus:0-11"`` when only its CPUs are
            known); "" when unknown. Devices with equal keys are on one NUMA node.
    """

    uuid: str
    node: str
    resource: str
    model: str = ""
    group: str = ""
    numa: str = ""


@dataclass(frozen=True, slots=True)
class DeviceLink:
    """How two devices of one node are connected (from the agent's ``GpuLink``).

    Attributes:
        a, b: device UUIDs.
        nvlinks: NVLinks joining them (0: none or unknown).
        pcie: PCIe common ancestor: ``internal``, ``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``; "" unknown.
    """

    a: str
    b: str
    nvlinks: int = 0
    pcie: str = ""


@dataclass(frozen=True, slots=True)
class Node:
    """A node and its allocatable devices, in the order the node reports them (NVML index order).

    Attributes:
        name: the node's name (hostname); unique in a snapshot.
        devices: every allocatable device of the node, free or not.
        links: topology facts between its devices (); without links and NUMA keys placement
            inside the node uses ``Device.group`` only (see :mod:`.topology`).
        cpus: logical CPUs jobs may use (the agent's count minus its reserve); None = unknown,
            then CPU requests are not counted on this node.
        memory: host memory jobs may use, bytes (minus the reserve); None = unknown, not counted.
    """

    name: str
    devices: tuple[Device, ...]
    links: tuple[DeviceLink, ...] = ()
    cpus: int | None = None
    memory: int | None = None


@dataclass(slots=True, unsafe_hash=True)
class RankPlacement:
    """Where one rank of a gang runs.

    Attributes:
        rank: global rank, 0..workers-1.
        node: node name.
        devices: device UUIDs handed to this rank (``CUDA_VISIBLE_DEVICES``); ``per_worker`` of them.
    """

    rank: int
    node: str
    devices: tuple[str, ...]


Placement = tuple[RankPlacement, ...]
"""A whole gang's placement: one :class:`RankPlacement` per rank, in rank order. Ranks on the
same node are consecutive; NODE_RANK follows the order in which nodes first appear."""


@dataclass(slots=True, unsafe_hash=True)
class RunningJob:
    """A job that holds quota and devices: admitted, running, or terminating.

    Attributes:
        id: job id.
        queue: name of its queue.
        request: what it asked for.
        priority: effective priority (priority classes already resolved to integers).
        submit_time: original submission time, seconds (kept across requeues);
            ``lower-or-newer-equal-priority`` compares it.
        admit_time: when its current admission was granted, seconds; victims are taken
            "most recently admitted first" by this time (ties: higher ``seq`` first).
        placement: its devices, rank by rank.
        grace: seconds between SIGTERM and SIGKILL when it is stopped.
        terminating: True once it was told to stop (preempted or cancelled); its quota and
            devices still count as used until it is gone. Never chosen as a new victim.
        seq: tie-break among equal ``admit_time``: higher means admitted later (the lifecycle
            model's admission order, ``JobStatus.admit_seq``, in the coordinator and the simulator).
        tenant: its tenant (admission fair sharing); None = its queue's default tenant.
        user: the submitting user's name; its devices and the job count towards that user's
            limits in its queue (``QueueSpec.max_gpus_per_user``), terminating or not.
    """

    id: str
    queue: str
    request: JobRequest
    priority: int
    submit_time: float
    admit_time: float
    placement: Placement
    grace: float = 0.0
    terminating: bool = False
    seq: int = 0
    tenant: str | None = None
    user: str = ""


def victim_order(job: RunningJob) -> tuple[int, float, int, str]:
    """The one eviction order among candidates of one group: lowest priority, then most
    recently admitted (latest ``admit_time``, then highest ``seq``: the lifecycle model's
    admission order), then id."""
    return (job.priority, -job.admit_time, -job.seq, job.id)


@dataclass(slots=True, unsafe_hash=True)
class PendingJob:
    """A job waiting in its queue.

    Attributes:
        id: job id.
        queue: name of its queue.
        request: what it asks for.
        priority: effective priority (integer).
        submit_time: original submission time, seconds (kept across requeues).
        seq: submission order; the last tie-break among pending jobs.
        pending_since: submission time or the time of its last requeue, seconds;
            starvation (``QueueSpec.starvation_after``) counts from here.
        nominated: ids of the victims this job preempted and is waiting for (from an earlier
            :class:`~labgang.launcher.scheduler.decisions.Preempt`); () when none.
        tenant: its tenant (admission fair sharing); None = its queue's default tenant.
        held_last_cycle: it held its queue's idle quota in the previous cycle
            (:attr:`~labgang.launcher.scheduler.decisions.CycleResult.held`); a hold lasts one
            cycle, so it does not hold again in this one.
        user: the submitting user's name, for the queue's per-user limits.
        begin_time: ``--begin``: never admitted before this time, seconds (pending reason
            ``begin_time`` until then); None = at once.
        on_hold: who held the job (``labgang hold``; None: not held). A cycle never admits
            such a job nor looks for victims for it: it stays pending with reason HELD.
        hold_admin: an admin held it (only an admin may release it; the reason says so).
    """

    id: str
    queue: str
    request: JobRequest
    priority: int
    submit_time: float
    seq: int
    pending_since: float
    nominated: tuple[str, ...] = ()
    tenant: str | None = None
    held_last_cycle: bool = False
    user: str = ""
    begin_time: float | None = None
    on_hold: str | None = None
    hold_admin: bool = False


@dataclass(slots=True, unsafe_hash=True)
class Snapshot:
    """Everything one scheduling cycle looks at.

    Attributes:
        now: the current time, seconds (the scheduler never reads a clock).
        nodes: every node with its allocatable devices.
        queues: every queue's configuration (usage is derived from ``running``).
        running: jobs holding quota and devices, terminating ones included.
        pending: jobs waiting in their queues.
        unavailable: device UUIDs not offered to new jobs (foreign processes, lost devices,
            memory still held after a job ended). Jobs already placed there keep counting.
        cohorts: cohort specs (parents, cohort quota, limits, weights); cohorts only named by
            queues need none.
        sharing: fair sharing and admission fair sharing settings.
        tenants: every tenant's usage history (admission fair sharing); a tenant missing here
            has history 0 and weight 1.
        gpu_sharing: the ``[sharing]`` table: which nodes' cards may be shared by shards or MPS
            (:mod:`.shares`).
    """

    now: float
    nodes: tuple[Node, ...]
    queues: tuple[QueueSpec, ...]
    running: tuple[RunningJob, ...]
    pending: tuple[PendingJob, ...]
    unavailable: frozenset[str] = frozenset()
    cohorts: tuple[CohortSpec, ...] = ()
    sharing: SharingPolicy = field(default_factory=SharingPolicy)
    tenants: tuple[TenantUsage, ...] = ()
    gpu_sharing: GpuSharing = field(default_factory=GpuSharing)


@dataclass(frozen=True, slots=True)
class TenantUsage:
    """A tenant's decayed usage history, for admission fair sharing.

    Attributes:
        queue: the tenant's queue.
        name: the tenant's name ("" for the queue's default tenant).
        weight: its ``fair_weight`` (>= 0).
        history: ``H``, decayed devices held (see :mod:`labgang.launcher.scheduler.tenants`).
        last: time of its last update, seconds.
    """

    queue: str
    name: str
    weight: float = 1.0
    history: float = 0.0
    last: float = 0.0
