"""The coordinator's side of scontrol's verbs: ``hold``, ``release``, ``requeue`` and ``update``.

Each function checks the caller as ``cancel`` does (the owner or an admin,
``Caller.check_may_act``), then the lifecycle's rules (``launcher/lifecycle/verbs.py``): a refused
request raises before anything is applied, so it changes nothing. An allowed one becomes one
lifecycle event, committed before the answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from labgang.launcher.config.limits import MAX_TIME_LIMIT_S
from labgang.launcher.config.queues import PRIORITY_MAX, PRIORITY_MIN
from labgang.launcher.coordinator.depends import dependency_cycle, submission_targets
from labgang.launcher.coordinator.errors import ApiError, BadRequest, Conflict, Forbidden
from labgang.launcher.coordinator.policy import check_priority_allowed, moved_priority_refusal, what_priority_allows
from labgang.launcher.coordinator.requests import Text, _first_error, check_name_length
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.records import JobRecord, JobSpec
from labgang.launcher.lifecycle.verbs import (
    JobUpdate,
    Refusal,
    hold_refusal,
    release_refusal,
    requeue_refusal,
    update_refusal,
)
from labgang.launcher.text import control_characters
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from labgang.launcher.config.cluster import ClusterConfig
    from labgang.launcher.coordinator.desk import JobDesk
    from labgang.launcher.coordinator.requests import Caller
    from labgang.launcher.coordinator.store import Store


class UpdateBody(BaseModel):
    """The JSON body of ``POST /v1/jobs/{id}/update`` (docs/openapi.json, ``UpdateRequest``)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)  # JSON true is no number

    priority: int | str | None = None
    time_limit_s: float | None = Field(default=None, gt=0, le=MAX_TIME_LIMIT_S)
    name: Text | None = None  # its length is [limits] max_name_chars's (check_name_length), as at submission
    dependency: str | None = Field(default=None, max_length=4096)
    queue: str | None = Field(default=None, min_length=1, max_length=256)


class RequeueBody(BaseModel):
    """The JSON body of ``POST /v1/jobs/{id}/requeue``: ``{"hold": true}`` also holds it."""

    model_config = ConfigDict(extra="forbid")

    hold: StrictBool = False


_REFUSALS: dict[str, type[ApiError]] = {"state": Conflict, "forbidden": Forbidden, "invalid": BadRequest}


def _refuse(refusal: Refusal | None) -> None:
    """Raise the API error a lifecycle refusal means: 409 for the job's state, 403 for a value the
    caller may not set, 400 for a malformed one."""
    if refusal is not None:
        raise _REFUSALS[refusal.kind](refusal.message, field=refusal.field)


def _validated(model: type[BaseModel], body: Any) -> Any:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        err = _first_error(exc)
        if err.allowed is not None and err.message.startswith("unknown field"):
            err.allowed = sorted(model.model_fields)
        raise err from None


async def hold(coord: JobDesk, caller: Caller, job_id: str) -> JobRecord:
    """Hold a pending job (``labgang hold``): no cycle admits it until it is released.

    Raises:
        NotFound: no such job. Forbidden: not the owner and not an admin.
        Conflict: the job is not pending.
    """
    job = coord.get_job(job_id)
    caller.check_may_act(job, "hold it")
    _refuse(hold_refusal(job))
    coord.apply(ev.HoldRequested(coord.clock(), job.id, caller.user, admin=caller.admin and not caller.owns(job.spec)))
    await coord.flush()
    return job


async def release(coord: JobDesk, caller: Caller, job_id: str) -> JobRecord:
    """Release a held job (``labgang release``).

    Raises:
        NotFound: no such job. Forbidden: not the owner and not an admin, or an admin hold
        released by a non-admin. Conflict: the job is not held.
    """
    job = coord.get_job(job_id)
    caller.check_may_act(job, "release it")
    _refuse(release_refusal(job, caller.admin))
    coord.apply(ev.ReleaseRequested(coord.clock(), job.id, caller.user))
    await coord.flush()
    return job


async def requeue(coord: JobDesk, caller: Caller, job_id: str, body: Any) -> JobRecord:
    """Requeue an admitted or running job (``labgang requeue [--hold]``, Slurm's ``scontrol
    requeue``): its ranks get SIGTERM, then SIGKILL after its grace; then it is pending again.

    Raises:
        BadRequest: a malformed body. NotFound: no such job. Forbidden: not the owner and not an
        admin. Conflict: the job is not admitted or running.
    """
    req = _validated(RequeueBody, body)
    job = coord.get_job(job_id)
    caller.check_may_act(job, "requeue it")
    _refuse(requeue_refusal(job))
    admin_hold = caller.admin and not caller.owns(job.spec)
    coord.apply(ev.RequeueRequested(coord.clock(), job.id, caller.user, hold=req.hold, admin=admin_hold))
    await coord.flush()
    return job


async def update(
    coord: JobDesk,
    caller: Caller,
    job_id: str,
    body: Any,
    *,
    config: ClusterConfig,
    store: Store,
    active: Mapping[str, JobRecord],
    recent: Mapping[str, JobRecord],
    check_moved: Callable[[JobSpec], None] | None = None,
) -> JobRecord:
    """Change a job's priority, time limit, name, dependency or queue (``labgang update``).

    A queue change (Slurm's ``Partition=``) is refused as a submission to that queue would be:
    a queue the caller may not use, a priority a non-admin could not give a job there, and
    whatever ``check_moved`` (``JobOperations.check_moved``: the user's submitted-jobs limit, a
    job the queue could never start) raises for the moved spec.

    Args:
        config: the cluster configuration (priority classes, the queues' policies).
        store / active / recent: where a new dependency's jobs are looked up: the database, the
            lifecycle model's jobs and the recently finished ones, by id.

    Raises:
        BadRequest: a malformed field, or no field at all. NotFound: no such job, or a dependency
        naming no job. Forbidden: not the owner and not an admin, or a raise only an admin may
        make. Conflict: a finished job, or a dependency change once the job left pending.
    """
    req = _validated(UpdateBody, body)
    # an explicit null time limit lifts it (`update TimeLimit=UNLIMITED` or `0`, as Slurm)
    no_time_limit = "time_limit_s" in req.model_fields_set and req.time_limit_s is None
    if not no_time_limit and all(getattr(req, name) is None for name in UpdateBody.model_fields):
        raise BadRequest("nothing to update: give at least one field", allowed=sorted(UpdateBody.model_fields))
    priority = None
    if req.priority is not None:
        try:
            priority = config.resolve_priority(req.priority)
        except ValueError as exc:
            raise _unknown_priority(config, coord, job_id, caller, req.priority, exc) from None
        if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
            raise BadRequest(
                f"priority: {priority} is out of range (allowed: an integer from {PRIORITY_MIN} to {PRIORITY_MAX})",
                field="priority",
            )
    if req.name is not None:
        check_name_length(req.name, config)
    if req.name is not None and control_characters(req.name):
        raise BadRequest(f"name: {req.name!r} contains control characters; allowed: printable characters", field="name")
    if req.queue is not None and config.queue(req.queue) is None:
        names = [q.name for q in config.queues]
        allowed = ", ".join(names)
        raise BadRequest(f"queue: {req.queue!r} is not a queue; allowed: {allowed}", field="queue", allowed=names)
    change = JobUpdate(
        priority=priority,
        time_limit_s=req.time_limit_s,
        name=req.name,
        dependency=req.dependency,
        no_time_limit=no_time_limit,
        queue=req.queue,
    )
    job = coord.get_job(job_id)
    caller.check_may_act(job, "update it")
    # the job's own rules first: a raise a non-admin may not make is refused as that, before the
    # queue's classes would be offered (a class above the job's priority is a raise too)
    _refuse(update_refusal(job, change, caller.admin))
    if req.priority is not None:  # the queue's priority classes hold for an update as for a submission
        refusal = check_priority_allowed(  # the queue it is in after this update: its classes
            config, req.queue or job.spec.queue, req.priority, user=caller.user, admin=caller.may_set_priority
        )
        if refusal is not None:
            raise Forbidden(refusal.message, field=refusal.field, allowed=refusal.allowed)
    if "queue" in change.changes(job.spec):
        _check_move(config, caller, job, change, check_moved)
    if change.dependency:  # only an update can close a cycle: refuse it, as Slurm does
        cycle = dependency_cycle(active.values(), job.id, change.dependency)
        if cycle is not None:
            chain = " -> ".join([job.id, *cycle])
            raise BadRequest(
                f"dependency: {change.dependency!r} would make job {job.id} wait for itself ({chain}); "
                "allowed: a dependency on jobs that do not wait for this one",
                field="dependency",
            )
    targets: tuple[Any, ...] = ()
    if "dependency" in change.changes(job.spec):
        targets = submission_targets(store, active, recent, change.applied(job.spec))
    coord.apply(ev.UpdateRequested(coord.clock(), job.id, caller.user, change, targets))
    await coord.flush()
    return job


def _unknown_priority(
    config: ClusterConfig, coord: JobDesk, job_id: str, caller: Caller, value: object, exc: ValueError
) -> BadRequest:
    """The refusal of an update's unknown priority class: with classes configured and the job known,
    the ones this user may use in the job's queue (as ``submit`` and ``explain`` list them), else
    the resolver's words."""
    try:
        queue = config.queue(coord.get_job(job_id).spec.queue) if config.priority_classes else None
    except ApiError:  # no such job: its own refusal follows the value's
        queue = None
    if queue is None:
        classes = sorted(config.priority_classes)
        return BadRequest(f"priority: {exc}", field="priority", allowed=classes or None)
    allows, names = what_priority_allows(config, queue, admin=caller.may_set_priority)
    where = "" if caller.may_set_priority else f" in queue {queue.name}"
    return BadRequest(
        f"priority: unknown priority class {str(value).strip()!r}{where}; allowed: {allows}",
        field="priority",
        allowed=names or None,
    )


def _check_move(
    config: ClusterConfig,
    caller: Caller,
    job: JobRecord,
    change: JobUpdate,
    check_moved: Callable[[JobSpec], None] | None,
) -> None:
    """Refuse moving pending ``job`` to ``change.queue`` where a submission there would be refused.

    Raises:
        Forbidden: the caller (the job's owner, unless an admin) may not use that queue, or a
            non-admin's job has a priority that queue would not give it. Conflict: what
            ``check_moved`` raises.
    """
    target = config.queue(change.queue or "")
    assert target is not None  # checked with the body
    if not config.may_use_queue(target, caller.user, caller.groups):  # admins may use any queue
        usable = [q.name for q in config.queues if config.may_use_queue(q, caller.user, caller.groups)]
        raise Forbidden(f"user {caller.user!r} may not submit to queue {target.name!r}", field="queue", allowed=usable)
    moved = change.applied(job.spec)  # with the update's other changes (a lower priority given with it)
    if not caller.may_set_priority:
        refusal = moved_priority_refusal(config, target, job.id, moved.priority)
        if refusal is not None:
            raise Forbidden(refusal.message, field=refusal.field)
    if check_moved is not None:
        check_moved(moved)
