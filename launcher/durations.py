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
