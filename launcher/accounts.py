"""Who a uid is on this host (password and group databases), and which names a cluster
config gives that this host does not know."""

from __future__ import annotations

import grp
import pwd
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labgang.launcher.config.cluster import ClusterConfig


def unknown_accounts(cfg: ClusterConfig) -> list[str]:
    """Users and groups that ``cfg`` names but this host's password/group database lacks.

    Not errors: on a lab cluster accounts may exist only on the nodes (or come from LDAP
    later), so ``labgang config check`` prints these as warnings and still exits 0.

    Args:
        cfg: a validated configuration.

    Returns:
        One line per unknown name, starting with its key path (``admins``,
        ``admin_groups``, ``queues[i].users``, ``queues[i].groups``).
    """

    def known_user(name: str) -> bool:
        try:
            pwd.getpwnam(name)
            return True
        except KeyError:
            return False

    def known_group(name: str) -> bool:
        try:
            grp.getgrnam(name)
            return True
        except KeyError:
            return False

    places: list[tuple[str, list[str] | None, str]] = [
        ("admins", cfg.admins, "user"),
        ("admin_groups", cfg.admin_groups, "group"),
    ]
    for i, q in enumerate(cfg.queues):
        places += [(f"queues[{i}].users", q.users, "user"), (f"queues[{i}].groups", q.groups, "group")]
    out = []
    for where, names, kind in places:
        for name in names or ():
            if not (known_user(name) if kind == "user" else known_group(name)):
                out.append(f"{where}: unknown {kind} {name!r} on this host (fine if it exists only on other hosts)")
    return out


def user_name(uid: int) -> str:
    """The login name of ``uid`` (``str(uid)`` when the password database has none)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def user_groups(uid: int) -> tuple[str, ...]:
    """Names of the groups ``uid`` belongs to (primary and supplementary); empty if unknown."""
    try:
        entry = pwd.getpwuid(uid)
    except KeyError:
        return ()
    names = set()
    try:
        names.add(grp.getgrgid(entry.pw_gid).gr_name)
    except KeyError:
        pass
    for g in grp.getgrall():
        if entry.pw_name in g.gr_mem:
            names.add(g.gr_name)
    return tuple(sorted(names))


def primary_gid(uid: int) -> int | None:
    """The primary gid of ``uid``, or None when the password database has none."""
    try:
        return pwd.getpwuid(uid).pw_gid
    except KeyError:
        return None
