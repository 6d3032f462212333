"""``--begin``: when a job may start, as Slurm's ``sbatch --begin`` reads it (docs/slurm.md).

Pure: the caller passes ``now`` (unix seconds); local dates and times are read in the local
time zone. Stdlib only (the fast path of ``labgang submit`` imports it only with ``--begin``).
"""

from __future__ import annotations

BEGIN_HELP = (
    "now+N[seconds|minutes|hours|days|weeks] (now+1hour), an ISO date or date and time "
    "(2026-12-03, 2026-12-03T16:00), a time of day HH:MM[:SS] (tomorrow once past), midnight, noon, "
    "teatime, today, tomorrow, or a delay as --time takes it (90 = 90 minutes, 30m, 2h, 1-00:00:00)"
)

_UNITS = {
    "": 1.0,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "hours": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
    "w": 604800.0,
    "week": 604800.0,
    "weeks": 604800.0,
}
"""Slurm's units after ``now+N`` (seconds by default), with their short forms."""

_NAMED_TIMES = {"midnight": (0, 0), "noon": (12, 0), "teatime": (16, 0)}

MAX_BEGIN_AHEAD_S = 3650 * 86400
"""The furthest ahead a begin time may be: 3650 days, 10 years (further is a typo, and a time past
the year 9999 cannot even be printed)."""


def begin_out_of_range(begin: float, now: float, text: str | None = None) -> str | None:
    """The one-line refusal of a begin time more than :data:`MAX_BEGIN_AHEAD_S` after ``now``
    (both unix seconds; ``text`` is the value as typed, for the message), or None when in range."""
    if begin - now <= MAX_BEGIN_AHEAD_S:
        return None
    days = (begin - now) / 86400
    ahead = f"{days / 365.25:,.0f} years" if days >= 3653 else f"{days:,.0f} days"
    what = f"{text!r} is {ahead} ahead" if text is not None else f"{ahead} ahead"
    return f"{what}: out of range; allowed: at most 3650 days (10 years) ahead"


def _bad(text: str) -> ValueError:
    return ValueError(f"{text!r} is not a begin time; allowed: {BEGIN_HELP}")


def _now_plus(text: str, rest: str, now: float) -> float:
    sign = 1.0
    if rest and rest[0] in "+-":
        sign = 1.0 if rest[0] == "+" else -1.0
        rest = rest[1:]
        if not rest[:1].isdigit():
            raise _bad(text)
    elif rest:
        raise _bad(text)
    digits = len(rest) - len(rest.lstrip("0123456789"))
    if rest and not digits:
        raise _bad(text)
    count, unit = rest[:digits], rest[digits:].lower()
    if unit not in _UNITS:
        raise _bad(text)
    return now + sign * int(count or "0") * _UNITS[unit]


def _time_of_day(hour: int, minute: int, second: int, now: float) -> float:
    """Today at that local time, or tomorrow once it has passed."""
    import datetime

    today = datetime.datetime.fromtimestamp(now)
    at = today.replace(hour=hour, minute=minute, second=second, microsecond=0)
    if at.timestamp() <= now:
        at += datetime.timedelta(days=1)
    return at.timestamp()


def parse_begin(text: str, now: float) -> float:
    """Parse ``--begin`` into unix seconds.

    Args:
        text: ``now``, ``now+1hour``/``now+30minutes``/``now+90`` (seconds), an ISO date
            (``2026-12-03``: its midnight) or date and time (``2026-12-03T16:00[:00]``, a
            space for ``T`` too; local time unless it names an offset), a time of day
            ``HH:MM[:SS]`` (today, or tomorrow once past), ``midnight``/``noon``/``teatime``
            (the next one), ``today``/``tomorrow`` (their midnight), or a delay in ``--time``'s
            forms (:func:`labgang.launcher.durations.parse_time_limit`: ``90`` is 90 minutes).
        now: the current time, unix seconds.

    Returns:
        The begin time, unix seconds (one in the past means at once).

    Raises:
        ValueError: none of these forms, or more than :data:`MAX_BEGIN_AHEAD_S` ahead; the message
            lists what is allowed.
    """
    begin = _parse_begin(text, now)
    out_of_range = begin_out_of_range(begin, now, text)
    if out_of_range is not None:
        raise ValueError(out_of_range)
    return begin


def _parse_begin(text: str, now: float) -> float:
    """:func:`parse_begin` without its range check."""
    raw = text.strip()
    low = raw.lower()
    if not raw:
        raise ValueError(f"empty begin time; allowed: {BEGIN_HELP}")
    if low.startswith("now"):
        return _now_plus(text, low[3:], now)
    if low in _NAMED_TIMES:
        return _time_of_day(*_NAMED_TIMES[low], 0, now)
    if low in ("today", "tomorrow"):
        import datetime

        day = datetime.datetime.fromtimestamp(now).replace(hour=0, minute=0, second=0, microsecond=0)
        return (day + datetime.timedelta(days=1 if low == "tomorrow" else 0)).timestamp()
    if ":" in raw and "-" not in raw:  # HH:MM[:SS]: Slurm's time of day (not --time's MM:SS)
        parts = raw.split(":")
        if len(parts) in (2, 3) and all(p.isascii() and p.isdigit() for p in parts):
            hour, minute, second = (int(p) for p in [*parts, "0"][:3])
            if hour < 24 and minute < 60 and second < 60:
                return _time_of_day(hour, minute, second, now)
        raise _bad(text)
    if len(raw) >= 10 and raw[4:5] == "-" and raw[7:8] == "-":
        import datetime

        try:
            return datetime.datetime.fromisoformat(raw).timestamp()
        except ValueError:
            raise _bad(text) from None
    from labgang.launcher.durations import parse_time_limit

    try:
        return now + parse_time_limit(raw)
    except ValueError:
        raise _bad(text) from None
