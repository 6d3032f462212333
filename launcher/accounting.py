"""GPU-hours per user, queue and team from the attempt records (``labgang report``, Slurm's ``sreport``),
and the running totals behind the ``labgang_gpu_seconds_total`` counters.

Every number here is a sum over :class:`~labgang.launcher.lifecycle.attempts.AttemptRecord`: the
allocated device-seconds of each start attempt (devices x the time it held them, preempted,
requeued, cancelled and timed-out attempts included) and the part of them the devices were busy.

* A report over a window [since, until] counts the part of each attempt's held time inside the
  window. Its busy time is the attempt's, in the same proportion (activity is kept per attempt,
  not per instant: an attempt half inside the window brings half its busy time).
* A **team** is the cohort of the queue (the queues that lend to and borrow from each other); a
  queue in no cohort is a team of its own, named after the queue.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from labgang.launcher.lifecycle.attempts import AttemptRecord
from labgang.launcher.model import QueueSpec

REPORT_GROUPS = ("user", "queue", "team")
"""What a report can group by."""


def team_lookup(queues: Iterable[QueueSpec]) -> Callable[[str], str]:
    """``queue name -> team``: the queue's cohort, or the queue's own name when it has none (and
    for a queue no longer in the configuration)."""
    cohorts = {q.name: q.cohort for q in queues}

    def team(queue: str) -> str:
        return cohorts.get(queue) or queue

    return team


@dataclass
class ReportRow:
    """One group of a report: device-seconds allocated, measured and busy, and what they cover."""

    key: str
    allocated_s: float = 0.0
    measured_s: float = 0.0
    busy_s: float = 0.0
    jobs: set[str] = field(default_factory=set)
    attempts: int = 0

    def add(self, rec: AttemptRecord, allocated_s: float, fraction: float) -> None:
        """Add the part of ``rec`` inside the window: ``allocated_s`` device-seconds, ``fraction`` of its time."""
        self.allocated_s += allocated_s
        self.measured_s += rec.measured_gpu_s * fraction
        self.busy_s += rec.busy_gpu_s * fraction
        self.jobs.add(rec.job_id)
        self.attempts += 1

    def view(self, group: str) -> dict[str, Any]:
        """The row as JSON: hours, ``activity_pct`` (mean activity over the measured time; None
        without samples) and ``used_pct`` (busy device-hours over allocated ones: the allocation
        ratio; None when nothing was allocated)."""
        return {
            group: self.key,
            "gpu_hours": self.allocated_s / 3600.0,
            "used_gpu_hours": self.busy_s / 3600.0,
            "measured_gpu_hours": self.measured_s / 3600.0,
            "activity_pct": None if self.measured_s <= 0 else 100.0 * self.busy_s / self.measured_s,
            "used_pct": None if self.allocated_s <= 0 else 100.0 * self.busy_s / self.allocated_s,
            "jobs": len(self.jobs),
            "attempts": self.attempts,
        }


def report(
    records: Iterable[AttemptRecord],
    *,
    group: str,
    since: float | None,
    until: float | None,
    now: float,
    team: Callable[[str], str],
) -> dict[str, Any]:
    """The report over [``since``, ``until``] (None: unbounded; an attempt still running counts to
    ``now``), one row per ``group`` value with allocated GPU-hours, largest first, and the total;
    ``first_admit_time`` the earliest admission among the attempts counted (None: none counted).

    Args:
        records: attempt records (any that held devices outside the window add nothing).
        group: ``"user"``, ``"queue"`` or ``"team"`` (:data:`REPORT_GROUPS`).
        team: the team of a queue (:func:`team_lookup`).

    Raises:
        ValueError: ``group`` is not one of :data:`REPORT_GROUPS`.
    """
    if group not in REPORT_GROUPS:
        raise ValueError(f"group {group!r} is not one of {', '.join(REPORT_GROUPS)}")
    rows: dict[str, ReportRow] = {}
    total = ReportRow("total")
    first: float | None = None
    for rec in records:
        allocated, fraction = rec.overlap(since, until, now)
        if fraction <= 0:
            continue
        first = rec.admit_time if first is None else min(first, rec.admit_time)
        key = rec.user if group == "user" else rec.queue if group == "queue" else team(rec.queue)
        rows.setdefault(key, ReportRow(key)).add(rec, allocated, fraction)
        total.add(rec, allocated, fraction)
    ordered = sorted(rows.values(), key=lambda r: (-r.allocated_s, r.key))
    return {
        "group": group,
        "since": since,
        "until": until,
        "now": now,
        "first_admit_time": first,
        "rows": [r.view(group) for r in ordered],
        "total": total.view(group) | {group: "total"},
    }


class UsageTotals:
    """Allocated and busy device-seconds per ``(queue, user)`` since the store began: the ended
    attempts' sums, kept up to date as attempts end, plus the open attempts' so far.

    Args:
        ended: ``(queue, user) -> (allocated, busy)`` of the attempts already ended (the store's
            ``ended_gpu_seconds``).
    """

    def __init__(self, ended: Mapping[tuple[str, str], tuple[float, float]]) -> None:
        self.ended = dict(ended)

    def attempt_ended(self, rec: AttemptRecord) -> None:
        """Add an attempt that just ended (call once per attempt)."""
        key = (rec.queue, rec.user)
        alloc, busy = self.ended.get(key, (0.0, 0.0))
        self.ended[key] = (alloc + rec.gpu_seconds(rec.end_time or rec.admit_time), busy + rec.busy_gpu_s)

    def totals(self, open_records: Iterable[AttemptRecord], now: float) -> dict[tuple[str, str], tuple[float, float]]:
        """``(queue, user) -> (allocated, busy)`` device-seconds up to ``now``: never less than at an
        earlier ``now`` (a counter), as the open attempts' time only grows until it moves to ``ended``."""
        out = dict(self.ended)
        for rec in open_records:
            if rec.end_time is not None:
                continue
            key = (rec.queue, rec.user)
            alloc, busy = out.get(key, (0.0, 0.0))
            out[key] = (alloc + rec.gpu_seconds(now), busy + rec.busy_gpu_s)
        return out
