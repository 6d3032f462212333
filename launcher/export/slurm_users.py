"""Who uses each queue, per-user limits and per-queue priority classes for ``labgang export slurm``.

Slurm admits a job only for a user with an association to its account
(``AccountingStorageEnforce=associations``), so every user who may submit to a queue gets one:
the queue's ``users``, the members of its ``groups`` (from this machine's group database) and,
for a queue open to everyone, every login user of the machine that runs the export (uid 1000 to
59999 with a login shell); users who come later need ``sacctmgr add user NAME account=QUEUE``.

Per-user limits (launcher/coordinator/policy.py) become the queue's QOS limits ``MaxTRESPerUser=gres/gpu=N``,
``MaxJobsPerUser`` and ``MaxSubmitJobsPerUser`` (on ``<queue>`` and ``<queue>-borrow``: Slurm counts
each QOS apart), and the same caps on each user's association with the queue's account
(``GrpTRES``, ``MaxJobs``, ``MaxSubmitJobs``), which count the two QOS together, as labgang does.

A queue's ``priority_classes`` (``--slurm-mode partitions``, where classes are job QOS
``prio-<class>``) become the QOS its users' associations may use, and ``default_priority_class``
their ``DefaultQOS``; without a default class they keep Slurm's ``normal`` QOS (priority 0) as the
default, as labgang gives priority 0.
"""

from __future__ import annotations

import grp
import pwd
import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from labgang.launcher.config.cluster import QueueConfig
from labgang.launcher.export.common import Gap

LOGIN_UID_MIN, LOGIN_UID_MAX = 1000, 60000
NO_LOGIN_SHELLS = ("nologin", "false", "sync", "halt", "shutdown")


def system_group_members(group: str) -> list[str]:
    """Members of Unix group ``group`` on this machine: listed members and users whose primary group
    it is; [] for an unknown group."""
    try:
        g = grp.getgrnam(group)
    except KeyError:
        return []
    return sorted({*g.gr_mem, *(p.pw_name for p in pwd.getpwall() if p.pw_gid == g.gr_gid)})


def system_login_users() -> list[str]:
    """This machine's login users: uid 1000 to 59999 and a shell that lets them log in."""
    return sorted(
        p.pw_name
        for p in pwd.getpwall()
        if LOGIN_UID_MIN <= p.pw_uid < LOGIN_UID_MAX and not p.pw_shell.rstrip("/").endswith(NO_LOGIN_SHELLS)
    )


@dataclass(frozen=True)
class Directory:
    """Where the export finds users: ``group_members(group)`` and ``login_users()`` (this machine's
    password and group databases by default; tests pass their own)."""

    group_members: Callable[[str], list[str]] = field(default=system_group_members)
    login_users: Callable[[], list[str]] = field(default=system_login_users)


def queue_users(q: QueueConfig, directory: Directory) -> list[str]:
    """Who may submit to ``q``, sorted: its ``users`` and its ``groups``' members; everyone (the
    login users) when it names neither."""
    if q.users is None and q.groups is None:
        return sorted(set(directory.login_users()))
    found = set(q.users or [])
    for g in q.groups or []:
        found.update(directory.group_members(g))
    return sorted(found)


_LIMIT_KEYS = (
    ("max_gpus_per_user", "MaxTRESPerUser=gres/gpu", "GrpTRES=gres/gpu"),
    ("max_running_jobs_per_user", "MaxJobsPerUser", "MaxJobs"),
    ("max_submitted_jobs_per_user", "MaxSubmitJobsPerUser", "MaxSubmitJobs"),
)
"""Each per-user limit of a queue: its key, its QOS setting and its association setting."""


def qos_limits(q: QueueConfig) -> list[str]:
    """The queue's per-user limits as QOS settings (``MaxTRESPerUser=gres/gpu=4`` ...)."""
    return [f"{qos}={getattr(q, key)}" for key, qos, _ in _LIMIT_KEYS if getattr(q, key) is not None]


def association_limits(q: QueueConfig) -> list[str]:
    """The queue's per-user limits as settings of one user's association (``GrpTRES=gres/gpu=4`` ...)."""
    return [f"{assoc}={getattr(q, key)}" for key, _, assoc in _LIMIT_KEYS if getattr(q, key) is not None]


def class_qos(q: QueueConfig, classes: dict[str, str], values: Mapping[str, int]) -> list[str]:
    """``QOS=... DefaultQOS=...`` for the associations of a queue that lists its priority classes
    (``classes``: class → its QOS, partitions mode; ``values``: class → priority); [] for a queue
    without a list. The default is the queue's ``default_priority_class``, else a class of value 0
    (what labgang gives a job without -p), else Slurm's ``normal`` QOS."""
    if q.priority_classes is None or not classes:
        return []
    allowed = [classes[c] for c in q.priority_classes if c in classes]
    zero = sorted(classes[c] for c, v in values.items() if v == 0 and c in classes)
    default = classes.get(q.default_priority_class or "") or (zero[0] if zero else "normal")
    if default not in allowed:
        allowed.append(default)
    return [f"QOS={','.join(sorted(allowed))}", f"DefaultQOS={default}"]


def user_lines(
    q: QueueConfig, account: str, users: list[str], classes: dict[str, str], values: Mapping[str, int]
) -> tuple[list[str], list[str]]:
    """``sacctmgr`` commands (without ``sacctmgr -i``) for the users of ``q``'s account ``account``
    (``classes``, ``values``: see :func:`class_qos`): ``(settings without TRES, run once the QOS
    exist; settings with TRES, run in the limits step)``."""
    first: list[str] = []
    later: list[str] = []
    plain = [s for s in association_limits(q) if not s.startswith("GrpTRES=")] + class_qos(q, classes, values)
    tres = [s for s in association_limits(q) if s.startswith("GrpTRES=")]
    for user in users:
        where = f"modify user where name={shlex.quote(user)} account={account} set "
        if plain:
            first.append(where + " ".join(plain))
        if tres:
            later.append(where + " ".join(tres))
    return first, later


def gaps(queues: list[QueueConfig], users: dict[str, list[str]], mode: str) -> list[Gap]:
    """What users, per-user limits and per-queue classes lose in Slurm."""
    out: list[Gap] = []
    for i, q in enumerate(queues):
        if q.users is None and q.groups is None:
            found = users.get(q.name) or []
            out.append(
                Gap(
                    f"queues[{i}] (no users or groups)",
                    "a queue open to every user, including users added later",
                    f"an association per login user of the machine that ran the export ({len(found)}); "
                    f"add later users with `sacctmgr add user NAME account={q.name.lower()}`",
                )
            )
        if qos_limits(q):
            out.append(
                Gap(
                    ", ".join(f"queues[{i}].{k}" for k in _limit_keys(q)),
                    "one per-user limit over the queue as a whole",
                    "QOS MaxTRESPerUser/MaxJobsPerUser/MaxSubmitJobsPerUser per QOS (the -borrow QOS counts apart), "
                    "and GrpTRES/MaxJobs/MaxSubmitJobs on each user's association, which counts both",
                )
            )
        if mode == "qos" and (q.priority_classes is not None or q.default_priority_class is not None):
            out.append(
                Gap(
                    f"queues[{i}].priority_classes, queues[{i}].default_priority_class",
                    "the priority classes a queue allows",
                    "--slurm-mode partitions (each user's association lists the class QOS it may use)",
                )
            )
    return out


def _limit_keys(q: QueueConfig) -> list[str]:
    keys = ("max_gpus_per_user", "max_running_jobs_per_user", "max_submitted_jobs_per_user")
    return [k for k in keys if getattr(q, k) is not None]
