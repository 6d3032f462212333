"""Who may use which priority, and how many jobs one user may submit, per queue (``cluster.toml``).

The rules (README, "Who may use what"):

- **Priority classes.** ``[priority_classes]`` names priorities cluster-wide; a queue's
  ``priority_classes = [...]`` lists the ones its jobs may use (absent: every class), and its
  ``default_priority_class`` is the class of a job submitted without ``-p`` (absent: priority 0).
- **Raw numbers** (``-p 500``) above the queue's default priority are for admins only: root,
  ``admins``, members of ``admin_groups``, and the user the coordinator runs as (on a
  workstation, whoever ran ``labgang up``; under systemd, the ``labgang`` service user, which
  nobody logs in as). Anyone else names a class the queue allows, or gives a number at or below
  the default (like Slurm's ``--nice``: a user may only lower their own job). Admins may also
  name any class in any queue.
- **Submitted jobs.** ``max_submitted_jobs_per_user`` (Slurm's MaxSubmitJobsPerUser) bounds one
  user's unfinished jobs in the queue (pending, held, or holding devices; each array task
  counts), admins included; a submission that would go over it is refused whole.

Every check returns a :class:`Refusal` (one line naming the rule and what is allowed, the request
field, the allowed values) or None, and changes nothing: the coordinator turns a refusal into a
403 before anything is stored. :func:`check_priority_allowed` is the one check for any path that
sets a job's priority (submission, ``labgang update JOB priority=...``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from labgang.launcher.config.cluster import ClusterConfig, QueueConfig


@dataclass(frozen=True, slots=True)
class Refusal:
    """A request the policy refuses (HTTP 403, CLI exit 1).

    Attributes:
        message: one line naming the rule and what is allowed.
        field: the request field at fault (``"priority"``, ``"queue"``); None when no field is
            (a limit reached: the same request may pass later).
        allowed: the values that would have been accepted (class names), or None.
    """

    message: str
    field: str | None
    allowed: list[str] | None = None


class UnknownPriority(ValueError):
    """A priority that is neither an integer nor a class of ``[priority_classes]`` (a bad value:
    HTTP 400, CLI exit 2). The message lists the allowed names."""


def usable_classes(config: ClusterConfig, queue: QueueConfig) -> list[str]:
    """The class names a non-admin may give jobs of ``queue``, lowest value first (ties by name)."""
    names = queue.priority_classes if queue.priority_classes is not None else list(config.priority_classes)
    return sorted((n for n in names if n in config.priority_classes), key=lambda n: (config.priority_classes[n], n))


def classes_text(config: ClusterConfig, names: list[str]) -> str:
    """``"low (-10), normal (0)"``: class names with their values, for messages."""
    return ", ".join(f"{n} ({config.priority_classes[n]})" for n in names)


def parse_priority(config: ClusterConfig, value: int | str | None) -> tuple[int | None, str | None]:
    """``(number, class name)`` of a requested priority: ``(None, None)`` for none given, ``(v, None)``
    for a raw integer (an int or a string of digits), ``(value of the class, name)`` for a class
    (named in any case when only one class has that name in any case: ``HIGH`` is ``high``).

    Raises:
        UnknownPriority: a string that is neither an integer nor a class; the message lists the classes.
    """
    if value is None:
        return None, None
    if isinstance(value, bool):
        raise UnknownPriority("priority must be an integer or a priority class name")
    if isinstance(value, int):
        return value, None
    text = str(value).strip()
    if text in config.priority_classes:
        return config.priority_classes[text], text
    folded = [name for name in config.priority_classes if name.casefold() == text.casefold()]
    if len(folded) == 1:  # any case, as Slurm's QOS names (-p HIGH is class high)
        return config.priority_classes[folded[0]], folded[0]
    try:
        return int(text), None
    except ValueError:
        if not config.priority_classes:
            raise UnknownPriority(
                f"priority: {text!r} is not an integer, and no priority classes are configured (allowed: an integer)"
            ) from None
        names = ", ".join(sorted(config.priority_classes))
        raise UnknownPriority(f"unknown priority class {text!r}; allowed: an integer or one of {names}") from None


def what_priority_allows(config: ClusterConfig, queue: QueueConfig, *, admin: bool) -> tuple[str, list[str]]:
    """What ``-p`` takes for this user in ``queue``: the "allowed: ..." text and the class names.

    An admin: any integer or any class; anyone else: an integer up to the queue's default priority
    (lowering one's own job) or one of the queue's classes (:func:`usable_classes`).
    """
    if admin:
        names = sorted(config.priority_classes)
        return ("an integer or one of " + ", ".join(names) if names else "an integer"), names
    usable = usable_classes(config, queue)
    default = submission_priority(config, queue, None)
    classes = f" or one of {classes_text(config, usable)}" if usable else " (no class)"
    return f"an integer up to {default}{classes}", usable


def check_priority_allowed(
    config: ClusterConfig, queue_name: str, value: int | str | None, *, user: str, admin: bool
) -> Refusal | None:
    """May ``user`` give a job of queue ``queue_name`` the priority ``value``?

    Args:
        config: the cluster configuration.
        queue_name: the job's queue (an unknown queue is refused, field ``queue``).
        value: what was asked: an int, a class name, a string of digits, or None (the queue's default).
        user: the user asking, for the message.
        admin: the user is an admin (root, ``admins``, ``admin_groups``, or the coordinator's own user).

    Returns:
        None when allowed, else the refusal: a raw number above the queue's default priority from
        a non-admin, or a class the queue does not list.

    Raises:
        UnknownPriority: ``value`` is neither an integer nor a class (a bad value, not a refusal).
    """
    queue = config.queue(queue_name)
    if queue is None:
        names = [q.name for q in config.queues]
        return Refusal(f"queue: {queue_name!r} is not a queue; allowed: {', '.join(names)}", "queue", names)
    number, name = parse_priority(config, value)
    if number is None or admin:
        return None
    usable = usable_classes(config, queue)
    default = submission_priority(config, queue, None)
    allowed = f"name one of {classes_text(config, usable)}" if usable else "no -p (the queue's default priority)"
    if name is None:
        if number <= default:  # Slurm's --nice for users: lowering one's own job is anyone's right
            return None
        return Refusal(
            f"priority: a number (-p {number}) above the queue's default ({default}) is for admins only; "
            f"user {user} may use queue {queue_name}'s priority classes: {allowed}, or a number up to {default}",
            "priority",
            usable or None,
        )
    if name not in usable:
        # worded as an unknown class is (requests.py): what -p takes here, numbers too
        return Refusal(
            f"priority: class {name!r} is not allowed in queue {queue_name} (its priority_classes); "
            f"allowed: {what_priority_allows(config, queue, admin=False)[0]}",
            "priority",
            usable,
        )
    return None


def moved_priority_refusal(config: ClusterConfig, queue: QueueConfig, job_id: str, priority: int) -> Refusal | None:
    """May a non-admin's pending job of ``priority`` move into ``queue`` (``update Partition=``)?
    Yes when a non-admin could submit it there with that priority: at most the queue's default,
    or the value of a class the queue allows (:func:`usable_classes`); else the refusal names both.
    """
    usable = usable_classes(config, queue)
    default = submission_priority(config, queue, None)
    if priority <= default or any(config.priority_classes[n] == priority for n in usable):
        return None
    allowed = f"its classes {classes_text(config, usable)}" if usable else "no class"
    return Refusal(
        f"queue: priority {priority} (job {job_id}'s) is not one queue {queue.name} gives a non-admin (a number "
        f"up to its default {default}, or {allowed}); lower it first (update Priority=...) or ask an admin",
        "queue",
        None,
    )


def submission_priority(config: ClusterConfig, queue: QueueConfig, value: int | str | None) -> int:
    """The priority a job of ``queue`` gets for ``value`` (already allowed by
    :func:`check_priority_allowed`): the class's value or the number, else the value of the queue's
    ``default_priority_class``, else 0.

    Raises:
        UnknownPriority: ``value`` is neither an integer nor a class.
    """
    number, _name = parse_priority(config, value)
    if number is not None:
        return number
    if queue.default_priority_class is not None:
        return config.priority_classes[queue.default_priority_class]
    return 0


def check_submitted_limit(queue: QueueConfig, user: str, unfinished: int, adding: int) -> Refusal | None:
    """May ``user``, with ``unfinished`` jobs in ``queue`` (pending, held or holding devices),
    submit ``adding`` more (1, or an array's task count)? None when ``max_submitted_jobs_per_user``
    allows it."""
    limit = queue.max_submitted_jobs_per_user
    if limit is None or unfinished + adding <= limit:
        return None
    what = "1 more job" if adding == 1 else f"{adding} more jobs"
    return Refusal(
        f"user {user} has {unfinished} of {limit} unfinished jobs allowed in queue {queue.name} "
        f"(max_submitted_jobs_per_user); refused {what}: cancel some or wait for them to end",
        None,  # not a field: the CLI must not read it as a refused default queue
    )


@dataclass(frozen=True, slots=True)
class UserUsage:
    """One user's standing in one queue against its per-user limits.

    Attributes:
        user: the user.
        gpus: devices their jobs of the queue hold (any resource; a MIG device counts one).
        running: their jobs of the queue holding devices.
        submitted: their unfinished jobs of the queue (pending, held, or holding devices).
    """

    user: str
    gpus: int = 0
    running: int = 0
    submitted: int = 0


def limits_of(queue: QueueConfig) -> dict[str, int]:
    """The per-user limits ``queue`` sets, by key (``max_gpus_per_user``: 4, ...); {} when none."""
    out = {
        "max_gpus_per_user": queue.max_gpus_per_user,
        "max_running_jobs_per_user": queue.max_running_jobs_per_user,
        "max_submitted_jobs_per_user": queue.max_submitted_jobs_per_user,
    }
    return {k: v for k, v in out.items() if v is not None}


def at_limits(queue: QueueConfig, usage: Mapping[str, UserUsage]) -> dict[str, list[str]]:
    """Which users are at each of ``queue``'s per-user limits: ``{"max_gpus_per_user": ["lab1"]}``
    (users sorted; only limits someone is at)."""
    out: dict[str, list[str]] = {}
    for key, limit in limits_of(queue).items():
        attr = {"max_gpus_per_user": "gpus", "max_running_jobs_per_user": "running"}.get(key, "submitted")
        users = sorted(u for u, use in usage.items() if getattr(use, attr) >= limit)
        if users:
            out[key] = users
    return out
