"""Whom a rank runs as: the uid/gid/groups policy and the checks behind it."""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Collection
from dataclasses import dataclass

from .errors import LaunchRefused


@dataclass(frozen=True)
class RunAs:
    """The credentials a rank is started with.

    Attributes:
        uid: user id.
        gid: primary group id.
        groups: supplementary groups (``os.getgrouplist`` of the user), primary included.
        name: login name.
        home: home directory from the passwd database.
        drop_privileges: True when the agent is root and switches to these credentials at spawn
            (``subprocess`` ``user=``/``group=``/``extra_groups=``); False when the agent already
            runs as this user.
    """

    uid: int
    gid: int
    groups: tuple[int, ...]
    name: str
    home: str
    drop_privileges: bool


def resolve_run_as(
    uid: int, gid: int | None, *, job_id: str, agent_uid: int, allowed_uids: Collection[int] | None, allow_root: bool
) -> RunAs:
    """Decide the credentials of a rank, or refuse.

    Rules: an agent running as root may start any non-root uid with a passwd entry (restricted to
    ``allowed_uids`` when given) and root only when ``allow_root``; an agent running as a normal
    user starts only that user's ranks.

    Args:
        uid: the submitting user's uid (``LaunchSpec.uid``).
        gid: the asked primary group, or None for the user's own.
        job_id: for the error messages.
        agent_uid: the agent's effective uid (``os.geteuid()``).
        allowed_uids: uids a root agent may run; None = every non-root user.
        allow_root: whether uid 0 jobs are allowed.

    Raises:
        LaunchRefused: the policy forbids it, or the user or group is unknown; the message says why.
    """
    if agent_uid != 0:
        return _run_as_self(uid, gid, job_id=job_id, agent_uid=agent_uid)
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        raise LaunchRefused(
            f"uid: job {job_id} asks for uid {uid}, which has no passwd entry; the agent "
            f"needs the user's name to find their groups"
        ) from None
    if uid == 0 and not allow_root:
        raise LaunchRefused(
            f"uid: job {job_id} asks to run as root, and root jobs are off (allow_root = false in the agent config)"
        )
    if uid != 0 and allowed_uids is not None and uid not in allowed_uids:
        raise LaunchRefused(
            f"uid: job {job_id} asks for uid {uid} ({entry.pw_name}), which this agent's "
            f"config does not allow (allowed: {sorted(allowed_uids)})"
        )
    groups = tuple(sorted(set(os.getgrouplist(entry.pw_name, entry.pw_gid))))
    primary = entry.pw_gid if gid is None else gid
    if gid is not None and gid not in groups:
        raise LaunchRefused(
            f"gid: job {job_id} asks for gid {gid}, which user {entry.pw_name} is not in (allowed: {list(groups)})"
        )
    return RunAs(uid=uid, gid=primary, groups=groups, name=entry.pw_name, home=entry.pw_dir, drop_privileges=True)


def _run_as_self(uid: int, gid: int | None, *, job_id: str, agent_uid: int) -> RunAs:
    """The credentials of a rank started by a non-root agent: its own, unchanged.

    Raises:
        LaunchRefused: ``uid`` is not the agent's, or ``gid`` is not its current group (an
            unprivileged process cannot switch its primary group).
    """
    try:
        entry = pwd.getpwuid(agent_uid)
        name, home = entry.pw_name, entry.pw_dir
    except KeyError:  # an arbitrary uid in a container: nothing to look up, nothing to change
        name, home = str(agent_uid), os.environ.get("HOME", "/")
    if uid != agent_uid:
        raise LaunchRefused(
            f"uid: this agent runs as uid {agent_uid} ({name}) and starts only that user's "
            f"ranks; job {job_id} asks for uid {uid}. Run the agent as root to start other "
            f"users' jobs"
        )
    egid = os.getegid()
    if gid is not None and gid != egid:
        raise LaunchRefused(
            f"gid: this agent runs with gid {egid} and cannot switch groups; job {job_id} "
            f"asks for gid {gid} (allowed: {egid} or null)"
        )
    return RunAs(
        uid=uid,
        gid=egid,
        groups=tuple(sorted(set(os.getgroups()) | {egid})),
        name=name,
        home=home,
        drop_privileges=False,
    )


def check_can_enter(path: str, run_as: RunAs) -> None:
    """Refuse a working directory the user could not ``cd`` into themselves.

    The rank's ``chdir`` happens before privileges are dropped, so without this check root's
    access would leak to the user. Checks the mode bits (search permission on every component,
    ACLs not considered, so an ACL-only grant is refused).

    Raises:
        LaunchRefused: naming ``cwd`` and the component that blocks the user.
    """
    if run_as.uid == 0:
        return
    components = ["/"]
    for part in (p for p in path.split("/") if p):
        components.append(os.path.join(components[-1], part))
    for current in components:
        try:
            st = os.stat(current)
        except OSError as exc:
            raise LaunchRefused(f"cwd: {path} is not usable: {current}: {exc.strerror}") from None
        if not stat.S_ISDIR(st.st_mode):
            raise LaunchRefused(f"cwd: {current} is not a directory (allowed: an existing directory)")
        if st.st_uid == run_as.uid:
            allowed = st.st_mode & stat.S_IXUSR
        elif st.st_gid in run_as.groups:
            allowed = st.st_mode & stat.S_IXGRP
        else:
            allowed = st.st_mode & stat.S_IXOTH
        if not allowed:
            raise LaunchRefused(
                f"cwd: user {run_as.name} (uid {run_as.uid}) may not enter {current} on the way to {path}"
            )
