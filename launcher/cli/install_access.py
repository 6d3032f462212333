"""Can a Unix user run a program? What ``labgang install`` checks before it points a unit's
``ExecStart=`` at a labgang, or calls a venv usable by every user.

A venv's ``bin/labgang`` is a script whose ``#!`` names the venv's ``python``, itself a link to the
interpreter it was made from: a pyenv Python under ``/root`` (mode 0700) makes the whole venv
unusable by anyone but root, though every file in the venv is readable. So the check follows the
script's ``#!`` line and every symbolic link, and asks of each directory on the way whether the user
may search it, and of each file whether they may read and execute it.
"""

from __future__ import annotations

import os
import pwd
import stat
from dataclasses import dataclass
from pathlib import Path

MAX_HOPS = 8  # #! lines and links followed before giving up (a loop)


@dataclass(frozen=True)
class Identity:
    """Whose access is checked: ``uid`` and group ids; ``name`` for messages. ``uid`` None means
    a user who owns nothing and is in no group of the files (what any other user sees)."""

    name: str
    uid: int | None
    gids: frozenset[int]

    @classmethod
    def of(cls, user: str) -> Identity:
        """The user named ``user``; one that does not exist yet (``labgang``, created at install
        time by systemd-sysusers) is checked as an unrelated user."""
        try:
            entry = pwd.getpwnam(user)
        except KeyError:
            return cls(user, None, frozenset())
        return cls(user, entry.pw_uid, frozenset(os.getgrouplist(user, entry.pw_gid)))

    @classmethod
    def anyone(cls) -> Identity:
        """Any user who owns none of the files and is in none of their groups."""
        return cls("every user", None, frozenset())


def _allowed(st: os.stat_result, who: Identity, want: int) -> bool:
    """``want`` (a mix of 4 read, 2 write, 1 execute) granted to ``who`` by ``st``'s mode."""
    if who.uid == 0:
        return not (want & 1) or bool(st.st_mode & 0o111) or stat.S_ISDIR(st.st_mode)
    if who.uid is not None and st.st_uid == who.uid:
        bits = st.st_mode >> 6
    elif st.st_gid in who.gids:
        bits = st.st_mode >> 3
    else:
        bits = st.st_mode
    return bits & want == want


def _walk_problem(path: Path, who: Identity) -> tuple[str | None, Path]:
    """Check every directory of ``path`` for search permission and follow its links; return the
    problem (or None) and the file reached."""
    current = Path("/")
    parts = list(path.parts[1:]) if path.is_absolute() else list(path.absolute().parts[1:])
    hops = 0
    while parts:
        part = parts.pop(0)
        try:
            st = current.stat()
        except OSError as exc:
            return f"{current}: {exc.strerror}", current
        if not _allowed(st, who, 1):
            return f"{current} is not searchable by {who.name} (mode {stat.S_IMODE(st.st_mode):04o})", current
        candidate = current / part
        if candidate.is_symlink():
            hops += 1
            if hops > MAX_HOPS:
                return f"{candidate}: too many symbolic links", candidate
            target = Path(os.readlink(candidate))
            if target.is_absolute():
                current, parts = Path("/"), list(target.parts[1:]) + parts
            else:
                parts = list(target.parts) + parts
            continue
        current = candidate if part != ".." else current.parent
    return None, current


def run_problem(path: Path, who: Identity) -> str | None:
    """Why ``who`` cannot run the program ``path`` (a ``#!`` script: its interpreter too), or None.

    Returns:
        One line naming the first directory or file in the way and its mode, or None.
    """
    seen = 0
    while True:
        problem, target = _walk_problem(path, who)
        if problem is not None:
            return problem
        try:
            st = target.stat()
        except OSError as exc:
            return f"{target}: {exc.strerror}"
        if not stat.S_ISREG(st.st_mode):
            return f"{target} is not a file"
        try:
            with open(target, "rb") as fh:
                head = fh.read(256)
        except OSError as exc:
            return f"{target}: {exc.strerror}"
        script = head.startswith(b"#!")
        want = 5 if script else 1  # a script is read by its interpreter
        if not _allowed(st, who, want):
            what = "read and executed" if script else "executed"
            return f"{target} cannot be {what} by {who.name} (mode {stat.S_IMODE(st.st_mode):04o})"
        if not script:
            return None
        words = head[2:].split(b"\n", 1)[0].split()
        if not words:
            return f"{target} has an empty #! line"
        seen += 1
        if seen > MAX_HOPS:
            return f"{target}: too many #! interpreters"
        path = Path(os.fsdecode(words[0]))


def read_problem(path: Path, who: Identity) -> str | None:
    """Why ``who`` cannot read the file or list the directory ``path``, or None."""
    problem, target = _walk_problem(path, who)
    if problem is not None:
        return problem
    try:
        st = target.stat()
    except OSError as exc:
        return f"{target}: {exc.strerror}"
    want = 5 if stat.S_ISDIR(st.st_mode) else 4
    if not _allowed(st, who, want):
        return f"{target} cannot be read by {who.name} (mode {stat.S_IMODE(st.st_mode):04o})"
    return None
