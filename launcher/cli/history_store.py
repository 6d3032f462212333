"""``labgang history`` when no coordinator answers for the state directory: the same rows
(``GET /v1/history``'s, :func:`labgang.launcher.coordinator.views.history_view`) read from the
instance's store file itself, opened read-only (SQLite ``mode=ro``), so a stopped ``labgang up``'s
jobs can still be listed, as ``sacct`` reads slurmdbd without slurmctld. Nothing is ever written.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from labgang.launcher.cli.errors import CommandFailed

if TYPE_CHECKING:
    from labgang.launcher.api.client import CoordinatorUnavailable
    from labgang.launcher.coordinator.store import Store

T = TypeVar("T")


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


def _own_name() -> str:
    """The caller's login name (its uid as text when the password database has none)."""
    import pwd

    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return str(os.getuid())


def default_whose(meta: str | None) -> str | None:
    """Whose jobs ``history`` without ``-u`` lists from a store: None (every user's) for root and
    for an admin (``admins``/``admin_groups``) of the config the instance last ran with, as the
    coordinator answers them (:meth:`labgang.launcher.coordinator.requests.Caller.history_user`);
    else the caller's own name.

    Args:
        meta: the store's recorded config (its ``meta`` value, :data:`labgang.launcher.config.record.CONFIG_KEY`),
            None when none was recorded (then only root is an admin).
    """
    if os.getuid() == 0:
        return None
    name = _own_name()
    if meta is None:
        return name
    from labgang.launcher.accounts import user_groups
    from labgang.launcher.config.record import parse_recorded

    recorded = parse_recorded(meta)
    if recorded is not None and recorded.config.is_admin(name, user_groups(os.getuid())):
        return None
    return name


def _whose(user: str | None, meta: str | None) -> str | None:
    """``find_jobs``' user for ``-u``: None (every user) for ``all``, the default
    (:func:`default_whose`) when not given, else the name (a uid of this machine becomes its name)."""
    from labgang.launcher.job_filters import user_name

    if user is None:
        return default_whose(meta)
    name = user_name(user)
    return None if name == "all" else name


@contextlib.contextmanager
def _read_only(path: Path) -> Iterator[Store]:
    """The store at ``path`` opened read-only for the ``with`` block, closed after.

    Raises:
        CommandFailed: no store there, one this user may not read, or not a labgang store (an
            SQLite error inside the block included; exit 1).
    """
    import sqlite3

    from labgang.launcher.coordinator.store import Store, unreadable_reason

    reason = unreadable_reason(path)
    if reason is not None:
        raise CommandFailed(reason, 1)
    try:
        store = Store(path, read_only=True)
        try:
            yield store
        finally:
            store.close()
    except sqlite3.Error as err:
        raise CommandFailed(f"cannot read the labgang store {path}: {err}", 1) from None


def read_store_instead(
    command: str, state_dir: Path | None, err: CoordinatorUnavailable, read: Callable[[Path], T]
) -> T:
    """What ``command`` (``history``, ``report``) answers when no coordinator answers (``err``):
    ``read`` of the instance's store file, after one stderr line saying it was read directly.

    Raises:
        CommandFailed: no instance ever ran there (``err``'s line), or the store cannot be read
            either (one line with both reasons; exit 1).
    """
    import click

    path = store_path(state_dir)
    if not path.exists():  # no instance ever ran there: nothing to read
        raise CommandFailed(str(err), 1) from None
    try:
        answer = read(path)
    except CommandFailed as unreadable:
        raise CommandFailed(f"{err}; and its store: {unreadable.message}", 1) from None
    click.echo(
        f"labgang {command}: no coordinator answers at {err.socket_path}; read its store {path} directly (read-only)",
        err=True,
    )
    return answer


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
    jobs: tuple[str, ...] = (),
) -> tuple[list[dict[str, Any]], str]:
    """``labgang history``'s rows from the store at ``path``, as the coordinator would answer them
    (oldest first; at most ``limit``, the most recently submitted; ``attempt_records`` with ``attempts``),
    and the user filter in force (a name, or "all"), as the coordinator's answer says it.

    Whoever can read the file reads every user's jobs in it (``-u all``, ``-u NAME``); without ``-u``,
    every user's for root and the instance's admins, else the caller's own, as from the coordinator
    (:func:`default_whose`). A job's state is the one last committed: a job the stopped instance left
    running shows as running.

    Args:
        user: a user name, a uid of this machine, ``"all"``, or None (the caller's own jobs).
        states: JobState values (() = any). since / until: unix seconds (see ``Store.find_jobs``).
        jobs: only these job ids; an array id names its tasks (() = any).

    Raises:
        CommandFailed: no store there, one this user may not read, or not a labgang store (exit 1).
    """
    from labgang.launcher.config.record import CONFIG_KEY
    from labgang.launcher.coordinator.views import history_view

    now = time.time()
    with _read_only(path) as store:
        whose = _whose(user, store.meta(CONFIG_KEY))
        found = store.find_jobs(
            user=whose, queue=queue, states=states, since=since, until=until, limit=limit, now=now, ids=jobs
        )
        records = store.attempts_of([job.id for job in found])
    rows = [history_view(job, now, records.get(job.id, []), per_attempt=attempts) for job in found]
    return rows, "all" if whose is None else whose


def store_report(path: Path, *, group: str, since: float | None, until: float | None) -> dict[str, Any]:
    """``labgang report``'s answer from the store at ``path`` (read-only), as the coordinator would
    answer it (:func:`labgang.launcher.accounting.report`) but for the attempts it held open in
    memory: an attempt the stopped instance left open counts until now, its last usage sample as
    committed. Teams come from the config the instance last ran with (its queues' cohorts).

    Args:
        group: ``user``, ``queue`` or ``team``. since / until: unix seconds, None: unbounded.

    Raises:
        CommandFailed: no store there, one this user may not read, or not a labgang store (exit 1).
    """
    from labgang.launcher import accounting
    from labgang.launcher.config.record import CONFIG_KEY, parse_recorded

    with _read_only(path) as store:
        found = store.attempts_between(since, until)
        meta = store.meta(CONFIG_KEY)
    recorded = None if meta is None else parse_recorded(meta)
    queues = recorded.config.queue_specs() if recorded is not None else ()
    return accounting.report(
        found, group=group, since=since, until=until, now=time.time(), team=accounting.team_lookup(queues)
    )
