"""Scenario files (format: ``docs/scenarios.md``): parsing and validation.

Every table is a pydantic model with ``extra="forbid"``, so an unknown key is an error
that names the key and lists the allowed ones, never silently ignored (a scenario that
uses a feature this build lacks must not pass). Cross-references (job → queue, priority
class names, job ids in expectations) are checked after parsing. :func:`load_scenario`
returns a :class:`Scenario` of plain model types, or raises :class:`ScenarioError`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from labgang.agent import tomlfile
from labgang.agent.mem_size import parse_mem
from labgang.launcher.config.limits import MAX_WORKERS
from labgang.launcher.config.queues import (
    AdmissionFairSharingModel,
    BorrowWithinCohortModel,
    CohortModel,
    FairPreemptionName,
    QueueModel,
    TenantModel,
    Whole,
    fair_preemption_problem,
    sharing_policy,
    shown,
    strict_int,
    tree_problems,
)
from labgang.launcher.config.sharing import MAX_SHARDS_PER_GPU, SharingModel, share_with_problems
from labgang.launcher.durations import DURATION_HELP, parse_duration
from labgang.launcher.lifecycle.group_policy import BadGroupPolicy, GroupPolicy, check_policy
from labgang.launcher.model import (
    GPU,
    MIG_PROFILE_RE,
    CohortSpec,
    GpuSharing,
    GroupRequest,
    JobRequest,
    QueueSpec,
    SharingPolicy,
    TenantSpec,
    is_valid_resource,
    mig_resource,
)
from labgang.launcher.scheduler.snapshot import Device, Node
from labgang.launcher.share_request import share_problem
from labgang.launcher.simulate.naming import JobIds, dependencies, job_ids
from labgang.launcher.simulate.node_events import NODE_TIMEOUT_S, NodeEventModel, event_problems
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

Feature = Literal[
    "borrow_within_cohort", "queueing_strategy", "fair_sharing", "hierarchical_cohorts", "admission_fair_sharing"
]
OPTIONAL_FEATURES = (
    "borrow_within_cohort",
    "queueing_strategy",
    "fair_sharing",
    "hierarchical_cohorts",
    "admission_fair_sharing",
)
"""Names allowed in ``[scenario] requires``."""
SUPPORTED_FEATURES = frozenset(OPTIONAL_FEATURES)


class ScenarioError(ValueError):
    """A scenario file is unreadable or breaks the format (``labgang simulate`` exits 2).

    Attributes:
        source: the file name.
        problems: one line per problem, each starting with the key path (``jobs[2].mig``).
        unreadable: True when the file could not be read as text at all (missing,
            unreadable, not UTF-8); ``problems`` then holds that one reason.
    """

    def __init__(self, source: str, problems: list[str], *, unreadable: bool = False) -> None:
        self.source = source
        self.problems = list(dict.fromkeys(problems))  # each problem once (a name listed twice, say)
        self.unreadable = unreadable
        super().__init__(f"{source}: " + "; ".join(problems))


MAX_SECONDS = 10 * 365 * 86400
"""Largest time a scenario key (``submit``, ``duration``, ``grace``, ``expect.at``) may hold: 10 years in seconds."""
SECONDS_HELP = f"{DURATION_HELP}; at most {MAX_SECONDS} s (10 years)"


def _seconds(value: object) -> object:
    """A time key's value: a number of seconds as is, or a duration string (``"10m"``, ``"1h30m"``);
    never a bool, never above :data:`MAX_SECONDS` (nor nan or infinity)."""
    if value is None:
        return value
    if isinstance(value, str):
        try:
            value = parse_duration(value)
        except ValueError:
            raise ValueError(f"{value!r} is not a duration; allowed: {DURATION_HELP}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{shown(value)} is not allowed; allowed: {SECONDS_HELP}")
    if not value <= MAX_SECONDS:  # also nan
        raise ValueError(f"{shown(value)} is not allowed; allowed: {SECONDS_HELP}")
    return value


Seconds = Annotated[float, BeforeValidator(_seconds)]
"""Seconds, written as a number or as a duration string such as ``"10m"`` (``launcher/durations.py``)."""
OptionalSeconds = Annotated[float | None, BeforeValidator(_seconds)]
"""Seconds or None."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _profile(value: str) -> str:
    if not MIG_PROFILE_RE.match(value):
        raise ValueError(f"{value!r} is not a MIG profile; allowed: like '1g.10gb', '3g.40gb', '1c.3g.71gb'")
    return value


class ScenarioMeta(_Strict):
    """``[scenario]``: name, description, source, optional features it needs."""

    name: str
    description: str = ""
    source: str = ""
    requires: list[Feature] = []
    fair_sharing: bool = False
    fair_preemption: list[FairPreemptionName] | None = None
    admission_fair_sharing: AdmissionFairSharingModel | None = None
    node_timeout: Seconds = Field(default=NODE_TIMEOUT_S, gt=0)


MAX_NODE_GPUS = 1024
"""Most GPUs one scenario node may have (abstract nodes translated from Kueue tests hold 200)."""
MAX_MIG_PER_GPU = 7
"""Most MIG devices one GPU splits into (seven 1g instances on an A100 or H100)."""
MAX_NODES = 4096
"""Most ``[[nodes]]`` in one file."""
MAX_GPUS = 65_536
"""Most devices' parent GPUs in one file, all nodes together: bounds the simulation's memory."""
MAX_JOBS = 100_000
"""Most ``[[jobs]]`` in one file."""


def _between(low: int, high: int) -> AfterValidator:
    """A bound on an integer key that reads ``must be low..high, got N``."""

    def check(value: int | None) -> int | None:
        if value is not None and not low <= value <= high:
            raise ValueError(f"must be {low}..{high}, got {value}")
        return value

    return AfterValidator(check)


def _whole(low: int, high: int) -> BeforeValidator:
    """Only a whole number (never ``true`` or ``"3"``) for a key bounded by :func:`_between`."""
    return strict_int(f"a whole number {low}..{high}")


def _not_bool(value: object) -> object:
    if isinstance(value, bool):
        raise ValueError(f"{shown(value)} is not allowed; allowed: a whole number or a priority class name")
    return value


class NodeModel(_Strict):
    """``[[nodes]]``: ``gpus`` full GPUs, or with ``mig`` each GPU split into these MIG devices;
    ``cpus`` and ``memory`` (a size such as ``"256G"``) are the host CPUs and memory offered to
    jobs (after the agent's reserve; absent: not counted on this node, docs/host-resources.md)."""

    name: str = Field(min_length=1)
    gpus: Annotated[int, _whole(1, MAX_NODE_GPUS), _between(1, MAX_NODE_GPUS)]
    model: str = ""
    mig: list[str] | None = None
    cpus: Annotated[int | None, _whole(0, 1 << 16), _between(0, 1 << 16)] = None
    memory: str | None = None

    @field_validator("memory")
    @classmethod
    def _memory(cls, v: str | None) -> str | None:
        if v is not None:
            parse_mem(v, zero=True)
        return v

    @field_validator("mig")
    @classmethod
    def _mig(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and len(v) > MAX_MIG_PER_GPU:
            raise ValueError(f"at most {MAX_MIG_PER_GPU} MIG devices per GPU, got {len(v)}")
        return None if v is None else [_profile(p) for p in v]


class GroupModel(_Strict):
    """``[[jobs.groups]]``: one group of a job of groups (docs/job-groups.md): ``workers`` ranks
    of ``gpus_per_worker`` GPUs each (0: ranks with no device, such as an MPI launcher) or one
    ``mig`` device each, on exactly ``nodes`` nodes (unset: as few as fit), optionally ``model``,
    a required ``topology`` among the group's own ranks, and host requests per rank."""

    name: str | None = Field(default=None, min_length=1)
    workers: Annotated[int, _whole(1, MAX_WORKERS), _between(1, MAX_WORKERS)] = 1
    gpus_per_worker: Annotated[int | None, _whole(0, MAX_NODE_GPUS), _between(0, MAX_NODE_GPUS)] = None
    mig: str | None = None
    nodes: Annotated[int | None, _whole(1, MAX_WORKERS), _between(1, MAX_WORKERS)] = None
    model: str | None = Field(default=None, min_length=1)
    topology: Literal["nvlink", "pcie-switch", "numa", "node"] | None = None
    cpus_per_task: Annotated[int, _whole(0, 1 << 16), _between(0, 1 << 16)] = 0
    mem: str | None = None
    mem_per_gpu: str | None = None
    duration: OptionalSeconds = Field(default=None, ge=0)  # the group's ranks' run time (unset: the job's)

    @field_validator("mem", "mem_per_gpu")
    @classmethod
    def _mem(cls, v: str | None) -> str | None:
        if v is not None:
            parse_mem(v)
        return v

    @field_validator("mig")
    @classmethod
    def _mig(cls, v: str | None) -> str | None:
        return None if v is None else _profile(v)

    def request(self) -> JobRequest:
        """The group's own ranks as a :class:`JobRequest`."""
        resource, per = (mig_resource(self.mig), 1) if self.mig is not None else (GPU, self.gpus_per_worker)
        return JobRequest(
            workers=self.workers,
            per_worker=1 if per is None else per,
            resource=resource,
            gpu_model=self.model,
            nodes=self.nodes,
            topology=self.topology,
            cpus_per_task=self.cpus_per_task,
            mem=0 if self.mem is None else parse_mem(self.mem),
            mem_per_gpu=0 if self.mem_per_gpu is None else parse_mem(self.mem_per_gpu),
        )


def groups_request(groups: list[GroupModel], colocate: list[list[str]] | None) -> JobRequest:
    """The :class:`JobRequest` of a job of groups (default names ``g0``, ``g1``, …)."""
    named = tuple(GroupRequest(g.name or f"g{i}", g.request()) for i, g in enumerate(groups))
    device = [g.request for g in named if g.request.per_worker > 0]
    first = named[0].request
    return JobRequest(
        workers=sum(g.request.workers for g in named),
        per_worker=first.per_worker,
        resource=device[0].resource if device else GPU,
        gpu_model=first.gpu_model,
        nodes=first.nodes,
        topology=first.topology,
        cpus_per_task=first.cpus_per_task,
        mem=first.mem,
        mem_per_gpu=first.mem_per_gpu,
        groups=named,
        colocate=tuple(tuple(c) for c in colocate or ()),
    )


def group_problems(where: str, groups: list[GroupModel], colocate: list[list[str]] | None) -> list[str]:
    """What is wrong with a job's ``groups`` and ``colocate`` (empty when nothing)."""
    out = []
    names = [g.name or f"g{i}" for i, g in enumerate(groups)]
    for i, g in enumerate(groups):
        if g.mig is not None and g.gpus_per_worker is not None:
            out.append(f"{where}.groups[{i}]: give either gpus_per_worker or mig, not both")
        if g.nodes is not None and g.nodes > g.workers:
            out.append(f"{where}.groups[{i}].nodes: {g.nodes} nodes for {g.workers} ranks; allowed: 1..{g.workers}")
        if g.topology is not None and g.nodes not in (None, 1):
            out.append(f"{where}.groups[{i}].topology: keeps the group on one node; nodes must be 1 or unset")
    seen = set()
    for n in names:
        if n in seen:
            out.append(f"{where}.groups: group name {n!r} appears twice; allowed: distinct names")
        seen.add(n)
    resources = {mig_resource(g.mig) if g.mig else GPU for g in groups if g.mig or g.gpus_per_worker != 0}
    if len(resources) > 1:
        out.append(f"{where}.groups: every group's devices must be of one kind; got {', '.join(sorted(resources))}")
    if not resources:
        out.append(f"{where}.groups: no group asks for a device; allowed: at least one group with gpus or mig")
    for c in colocate or ():
        for n in c:
            if n not in names:
                out.append(f"{where}.colocate: unknown group {n!r}; allowed: {', '.join(names)}")
        if len(c) < 2:
            out.append(f"{where}.colocate: {c} names one group; allowed: two or more group names")
    for i, g in enumerate(groups):
        if any(names[i] in c for c in colocate or ()) and g.nodes not in (None, 1):
            out.append(f"{where}.groups[{i}].nodes: a colocated group is on one node; nodes must be 1 or unset")
    return out


class JobModel(_Strict):
    """``[[jobs]]``: a gang, when it arrives, how long it runs.

    Extensions (docs/scenarios.md, "Arrays and dependencies"): ``array`` makes it a job array
    (``--array``'s syntax; ``durations`` then gives each task its own run time, in task order),
    ``dependency`` is ``--dependency``'s grammar over scenario ids, and
    ``name`` is the job name ``singleton`` groups by (default: the ``id``). ``hold`` submits it
    held (``labgang submit --hold``) and ``release`` is when it is released (``labgang release``;
    none: never).

    ``begin`` is ``--begin``: the scheduler does not admit it before that time (seconds, as
    ``submit``; pending reason ``begin_time`` until then).

    ``nodes`` asks for exactly that many nodes (docs/queue-semantics.md §R; ranks
    spread evenly); ``model`` restricts it to GPUs whose node ``model`` contains the text
    (case-insensitive), as a submission's GPU model constraint does. ``time_limit`` is
    ``--time``: a gang still running that long after its start is stopped (its ``grace``) and
    ends TIMEOUT, as in the coordinator.

    ``groups`` makes it a job of groups (docs/job-groups.md), each group with its own shape;
    then the job's own shape keys (``workers``, ``gpus_per_worker``, ``mig``, ``nodes``,
    ``model``, ``min_workers`` and the host keys) stay unset. ``colocate`` lists sets of group
    names whose ranks share one node.
    """

    id: str = Field(min_length=1)
    queue: str
    workers: Annotated[int, _whole(1, MAX_WORKERS), _between(1, MAX_WORKERS)] = 1
    gpus_per_worker: Annotated[int | None, _whole(1, MAX_NODE_GPUS), _between(1, MAX_NODE_GPUS)] = (
        None  # a rank lives on one node
    )
    mig: str | None = None
    priority: Annotated[int | str, BeforeValidator(_not_bool)] = 0
    submit: Seconds = 0.0
    duration: OptionalSeconds = Field(default=None, ge=0)
    time_limit: OptionalSeconds = Field(default=None, gt=0)
    durations: list[Annotated[float, BeforeValidator(_seconds), Field(ge=0)]] | None = None
    grace: Seconds = Field(default=0.0, ge=0)
    running: bool = False
    nodes: Annotated[int | None, _whole(1, MAX_WORKERS), _between(1, MAX_WORKERS)] = None
    model: str | None = Field(default=None, min_length=1)
    tenant: str | None = Field(default=None, min_length=1)
    user: str = Field(default="sim", min_length=1)
    min_workers: Annotated[int | None, _whole(1, MAX_WORKERS), _between(1, MAX_WORKERS)] = None
    name: str | None = Field(default=None, min_length=1)
    array: str | None = None
    dependency: str | None = None
    begin: OptionalSeconds = Field(default=None, ge=0)
    hold: bool = False
    release: OptionalSeconds = None
    cpus_per_task: Annotated[int, _whole(0, 1 << 16), _between(0, 1 << 16)] = 0
    mem: str | None = None
    mem_per_gpu: str | None = None
    exclusive: bool = False
    groups: list[GroupModel] | None = Field(default=None, min_length=2, max_length=16)
    colocate: list[list[str]] | None = None
    success_policy: str | None = None  # as --success-policy: all, any or group:NAME
    shards: Annotated[int, _whole(0, MAX_SHARDS_PER_GPU), _between(0, MAX_SHARDS_PER_GPU)] = 0
    mps: Annotated[int, _whole(0, 100), _between(0, 100)] = 0
    gpu_mem: str | None = None
    requeue: bool = True

    @field_validator("mem", "mem_per_gpu", "gpu_mem")
    @classmethod
    def _mem(cls, v: str | None) -> str | None:
        if v is not None:
            parse_mem(v)
        return v

    @field_validator("mig")
    @classmethod
    def _mig(cls, v: str | None) -> str | None:
        return None if v is None else _profile(v)

    @model_validator(mode="after")
    def _min_workers(self) -> JobModel:
        if self.colocate is not None and self.groups is None:
            raise ValueError("colocate names groups: it needs groups")
        if self.groups is not None:
            shape = ("workers", "gpus_per_worker", "mig", "nodes", "model", "min_workers", "cpus_per_task", "mem")
            given = [k for k in (*shape, "mem_per_gpu", "exclusive") if k in self.model_fields_set]
            if given:
                raise ValueError(f"with groups, give the shape in each group, not at the job: {', '.join(given)}")
        if self.min_workers is not None and self.min_workers > self.workers:
            raise ValueError(f"min_workers ({self.min_workers}) must be <= workers ({self.workers})")
        if self.release is not None and not self.hold:
            raise ValueError("release is when a held job is released: it needs hold = true")
        if self.release is not None and self.release < max(0.0, self.submit):
            raise ValueError(f"release ({self.release:g}) must not be before the job is submitted ({self.submit:g})")
        if self.hold and self.running:
            raise ValueError("a running job cannot be held: hold is for a job submitted pending (running = false)")
        if self.mem is not None and self.mem_per_gpu is not None:
            raise ValueError("mem (per node) and mem_per_gpu exclude each other: give one")
        problem = share_problem(
            self.shards, self.mps, self.workers, self.gpus_per_worker or 1, self.mig, exclusive=self.exclusive
        )
        if problem is not None:
            raise ValueError(problem)
        if self.running and (self.shards or self.mps):
            raise ValueError("running = true places whole devices; submit a share of a gpu pending")
        return self

    def _host(self) -> dict[str, Any]:
        return {
            "cpus_per_task": self.cpus_per_task,
            "mem": 0 if self.mem is None else parse_mem(self.mem),
            "mem_per_gpu": 0 if self.mem_per_gpu is None else parse_mem(self.mem_per_gpu),
            "exclusive": self.exclusive,
        }

    def _share(self) -> dict[str, Any]:
        return {
            "shards": self.shards,
            "mps": self.mps,
            "gpu_mem": 0 if self.gpu_mem is None else parse_mem(self.gpu_mem),
        }

    def request(self) -> JobRequest:
        """The scheduler's :class:`JobRequest`."""
        if self.groups is not None:
            return groups_request(self.groups, self.colocate)
        if self.mig is not None:
            return JobRequest(
                workers=self.workers,
                per_worker=1,
                resource=mig_resource(self.mig),
                gpu_model=self.model,
                nodes=self.nodes,
                min_workers=self.min_workers,
                **self._host(),
            )
        return JobRequest(
            workers=self.workers,
            per_worker=self.gpus_per_worker or 1,
            resource=GPU,
            gpu_model=self.model,
            nodes=self.nodes,
            min_workers=self.min_workers,
            **self._host(),
            **self._share(),
        )


class ExpectModel(_Strict):
    """``[[expect]]``: what must hold at ``at`` (absent: once no event is left)."""

    at: OptionalSeconds = None
    running: list[str] | None = None
    pending: list[str] | None = None
    finished: list[str] | None = None
    preempted: list[str] | None = None
    not_preempted: list[str] | None = None
    started: dict[str, Whole] | None = None
    cancelled: list[str] | None = None


class InvariantModel(_Strict):
    """``[[invariant]]``: checked after every event."""

    max_usage: dict[str, str | int] | None = None
    no_partial_gangs: bool = False

    @field_validator("max_usage")
    @classmethod
    def _max_usage(cls, v: dict[str, str | int] | None) -> dict[str, str | int] | None:
        if v is None:
            return v
        if not isinstance(v.get("queue"), str):
            raise ValueError('needs queue = "<name>" and one or more <resource> = <count>')
        for key, n in v.items():
            if key == "queue":
                continue
            if not is_valid_resource(key):
                raise ValueError(f"unknown key {key!r}; allowed: queue, gpu, mig-<profile>")
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise ValueError(f"{key} must be an integer >= 0")
        return v


class ScenarioFile(_Strict):
    """A whole scenario file."""

    scenario: ScenarioMeta
    nodes: list[NodeModel] = Field(min_length=1)
    priority_classes: dict[str, Whole] = {}
    cohorts: list[CohortModel] = []
    queues: list[QueueModel] = Field(min_length=1)
    tenants: list[TenantModel] = []
    jobs: list[JobModel] = []
    expect: list[ExpectModel] = []
    invariant: list[InvariantModel] = []
    sharing: SharingModel = SharingModel()
    events: list[NodeEventModel] = []


@dataclass(frozen=True)
class Scenario:
    """A validated scenario, ready to simulate.

    Attributes:
        source: file name (for messages).
        file: the parsed file.
        nodes: the simulated cluster, devices with stable fake UUIDs.
        queues: queue specs in file order.
        priorities: each job's integer priority, by job id.
        cohorts: cohort specs in file order.
        sharing: fair sharing and admission fair sharing settings.
        tenants: tenants (admission fair sharing) in file order.
        ids: every job (array tasks one by one) under its name and the coordinator's id.
        dependencies: ``[[jobs]]`` index -> its ``dependency`` in the coordinator's ids.
        gpu_sharing: the ``[sharing]`` table (shards and MPS per node; docs/sharing.md).
    """

    source: str
    file: ScenarioFile
    nodes: tuple[Node, ...]
    queues: tuple[QueueSpec, ...]
    priorities: dict[str, int]
    cohorts: tuple[CohortSpec, ...] = ()
    sharing: SharingPolicy = field(default_factory=SharingPolicy)
    tenants: tuple[TenantSpec, ...] = ()
    ids: JobIds = field(default_factory=JobIds)
    dependencies: dict[int, str] = field(default_factory=dict)
    gpu_sharing: GpuSharing = field(default_factory=GpuSharing)

    @property
    def has_checks(self) -> bool:
        """True when the file states expectations or invariants."""
        return bool(self.file.expect or self.file.invariant)


def build_nodes(nodes: list[NodeModel]) -> tuple[Node, ...]:
    """Devices for each node: ``GPU-<node>-<i>`` full GPUs, or for MIG nodes
    ``MIG-<node>-<i>-<k>`` devices grouped by their parent GPU."""
    out = []
    for n in nodes:
        devs: list[Device] = []
        for i in range(n.gpus):
            if n.mig:
                parent = f"GPU-{n.name}-{i}"
                devs += [
                    Device(f"MIG-{n.name}-{i}-{k}", n.name, mig_resource(p), n.model, parent)
                    for k, p in enumerate(n.mig)
                ]
            else:
                devs.append(Device(f"GPU-{n.name}-{i}", n.name, GPU, n.model, ""))
        memory = None if n.memory is None else parse_mem(n.memory, zero=True)
        out.append(Node(n.name, tuple(devs), cpus=n.cpus, memory=memory))
    return tuple(out)


def _loc(loc: tuple[Any, ...], data: dict[str, Any]) -> str:
    text = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            text += f"[{part}]"
            # name the job, queue or node: easier to find than an index
            if i == 1 and loc[0] in ("jobs", "queues", "nodes", "cohorts", "tenants"):
                try:
                    ident = data[loc[0]][part].get("id" if loc[0] == "jobs" else "name")
                except (KeyError, IndexError, AttributeError, TypeError):
                    ident = None
                if ident is not None:
                    text += f" ({ident!r})"
        else:
            text += ("." if text else "") + str(part)
    return text


def _model_for(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] = ScenarioFile
    table: dict[str, type[BaseModel]] = {
        "scenario": ScenarioMeta,
        "nodes": NodeModel,
        "queues": QueueModel,
        "cohorts": CohortModel,
        "tenants": TenantModel,
        "jobs": JobModel,
        "expect": ExpectModel,
        "invariant": InvariantModel,
        "events": NodeEventModel,
    }
    keys = [p for p in loc[:-1] if isinstance(p, str)]
    for k in keys:
        if model is JobModel and k == "groups":
            model = GroupModel
        elif model is ScenarioFile and k in table:
            model = table[k]
        elif model is QueueModel and k == "borrow_within_cohort":
            model = BorrowWithinCohortModel
        elif model is ScenarioMeta and k == "admission_fair_sharing":
            model = AdmissionFairSharingModel
        else:
            return None
    return model


def describe_errors(exc: ValidationError, data: dict[str, Any]) -> list[str]:
    """One line per pydantic error, naming the key path and the allowed keys or values."""
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p in ("int", "str", "list[str]", "literal")))
        where = _loc(loc, data) or "file"
        if err["type"] == "extra_forbidden":
            model = _model_for(loc)
            allowed = ", ".join(model.model_fields) if model else "see docs/scenarios.md"
            lines.append(f"{where}: unknown key {loc[-1]!r}; allowed keys: {allowed}")
        elif err["type"] == "missing":
            lines.append(f"{where}: required key is missing")
        else:
            lines.append(f"{where}: {err['msg'].removeprefix('Value error, ')}")
    return sorted(set(lines), key=lines.index)


def _sizes(data: dict[str, Any]) -> list[str]:
    """Problems with the file's size (node and job counts, GPUs in all), found before any table is validated."""
    problems = []
    nodes, jobs = data.get("nodes"), data.get("jobs")
    if isinstance(nodes, list) and len(nodes) > MAX_NODES:
        problems.append(f"nodes: {len(nodes)} nodes; must be at most {MAX_NODES}")
    elif isinstance(nodes, list):
        gpus = [n.get("gpus") for n in nodes if isinstance(n, dict)]
        total = sum(g for g in gpus if isinstance(g, int) and 1 <= g <= MAX_NODE_GPUS)
        if total > MAX_GPUS:
            problems.append(f"nodes: {total} GPUs in all; must be at most {MAX_GPUS}")
    if isinstance(jobs, list) and len(jobs) > MAX_JOBS:
        problems.append(f"jobs: {len(jobs)} jobs; must be at most {MAX_JOBS}")
    return problems


def parse_scenario(data: dict[str, Any], source: str = "<scenario>") -> Scenario:
    """Validate a decoded TOML document.

    Raises:
        ScenarioError: any unknown key, bad value, dangling reference, a lending limit
            above the queue's nominal quota, or an unsupported feature (``fair_sharing``).
    """
    sizes = _sizes(data)
    if sizes:
        raise ScenarioError(source, sizes)
    try:
        f = ScenarioFile.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError(source, describe_errors(exc, data)) from None
    problems: list[str] = []
    meta = f.scenario
    for feat in meta.requires:
        if feat not in SUPPORTED_FEATURES:
            problems.append(
                f"scenario.requires: feature {feat!r} is not supported by this build; "
                f"supported: {', '.join(sorted(SUPPORTED_FEATURES))}"
            )
    problem = fair_preemption_problem(meta.fair_preemption, meta.fair_sharing, "scenario.fair_preemption")
    if problem:
        problems.append(problem)
    if f.tenants and meta.admission_fair_sharing is None:
        problems.append("tenants: only allowed with scenario.admission_fair_sharing")
    _unique(problems, "nodes", [n.name for n in f.nodes])
    problems.extend(event_problems(f.events, [n.name for n in f.nodes]))
    problems.extend(share_with_problems([(i, q.model_dump()) for i, q in enumerate(f.queues)]))
    _unique(problems, "queues", [q.name for q in f.queues])
    _unique(problems, "jobs", [j.id for j in f.jobs])
    problems.extend(tree_problems(f.queues, f.cohorts, f.tenants))
    queues = {q.name: q for q in f.queues}
    tenants = {t.name: t for t in f.tenants}
    priorities: dict[str, int] = {}
    for i, j in enumerate(f.jobs):
        where = f"jobs[{i}] ({j.id!r})"
        if j.queue not in queues:
            problems.append(f"{where}.queue: unknown queue {j.queue!r}; allowed: {', '.join(queues)}")
        if j.mig is not None and j.gpus_per_worker is not None:
            problems.append(f"{where}: give either gpus_per_worker or mig, not both")
        if j.groups is not None:
            problems.extend(group_problems(where, j.groups, j.colocate))
        if j.success_policy is not None:
            names = [g.name or f"g{k}" for k, g in enumerate(j.groups or [])] or ["g0"]
            try:
                check_policy(GroupPolicy(success=j.success_policy), names)
            except BadGroupPolicy as exc:
                problems.append(f"{where}.success_policy: {exc}")
        if j.tenant is not None:
            tenant = tenants.get(j.tenant)
            if meta.admission_fair_sharing is None:
                problems.append(f"{where}.tenant: only allowed with scenario.admission_fair_sharing")
            elif tenant is None:
                problems.append(
                    f"{where}.tenant: unknown tenant {j.tenant!r}; allowed: {', '.join(tenants) or '(none)'}"
                )
            elif tenant.queue != j.queue:
                problems.append(
                    f"{where}.tenant: tenant {j.tenant!r} belongs to queue {tenant.queue!r}, not {j.queue!r}"
                )
        if isinstance(j.priority, str):
            if j.priority not in f.priority_classes:
                problems.append(
                    f"{where}.priority: unknown priority class {j.priority!r}; allowed: an integer "
                    f"or one of {', '.join(f.priority_classes) or '(none defined)'}"
                )
            priorities[j.id] = f.priority_classes.get(j.priority, 0)
        else:
            priorities[j.id] = j.priority
    job_names, id_problems = job_ids(f.jobs, lambda i: f"jobs[{i}] ({f.jobs[i].id!r})")
    # a job whose id another job already has was named once above ("duplicate name"): not again
    seen: set[str] = set()
    again: list[str] = []
    for i, j in enumerate(f.jobs):
        if j.id in seen:
            again.append(f"jobs[{i}] (")
        seen.add(j.id)
    problems.extend(p for p in id_problems if not p.startswith(tuple(again)))
    if len(job_names.tasks) > MAX_JOBS:
        problems.append(f"jobs: {len(job_names.tasks)} jobs with array tasks; must be at most {MAX_JOBS}")
    depends, dep_problems = dependencies(job_names, f.jobs, lambda i: f"jobs[{i}] ({f.jobs[i].id!r})")
    problems.extend(dep_problems)
    for i, j in enumerate(f.jobs):
        if j.array is not None and j.running:
            problems.append(f"jobs[{i}] ({j.id!r}).array: not allowed with running = true")
        if j.durations is not None:
            tasks = sum(1 for t in job_names.tasks if t.index == i)
            if j.array is None:
                problems.append(f"jobs[{i}] ({j.id!r}).durations: only allowed with array; use duration")
            elif j.duration is not None:
                problems.append(f"jobs[{i}] ({j.id!r}).durations: give either duration or durations, not both")
            elif len(j.durations) != tasks:
                problems.append(
                    f"jobs[{i}] ({j.id!r}).durations: {len(j.durations)} run times for {tasks} array tasks; "
                    "allowed: one per task, in task order"
                )
    for i, e in enumerate(f.expect):
        for key in ("running", "pending", "finished", "preempted", "not_preempted", "started", "cancelled"):
            for name in getattr(e, key) or ():
                if not job_names.members(name):
                    problems.append(
                        f"expect[{i}].{key}: unknown job {name!r}; allowed: a job id, an array's id "
                        "(all its tasks) or one task as NAME_INDEX"
                    )
    for i, inv in enumerate(f.invariant):
        if inv.max_usage is not None and inv.max_usage["queue"] not in queues:
            problems.append(
                f"invariant[{i}].max_usage.queue: unknown queue {inv.max_usage['queue']!r}; "
                f"allowed: {', '.join(queues)}"
            )
    if problems:
        raise ScenarioError(source, problems)
    if not depends and not any(j.hold for j in f.jobs):
        job_names.use_names()  # no numbering the lifecycle reads: its ids are the file's names
    return Scenario(
        source,
        f,
        build_nodes(f.nodes),
        tuple(q.to_spec() for q in f.queues),
        priorities,
        tuple(c.to_spec() for c in f.cohorts),
        sharing_policy(meta.fair_sharing, meta.fair_preemption, meta.admission_fair_sharing),
        tuple(t.to_spec() for t in f.tenants),
        job_names,
        depends,
        f.sharing.to_spec(),
    )


def _unique(problems: list[str], table: str, names: list[str]) -> None:
    seen: set[str] = set()
    for i, n in enumerate(names):
        if n in seen:
            problems.append(f"{table}[{i}]: duplicate name {n!r}")
        seen.add(n)


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate one scenario file.

    Raises:
        ScenarioError: the file is missing or unreadable, not UTF-8 text, not TOML, or not a
            valid scenario.
    """
    p = Path(path)
    try:
        data = tomlfile.read_toml(p)
    except tomlfile.TomlFileError as exc:
        raise ScenarioError(exc.path, [exc.reason], unreadable=not exc.syntax) from None
    return parse_scenario(data, str(p))
