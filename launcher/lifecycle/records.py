"""The job and rank records the lifecycle model changes and the store persists.

:class:`JobRecord` = the submitted :class:`JobSpec` (never changes), the mutable
:class:`JobStatus`, the current attempt's :class:`RankRecord` per rank, and the history lines
of the job that are in memory. Plain dataclasses: no I/O; ``launcher/coordinator/store.py`` writes them
to SQLite and reads them back.

:class:`JobStatus` and :class:`RankRecord` count the changes made to them (:class:`CountsChanges`),
so a cache of a view of a job (``launcher/coordinator/view_cache.py``) can tell that it is stale
with one comparison, whichever rule wrote which field, without any rule having to say so.
"""

from __future__ import annotations

import json
import math
import signal as signal_mod
from dataclasses import asdict, dataclass, field
from operator import attrgetter, is_
from typing import Any

from labgang.launcher.jobgroups import GroupSpec, RankGroup, default_group_name, rank_group
from labgang.launcher.lifecycle.attempts import AttemptRecord
from labgang.launcher.lifecycle.group_policy import GroupPolicy
from labgang.launcher.lifecycle.states import EndIntent, JobState, RankPhase
from labgang.launcher.model import GroupRequest, JobRequest
from labgang.launcher.scheduler.decisions import NoPreemption

_UNSET = object()


class CountsChanges:
    """A base for the mutable records: ``changes`` counts the writes that changed a field's value.

    Every attribute write goes through :meth:`__setattr__`, so no write can be missed, wherever it
    is made. A write of an equal value of the same type (a cycle setting a pending job's reason to
    the same message again) is not a change; the fields set while the object is built count too.
    Compare ``changes`` together with the object's identity: a replaced object starts again from 0.
    """

    changes: int = 0
    """How many writes changed a value since the object was built (not a dataclass field: it is
    neither persisted nor compared)."""

    def __setattr__(self, name: str, value: Any) -> None:
        fields = self.__dict__
        old = fields.get(name, _UNSET)
        if old is _UNSET:
            # the object being built, or a name that is no field (a property refuses it as usual)
            object.__setattr__(self, name, value)
        else:
            # a field: a plain value in the instance dict, written straight there (the hot path:
            # every cycle writes the reason message of each pending job, mostly the same again)
            fields[name] = value
            if old is value or (old == value and type(old) is type(value)):
                return
        fields["changes"] = fields.get("changes", 0) + 1  # not through __setattr__: no recursion


DEFAULT_UMASK = 0o022
"""The umask of a job whose submission did not carry one (a client or a store from before it did):
the usual login default, group and others may read (docs/slurm.md, "The umask")."""


@dataclass(frozen=True)
class ArrayTask:
    """Which task of which job array a job is (docs/arrays.md).

    ``array_id`` is the array's id (the sequence number of its first task); the job's own id is
    ``"{array_id}_{index}"``. ``count``, ``low``, ``high`` and ``step`` describe the whole array
    (``SLURM_ARRAY_TASK_COUNT``/``_MIN``/``_MAX``/``_STEP``); ``limit`` is its ``%N`` cap on tasks
    holding devices at once (None = no cap).
    """

    array_id: str
    index: int
    count: int
    low: int
    high: int
    step: int = 1
    limit: int | None = None


class _RequestMemo:
    """The slots :attr:`JobSpec.request` keeps the request it built in: not dataclass fields, so
    neither in the spec row nor compared, shown or copied by ``dataclasses.replace`` (a replaced
    spec builds its own). Unset until the request is first asked for."""

    __slots__ = ("_group_request", "_one_request_memo")
    _group_request: JobRequest
    _one_request_memo: tuple[tuple[object, ...], JobRequest]


@dataclass(slots=True)
class JobSpec(_RequestMemo):
    """What the user submitted. Only ``labgang update`` changes it, and only by replacing the
    whole object (``dataclasses.replace``): caches of a job's views compare the spec by identity.

    Slotted: with its 46 fields an instance dict would be a second object per job, made at every
    build (CPython 3.11 keeps at most 30 attribute values in the object itself), that the
    collector tracks as long as the job lives.

    Times are seconds; ``signal`` is ``"SIGUSR1@60"`` (signal 60 s before the time limit) or None.
    ``topology`` is a required topology level or None; ``cpu_bind`` is ``"numa"`` (pin each rank
    to its GPUs' NUMA node CPUs) or ``"none"`` (docs/topology.md). ``min_workers`` makes the gang
    elastic (``JobRequest.min_workers``); the size it started with is ``len(ranks)``.
    ``dependency`` is the canonical ``--dependency`` text (``lifecycle/dependency.py``) or None.
    ``array`` says which task of a job array this job is (None for a job of its own).
    ``begin_time`` (unix seconds; simulated seconds in ``labgang simulate``) is ``--begin``: the
    scheduler never admits the job before it (pending reason ``begin_time``); None = at once.
    ``output``/``error`` are the ``--output``/``--error`` file name patterns as given
    (``launcher/output_pattern.py``), or None.
    ``mail_type`` are the notifications it asked for (``launcher/config/notify.py``: BEGIN, END, FAIL,
    REQUEUE) and ``mail_user`` whom a mail goes to (None: its user). ``stdin`` is rank 0's
    standard input, base64 (``labgang run``'s; None: ``/dev/null``); ``pty``: rank 0 runs on a
    pseudo-terminal fed by ``POST /v1/jobs/{id}/pty`` (``labgang run --pty``); ``stdin_stream``:
    rank 0's standard input is streamed by ``POST /v1/jobs/{id}/stdin`` (``labgang run``'s own, with
    backpressure; the first attempt only: a restarted rank 0 reads ``/dev/null``).
    ``cpus_per_task``, ``mem`` (bytes per node), ``mem_per_gpu`` (bytes) and ``exclusive`` are the
    host requests (``JobRequest``'s fields of those names; 0/False: not counted).
    ``groups`` (``launcher/jobgroups.py``) are the groups of a job of two or more groups, ``()``
    for a one-group job; with groups, ``workers`` is the number of ranks over all of them, the
    other shape fields and ``argv`` are the first group's, ``env`` is the job's environment (each
    group's ``env`` goes on top) and ``colocate`` lists sets of group names that share a node.
    ``success_policy``, ``failure_policy``, ``max_restarts`` and ``startup_order`` are the
    lifecycle policies (``launcher/lifecycle/group_policy.py``; :attr:`group_policy`), stored
    only when not the defaults (a plain gang's: ``all``, ``fail``, 0, none). ``shards``, ``mps``
    (percent) and ``gpu_mem`` (bytes) ask for a share of one GPU (``--shards``/``--mps``/``--gpu-mem``;
    0: none; docs/sharing.md). ``attached``: submitted by ``labgang run`` (without ``--requeue``),
    which follows it: not requeued when its ``run`` is gone (stored only when true).
    ``umask`` is the submitter's file mode creation mask (``0`` to ``0o777``), which every rank's
    process gets before its command runs, as Slurm passes ``SLURM_UMASK`` on; a spec stored before
    it existed reads as :data:`DEFAULT_UMASK`.
    """

    name: str
    user: str
    uid: int
    gid: int | None
    queue: str
    priority: int
    workers: int
    per_worker: int
    resource: str
    gpu_model: str | None
    nodes: int | None
    argv: list[str]
    env: dict[str, str]
    cwd: str
    grace_s: float
    time_limit_s: float | None
    requeue: bool
    signal: str | None
    topology: str | None = None
    cpu_bind: str = "numa"
    min_workers: int | None = None
    array: ArrayTask | None = None
    dependency: str | None = None
    begin_time: float | None = None
    output: str | None = None
    error: str | None = None
    mail_type: tuple[str, ...] = ()
    mail_user: str | None = None
    stdin: str | None = None
    pty: bool = False
    stdin_stream: bool = False
    cpus_per_task: int = 0
    mem: int = 0
    mem_per_gpu: int = 0
    exclusive: bool = False
    groups: tuple[GroupSpec, ...] = ()
    colocate: tuple[tuple[str, ...], ...] = ()
    success_policy: str = "all"
    failure_policy: str = "fail"
    max_restarts: int = 0
    startup_order: tuple[str, ...] = ()
    shards: int = 0
    mps: int = 0
    gpu_mem: int = 0
    attached: bool = False
    umask: int = DEFAULT_UMASK

    def to_dict(self) -> dict[str, Any]:
        """The spec as a JSON-ready dict (what the ``jobs.spec`` column holds). A one-group job
        has no ``groups``/``colocate`` keys: its row is what it was before groups existed."""
        if not self.groups and not self.attached and self.plain_policy and self.startup_order == ():
            # every submission's row (a plain gang): the same keys in the same order, read in one
            # call, without a getattr each and the deletions of the general case below
            out = dict(zip(_PLAIN_ROW_FIELDS, _plain_row_values(self), strict=True))
            out["array"] = None if self.array is None else asdict(self.array)
            out["mail_type"] = list(self.mail_type)
            return out
        out = {name: getattr(self, name) for name in _SPEC_FIELDS}
        out["array"] = None if self.array is None else asdict(self.array)
        out["mail_type"] = list(self.mail_type)
        del out["groups"], out["colocate"]
        for name, default in _POLICY_DEFAULTS.items():  # lifecycle/group_policy.py: stored only when set
            if getattr(self, name) == default:
                del out[name]
        if not self.attached:
            del out["attached"]
        if self.startup_order:
            out["startup_order"] = list(self.startup_order)
        if self.groups:
            out["groups"] = [g.to_dict() for g in self.groups]
            out["colocate"] = [list(c) for c in self.colocate]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpec:
        """Read back :meth:`to_dict` output (also of stores written before arrays or groups existed)."""
        fields = dict(data)
        array = fields.pop("array", None)
        fields["mail_type"] = tuple(fields.get("mail_type") or ())
        fields["groups"] = tuple(GroupSpec.from_dict(g) for g in fields.get("groups") or ())
        fields["colocate"] = tuple(tuple(c) for c in fields.get("colocate") or ())
        fields["startup_order"] = tuple(fields.get("startup_order") or ())
        return cls(**fields, array=None if array is None else ArrayTask(**array))

    def group_specs(self) -> tuple[GroupSpec, ...]:
        """The job's groups: its ``groups``, or for a one-group job the one group ``g0`` its own
        fields describe (command ``argv``, no extra environment)."""
        if self.groups:
            return self.groups
        return (
            GroupSpec(
                name=default_group_name(0),
                workers=self.workers,
                per_worker=self.per_worker,
                resource=self.resource,
                gpu_model=self.gpu_model,
                nodes=self.nodes,
                topology=self.topology,
                min_workers=self.min_workers,
                cpus_per_task=self.cpus_per_task,
                mem=self.mem,
                mem_per_gpu=self.mem_per_gpu,
                exclusive=self.exclusive,
                argv=tuple(self.argv),
            ),
        )

    @property
    def group_policy(self) -> GroupPolicy:
        """The job's lifecycle policies (success, failure, restarts, startup order)."""
        return GroupPolicy(self.success_policy, self.failure_policy, self.max_restarts, tuple(self.startup_order))

    @property
    def plain_policy(self) -> bool:
        """``group_policy.plain`` read from the fields, without building the policy (asked at every
        rank report): a plain gang's policies, ``all``, ``fail``, no restarts, no startup order."""
        return (
            self.success_policy == "all"
            and self.failure_policy == "fail"
            and self.max_restarts == 0
            and len(self.startup_order) == 0
        )

    def rank_group(self, rank: int) -> RankGroup:
        """The group global rank ``rank`` belongs to, its index in it and the group's first rank
        (what dispatch gives each rank: its group's command and environment).

        Raises:
            IndexError: ``rank`` is not a rank of this job.
        """
        return rank_group(self.group_specs(), rank)

    @property
    def request(self) -> JobRequest:
        """The scheduler's view of the request (a job of groups': built once per spec, which is
        never changed in place)."""
        if self.groups:
            try:
                return self._group_request
            except AttributeError:  # not asked for before
                # (mypy's dataclass plugin knows the fields' slots only, not _RequestMemo's)
                made = self._group_request = self._groups_request()  # type: ignore[misc]
                return made
        # built again only when a field it is made of was written (compared by identity: the
        # very values it was made from; tests write fields in place): a pending job's view asks
        # for it every cycle
        key = (
            self.workers, self.per_worker, self.resource, self.gpu_model, self.nodes, self.topology,
            self.min_workers, self.cpus_per_task, self.mem, self.mem_per_gpu, self.exclusive,
            self.shards, self.mps, self.gpu_mem,
        )  # fmt: skip
        try:
            last = self._one_request_memo
        except AttributeError:  # not asked for before
            pass
        else:
            if all(map(is_, last[0], key)):
                return last[1]
        made = self._one_request()
        self._one_request_memo = (key, made)  # type: ignore[misc]  # a slot of _RequestMemo's
        return made

    def _groups_request(self) -> JobRequest:
        first = self.groups[0].request()
        device = [g.resource for g in self.groups if g.per_worker > 0]
        return JobRequest(
            workers=self.workers,
            per_worker=first.per_worker,
            resource=device[0] if device else first.resource,
            gpu_model=first.gpu_model,
            nodes=first.nodes,
            topology=first.topology,
            cpus_per_task=first.cpus_per_task,
            mem=first.mem,
            mem_per_gpu=first.mem_per_gpu,
            exclusive=first.exclusive,
            groups=tuple(GroupRequest(g.name, g.request()) for g in self.groups),
            colocate=self.colocate,
        )

    def _one_request(self) -> JobRequest:
        return JobRequest(
            workers=self.workers,
            per_worker=self.per_worker,
            resource=self.resource,
            gpu_model=self.gpu_model,
            nodes=self.nodes,
            topology=self.topology,
            min_workers=self.min_workers,
            cpus_per_task=self.cpus_per_task,
            mem=self.mem,
            mem_per_gpu=self.mem_per_gpu,
            exclusive=self.exclusive,
            shards=self.shards,
            mps=self.mps,
            gpu_mem=self.gpu_mem,
        )


_SPEC_FIELDS = tuple(JobSpec.__dataclass_fields__)
_POLICY_DEFAULTS: dict[str, Any] = {
    "success_policy": "all",
    "failure_policy": "fail",
    "max_restarts": 0,
    "startup_order": (),
}
"""The lifecycle policies of a job of groups at their defaults: not written to the spec row."""
_PLAIN_ROW_FIELDS = tuple(
    name for name in _SPEC_FIELDS if name not in ("groups", "colocate", "attached", *_POLICY_DEFAULTS)
)
"""The keys of a plain gang's spec row (:meth:`JobSpec.to_dict`), in field order."""
_plain_row_values = attrgetter(*_PLAIN_ROW_FIELDS)
"""A spec's values of :data:`_PLAIN_ROW_FIELDS`, as a tuple in that order."""


@dataclass
class RankRecord(CountsChanges):
    """One rank of one start attempt: where it runs and its phase (:class:`RankPhase`, changed
    only through ``lifecycle.states.advance``).

    ``start_time`` is when its main process started (unix s; the agent's instant, which the
    start gate makes the same for a gang's ranks on one node up to the exec; None: it never
    started), ``end_time`` when that process ended or the rank was found lost (None: it has not,
    or it never started).
    """

    rank: int
    node: str
    devices: tuple[str, ...]
    state: RankPhase = RankPhase.ASSIGNED
    pid: int | None = None
    exit_status: int | None = None
    start_time: float | None = None
    end_time: float | None = None

    @property
    def ended(self) -> bool:
        """True once the rank's processes are gone and its devices free (or its node was lost)."""
        return self.state.ended

    @classmethod
    def assigned(cls, rank: int, node: str, devices: tuple[str, ...]) -> RankRecord:
        """``RankRecord(rank=rank, node=node, devices=devices)``: a rank just placed by an
        admission (phase ASSIGNED, nothing else known). The same instance dict, in the same order,
        with the same change count, without a write of each field through ``__setattr__`` (an
        admission makes one a rank)."""
        if cls is not RankRecord:
            return cls(rank=rank, node=node, devices=devices)
        record = object.__new__(RankRecord)
        fields = record.__dict__
        fields.update(_ASSIGNED)
        fields["rank"] = rank
        fields["node"] = node
        fields["devices"] = devices
        return record


@dataclass
class JobStatus(CountsChanges):
    """The mutable part of a job. Times are unix seconds (simulated seconds in ``labgang simulate``).

    ``state`` changes only through ``lifecycle.states.transition``. ``end_intent`` says what
    happens when a terminating job's ranks are all gone (None: decided by their exits).
    ``attempt`` numbers the start attempts (a new one at every requeue, so a new attempt's ranks
    never collide with an old one's on a node); ``restart_count`` counts only attempts that ran
    (some rank started). ``ran`` is True once a rank of the current attempt started (while
    ``unheard_exits`` is set: whether the requeued attempt had, hence counted a restart).
    ``admit_seq`` is the admission order (1, 2, … across all jobs): "most recently admitted"
    among equal ``admit_time`` is the highest one. ``dependency_met`` is True once the job's
    dependency held (its ``after*`` conditions are then never judged again, only ``singleton``).
    ``no_preemption`` goes with the scheduler's pending reason: the preemption rule that kept the
    pending job from looking for victims in the last cycle (None: it looked, or needed none).
    ``lease_stopped`` is True once a rank of the current attempt was stopped by its own agent
    because the node's lease ran out (its exit reported ``fenced``): that exit, even status 0,
    is not the rank's own (docs/queue-semantics.md §A3.6).
    ``hold`` is who held the pending job (``labgang hold``, ``submit --hold``; None: not held):
    no cycle admits it until ``labgang release``. ``hold_admin`` is True when an admin held
    another user's job: then only an admin may release it (Slurm's JobHeldAdmin).
    ``failure_restarts`` counts the restarts ``--failure-policy restart`` made (a rank failed:
    the whole job started again), bounded by ``--max-restarts`` (``lifecycle/group_policy.py``).
    ``unheard_exits`` is set while a requeued job waits in its queue, when its last attempt was
    requeued only because some ranks' exits were never heard (their node was lost and its fence ran
    out) and every other rank of it had exited 0 on its own: those ranks as ``(run id, rank, node)``.
    Should their agent report each of them exited 0 on its own (not ``fenced``) before the job is
    admitted again, that attempt had finished and the job ends succeeded instead of running again
    (docs/queue-semantics.md §A3.6, ``GangRules.late_exit``), as that attempt: ``attempt`` goes back
    to its number, the requeue's restart is taken back, and it ends when its last rank really
    ended; () otherwise.
    """

    state: JobState = JobState.PENDING
    submit_time: float = 0.0
    pending_since: float = 0.0
    admit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    exit_status: int | None = None
    restart_count: int = 0
    start_failures: int = 0
    not_before: float = 0.0
    reason_code: str | None = None
    reason_message: str | None = None
    end_intent: EndIntent | None = None
    nominated: tuple[str, ...] = ()
    master_addr: str | None = None
    master_port: int | None = None
    warned: bool = False
    attempt: int = 0
    ran: bool = False
    admit_seq: int = 0
    dependency_met: bool = False
    no_preemption: NoPreemption | None = None
    lease_stopped: bool = False
    hold: str | None = None
    hold_admin: bool = False
    failure_restarts: int = 0
    unheard_exits: tuple[tuple[str, int, str], ...] = ()

    @classmethod
    def submitted(cls, now: float) -> JobStatus:
        """The status of a job just submitted at ``now`` (unix or simulated seconds): pending,
        waiting since its submission. The one way a new job's status is made (coordinator,
        array tasks, ``labgang simulate``)."""
        if cls is not JobStatus:
            return cls(state=JobState.PENDING, submit_time=now, pending_since=now)
        # what that build gives, without a write of each field through ``__setattr__`` (a replay makes one
        # a job): the same instance dict, in the same order, with the same change count
        status = object.__new__(JobStatus)
        fields = status.__dict__
        fields.update(_SUBMITTED)
        fields["submit_time"] = fields["pending_since"] = now
        return status

    def to_json(self) -> str:
        """The status as compact JSON (what the ``jobs.status`` column holds)."""
        fields = self.__dict__  # a dataclass's fields are plain entries there: no getattr each
        d = {name: fields[name] for name in _STATUS_FIELDS}
        d["state"] = self.state.value
        d["end_intent"] = None if self.end_intent is None else self.end_intent.value
        d["nominated"] = list(self.nominated)
        d["no_preemption"] = None if self.no_preemption is None else self.no_preemption.facts()
        return _COMPACT_JSON.encode(d)  # json.dumps(d, separators=(",", ":")) without a new encoder each time

    @classmethod
    def from_json(cls, text: str) -> JobStatus:
        """Read back :meth:`to_json` output (also of stores written before ``attempt`` existed,
        where the attempt number was the restart count).

        Raises:
            ValueError: a state or end intent that is not a known value.
        """
        d = json.loads(text)
        d["state"] = JobState(d["state"])
        d["end_intent"] = None if d.get("end_intent") is None else EndIntent(d["end_intent"])
        d["nominated"] = tuple(d.get("nominated", ()))
        d["unheard_exits"] = tuple((str(r), int(n), str(node)) for r, n, node in d.get("unheard_exits", ()))
        facts = d.get("no_preemption")
        d["no_preemption"] = None if facts is None else NoPreemption.from_facts(facts)
        d.setdefault("attempt", d.get("restart_count", 0))
        known = cls.__dataclass_fields__
        return cls(**{k: v for k, v in d.items() if k in known})


_STATUS_FIELDS = tuple(JobStatus.__dataclass_fields__)
_COMPACT_JSON = json.JSONEncoder(separators=(",", ":"))
"""``json.dumps(..., separators=(",", ":"))``'s encoder, made once (``dumps`` makes one a call)."""

_ASSIGNED: dict[str, Any] = dict(vars(RankRecord(0, "", ())))
"""The instance dict (fields and ``changes``, in the order the dataclass build writes them) of a
rank :meth:`RankRecord.assigned` makes, its rank, node and devices to be set; every default is
immutable."""

_SUBMITTED: dict[str, Any] = dict(vars(JobStatus(state=JobState.PENDING, submit_time=0.0, pending_since=0.0)))
"""The instance dict (fields and ``changes``, in the order the dataclass build writes them) of a
status :meth:`JobStatus.submitted` makes, its times to be set; every default is immutable."""


@dataclass(frozen=True, init=False)
class HistoryEntry:
    """One line of a job's history (unix seconds); never changed once written (the history only grows).

    Frozen (a write raises ``FrozenInstanceError``); the constructor writes the three fields into
    the instance dict itself, where the generated one calls ``object.__setattr__`` for each (a
    replay builds one entry per transition: 170 ns each instead of 370 ns on Python 3.11).
    """

    time: float
    event: str
    message: str

    def __init__(self, time: float, event: str, message: str) -> None:
        fields = self.__dict__
        fields["time"] = time
        fields["event"] = event
        fields["message"] = message


@dataclass
class JobRecord:
    """A job as the coordinator holds it in memory: spec, status, current ranks, history, and the
    accounting record of its current (or last) start attempt (None before its first admission;
    the earlier attempts' records are in the store)."""

    id: str
    seq: int
    spec: JobSpec
    status: JobStatus
    ranks: dict[int, RankRecord] = field(default_factory=dict)
    history: list[HistoryEntry] = field(default_factory=list)
    attempt_record: AttemptRecord | None = None
    requeued_ranks: dict[int, RankRecord] = field(default_factory=dict)
    """The ranks of the attempt a requeue ended, kept while ``status.unheard_exits`` awaits some of
    their exits (``GangRules.late_exit``): should they all turn out to have exited 0, that attempt
    is the job's last, and these its ranks again (``show``'s nodes and rank table, the job's end
    time). Empty otherwise; the store reads them back (attempt ``status.attempt - 1``)."""

    @property
    def attempt(self) -> int:
        """The start attempt the current ranks belong to."""
        return self.status.attempt

    @property
    def run_id(self) -> str:
        """The id the node agents know this attempt by (``<job id>.<attempt>``), so a
        requeued job's new ranks never collide with its old ones."""
        return f"{self.id}.{self.attempt}"


class BadSignal(ValueError):
    """A ``--signal`` spec that does not parse; ``allowed`` lists the signal names when the name was wrong."""

    def __init__(self, message: str, allowed: list[str] | None = None) -> None:
        super().__init__(message)
        self.allowed = allowed


def parse_warning(text: str) -> tuple[int, float]:
    """Parse ``"SIGUSR1@60"`` (or ``"USR1@60"``, ``"10@60"``, ``"B:SIGUSR1@60"``) into (signal
    number, seconds before); whom it goes to is :func:`warns_batch_shell_only`.

    Raises:
        BadSignal: the name or the seconds are invalid.
    """
    if text[:2].upper() in ("B:", "R:"):
        text = text[2:]
    name, sep, when = text.partition("@")
    if not sep:
        raise BadSignal(f"signal {text!r} must look like SIGUSR1@60 (signal@seconds before the time limit)")
    name = name.strip().upper()
    try:
        signum = (
            int(name) if name.isdigit() else int(signal_mod.Signals[name if name.startswith("SIG") else "SIG" + name])
        )
    except KeyError:
        raise BadSignal(f"unknown signal {name!r}", sorted(s.name for s in signal_mod.Signals)) from None
    try:
        seconds = float(when)
    except ValueError:
        raise BadSignal(f"signal time {when!r} is not a number of seconds") from None
    if not math.isfinite(seconds):
        raise BadSignal(f"signal time {when!r} must be a finite number of seconds")
    if seconds < 0:
        raise BadSignal("signal time must be >= 0 seconds")
    return signum, seconds


def warns_batch_shell_only(text: str | None) -> bool:
    """Whether a ``--signal`` goes to each rank's own process only (Slurm's ``B:``, the batch
    shell: a script traps it and decides what its programs get), not to its whole process group."""
    return text is not None and text[:2].upper() == "B:"


def signal_name(signum: int) -> str:
    """``"SIGUSR1"`` for 10; the number itself when it names no signal."""
    try:
        return signal_mod.Signals(signum).name
    except ValueError:
        return str(signum)
