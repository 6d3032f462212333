"""click parameter types for the duration, signal and node-count flags (``--time 2h``,
``--signal USR1@60``, ``-N 2``).

Apart from :mod:`labgang.launcher.cli.format` (which parses the text and stays free of click)
so that the fast command paths do not import click; ``format.DURATION`` still names these.
"""

from __future__ import annotations

from typing import Any

import click
from labgang.launcher.cli.format import parse_signal_spec
from labgang.launcher.durations import parse_duration, parse_job_time_limit, parse_time_limit


class DurationType(click.ParamType):
    """A click parameter type for :func:`parse_duration` (value in seconds, float)."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return parse_duration(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class TimeLimitType(click.ParamType):
    """A click parameter type for ``--time``: :func:`parse_time_limit` (Slurm's forms, a bare
    number is minutes; value in seconds, float)."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        try:
            return parse_time_limit(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class JobTimeLimitType(click.ParamType):
    """``submit``/``run``'s ``--time``: :func:`parse_job_time_limit` (as :class:`TimeLimitType`, but
    ``0`` and ``UNLIMITED`` mean no limit, as in Slurm; value in seconds, or None)."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float | None:
        if isinstance(value, (int, float)):
            return float(value) if value > 0 else None
        try:
            return parse_job_time_limit(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class BeginType(click.ParamType):
    """A click parameter type for ``--begin``: :func:`labgang.launcher.begin_time.parse_begin`
    at the time the command line is read (value in unix seconds, float)."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, (int, float)):
            return float(value)
        import time

        from labgang.launcher.begin_time import parse_begin

        try:
            return parse_begin(str(value), time.time())
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class SignalSpecType(click.ParamType):
    """A click parameter type for :func:`parse_signal_spec` (value ``"SIGUSR1@60"``)."""

    name = "SIG@SECONDS"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        try:
            return parse_signal_spec(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class NodeCountType(click.IntRange):
    """``-N/--nodes``: a whole number of nodes >= 1. Slurm's ``--nodes=MIN-MAX`` range is refused
    in words that say labgang takes one count (click's own line, ``'1-2' is not a valid integer
    range``, read as if a range were allowed); :func:`labgang.launcher.cli.errors.usage_line`
    adds ``allowed: an integer >= 1``."""

    def __init__(self) -> None:
        super().__init__(min=1)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        low, dash, high = str(value).partition("-")
        if dash and low.strip().isdigit() and high.strip().isdigit():
            self.fail(
                f"{value!r} is a range of node counts (Slurm's --nodes=MIN-MAX); labgang places a gang on "
                "exactly one number of nodes",
                param,
                ctx,
            )
        return super().convert(value, param, ctx)


DURATION = DurationType()
TIME_LIMIT = TimeLimitType()
JOB_TIME_LIMIT = JobTimeLimitType()
BEGIN = BeginType()
SIGNAL_SPEC = SignalSpecType()
NODE_COUNT = NodeCountType()
