"""``labgang history``: finished and current jobs from the coordinator's store (Slurm's ``sacct``).

Times for ``--since`` / ``--until`` are a date (``2026-12-01``), a date and time
(``2026-12-01 14:30``, ``2026-12-01T14:30:05``; local time), or an age before now (``2h``,
``7d``, ``1h30m``; see ``parse_duration``).
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import click
from labgang.launcher.api.client import Client
from labgang.launcher.cli.format import render_table, to_json
from labgang.launcher.cli.plumbing import json_option, state_dir_option, talks_to_coordinator
from labgang.launcher.durations import format_duration, parse_duration

STATES = ("pending", "admitted", "running", "terminating", "succeeded", "failed", "cancelled")
_FORMATS = ("%Y-%m-%d", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S")
TIME_HELP = "a date (2026-12-01), a date and time (2026-12-01 14:30, local) or an age (2h, 7d, 1h30m)"


def parse_when(text: str, now: float) -> float:
    """Unix seconds for ``text``: a date, a date and time (local time) or an age before ``now``.

    Raises:
        ValueError: none of these; the message lists the allowed forms.
    """
    raw = text.strip()
    for fmt in _FORMATS:
        try:
            return dt.datetime.strptime(raw, fmt).timestamp()
        except ValueError:
            continue
    try:
        return now - parse_duration(raw)
    except ValueError:
        raise ValueError(f"{text!r} is not a time; allowed: {TIME_HELP}") from None


class WhenType(click.ParamType):
    """A click parameter type for :func:`parse_when` (value: unix seconds)."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_when(str(value), time.time())
        except ValueError as err:
            self.fail(str(err), param, ctx)


def _when(t: float | None) -> str:
    return "-" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def history_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """The ``labgang history`` table: one row per job, sacct's columns (local times)."""
    headers = (
        "JOBID",
        "NAME",
        "USER",
        "QUEUE",
        "STATE",
        "SUBMIT",
        "START",
        "END",
        "WAIT",
        "ELAPSED",
        "GPU-H",
        "EXIT",
        "RESTARTS",
        "REASON",
    )
    body = [
        (
            r["id"],
            str(r.get("name") or "-")[:20],
            r["user"],
            r["queue"],
            str(r["state"]).upper(),
            _when(r.get("submit_time")),
            _when(r.get("start_time")),
            _when(r.get("end_time")),
            format_duration(r.get("wait_s")),
            format_duration(r.get("elapsed_s")),
            "-" if r.get("gpu_hours") is None else f"{r['gpu_hours']:.2f}",
            "-" if r.get("exit_status") is None else r["exit_status"],
            r.get("restart_count", 0),
            ((r.get("reason") or {}).get("message") or (r.get("reason") or {}).get("code") or "-")[:60],
        )
        for r in rows
    ]
    return render_table(headers, body)


@click.command()
@click.option("--user", "-u", help="Whose jobs: a user name, or 'all' (admins). Default: your own.")
@click.option("--queue", "-q", help="Only this queue's jobs.")
@click.option(
    "--state",
    "-s",
    "states",
    multiple=True,
    type=click.Choice(STATES, case_sensitive=False),
    help="Only jobs in this state (repeat for several).",
)
@click.option("--since", type=WhenType(), help=f"Jobs not ended before this time: {TIME_HELP}.")
@click.option("--until", type=WhenType(), help="Jobs submitted up to this time (same forms as --since).")
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True, help="At most this many.")
@json_option
@state_dir_option
@talks_to_coordinator
def history(
    state_dir: Path | None,
    user: str | None,
    queue: str | None,
    states: tuple[str, ...],
    since: float | None,
    until: float | None,
    limit: int,
    as_json: bool,
) -> None:
    """List finished and current jobs from the coordinator's store, oldest first.

    Columns: submit, start and end time (the last attempt's), wait (submit to start), elapsed,
    GPU-hours (devices x elapsed), exit status, restarts (attempts that ran, minus one) and the
    final reason. Finished jobs of any age are kept in the store; `labgang queue` shows only
    pending and running ones.
    """
    if since is not None and until is not None and since > until:
        raise click.BadParameter("--since must not be later than --until", param_hint="--since")
    with Client.for_state_dir(state_dir) as client:
        rows = client.history(
            user=user, queue=queue, states=tuple(s.lower() for s in states), since=since, until=until, limit=limit
        )
    if not rows and user not in (None, "all") and not _local_user(user):
        click.echo(f"labgang history: note: no user {user!r} on this machine (is the name right?)", err=True)
    click.echo(to_json({"jobs": rows}) if as_json else history_table(rows))


def _local_user(name: str) -> bool:
    """True when ``name`` is a user of this machine (``getpwnam``)."""
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True
