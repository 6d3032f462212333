"""The job and queue model shared by the scheduler, the coordinator and the CLI.

Plain frozen dataclasses and enums: no I/O, no validation library. Validation of
user input (config files, API requests, scenario files) happens at the edges
(``launcher/config/cluster.py``, the API handlers, ``launcher/simulate/``) and produces
these types.

Terms follow Kueue and Volcano (docs/queue-semantics.md): a *job* is a gang of ``workers``
ranks; a *queue* has a ``nominal`` quota per resource, an optional ``cohort``,
``borrowing_limit`` and ``lending_limit``.

Resource names are ``"gpu"`` for a full GPU and ``"mig-<profile>"`` for one MIG
device of that profile (``"mig-1g.10gb"``), as NVIDIA's device plugin names them
in its mixed MIG strategy.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from labgang.launcher.lifecycle import states as _lifecycle_states

GPU = "gpu"
TOPOLOGY_LEVELS = ("nvlink", "pcie-switch", "numa", "node")
"""Allowed ``JobRequest.topology`` values, closest first."""
CPU_BIND = ("numa", "none")
"""Allowed ``cpu_bind`` values: pin each rank to its GPUs' NUMA node CPUs (default), or not."""
MIG_PREFIX = "mig-"
# A MIG profile as nvidia-smi prints it: "1g.10gb", "3g.40gb", "1c.3g.71gb", "1g.18gb+me".
MIG_PROFILE_RE = re.compile(r"^(?:\d+c\.)?\d+g\.\d+gb(?:\+(?:me|gfx|me\.all|nome|nodec))*$")


def mig_resource(profile: str) -> str:
    """Return the resource name for one MIG device of ``profile`` (``"1g.10gb"`` → ``"mig-1g.10gb"``)."""
    return MIG_PREFIX + profile


def is_valid_resource(name: str) -> bool:
    """True for ``"gpu"`` and for ``"mig-<profile>"`` with a well-formed profile."""
    if name == GPU:
        return True
    return name.startswith(MIG_PREFIX) and bool(MIG_PROFILE_RE.match(name[len(MIG_PREFIX) :]))


class WithinQueue(str, enum.Enum):
    """Kueue's ``withinClusterQueue``: whom a pending job may preempt in its own queue."""

    NEVER = "never"
    LOWER_PRIORITY = "lower-priority"
    LOWER_OR_NEWER_EQUAL_PRIORITY = "lower-or-newer-equal-priority"


class ReclaimWithinCohort(str, enum.Enum):
    """Kueue's ``reclaimWithinCohort``: whom a job may preempt in other queues of its cohort
    to get back its own nominal quota that they borrowed."""

    NEVER = "never"
    LOWER_PRIORITY = "lower-priority"
    ANY = "any"


class BorrowPolicy(str, enum.Enum):
    """Kueue's ``borrowWithinCohort.policy``."""

    NEVER = "never"
    LOWER_PRIORITY = "lower-priority"


class Queueing(str, enum.Enum):
    """Order within one queue: a best-effort head that does not fit lets later jobs try;
    a strict head blocks the queue."""

    BEST_EFFORT_FIFO = "best-effort-fifo"
    STRICT_FIFO = "strict-fifo"


@dataclass(frozen=True, slots=True)
class BorrowWithinCohort:
    """While borrowing, a queue may preempt lower-priority jobs of other queues in its cohort,
    but only jobs whose priority is <= ``max_priority_threshold`` (None = no cap)."""

    policy: BorrowPolicy = BorrowPolicy.NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """One queue's configuration.

    Quantities are device counts per resource name. ``borrowing_limit`` and
    ``lending_limit`` map a resource to its limit; a resource absent from the map
    has no limit (unlimited borrowing; lends all of its unused nominal).
    ``starvation_after`` is in seconds (None = never reserve).
    ``max_gpus_per_user`` / ``max_running_jobs_per_user`` (Slurm's MaxTRESPerUser=gres/gpu and
    MaxJobsPerUser): the most devices (of any resource; a MIG device counts one) and jobs one user's
    jobs of this queue may hold at once (None = no limit); a job over either waits with a
    user-limit reason, never preempts, and never keeps other users' jobs waiting.
    """

    name: str
    nominal: Mapping[str, int] = field(default_factory=dict)
    cohort: str | None = None
    borrowing_limit: Mapping[str, int] = field(default_factory=dict)
    lending_limit: Mapping[str, int] = field(default_factory=dict)
    within_queue: WithinQueue = WithinQueue.NEVER
    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.NEVER
    borrow_within_cohort: BorrowWithinCohort = BorrowWithinCohort()
    queueing: Queueing = Queueing.BEST_EFFORT_FIFO
    starvation_after: float | None = None
    fair_weight: float = 1.0
    max_gpus_per_user: int | None = None
    max_running_jobs_per_user: int | None = None
    share_gpus: str = "none"
    share_with: tuple[str, ...] = ()


SHARE_GPUS = ("none", "queue", "user")
"""Allowed ``QueueSpec.share_gpus`` values (docs/sharing.md): ``none`` whole GPUs or MIG only (untrusted
tenants); ``queue`` a card may be shared with jobs of the same queue (and of queues both naming each other in
``share_with``); ``user`` only with the same user's jobs."""


@dataclass(frozen=True, slots=True)
class NodeGpuSharing:
    """One node's GPU sharing: ``shards_per_gpu`` time-sliced shards per card (0 = no shards), ``mps``
    whether its cards may run an MPS server (``--mps``)."""

    shards_per_gpu: int = 0
    mps: bool = False


@dataclass(frozen=True, slots=True)
class GpuSharing:
    """The cluster's ``[sharing]`` table: GPU sharing by shards (time-slicing) and MPS.

    ``shards_per_gpu`` (0 = off) is also the quota unit of a shard: one shard counts
    ``1/shards_per_gpu`` gpu against quota on every node, so a node override may turn shards off
    (0) but not change their number. ``mps`` allows ``--mps`` on every node; ``nodes`` maps a node
    name to its override.
    """

    shards_per_gpu: int = 0
    mps: bool = False
    nodes: Mapping[str, NodeGpuSharing] = field(default_factory=dict)

    def node(self, name: str) -> NodeGpuSharing:
        """``name``'s sharing: its override, else the cluster-wide values."""
        got = self.nodes.get(name)
        return got if got is not None else NodeGpuSharing(self.shards_per_gpu, self.mps)

    @property
    def enabled(self) -> bool:
        """True when any node may share a card."""
        if self.shards_per_gpu or self.mps:
            return True
        return bool(self.nodes) and any(n.shards_per_gpu or n.mps for n in self.nodes.values())


@dataclass(frozen=True, slots=True)
class CohortSpec:
    """One cohort of a cohort tree (Kueue's hierarchical cohorts).

    A cohort named by a queue or by another cohort's ``parent`` without a spec of its own is
    a root with no quota and weight 1. ``nominal`` is quota owned by the cohort itself and
    shared by its subtree; ``borrowing_limit`` / ``lending_limit`` (only with a ``parent``)
    bound what the subtree takes from, and lends to, the rest of the tree (absent resource =
    no limit). ``fair_weight`` (>= 0) divides its share under fair sharing.
    """

    name: str
    parent: str | None = None
    nominal: Mapping[str, int] = field(default_factory=dict)
    borrowing_limit: Mapping[str, int] = field(default_factory=dict)
    lending_limit: Mapping[str, int] = field(default_factory=dict)
    fair_weight: float = 1.0


class FairPreemption(str, enum.Enum):
    """Kueue's fair-sharing preemption strategies: the test a victim of another queue must pass."""

    LESS_THAN_OR_EQUAL_TO_FINAL_SHARE = "less-than-or-equal-to-final-share"
    LESS_THAN_INITIAL_SHARE = "less-than-initial-share"


DEFAULT_FAIR_PREEMPTION: tuple[FairPreemption, ...] = (
    FairPreemption.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,
    FairPreemption.LESS_THAN_INITIAL_SHARE,
)
"""Kueue's default strategy list; the only other allowed lists are each one alone."""


@dataclass(frozen=True, slots=True)
class AdmissionFairSharing:
    """Usage-based order inside a queue (Kueue's admission fair sharing).

    ``half_life``: seconds after which a tenant's usage history counts half;
    ``sampling_interval``: seconds between history updates (also scales the entry penalty).
    """

    half_life: float
    sampling_interval: float = 300.0


@dataclass(frozen=True, slots=True)
class SharingPolicy:
    """Cluster-wide sharing rules: ``fair_sharing`` (dominant resource share order and
    preemption), its ``fair_preemption`` strategies in the order tried, and optional
    ``admission`` fair sharing among a queue's tenants."""

    fair_sharing: bool = False
    fair_preemption: tuple[FairPreemption, ...] = DEFAULT_FAIR_PREEMPTION
    admission: AdmissionFairSharing | None = None


@dataclass(frozen=True, slots=True)
class TenantSpec:
    """A tenant of a queue (a user or group; Kueue's LocalQueue) for admission fair sharing.

    ``usage``: usage history at start, devices per resource (every device counts 1).
    """

    name: str
    queue: str
    fair_weight: float = 1.0
    usage: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupRequest:
    """One named group of a job of groups (``launcher/jobgroups.py``): ``request`` is the shape
    of the group's own ranks (its ``topology`` binds only them; ``min_workers`` is its floor)."""

    name: str
    request: JobRequest


@dataclass(slots=True)
class JobRequest:
    """What a job asks the scheduler for: a gang of ``workers`` ranks, each needing
    ``per_worker`` devices of ``resource``.

    A value, not changed after construction; equality and hash by fields (not ``frozen`` only for
    its cheaper ``__init__``; the hash, of the compared fields' tuple as a frozen dataclass's, is
    worked out once: requests are dict keys of the scheduler's memos, hashed every cycle).

    ``resource`` is ``"gpu"`` (then ``per_worker`` >= 1 full GPUs) or ``"mig-<profile>"``
    (then ``per_worker`` is 1: one MIG device per rank). ``gpu_model`` restricts to GPUs
    whose NVML name contains it (case-insensitive). ``nodes`` asks for exactly that many
    nodes (None = as few as fit). ``topology`` is a required closeness of the whole gang's
    devices: ``"nvlink"``, ``"pcie-switch"``, ``"numa"`` or ``"node"`` (each keeps the gang on
    one node; None = preferred, not required; ``docs/topology.md``). ``min_workers`` makes the
    gang elastic: it starts with as many ranks as can be placed now, never fewer than
    ``min_workers``, all or nothing at that size, never preempting to grow (None = exactly
    ``workers``).

    Host resources (``docs/host-resources.md``), counted per node against what its agent reports:
    ``cpus_per_task`` logical CPUs per rank (Slurm's ``-c``; 0 = not counted), ``mem`` bytes per
    node the gang uses (Slurm's ``--mem``; 0 = not counted), ``mem_per_gpu`` bytes per device of
    a rank (``--mem-per-gpu``; 0 = not counted; never both with ``mem``). ``exclusive`` takes whole
    nodes: it starts only on nodes nobody uses, and nobody else starts on them while it runs.

    A job of groups (``docs/job-groups.md``) has two or more ``groups``, admitted all or nothing;
    then ``workers`` is the number of ranks over all groups, the other shape fields are the first
    group's, and :attr:`total` sums the groups (every group's devices are of one ``resource``).
    ``colocate`` lists sets of group names whose ranks share one node. A one-group job has
    ``groups == ()``.
    A share of one card (docs/sharing.md; then ``workers`` = ``per_worker`` = 1, ``resource`` ``"gpu"``):
    ``shards`` time-sliced shards of a card (``--shards``; 0 = none), or ``mps`` percent of its SMs through
    MPS (``--mps``, 1..100; 0 = none), never both; ``gpu_mem`` the rank's device-memory budget in bytes
    (``--gpu-mem``; 0 = none).
    """

    workers: int = 1
    per_worker: int = 1
    resource: str = GPU
    gpu_model: str | None = None
    nodes: int | None = None
    topology: str | None = None
    min_workers: int | None = None
    cpus_per_task: int = 0
    mem: int = 0
    mem_per_gpu: int = 0
    exclusive: bool = False
    groups: tuple[GroupRequest, ...] = ()
    colocate: tuple[tuple[str, ...], ...] = ()
    shards: int = 0
    mps: int = 0
    gpu_mem: int = 0
    shared: bool = field(init=False, repr=False, compare=False)
    """True when the request is a share of one card (``shards`` or ``mps``), not whole devices: set once
    from them (the scheduler reads it hundreds of thousands of times a cycle at 1,000 nodes)."""

    host: bool = field(init=False, repr=False, compare=False)
    """True when the request counts host CPUs or memory or takes whole nodes: set once (as
    :attr:`shared`; read for every job a cycle tries)."""
    total: int = field(init=False, repr=False, compare=False)
    """Devices the whole gang needs (summed over its groups): set once (as :attr:`shared`; read by
    every quota fit and usage count)."""
    elastic: bool = field(init=False, repr=False, compare=False)
    """True when the gang may start with fewer than ``workers`` ranks (a job of groups: when some
    group may): set once (as :attr:`shared`)."""
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # derived from the fields, once: the request is a value, never changed after construction
        # (``replace`` builds a new one, and this runs again for it)
        object.__setattr__(self, "shared", bool(self.shards or self.mps))
        groups = self.groups
        if groups:
            host = any(g.request.host for g in groups)
            total = sum(g.request.workers * g.request.per_worker for g in groups)
            elastic = any(g.request.elastic for g in groups)
        else:
            host = bool(self.cpus_per_task or self.mem or self.mem_per_gpu or self.exclusive)
            total = self.workers * self.per_worker
            elastic = self.min_workers is not None and self.min_workers < self.workers
        self.host, self.total, self.elastic = host, total, elastic
        self._hash = hash(
            (
                self.workers,
                self.per_worker,
                self.resource,
                self.gpu_model,
                self.nodes,
                self.topology,
                self.min_workers,
                self.cpus_per_task,
                self.mem,
                self.mem_per_gpu,
                self.exclusive,
                self.groups,
                self.colocate,
                self.shards,
                self.mps,
                self.gpu_mem,
            )
        )

    def __hash__(self) -> int:
        """The hash of the compared fields' tuple (what ``unsafe_hash`` generates), worked out once."""
        return self._hash

    def rank_mem(self) -> int:
        """Bytes of host memory one rank takes through ``mem_per_gpu`` (0 when not counted)."""
        return self.per_worker * self.mem_per_gpu

    def at_size(self, workers: int) -> JobRequest:
        """This request with ``workers`` ranks and no minimum: an elastic gang at one size."""
        return replace(self, workers=workers, min_workers=None)

    def floor(self) -> JobRequest:
        """The smallest gang this request accepts (itself when not elastic; a job of groups:
        every group at its floor)."""
        if self.groups:
            if not self.elastic:
                return self
            floors = tuple(GroupRequest(g.name, g.request.floor()) for g in self.groups)
            return replace(self, groups=floors, workers=sum(g.request.workers for g in floors), min_workers=None)
        return self.at_size(self.min_workers) if self.elastic and self.min_workers is not None else self


JobState = _lifecycle_states.JobState
"""A job's life: defined by the lifecycle model (``launcher/lifecycle/states.py``), named here too."""
