"""``labgang history`` when no coordinator answers for the state directory: the same rows
(``GET /v1/history``'s, :func:`labgang.launcher.coordinator.views.history_view`) read from the
instance's store file itself, opened read-only (SQLite ``mode=ro``), so a stopped ``labgang up``'s
jobs can still be listed, as ``sacct`` reads slurmdbd without slurmctld. Nothing is ever written.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from labgang.launcher.cli.errors import CommandFailed


def store_path(state_dir: Path | None) -> Path:
    """The store of the instance the other commands reach (``--state-dir``, ``LABGANG_STATE_DIR``,
    else the system instance or the user's own, as :func:`labgang.launcher.api.discovery.find_socket_file`
    finds its socket).

    Raises:
        CommandFailed: the system config is unreadable (exit 2).
    """
    from labgang.agent import paths
    from labgang.launcher.api.discovery import SystemConfigInvalid, find_socket_file

    try:
        return paths.db_path(Path(os.path.dirname(find_socket_file(state_dir))))
    except SystemConfigInvalid as err:
        raise CommandFailed(str(err), 2) from None


def _whose(user: str | None) -> str | None:
    """``find_jobs``' user for ``-u``: None (every user) for ``all``, the caller's own name when not
    given, else the name (a uid of this machine becomes its name)."""
    from labgang.launcher.job_filters import user_name

    if user is None:
        import pwd

        try:
            return pwd.getpwuid(os.getuid()).pw_name
        except KeyError:
            return str(os.getuid())
    name = user_name(user)
    return None if name == "all" else name


def store_history_rows(
    path: Path,
    *,
    user: str | None,
    queue: str | None,
    states: tuple[str, ...],
    since: float | None,
    until: float | None,
    limit: int,
    attempts: bool = False,
) -> list[dict[str, Any]]:
    """``labgang history``'s rows from the store at ``path``, as the coordinator would answer them
    (oldest first; at most ``limit``, the most recently submitted; ``attempt_records`` with ``attempts``).

    Whoever can read the file reads every user's jobs in it (``-u all``, ``-u NAME``); without ``-u``,
    the caller's own, as from the coordinator. A job's state is the one last committed: a job the
    stopped instance left running shows as running.

    Args:
        user: a user name, a uid of this machine, ``"all"``, or None (the caller's own jobs).
        states: JobState values (() = any). since / until: unix seconds (see ``Store.find_jobs``).

    Raises:
        CommandFailed: no store there, one this user may not read, or not a labgang store (exit 1).
    """
    import sqlite3

    from labgang.launcher.coordinator.store import Store
    from labgang.launcher.coordinator.views import history_view

    if not path.is_file():
        raise CommandFailed(f"no labgang store at {path} (is --state-dir right?)", 1)
    if not os.access(path, os.R_OK):  # a system instance's store: owner-only, job specs carry environments
        raise CommandFailed(
            f"the labgang store {path} is readable only by whoever runs that labgang "
            f"(file mode {path.stat().st_mode & 0o777:o})",
            1,
        )
    now = time.time()
    try:
        store = Store(path, read_only=True)
        try:
            jobs = store.find_jobs(
                user=_whose(user), queue=queue, states=states, since=since, until=until, limit=limit, now=now
            )
            records = store.attempts_of([job.id for job in jobs])
        finally:
            store.close()
    except sqlite3.Error as err:
        raise CommandFailed(f"cannot read the labgang store {path}: {err}", 1) from None
    return [history_view(job, now, records.get(job.id, []), per_attempt=attempts) for job in jobs]
