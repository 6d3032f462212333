"""``labgang queue -o/--format`` and ``--long``: squeue's format strings over JobView dicts.

Rendered here, in the client, from whole JobViews (``GET /v1/jobs``): the default table stays the
coordinator's (``launcher/jobtable.py``, the fast path of docs/cli-startup.md).

A format is text with fields ``%[-][.][WIDTH]X`` as squeue's ``-o``: ``%.10i`` right-aligns the
job id in 10 columns, ``%-20j`` left-aligns the name in 20, ``%j`` takes the name as it is (the
columns are then aligned to the widest cell). The fields (squeue's letters):

====  ===============  ==========================================================
%i    JOBID            the job id (``12``, ``12_7``)
%A    JOBID            the same (squeue: the job id number)
%j    NAME             the job name
%u    USER             the owner
%T    STATE            the state, upper case (PENDING, RUNNING...)
%t    ST               squeue's compact state code (PD, CF, R, CG, CD, F, CA)
%M    TIME             time used: since the start, ``D-HH:MM:SS`` as squeue (0:00 while pending)
%l    TIME_LIMIT       the time limit, ``D-HH:MM:SS`` (UNLIMITED without one)
%D    NODES            how many nodes it runs on (``-`` until it is placed)
%R    NODELIST(REASON) the nodes, or ``(reason)`` while pending
%N    NODELIST         the nodes
%r    REASON           the pending reason's code (None when none)
%b    TRES_PER_NODE    devices per rank, ``gpu:2`` or ``mig-1g.10gb:1``
%P    PARTITION        the queue (Slurm's partition)
%q    QOS              the queue (labgang has no separate QOS; its priority classes live in queues)
%p    PRIORITY         the priority (an integer)
%Q    PRIORITY         the same
%V    SUBMIT_TIME      the submission time, ``YYYY-MM-DDTHH:MM:SS`` (local time)
%S    START_TIME       the start time (N/A before it started)
%e    END_TIME         the end time (N/A until it ended)
%C    CPUS             ranks (labgang counts ranks, not CPUs)
%o    COMMAND          the command line (``argv`` joined; empty where it is hidden)
%E    DEPENDENCY       the ``--dependency`` (``(null)`` without one, as squeue)
%%    %                a percent sign
====  ===============  ==========================================================

Pure: no I/O (``now`` is passed in).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from labgang.launcher.jobtable import where_or_why
from labgang.launcher.text import printable

LONG_FORMAT = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
"""squeue ``-l``'s columns (JOBID PARTITION NAME USER STATE TIME TIME_LIMIT NODES NODELIST(REASON))."""

_CODES = {
    "pending": "PD",
    "admitted": "CF",
    "running": "R",
    "terminating": "CG",
    "succeeded": "CD",
    "failed": "F",
    "cancelled": "CA",
}


class BadFormat(ValueError):
    """A format string with a field letter labgang does not have; the message lists the allowed ones."""


def slurm_duration(seconds: float | None) -> str:
    """squeue's ``[D-]H:MM:SS`` (``M:SS`` under an hour): 0 → ``0:00``, 3725 → ``1:02:05``,
    90061 → ``1-01:01:01``; None → ``UNLIMITED``."""
    if seconds is None:
        return "UNLIMITED"
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def _clock(t: Any) -> str:
    if not isinstance(t, (int, float)) or not t:
        return "N/A"
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(t))


def _used(job: Mapping[str, Any], now: float) -> str:
    start = job.get("start_time")
    if not isinstance(start, (int, float)):
        return "0:00"
    end = job.get("end_time")
    return slurm_duration((end if isinstance(end, (int, float)) else now) - start)


def _node_count(job: Mapping[str, Any]) -> str:
    nodes = job.get("nodes") or []
    if job.get("state") in ("admitted", "running", "terminating") and nodes:
        return str(len(nodes))
    return "-"  # not placed yet: how many nodes it gets is the placement's choice


def _tres_per_node(job: Mapping[str, Any]) -> str:
    """squeue's ``%b``: ``gpu:2``, ``mig-1g.10gb:1``; a share of one GPU as Slurm's gres: ``shard:2``, ``mps:25``."""
    if job.get("shards"):
        return f"shard:{job['shards']}"
    if job.get("mps"):
        return f"mps:{job['mps']}"
    return f"{job.get('resource') or 'gpu'}:{job.get('gpus_per_worker', '?')}"


Field = tuple[str, Callable[[Mapping[str, Any], float], str]]

FIELDS: dict[str, Field] = {
    "i": ("JOBID", lambda j, now: str(j.get("id", "?"))),
    "A": ("JOBID", lambda j, now: str(j.get("id", "?"))),
    "j": ("NAME", lambda j, now: str(j.get("name") or "-")),
    "u": ("USER", lambda j, now: str(j.get("user", "?"))),
    "T": ("STATE", lambda j, now: str(j.get("state", "?")).upper()),
    "t": ("ST", lambda j, now: _CODES.get(str(j.get("state")), "?")),
    "M": ("TIME", _used),
    "l": ("TIME_LIMIT", lambda j, now: slurm_duration(j.get("time_limit_s"))),
    "D": ("NODES", lambda j, now: _node_count(j)),
    "R": ("NODELIST(REASON)", lambda j, now: where_or_why(j)),
    "N": ("NODELIST", lambda j, now: ",".join(j.get("nodes") or []) or ""),
    "r": ("REASON", lambda j, now: str((j.get("reason") or {}).get("code") or "None")),
    "b": ("TRES_PER_NODE", lambda j, now: _tres_per_node(j)),
    "P": ("PARTITION", lambda j, now: str(j.get("queue", "?"))),
    "q": ("QOS", lambda j, now: str(j.get("queue", "?"))),
    "p": ("PRIORITY", lambda j, now: str(j.get("priority", 0))),
    "Q": ("PRIORITY", lambda j, now: str(j.get("priority", 0))),
    "V": ("SUBMIT_TIME", lambda j, now: _clock(j.get("submit_time"))),
    "S": ("START_TIME", lambda j, now: _clock(j.get("start_time"))),
    "e": ("END_TIME", lambda j, now: _clock(j.get("end_time"))),
    "C": ("CPUS", lambda j, now: str(j.get("workers", "?"))),
    "o": ("COMMAND", lambda j, now: " ".join(j.get("argv") or [])),
    "E": ("DEPENDENCY", lambda j, now: str(j.get("dependency") or "(null)")),
}
"""squeue's field letter → (header, the cell of a JobView at ``now``)."""

MAX_WIDTH = 1000
"""The widest field ``-o`` takes (``%.99999999999i`` would pad each cell to that many characters)."""

# A parsed format: literal text, or (letter, width or None, right-aligned?).
Part = str | tuple[str, int | None, bool]


def parse_format(text: str) -> list[Part]:
    """Split a squeue format string into literal text and fields.

    Raises:
        BadFormat: an unknown field letter or a ``%`` at the end (the message lists the letters), or
            a width above :data:`MAX_WIDTH`.
    """
    parts: list[Part] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "%":
            literal.append(c)
            i += 1
            continue
        if text[i + 1 : i + 2] == "%":
            literal.append("%")
            i += 2
            continue
        j = i + 1
        left = text[j : j + 1] == "-"
        j += left
        right = text[j : j + 1] == "."
        j += right
        k = j
        while k < len(text) and text[k].isdigit():
            k += 1
        digits = text[j:k]  # a run of a hundred digits is not turned into a number
        width = None if not digits else int(digits) if len(digits) <= 6 else MAX_WIDTH + 1
        letter = text[k : k + 1]
        if width is not None and width > MAX_WIDTH:
            raise BadFormat(f"%{text[i + 1 : k + 1]}: a field width of at most {MAX_WIDTH} columns is allowed")
        if letter not in FIELDS:
            allowed = " ".join(f"%{x}" for x in FIELDS)
            what = f"%{text[i + 1 : k + 1]}" if letter else "a '%' at the end"
            raise BadFormat(f"{what} is not a field labgang has; allowed: {allowed} (and %% for '%')")
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append((letter, width, right and not left))
        i = k + 1
    if literal:
        parts.append("".join(literal))
    return parts


def format_jobs(jobs: Sequence[Mapping[str, Any]], fmt: str, now: float, *, header: bool = True) -> str:
    """The lines ``squeue -o FMT`` would print for ``jobs`` (JobView dicts, in order) at ``now``.

    A field with a width is cut or padded to it (``%.N``: right-aligned); one without is as wide
    as its widest cell (header included), left-aligned. No trailing spaces.

    Raises:
        BadFormat: see :func:`parse_format`.
    """
    parts = parse_format(fmt)
    rows: list[list[str]] = []
    if header:
        rows.append([p if isinstance(p, str) else FIELDS[p[0]][0] for p in parts])
    for job in jobs:
        rows.append([p if isinstance(p, str) else printable(FIELDS[p[0]][1](job, now)) for p in parts])
    widths = [
        0 if isinstance(p, str) else (p[1] if p[1] is not None else max(len(r[n]) for r in rows))
        for n, p in enumerate(parts)
    ]
    out = []
    for row in rows:
        cells = []
        for n, part in enumerate(parts):
            cell = row[n]
            if isinstance(part, str):
                cells.append(cell)
                continue
            width, right = widths[n], part[2]
            cell = cell[:width]
            cells.append(cell.rjust(width) if right else cell.ljust(width))
        out.append("".join(cells).rstrip())
    return "\n".join(out)


def select_ids(jobs: Iterable[dict[str, Any]], wanted: Iterable[str]) -> list[dict[str, Any]]:
    """The jobs ``-j LIST`` names: a job id, a task by its id (``12_1``) or its own number (``13``),
    or an array id naming all of its tasks (squeue's ``-j 12``), in the order ``jobs`` has them."""
    names = set(wanted)
    return [
        j
        for j in jobs
        if str(j.get("id")) in names or str(j.get("array_id")) in names or str(j.get("numeric_id")) in names
    ]
