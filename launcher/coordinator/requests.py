"""Validation of ``POST /v1/jobs`` bodies into a :class:`~labgang.launcher.coordinator.store.JobSpec`.

Every rejection is a :class:`BadRequest` naming the field and, where there is a fixed
set, the allowed values. The caller's identity never comes from the body.
"""

from __future__ import annotations

import base64
import os
import time
from dataclasses import dataclass
from typing import Annotated, Any

from labgang.agent.mem_size import MAX_MEMORY
from labgang.agent.supervisor.spec import GROUP_NAME_RE, group_env_name
from labgang.launcher.arrays import ArraySpec, BadArraySpec, parse_array
from labgang.launcher.begin_time import begin_out_of_range
from labgang.launcher.config.cluster import ClusterConfig, QueueConfig
from labgang.launcher.config.limits import MAX_GPUS_PER_WORKER, MAX_TIME_LIMIT_S, MAX_WORKERS
from labgang.launcher.config.notify import ALLOWED_MAIL_TYPES, BadMailType, parse_mail_types
from labgang.launcher.config.queues import PRIORITY_MAX, PRIORITY_MIN
from labgang.launcher.coordinator.errors import BadRequest, Forbidden
from labgang.launcher.coordinator.policy import (
    UnknownPriority,
    check_priority_allowed,
    parse_priority,
    submission_priority,
    what_priority_allows,
)
from labgang.launcher.jobgroups import MAX_GROUPS, GroupSpec, default_group_name
from labgang.launcher.lifecycle.dependency import BadDependency, parse_dependency
from labgang.launcher.lifecycle.group_policy import MAX_RESTARTS_LIMIT, BadGroupPolicy, check_policy
from labgang.launcher.lifecycle.records import DEFAULT_UMASK, BadSignal, JobRecord, JobSpec, parse_warning
from labgang.launcher.model import CPU_BIND, GPU, MIG_PROFILE_RE, TOPOLOGY_LEVELS, mig_resource
from labgang.launcher.output_pattern import check_pattern
from labgang.launcher.scheduler.shares import share_refusal
from labgang.launcher.share_request import MAX_SHARDS, share_problem
from labgang.launcher.stdin_forward import MAX_STDIN_BYTES
from labgang.launcher.text import control_characters
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError
from pydantic_core import ErrorDetails


def _exec_safe(value: str) -> str:
    """Refuse what ``execve`` and the environment cannot carry: NUL bytes and lone surrogates."""
    if "\0" in value:
        raise ValueError("must not contain a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = ord(value[exc.start])
        if 0xDC80 <= bad <= 0xDCFF:  # a byte the shell passed that is no UTF-8 (Python's surrogateescape)
            raise ValueError(
                f"is not UTF-8 text (byte 0x{bad - 0xDC00:02x} at character {exc.start}); allowed: UTF-8 text"
            ) from None
        raise ValueError(
            f"must be valid Unicode text (a lone surrogate \\u{bad:04x} at character {exc.start}); allowed: UTF-8 text"
        ) from None
    return value


#: A string that can reach ``execve``: no NUL byte, valid UTF-8 once encoded.
Text = Annotated[str, AfterValidator(_exec_safe)]


MAX_CPUS_PER_TASK = 65536
"""The most ``cpus_per_task`` a submission may give (no host has more logical CPUs)."""


class GroupBody(BaseModel):
    """One group of a job of groups in a submission body (docs/openapi.json, ``SubmitGroup``;
    docs/job-groups.md): its ranks' shape, command and extra environment."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)  # JSON true is no number

    name: Text | None = None
    workers: int = Field(default=1, ge=1, le=MAX_WORKERS)
    gpus_per_worker: int | None = Field(default=None, ge=0, le=MAX_GPUS_PER_WORKER)
    mig: str | None = None
    nodes: int | None = Field(default=None, ge=1, le=MAX_WORKERS)
    gpu_model: Text | None = None
    topology: str | None = None
    min_workers: int | None = Field(default=None, ge=1, le=MAX_WORKERS)
    cpus_per_task: int = Field(default=0, ge=0, le=MAX_CPUS_PER_TASK)
    mem: int = Field(default=0, ge=0, le=MAX_MEMORY)
    mem_per_gpu: int = Field(default=0, ge=0, le=MAX_MEMORY)
    argv: list[Text] = Field(min_length=1)
    env: dict[Text, Text] = Field(default_factory=dict)


class SubmitBody(BaseModel):
    """The JSON body of a submission (see docs/openapi.json, ``SubmitRequest``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)  # JSON true is no number

    name: Text | None = None
    queue: Text | None = None
    workers: int = Field(default=1, ge=1, le=MAX_WORKERS)
    gpus_per_worker: int | None = Field(default=None, ge=1, le=MAX_GPUS_PER_WORKER)
    mig: str | None = None
    priority: int | str | None = None
    nodes: int | None = Field(default=None, ge=1, le=MAX_WORKERS)
    gpu_model: Text | None = None
    grace_s: float | None = Field(default=None, ge=0, le=86400)
    time_limit_s: float | None = Field(default=None, gt=0, le=MAX_TIME_LIMIT_S)
    requeue: StrictBool = True
    signal: str | None = None
    hold: StrictBool = False  # submit --hold: pending, held until released (the coordinator applies it)
    mail_type: list[str] | None = None
    mail_user: Text | None = Field(default=None, max_length=256)
    stdin: str | None = Field(default=None, max_length=4 * ((MAX_STDIN_BYTES + 2) // 3))
    pty: StrictBool = False
    stdin_stream: StrictBool = False
    attached: StrictBool = False  # labgang run: its run follows it (not requeued once that is gone)
    topology: str | None = None
    cpu_bind: str | None = None
    min_workers: int | None = Field(default=None, ge=1, le=MAX_WORKERS)
    cpus_per_task: int = Field(default=0, ge=0, le=MAX_CPUS_PER_TASK)
    mem: int = Field(default=0, ge=0, le=MAX_MEMORY)
    mem_per_gpu: int = Field(default=0, ge=0, le=MAX_MEMORY)
    exclusive: StrictBool = False
    shards: int = Field(default=0, ge=0, le=MAX_SHARDS)
    mps: int = Field(default=0, ge=0, le=100)
    gpu_mem: int = Field(default=0, ge=0, le=MAX_MEMORY)
    dependency: str | None = Field(default=None, max_length=4096)
    begin_time: float | None = Field(default=None, ge=0)
    output: Text | None = Field(default=None, max_length=4096)
    error: Text | None = Field(default=None, max_length=4096)
    argv: list[Text] | None = Field(default=None, min_length=1)
    env: dict[Text, Text] = Field(default_factory=dict)
    cwd: Text | None = None
    array: str | None = None
    success_policy: str = "all"
    failure_policy: str = "fail"
    max_restarts: int = Field(default=0, ge=0, le=MAX_RESTARTS_LIMIT)
    startup_order: list[Text] = Field(default_factory=list, max_length=64)
    groups: list[GroupBody] | None = Field(default=None, min_length=2, max_length=MAX_GROUPS)
    colocate: list[list[Text]] | None = None
    umask: StrictInt | None = Field(default=None, ge=0, le=0o777)  # the submitter's; None: DEFAULT_UMASK


@dataclass(frozen=True)
class Caller:
    """Who sent a request: from SO_PEERCRED on the Unix socket, or vouched for by a node agent.

    ``uid`` is None for an anonymous read-only TCP client; ``gid`` is the user's primary
    group from the password database (None when unknown).
    """

    uid: int | None
    user: str
    groups: tuple[str, ...] = ()
    gid: int | None = None
    admin: bool = False
    read_only: bool = False

    @property
    def may_set_priority(self) -> bool:
        """True for an admin and for the user the coordinator runs as (who ran ``labgang up``):
        they may give a raw priority number and any class (launcher/coordinator/policy.py)."""
        return self.admin or (self.uid is not None and self.uid == os.geteuid())

    def check_may_manage(self, what: str) -> None:
        """Refuse ``what`` (e.g. "drain a node") unless the caller is an admin or the user the
        coordinator runs as (who ran ``labgang up``), as for a raw priority.

        Raises:
            Forbidden: a read-only or anonymous caller, or any other user.
        """
        if self.read_only or self.uid is None:
            raise Forbidden(f"to {what} needs the Unix socket of a labgang node (this port is read-only)")
        if not self.may_set_priority:
            raise Forbidden(f"only an admin (cluster.toml admins) may {what}; {self.user} is not one")

    def owns(self, spec: JobSpec) -> bool:
        """True when the caller submitted the job."""
        return self.uid is not None and self.uid == spec.uid

    def check_may_act(self, job: JobRecord, what: str) -> None:
        """Refuse ``what`` (e.g. "cancel it") on ``job`` unless the caller owns it or is an admin.

        Raises:
            Forbidden: a read-only or anonymous caller, or another user's job for a non-admin.
        """
        if self.read_only or self.uid is None:
            raise Forbidden(f"{what} needs the Unix socket of a labgang node (this port is read-only)")
        if not (self.owns(job.spec) or self.admin):
            raise Forbidden(f"job {job.id} belongs to {job.spec.user}; only its owner or an admin may {what}")

    def history_user(self, user: str | None) -> str | None:
        """Whose history the caller reads for ``-u user``: a user name, or None for every user.

        One rule with ``queue``, ``show`` and ``report``: any user may read every user's jobs'
        history (``-u NAME``, ``-u all``), as ``sacct`` shows them without ``PrivateData``; a job's
        logs stay its owner's and the admins' (``labgang logs``). ``None`` asks for the default:
        every user's for an admin (root included, as ``sacct`` shows every user's jobs to root and
        operators) and for an anonymous read-only caller (as in ``GET /v1/jobs``), else the
        caller's own; ``"all"`` for every user's. Never raises.
        """
        if user == "all" or (user is None and (self.uid is None or self.admin)):
            return None
        return user or self.user


def parse_signal(text: str) -> tuple[int, float]:
    """Parse ``"SIGUSR1@60"`` (or ``"USR1@60"``, ``"10@60"``) into (signal number, seconds).

    Raises:
        BadRequest: the name or the seconds are invalid (field "signal").
    """
    try:
        return parse_warning(text)
    except BadSignal as exc:
        raise BadRequest(str(exc), field="signal", allowed=exc.allowed) from None


# Fields in seconds: their bounds read "must be > 0 seconds".
_SECONDS_FIELDS = frozenset({"grace_s", "time_limit_s"})
_BOUNDS = {
    "greater_than": ("gt", ">"),
    "greater_than_equal": ("ge", ">="),
    "less_than": ("lt", "<"),
    "less_than_equal": ("le", "<="),
}
_TYPES = {
    "int_parsing": "must be an integer",
    "int_type": "must be an integer",
    "int_from_float": "must be an integer",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "string_type": "must be a string",
    "list_type": "must be a list",
    "dict_type": "must be an object",
}


def _constraint(err: ErrorDetails, field: str | None) -> str:
    """Say what a pydantic error means in the field's own terms ("must be > 0 seconds")."""
    kind, ctx = err["type"], err.get("ctx") or {}
    top = field.split(".", 1)[0] if field else None
    if kind in _BOUNDS and top == "cpus_per_task":
        return f"{err.get('input')} is out of range; allowed: 1..{MAX_CPUS_PER_TASK}"
    if kind in _BOUNDS:
        key, op = _BOUNDS[kind]
        unit = " seconds" if top in _SECONDS_FIELDS else ""
        bound = ctx.get(key)
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)  # 31536000, not 3.1536e+07
        if unit and isinstance(bound, int) and bound >= 86400 and bound % 86400 == 0:
            days = bound // 86400
            unit += f" ({days} day{'s' if days != 1 else ''})"  # 31536000 seconds (365 days)
        return f"must be {op} {bound:g}{unit}" if isinstance(bound, float) else f"must be {op} {bound}{unit}"
    if kind == "too_short" and field is not None and field.split(".")[-1] == "argv":
        return "must name a command (at least one word)"
    if kind in ("too_short", "too_long") and field == "groups":
        return f"must list 2 to {MAX_GROUPS} groups (one group: leave groups out and give the shape at the job)"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    if kind == "finite_number":
        return "must be a finite number" + (" of seconds" if top in _SECONDS_FIELDS else "")
    if kind == "string_too_long":
        return f"must be at most {ctx.get('max_length')} characters"
    if top == "priority":
        return "must be an integer or a priority class name"
    return _TYPES.get(kind, err["msg"])


def _first_error(exc: ValidationError) -> BadRequest:
    err = exc.errors()[0]
    loc = [str(p) for p in err["loc"]]
    if loc and loc[0] == "priority":  # int | str union: pydantic names the branch tried
        loc = ["priority"]
    if loc and loc[0] == "env" and loc[-1] == "[key]":  # a variable's name, not its value
        return BadRequest(f"env: a variable name {_constraint(err, 'env')}", field="env")
    field = ".".join(loc) or None
    if err["type"] == "extra_forbidden":
        model = GroupBody if loc and loc[0] == "groups" and len(loc) == 3 else SubmitBody
        return BadRequest(f"unknown field {field!r}", field=field, allowed=sorted(model.model_fields))
    if err["type"] == "missing":
        return BadRequest(f"field {field!r} is required", field=field)
    return BadRequest(f"{field}: {_constraint(err, field)}", field=field)


def build_spec(body: Any, caller: Caller, config: ClusterConfig) -> JobSpec:
    """Validate a submission body for ``caller`` against ``config`` and return the job spec.

    Raises:
        BadRequest: a malformed or out-of-range field (names the field; lists allowed values).
        Forbidden: the caller may not use the queue.
    """
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    try:
        req = SubmitBody.model_validate(body)
    except ValidationError as exc:
        raise _first_error(exc) from None

    shape: tuple[GroupSpec, ...] = ()
    if req.groups is not None:
        shape = _group_shapes(req, config)
    elif req.colocate is not None:
        raise BadRequest("colocate: names groups of a job of groups; give groups too", field="colocate")
    if req.argv is None:
        if req.groups is None:
            raise BadRequest("field 'argv' is required", field="argv")
    elif not req.argv[0]:  # execve would fail at launch; later words may be empty ("cmd ''")
        raise BadRequest("argv: the command (argv[0]) is an empty string; it must name a program", field="argv.0")
    if req.queue is not None and not req.queue.strip():
        raise BadRequest("queue: must not be empty", field="queue", allowed=[q.name for q in config.queues])
    if req.name is not None and control_characters(req.name):
        raise BadRequest(
            f"name: {req.name!r} contains control characters ({', '.join(control_characters(req.name))}); "
            "allowed: printable characters",
            field="name",
        )
    queue_name = req.queue or config.default_queue
    queue = config.queue(queue_name)
    if queue is None:
        raise BadRequest(f"unknown queue {queue_name!r}", field="queue", allowed=[q.name for q in config.queues])
    if not config.may_use_queue(queue, caller.user, caller.groups):
        usable = [q.name for q in config.queues if config.may_use_queue(q, caller.user, caller.groups)]
        raise Forbidden(f"user {caller.user!r} may not submit to queue {queue_name!r}", field="queue", allowed=usable)

    if req.mig is not None:
        if not MIG_PROFILE_RE.match(req.mig):
            raise BadRequest(
                f"mig profile {req.mig!r} is not a MIG profile such as '1g.10gb' or '3g.40gb'", field="mig"
            )
        if req.gpus_per_worker not in (None, 1):
            raise BadRequest(
                "with mig, each rank gets exactly one MIG device; gpus_per_worker must be 1",
                field="gpus_per_worker",
                allowed=[1],
            )
        resource, per_worker = mig_resource(req.mig), 1
    else:
        resource, per_worker = GPU, req.gpus_per_worker or 1

    try:
        number, _class = parse_priority(config, req.priority)
        priority = submission_priority(config, queue, req.priority)
    except UnknownPriority as exc:
        asked = str(req.priority).strip()
        # `-p gpu` from a Slurm user means its partition: where the word is a queue, say where it goes
        slurm = (
            f"; {asked!r} is a queue: Slurm's -p/--partition is -q/--queue (or --partition) here, -p the priority"
            if any(q.name == asked for q in config.queues)
            else ""
        )
        if not config.priority_classes:  # no class anywhere: the parser's words say so
            raise BadRequest(str(exc) + slurm, field="priority") from None
        # what this user may use in this queue: a non-admin's numbers stop at its default, its classes only
        allows, names = what_priority_allows(config, queue, admin=caller.may_set_priority)
        where = "" if caller.may_set_priority else f" in queue {queue_name}"
        raise BadRequest(
            f"unknown priority class {asked!r}{where}; allowed: {allows}{slurm}",
            field="priority",
            allowed=names or None,
        ) from None
    if number is not None and not PRIORITY_MIN <= number <= PRIORITY_MAX:
        raise BadRequest(
            f"priority: {number} is out of range (allowed: an integer from {PRIORITY_MIN} to "
            f"{PRIORITY_MAX}, a signed 32-bit integer)",
            field="priority",
        )
    refusal = check_priority_allowed(config, queue_name, req.priority, user=caller.user, admin=caller.may_set_priority)
    if refusal is not None:
        raise Forbidden(refusal.message, field=refusal.field, allowed=refusal.allowed)

    _check_sizes(req, config)
    if req.begin_time is not None:
        out_of_range = begin_out_of_range(req.begin_time, time.time())
        if out_of_range is not None:
            raise BadRequest(f"begin_time: {out_of_range}", field="begin_time")
    if req.signal is not None:
        _signum, lead = parse_signal(req.signal)
        if lead > config.max_signal_lead_s:
            raise BadRequest(
                f"signal: the warning lead {lead:.15g} s is over the cluster's maximum of "
                f"{config.max_signal_lead_s:g} s (max_signal_lead_s)",
                field="signal",
            )
    if req.nodes is not None and req.nodes > req.workers:
        raise BadRequest(f"nodes ({req.nodes}) cannot exceed workers ({req.workers})", field="nodes")
    if req.topology is not None and req.topology not in TOPOLOGY_LEVELS:
        raise BadRequest(
            f"topology {req.topology!r} is not a level; allowed: {', '.join(TOPOLOGY_LEVELS)}",
            field="topology",
            allowed=list(TOPOLOGY_LEVELS),
        )
    if req.topology is not None and req.nodes not in (None, 1):
        raise BadRequest(
            f"topology {req.topology} keeps the whole gang on one node; nodes must be 1 or unset, not {req.nodes}",
            field="nodes",
            allowed=[1],
        )
    if req.min_workers is not None and req.min_workers > req.workers:
        raise BadRequest(
            f"min_workers ({req.min_workers}) cannot exceed workers ({req.workers})",
            field="min_workers",
            allowed=list(range(1, req.workers + 1)),
        )
    if req.min_workers is not None and req.nodes is not None and req.min_workers < req.nodes:
        raise BadRequest(
            f"min_workers ({req.min_workers}) cannot be below nodes ({req.nodes}): every node needs a rank",
            field="min_workers",
            allowed=list(range(req.nodes, req.workers + 1)),
        )
    if req.mem and req.mem_per_gpu:
        raise BadRequest(
            "mem and mem_per_gpu: give one of them (memory per node, or per GPU), not both", field="mem_per_gpu"
        )
    _check_share(req, config, queue)
    if req.cpu_bind not in (None, *CPU_BIND):
        raise BadRequest(
            f"cpu_bind {req.cpu_bind!r}; allowed: {', '.join(CPU_BIND)}", field="cpu_bind", allowed=list(CPU_BIND)
        )
    dependency = None
    if req.dependency is not None:
        try:
            parsed = parse_dependency(req.dependency)
        except BadDependency as exc:
            raise BadRequest(str(exc), field="dependency") from None
        if parsed.corresponding and req.array is None:
            raise BadRequest(
                f"dependency: {parsed.text!r}: aftercorr is for a job array (each task waits for the task "
                "with its own index); allowed: aftercorr with --array, or afterok:ID for one job",
                field="dependency",
            )
        dependency = parsed.text
    for field_name in ("output", "error"):
        pattern = getattr(req, field_name)
        problem = None if pattern is None else check_pattern(pattern)
        if problem is not None:
            raise BadRequest(f"{field_name}: {pattern!r}: {problem}", field=field_name)
    if req.pty and (req.stdin is not None or req.array is not None):
        raise BadRequest("pty: a terminal job takes its input from the terminal, not with stdin or array", field="pty")
    if req.stdin_stream and (req.stdin is not None or req.pty or req.array is not None):
        raise BadRequest(
            "stdin_stream: a streamed standard input goes to one rank 0; not with stdin, pty or array",
            field="stdin_stream",
        )
    if req.stdin is not None:
        try:
            base64.b64decode(req.stdin, validate=True)
        except ValueError:
            raise BadRequest("stdin: must be base64 (rank 0's standard input)", field="stdin") from None
    try:
        mail_type = parse_mail_types(req.mail_type) if req.mail_type else ()
    except BadMailType as exc:
        raise BadRequest(str(exc), field="mail_type", allowed=list(ALLOWED_MAIL_TYPES)) from None
    if req.mail_user is not None and (not req.mail_user.strip() or control_characters(req.mail_user)):
        raise BadRequest("mail_user: must be a mail address or a user name (printable, not empty)", field="mail_user")
    cwd = req.cwd or "/"
    if not cwd.startswith("/"):
        raise BadRequest(f"cwd {cwd!r} must be an absolute path", field="cwd")
    for key in req.env:
        if not key or "=" in key or "\0" in key:
            raise BadRequest(f"environment variable name {key!r} is invalid", field="env")
    if req.groups is not None:
        grouped = _spec_of_groups(req, shape, caller, queue_name, priority, dependency, mail_type, cwd, config)
        _check_group_policy(grouped)
        return grouped
    spec = JobSpec(
        name=req.name or _default_name(req.argv or []),
        user=caller.user,
        uid=caller.uid if caller.uid is not None else -1,
        gid=caller.gid,
        queue=queue_name,
        priority=priority,
        workers=req.workers,
        per_worker=per_worker,
        resource=resource,
        gpu_model=req.gpu_model or None,
        nodes=req.nodes,
        argv=list(req.argv or []),
        env=dict(req.env),
        cwd=cwd,
        grace_s=req.grace_s if req.grace_s is not None else config.default_grace_s,
        time_limit_s=req.time_limit_s,
        requeue=req.requeue,
        signal=req.signal,
        topology=req.topology,
        cpu_bind=req.cpu_bind or CPU_BIND[0],
        min_workers=req.min_workers if req.min_workers != req.workers else None,
        dependency=dependency,
        begin_time=req.begin_time,
        output=req.output,
        error=req.error,
        mail_type=mail_type,
        mail_user=req.mail_user if mail_type else None,
        stdin=req.stdin,
        pty=req.pty,
        stdin_stream=req.stdin_stream,
        attached=req.attached,
        umask=DEFAULT_UMASK if req.umask is None else req.umask,
        cpus_per_task=req.cpus_per_task,
        mem=req.mem,
        mem_per_gpu=req.mem_per_gpu,
        exclusive=req.exclusive,
        success_policy=req.success_policy,
        failure_policy=req.failure_policy,
        max_restarts=req.max_restarts,
        startup_order=tuple(req.startup_order),
        shards=req.shards,
        mps=req.mps,
        gpu_mem=req.gpu_mem,
    )
    _check_group_policy(spec)
    return spec


def _check_group_policy(spec: JobSpec) -> None:
    """Refuse lifecycle policies the job's groups cannot honour (``lifecycle/group_policy.py``).
    A plain gang's policies (the defaults) suit every job: they are not checked again.

    Raises:
        BadRequest: naming the field (``success_policy``...) and its allowed values.
    """
    if spec.plain_policy:
        return
    try:
        check_policy(spec.group_policy, [g.name for g in spec.group_specs()])
    except BadGroupPolicy as exc:
        raise BadRequest(str(exc), field=exc.field) from None


def _check_share(req: SubmitBody, config: ClusterConfig, queue: QueueConfig) -> None:
    """A share of one GPU (``shards``/``mps``/``gpu_mem``): well formed, and one the cluster's
    ``[sharing]`` and the queue's ``share_gpus`` allow (docs/sharing.md). A request for no share
    (neither ``shards`` nor ``mps``) needs neither table: they are converted only for a share.

    Raises:
        BadRequest: one line naming the field and what is allowed.
    """
    if req.groups is not None and (req.shards or req.mps or req.gpu_mem):
        key = "shards" if req.shards else "mps" if req.mps else "gpu_mem"
        raise BadRequest(f"{key}: not for a job of groups; a share is one GPU for a job of one rank", field=key)
    if req.gpu_mem and not (req.shards or req.mps):
        raise BadRequest("gpu_mem: a device-memory budget goes with a share of a gpu (shards or mps)", field="gpu_mem")
    if not (req.shards or req.mps):
        return  # share_problem and share_refusal find nothing to refuse in a request for no share
    problem = share_problem(
        req.shards, req.mps, req.workers, req.gpus_per_worker or 1, req.mig, exclusive=req.exclusive
    )
    if problem is None:
        problem = share_refusal(config.gpu_sharing(), queue.to_spec(), req.shards, req.mps)
    if problem is not None:
        raise BadRequest(problem, field="mps" if req.mps and not req.shards else "shards")


def requested_array(body: Any, config: ClusterConfig) -> ArraySpec | None:
    """The job array a submission body asks for (its ``array`` field, Slurm's ``--array``
    syntax, docs/arrays.md), or None for a single job. Call after :func:`build_spec` accepted
    the body.

    Raises:
        BadRequest: the spec does not parse or is over ``limits.max_array_size``; the message
            names the part that is wrong (``array: "5-2": end below start``).
    """
    text = body.get("array") if isinstance(body, dict) else None
    if text is None:
        return None
    if not isinstance(text, str):
        raise BadRequest("array: must be a string such as 0-99, 1,3,5-9, 0-20:4 or 0-99%8", field="array")
    try:
        return parse_array(text, config.limits.max_array_size)
    except BadArraySpec as exc:
        raise BadRequest(f"array: {exc}", field="array") from None


def check_name_length(name: str, config: ClusterConfig) -> None:
    """Refuse a job name longer than ``[limits] max_name_chars`` (a submission's or ``update Name=``'s).

    Raises:
        BadRequest: naming the field and the limit.
    """
    limit = config.limits.max_name_chars
    if len(name) > limit:
        raise BadRequest(f"name: must be at most {limit} characters (limits.max_name_chars)", field="name")


def _check_sizes(req: SubmitBody, config: ClusterConfig) -> None:
    """Refuse a submission bigger than the cluster's ``[limits]`` (see :class:`LimitsConfig`).

    Raises:
        BadRequest: naming the field and the limit that applies.
    """
    limits = config.limits
    if req.name is not None:
        check_name_length(req.name, config)
    argv_bytes = max(
        sum(len(word.encode()) + 1 for word in argv) for argv in [req.argv or [], *(g.argv for g in req.groups or ())]
    )
    if argv_bytes > limits.max_argv_bytes:
        raise BadRequest(
            f"argv: {argv_bytes} bytes; must be at most {limits.max_argv_bytes} bytes (limits.max_argv_bytes)",
            field="argv",
        )
    env_bytes = sum(len(k.encode()) + len(v.encode()) + 2 for k, v in req.env.items())
    if env_bytes > limits.max_env_bytes:
        raise BadRequest(
            f"env: {env_bytes} bytes; must be at most {limits.max_env_bytes} bytes (limits.max_env_bytes)",
            field="env",
        )
    if req.cwd is not None and len(req.cwd.encode()) > limits.max_cwd_bytes:
        raise BadRequest(f"cwd: must be at most {limits.max_cwd_bytes} bytes (limits.max_cwd_bytes)", field="cwd")


_JOB_SHAPE_FIELDS = (
    "workers",
    "gpus_per_worker",
    "mig",
    "nodes",
    "gpu_model",
    "topology",
    "min_workers",
    "cpus_per_task",
    "mem",
    "mem_per_gpu",
    "argv",
)
"""Fields a job of groups gives per group, never at the job (``exclusive`` is the job's: every
group takes whole nodes)."""


def _group_shapes(req: SubmitBody, config: ClusterConfig) -> tuple[GroupSpec, ...]:
    """The groups of a job of groups, checked (docs/job-groups.md).

    Raises:
        BadRequest: naming the field (``groups.1.gpus_per_worker``) and the values allowed.
    """
    assert req.groups is not None
    at_job = [k for k in _JOB_SHAPE_FIELDS if k in req.model_fields_set]
    if at_job:
        raise BadRequest(
            f"{at_job[0]}: a job of groups gives each group's shape and command in groups, not at the job",
            field=at_job[0],
        )
    out: list[GroupSpec] = []
    for i, g in enumerate(req.groups):
        where = f"groups.{i}"
        name = g.name if g.name is not None else default_group_name(i)
        if not GROUP_NAME_RE.match(name):
            raise BadRequest(
                f"{where}.name: {name!r} is not a group name; allowed: a letter, then letters, digits, _ or - "
                "(at most 64)",
                field=f"{where}.name",
            )
        if not g.argv[0]:
            raise BadRequest(f"{where}.argv: the command (argv[0]) is an empty string", field=f"{where}.argv.0")
        if g.mig is not None:
            if not MIG_PROFILE_RE.match(g.mig):
                raise BadRequest(f"{where}.mig: {g.mig!r} is not a MIG profile such as '1g.10gb'", field=f"{where}.mig")
            if g.gpus_per_worker not in (None, 1):
                raise BadRequest(
                    f"{where}.gpus_per_worker: with mig each rank gets one MIG device; must be 1 or unset",
                    field=f"{where}.gpus_per_worker",
                    allowed=[1],
                )
            resource, per_worker = mig_resource(g.mig), 1
        else:
            resource, per_worker = GPU, 1 if g.gpus_per_worker is None else g.gpus_per_worker
        if g.nodes is not None and g.nodes > g.workers:
            raise BadRequest(
                f"{where}.nodes: {g.nodes} nodes for {g.workers} ranks; allowed: 1 to {g.workers}",
                field=f"{where}.nodes",
            )
        if g.topology is not None and g.topology not in TOPOLOGY_LEVELS:
            raise BadRequest(
                f"{where}.topology: {g.topology!r} is not a level; allowed: {', '.join(TOPOLOGY_LEVELS)}",
                field=f"{where}.topology",
                allowed=list(TOPOLOGY_LEVELS),
            )
        if g.topology is not None and g.nodes not in (None, 1):
            raise BadRequest(
                f"{where}.nodes: topology keeps the group on one node; nodes must be 1 or unset",
                field=f"{where}.nodes",
                allowed=[1],
            )
        if g.min_workers is not None and not (g.nodes or 1) <= g.min_workers <= g.workers:
            raise BadRequest(
                f"{where}.min_workers: {g.min_workers}; allowed: {g.nodes or 1} to {g.workers} (the group's "
                "ranks, at least one per node it asks for)",
                field=f"{where}.min_workers",
            )
        if g.mem and g.mem_per_gpu:
            raise BadRequest(f"{where}.mem_per_gpu: give mem or mem_per_gpu, not both", field=f"{where}.mem_per_gpu")
        if per_worker == 0 and g.mem_per_gpu:
            raise BadRequest(
                f"{where}.mem_per_gpu: a group with gpus_per_worker 0 has no device to count memory by; "
                "allowed: mem (per node) or cpus_per_task",
                field=f"{where}.mem_per_gpu",
            )
        for key in g.env:
            if not key or "=" in key:
                raise BadRequest(f"{where}.env: variable name {key!r} is invalid", field=f"{where}.env")
        out.append(
            GroupSpec(
                name=name,
                workers=g.workers,
                per_worker=per_worker,
                resource=resource,
                gpu_model=g.gpu_model or None,
                nodes=g.nodes,
                topology=g.topology,
                min_workers=g.min_workers if g.min_workers != g.workers else None,
                cpus_per_task=g.cpus_per_task,
                mem=g.mem,
                mem_per_gpu=g.mem_per_gpu,
                exclusive=req.exclusive,
                argv=tuple(g.argv),
                env=dict(g.env),
            )
        )
    names = [g.name for g in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise BadRequest(f"groups: group name {twice[0]!r} is used twice; allowed: distinct names", field="groups")
    spelled = [group_env_name(n) for n in names]
    alike = [n for n, e in zip(names, spelled, strict=True) if spelled.count(e) > 1]
    if alike:
        raise BadRequest(
            f"groups: group names {', '.join(repr(n) for n in alike)} are one variable name "
            f"(LABGANG_GROUP_{group_env_name(alike[0])}_ADDR); allowed: names that differ other than in case "
            "or - against _",
            field="groups",
        )
    kinds = sorted({g.resource for g in out if g.per_worker > 0})
    if len(kinds) > 1:
        raise BadRequest(f"groups: every group's devices must be of one kind; got {', '.join(kinds)}", field="groups")
    if not kinds:
        raise BadRequest(
            "groups: no group asks for a device; allowed: at least one with gpus_per_worker >= 1 or mig", field="groups"
        )
    if sum(g.workers for g in out) > MAX_WORKERS:
        raise BadRequest(
            f"groups: {sum(g.workers for g in out)} ranks in all; must be at most {MAX_WORKERS}", field="groups"
        )
    for together in req.colocate or ():
        unknown = [n for n in together if n not in names]
        if unknown or len(set(together)) < 2:
            raise BadRequest(
                f"colocate: {','.join(together)} must name two or more of the job's groups; "
                f"allowed: {', '.join(names)}",
                field="colocate",
                allowed=names,
            )
        for spec in out:
            if spec.name in together and spec.nodes not in (None, 1):
                raise BadRequest(
                    f"colocate: group {spec.name} asks for {spec.nodes} nodes but colocated groups share one node",
                    field="colocate",
                )
    return tuple(out)


def _spec_of_groups(
    req: SubmitBody,
    groups: tuple[GroupSpec, ...],
    caller: Caller,
    queue_name: str,
    priority: int,
    dependency: str | None,
    mail_type: tuple[str, ...],
    cwd: str,
    config: ClusterConfig,
) -> JobSpec:
    """The spec of a job of groups (``launcher/jobgroups.py``): ``workers`` = ranks over all
    groups, the other shape fields and ``argv`` the first group's; without a ``name``, it is named
    after the first group's command, as Slurm names a heterogeneous job after its first component."""
    first = groups[0]
    return JobSpec(
        name=req.name or _default_name(list(first.argv)),
        user=caller.user,
        uid=caller.uid if caller.uid is not None else -1,
        gid=caller.gid,
        queue=queue_name,
        priority=priority,
        workers=sum(g.workers for g in groups),
        per_worker=first.per_worker,
        resource=next(g.resource for g in groups if g.per_worker > 0),
        gpu_model=first.gpu_model,
        nodes=first.nodes,
        argv=list(first.argv),
        env=dict(req.env),
        cwd=cwd,
        grace_s=req.grace_s if req.grace_s is not None else config.default_grace_s,
        time_limit_s=req.time_limit_s,
        requeue=req.requeue,
        signal=req.signal,
        topology=first.topology,
        cpu_bind=req.cpu_bind or CPU_BIND[0],
        dependency=dependency,
        begin_time=req.begin_time,
        output=req.output,
        error=req.error,
        mail_type=mail_type,
        mail_user=req.mail_user if mail_type else None,
        stdin=req.stdin,
        pty=req.pty,
        attached=req.attached,
        umask=DEFAULT_UMASK if req.umask is None else req.umask,
        cpus_per_task=first.cpus_per_task,
        mem=first.mem,
        mem_per_gpu=first.mem_per_gpu,
        exclusive=req.exclusive,
        groups=groups,
        colocate=tuple(tuple(c) for c in req.colocate or ()),
        success_policy=req.success_policy,
        failure_policy=req.failure_policy,
        max_restarts=req.max_restarts,
        startup_order=tuple(req.startup_order),
    )


def _default_name(argv: list[str]) -> str:
    """``train.py`` for ``python train.py ...``, else the command's base name."""
    first = argv[0].rsplit("/", 1)[-1]
    if first.startswith("python") and len(argv) > 1 and not argv[1].startswith("-"):
        first = argv[1].rsplit("/", 1)[-1]
    return first[:64] or "job"
