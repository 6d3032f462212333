"""Durations as people write and read them: ``parse_duration("1h30m")`` and
``format_duration(5400.0)``. Pure; shared by the CLI and the TUI.
"""

from __future__ import annotations

_UNIT_SECONDS = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
DURATION_HELP = "a number of seconds, or with a unit: 30s, 5m, 2h, 1d, 1h30m"


def _part(raw: str, pos: int) -> tuple[str, str, int] | None:
    """The part of a duration at ``pos``: (number, unit or "", end), or None if none starts there.

    What the pattern ``(\\d+(?:\\.\\d+)?)([smhd]?)`` matches (``\\d`` being ``str.isdecimal``), by hand:
    ``re`` costs a shell command ~8 ms to import (bench/cli_latency.py), more than the interpreter's start.
    """
    end = pos
    while end < len(raw) and raw[end].isdecimal():
        end += 1
    if end == pos:
        return None
    if end + 1 < len(raw) and raw[end] == "." and raw[end + 1].isdecimal():
        end += 1
        while end < len(raw) and raw[end].isdecimal():
            end += 1
    unit = raw[end] if end < len(raw) and raw[end] in "smhd" else ""
    return raw[pos:end], unit, end + len(unit)


def parse_duration(text: str) -> float:
    """Parse a duration such as ``"90"``, ``"30s"``, ``"5m"``, ``"2h"``, ``"1h30m"`` or ``"1.5h"``.

    Args:
        text: a non-negative number with an optional unit (s, m, h, d); parts may be
            chained from the largest unit down (``"1h30m"``). A bare number is seconds.

    Returns:
        The duration in seconds.

    Raises:
        ValueError: ``text`` is not such a duration; the message says what is allowed.
    """
    raw = text.strip().lower()
    pos = 0
    total = 0.0
    last_scale = float("inf")
    if not raw:
        raise ValueError(f"empty duration; allowed: {DURATION_HELP}")
    while pos < len(raw):
        part = _part(raw, pos)
        if part is None:
            raise ValueError(f"{text!r} is not a duration; allowed: {DURATION_HELP}")
        number, unit, end = part
        scale = _UNIT_SECONDS[unit]
        bare = unit == ""
        if scale >= last_scale or (bare and pos > 0) or (bare and end < len(raw)):
            raise ValueError(f"{text!r} is not a duration; allowed: {DURATION_HELP}")
        total += float(number) * scale
        last_scale = scale
        pos = end
    return total


def format_duration(seconds: float | None) -> str:
    """Render a duration compactly, two units at most: ``45s``, ``5m03s``, ``2h05m``, ``3d04h``.

    Args:
        seconds: a duration in seconds (negative values render as ``0s``); None renders as ``-``.
    """
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


TIME_LIMIT_HELP = (
    "minutes (90), MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS (Slurm's --time forms), "
    "or with a unit: 90s, 30m, 2h, 1d, 1h30m; for a job, 0 or UNLIMITED for none"
)


def _clock_fields(text: str, whole: str) -> list[int]:
    """The ``:``-separated whole numbers of a Slurm time (``"1:30:00"`` -> ``[1, 30, 0]``)."""
    fields = text.split(":")
    if not all(f.isascii() and f.isdigit() for f in fields):
        raise ValueError(f"{whole!r} is not a time limit; allowed: {TIME_LIMIT_HELP}")
    return [int(f) for f in fields]


def parse_time_limit(text: str) -> float:
    """Parse ``--time`` (and the length in ``--begin now+...``) as Slurm reads it, or with a unit.

    Slurm's forms: ``"90"`` (a bare number is MINUTES), ``"MM:SS"``, ``"HH:MM:SS"``, ``"D-HH"``,
    ``"D-HH:MM"``, ``"D-HH:MM:SS"``. labgang's forms: a number with a unit, ``"90s"``, ``"30m"``,
    ``"2h"``, ``"1d"``, ``"1h30m"`` (:func:`parse_duration`; ``90s`` stays 90 seconds).

    Args:
        text: the value as typed.

    Returns:
        The duration in seconds (>= 0).

    Raises:
        ValueError: none of these forms; the message lists what is allowed.
    """
    raw = text.strip()
    if not raw:
        raise ValueError(f"empty time limit; allowed: {TIME_LIMIT_HELP}")
    days_text, dash, rest = raw.partition("-")
    if dash:
        if not (days_text.isascii() and days_text.isdigit()) or not rest:
            raise ValueError(f"{text!r} is not a time limit; allowed: {TIME_LIMIT_HELP}")
        fields = _clock_fields(rest, text)
        if len(fields) > 3:
            raise ValueError(f"{text!r} is not a time limit; allowed: {TIME_LIMIT_HELP}")
        hours, minutes, seconds = [*fields, 0, 0][:3]
        return float(int(days_text) * 86400 + hours * 3600 + minutes * 60 + seconds)
    if ":" in raw:
        fields = _clock_fields(raw, text)
        if len(fields) == 2:
            return float(fields[0] * 60 + fields[1])
        if len(fields) == 3:
            return float(fields[0] * 3600 + fields[1] * 60 + fields[2])
        raise ValueError(f"{text!r} is not a time limit; allowed: {TIME_LIMIT_HELP}")
    if raw.isascii() and raw.replace(".", "", 1).isdigit():
        return float(raw) * 60.0  # Slurm: a bare number is minutes
    try:
        return parse_duration(raw)
    except ValueError:
        raise ValueError(f"{text!r} is not a time limit; allowed: {TIME_LIMIT_HELP}") from None


UNLIMITED_WORDS = frozenset({"unlimited", "infinite"})
"""Slurm's words for no time limit (any case)."""


def parse_job_time_limit(text: str) -> float | None:
    """Parse a job's ``--time`` (``submit``, ``run``, ``#SBATCH -t``): :func:`parse_time_limit`'s
    forms, where, as in Slurm, ``0`` (any form of zero: ``0``, ``0:00``, ``0s``) and the words
    ``UNLIMITED``/``INFINITE`` mean no time limit.

    Returns:
        The limit in seconds (> 0), or None for no limit.

    Raises:
        ValueError: none of these forms; the message lists what is allowed.
    """
    if text.strip().lower() in UNLIMITED_WORDS:
        return None
    seconds = parse_time_limit(text)
    return seconds if seconds > 0 else None
