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
from labgang.launcher.job_filters import STATE_NAMES
from labgang.launcher.text import clip, render_table

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    from labgang.launcher.api.client import Client

STATES = STATE_NAMES
"""Every job state (``history -s`` also takes squeue codes: :mod:`labgang.launcher.job_filters`)."""
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


def attempts_table(rows: Sequence[Mapping[str, Any]]) -> str:
    """``labgang history --attempts``: one line per start attempt of each job (sacct's rows per
    requeue): its outcome as a Slurm code (R running, CD, F, CA, TO, NF, PR preempted, RQ requeued
    for another reason), admission, start and end (local times), the time pending before it, the
    time it held its devices, devices, allocated GPU-hours, mean activity and why it ended."""
    headers = (
        "JOBID",
        "ATTEMPT",
        "USER",
        "QUEUE",
        "STATE",
        "ADMIT",
        "START",
        "END",
        "WAIT",
        "ELAPSED",
        "GPUS",
        "GPU-H",
        "ACT%",
        "NODES",
        "REASON",
    )
    body = [
        (
            r["id"],
            a["attempt"],
            r["user"],
            r["queue"],
            a.get("code") or str(a.get("outcome")),
            _when(a.get("admit_time")),
            _when(a.get("start_time")),
            _when(a.get("end_time")),
            format_duration(a.get("wait_s")),
            format_duration(a.get("elapsed_s")),
            gpus_cell(a.get("gpus", 0)),
            f"{a.get('gpu_hours') or 0.0:.2f}",
            "-" if a.get("activity_pct") is None else f"{a['activity_pct']:.0f}",
            clip(",".join(a.get("nodes") or ()) or "-", 30),
            clip(a.get("reason") or "-", 60),
        )
        for r in rows
        for a in r.get("attempt_records") or ()
    ]
    return render_table(headers, body)


def attempts_note(rows: Sequence[Mapping[str, Any]]) -> str | None:
    """The stderr line under the ``history`` table when some job held devices in more than one
    attempt (its ELAPSED and GPU-H add them up, its START is the last one's, as sacct shows a
    requeued job), naming those jobs; None when none did."""
    many = [f"{r['id']} ({r['admitted_attempts']})" for r in rows if (r.get("admitted_attempts") or 0) > 1]
    if not many:
        return None
    shown = ", ".join(many[:10]) + (f" and {len(many) - 10} more" if len(many) > 10 else "")
    return (
        f"labgang history: note: ELAPSED and GPU-H add up the attempts of job {shown}; START is the last "
        "attempt's (history --attempts lists each)"
    )


def gpus_cell(gpus: float) -> str:
    """The GPUS cell of an attempt: a whole number of devices as is (``2``), a share of a card as
    its part of the card (``0.25`` for one shard of a card split in 4, ``0.5`` for ``--mps 50``)."""
    return str(int(gpus)) if float(gpus).is_integer() else f"{gpus:.4g}"


ATTEMPT_STATE_CODES = {"R": "running", "CD": "succeeded", "F": "failed", "CA": "cancelled", "TO": "timeout"}
ATTEMPT_STATE_CODES.update({"NF": "node_fail", "PR": "preempted", "RQ": "requeued"})
"""``history --attempts -s``: an attempt's end, by Slurm code (the STATE column of ``--attempts``)
or by name (``lifecycle/attempts.py``'s ``ATTEMPT_OUTCOMES``; ``running``: not ended yet)."""

_ATTEMPT_ONLY = ("preempted", "requeued")
_ALLOWED_ATTEMPT_STATES = ", ".join(f"{name} ({code})" for code, name in ATTEMPT_STATE_CODES.items())


def history_state_items(text: str) -> tuple[str, ...]:
    """``history -s``'s value: job states (:func:`labgang.launcher.job_filters.state_items`) or
    the attempt ends only ``--attempts`` lists (``PR``/``preempted``, ``RQ``/``requeued``), as names.

    Raises:
        ValueError: an item that is neither; the message lists both kinds.
    """
    from labgang.launcher.job_filters import items, job_state

    out: list[str] = []
    for item in items(text):
        name = ATTEMPT_STATE_CODES.get(item.strip().upper(), item.strip().lower())
        if name in _ATTEMPT_ONLY:
            out.append(name)
            continue
        try:
            out.append(job_state(item))
        except ValueError as err:
            raise ValueError(f"{err}; with --attempts also: preempted (PR), requeued (RQ)") from None
    return tuple(dict.fromkeys(out))


def attempt_states(states: Sequence[str], per_attempt: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Split ``history -s``'s states (:func:`history_state_items`) into the job states to ask the
    coordinator for and the attempt ends to keep (``()``: every attempt).

    Without ``--attempts`` every state is a job's. With it every state is an attempt's end: a final
    one (CD, F, CA, TO, NF) is the end of the attempt that ended the job, so the jobs asked for are
    those in it; ``R``, ``PR`` or ``RQ`` among them ask for every job and keep the matching attempts.

    Raises:
        ValueError: an attempt end (PR, RQ) without ``--attempts``, or a job state that is no
            attempt's end (PD, CF, CG) with it; one line naming the allowed values.
    """
    if not per_attempt:
        odd = [s for s in states if s in _ATTEMPT_ONLY]
        if odd:
            code = {v: k for k, v in ATTEMPT_STATE_CODES.items()}[odd[0]]
            raise ValueError(
                f"-s/--state: {odd[0]} ({code}) is how an attempt ended, not a job state; "
                f"it goes with --attempts (history --attempts -s {code})"
            )
        return tuple(states), ()
    names = set(ATTEMPT_STATE_CODES.values())
    odd = [s for s in states if s not in names]
    if odd:
        allowed = _ALLOWED_ATTEMPT_STATES
        raise ValueError(f"-s/--state: {odd[0]} is no attempt's end; allowed with --attempts: {allowed}")
    if any(s in ("running", *_ATTEMPT_ONLY) for s in states):
        return (), tuple(states)
    return tuple(states), tuple(states)


def keep_attempts(rows: Sequence[Mapping[str, Any]], ends: Sequence[str]) -> list[dict[str, Any]]:
    """The rows with only their attempt records whose outcome is in ``ends`` (a job left with none
    is left out); every row as is when ``ends`` is empty."""
    if not ends:
        return [dict(r) for r in rows]
    out = []
    for r in rows:
        kept = [a for a in r.get("attempt_records") or () if a.get("outcome") in ends]
        if kept:
            out.append({**r, "attempt_records": kept})
    return out


def limit_note(searched: Sequence[object], limit: int, *, sifted: bool = False) -> str | None:
    """The stderr line for a history cut at ``limit`` rows (the most recently submitted jobs are
    kept), or None when fewer came back. As many rows as the limit may also be all there is.

    Args:
        searched: the rows the limit cut, before ``--attempts -s`` kept some of their attempts.
        sifted: those rows were sifted after the cut (the line then says the jobs were searched).
    """
    if len(searched) < limit:
        return None
    verb = "searched" if sifted else "showing"
    return f"labgang history: {verb} the {limit} most recently submitted jobs; older ones with --limit N or --until"


def history_json(rows: Sequence[Mapping[str, Any]], limit: int, searched: int | None = None) -> dict[str, Any]:
    """``history --json``'s object: ``jobs`` (oldest first) and ``limit_reached`` (as many rows as
    ``--limit`` came back, ``searched`` of them where ``--attempts -s`` then kept fewer: older jobs
    may have been left out)."""
    return {"jobs": rows, "limit_reached": (len(rows) if searched is None else searched) >= limit}


def local_user(name: str) -> bool:
    """True when ``name`` is a user of this machine (``getpwnam``)."""
    import pwd

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def history_rows(
    client: Client,
    *,
    user: str | None,
    queue: str | None,
    states: tuple[str, ...],
    since: float | None,
    until: float | None,
    limit: int,
    attempts: bool = False,
    jobs: tuple[str, ...] = (),
) -> tuple[list[dict[str, Any]], list[str]]:
    """``labgang history``'s rows (``GET /v1/history``) and, when none came back, the notes for
    standard error (:func:`empty_history_notes`).

    Args:
        user: a user name, a uid of this machine (:func:`labgang.launcher.job_filters.user_name`),
            "all", or None (the caller's own jobs).
        states: JobState values (:func:`labgang.launcher.job_filters.state_items` of ``-s``).
        attempts: also ask for each job's attempt records (``history --attempts``).
        jobs: only these job ids (``history -j``; an array id names its tasks).

    Raises:
        ApiError: a refusal (another user's jobs asked for by a non-admin).
        CoordinatorUnavailable: no coordinator answers.
    """
    from labgang.launcher.job_filters import user_name

    user = None if user is None else user_name(user)
    answer = client.history_answer(
        user=user, queue=queue, states=states, since=since, until=until, limit=limit, attempts=attempts, jobs=jobs
    )
    rows: list[dict[str, Any]] = answer["jobs"]
    if rows:
        return rows, []
    windowed = since is not None or until is not None
    return rows, empty_history_notes(client, user, queue, states, windowed=windowed, whose=answer.get("user"))


def empty_history_notes(
    client: Client | None,
    user: str | None,
    queue: str | None,
    states: tuple[str, ...] = (),
    *,
    windowed: bool = False,
    whose: str | None = None,
) -> list[str]:
    """Why ``history`` with filters lists nothing, as ``queue`` says it (one line each): which
    filters matched no job, naming the user filter in force (``no job of user root matches state
    pending (-u all for every user)``, ``no job of any user matches ...``); then whether it may be a
    typo: ``-u`` names no user of this machine, ``--queue`` no queue of the cluster (asked of the
    coordinator, only when the answer was empty; not when ``client`` is None: the store was read
    without one). Nothing for a plain ``history`` without ``-u`` or a time window (an empty store
    is an empty table).

    Args:
        user: the ``-u`` asked for (a name or "all"), None when not given.
        whose: the user filter in force, as the answer said it (a name, or "all"); None when not
            known (a coordinator older than that field): then ``user``'s.
    """
    whose = whose or user
    filters = (("queue", queue), ("state", ",".join(states)))
    wanted = " and ".join(f"{name} {value}" for name, value in filters if value)
    if not wanted and user is None and not windowed:
        return []
    subject = {None: "no job", "all": "no job of any user"}.get(whose, f"no job of user {whose}")
    default_own = user is None and whose not in (None, "all")
    notes = [
        subject
        + (f" matches {wanted}" if wanted else "")
        + (" in that time window" if windowed else "")
        + (" (-u all for every user)" if default_own else "")
    ]
    if user not in (None, "all") and not local_user(user):
        notes.append(f"no user {user!r} on this machine (is the name right?)")
    if queue is not None and client is not None:
        names = [str(q.get("name")) for q in client.queues()]
        if queue not in names:
            notes.append(f"no queue {queue!r} in this cluster (queues: {', '.join(names)}; is the name right?)")
    return notes
