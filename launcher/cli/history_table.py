"""``labgang history`` without click: the time forms of ``--since``/``--until``, the table, and
whether a user name is known here. The click command (:mod:`labgang.launcher.cli.history`) and
its fast path (:mod:`labgang.launcher.cli.quick`) share them.

Times for ``--since`` / ``--until`` are a date (``2026-12-01``), a date and time
(``2026-12-01 14:30``, ``2026-12-01T14:30:05``; local time), or an age before now (``2h``,
``7d``, ``1h30m``; see ``parse_duration``).
"""

from __future__ import annotations

import datetime as dt
import time

from labgang.launcher.durations import format_duration, parse_duration
from labgang.launcher.text import clip, render_table

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from labgang.launcher.api.client import Client

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
            clip(str(r.get("name") or "-"), 20),
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
            clip((r.get("reason") or {}).get("message") or (r.get("reason") or {}).get("code") or "-", 60),
        )
        for r in rows
    ]
    return render_table(headers, body)


def limit_note(rows: Sequence[object], limit: int) -> str | None:
    """The stderr line for a history cut at ``limit`` rows (the most recently submitted jobs are
    kept), or None when fewer came back. As many rows as the limit may also be all there is."""
    if len(rows) < limit:
        return None
    return f"labgang history: showing the {limit} most recently submitted jobs; older ones with --limit N or --until"


def history_json(rows: Sequence[Mapping[str, Any]], limit: int) -> dict[str, Any]:
    """``history --json``'s object: ``jobs`` (oldest first) and ``limit_reached`` (as many rows as
    ``--limit``: older jobs may have been left out)."""
    return {"jobs": rows, "limit_reached": len(rows) >= limit}


def local_user(name: str) -> bool:
    """True when ``name`` is a user of this machine (``getpwnam``)."""
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def empty_history_notes(client: Client, user: str | None, queue: str | None) -> list[str]:
    """Why an empty history may be a typo: ``-u`` names no user of this machine, ``--queue`` no
    queue of the cluster (asked of the coordinator, only when the answer was empty)."""
    notes = []
    if user not in (None, "all") and not local_user(user):
        notes.append(f"no user {user!r} on this machine (is the name right?)")
    if queue is not None:
        names = [str(q.get("name")) for q in client.queues()]
        if queue not in names:
            notes.append(f"no queue {queue!r} in this cluster (queues: {', '.join(names)}; is the name right?)")
    return notes
