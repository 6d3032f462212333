"""Accounting records: one per start attempt of a job (Slurm's ``sacct`` rows, one per requeue).

An attempt begins when a cycle admits the job (its devices are held from then on) and ends when
its ranks are all gone and the job is requeued or ends. Its record keeps what the accounting
needs, whatever became of the job later: the pending period before it, when it was admitted,
when every rank started, when it ended, its nodes and devices, its outcome, and how busy its
devices were (accumulated by the coordinator from the agents' device samples).

GPU-seconds are *allocated* time: devices x (end - admission), the time the devices were held
from other jobs, as Slurm counts an allocation (a gang still starting, or stopping in its grace
period, holds its devices). MIG devices count as devices. A share of a card counts its part of
the card (:attr:`AttemptRecord.share`: a shard is ``1/shards_per_gpu`` gpu, ``--mps P`` is
``P/100``; docs/sharing.md), as ``simulate`` and ``plan`` count it.

Pure: no I/O, no clock (times are given).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

ATTEMPT_OUTCOMES: dict[str, str] = {
    "running": "R",
    "succeeded": "CD",
    "failed": "F",
    "cancelled": "CA",
    "timeout": "TO",
    "node_fail": "NF",
    "preempted": "PR",
    "requeued": "RQ",
}
"""An attempt's outcome and its Slurm state code. ``running``: not ended yet (admitted, running
or stopping). ``preempted``: stopped for a preemptor (requeued, or ended with ``requeue =
false``). ``node_fail``: a node of it was lost. ``requeued``: stopped for another reason that
put the job back in its queue (a failed start, labgang shutting down). The others are the
job's final state, reached with this attempt."""


@dataclass
class AttemptRecord:
    """One start attempt of a job. Times are unix seconds (simulated seconds in ``labgang simulate``).

    ``pending_since`` is when the pending period before this attempt began (the submission for
    attempt 0, the requeue for later ones); ``admit_time`` when the cycle admitted it (devices held
    from then), ``start_time`` when every rank had started, or, for a gang stopped before every rank
    reported running while a rank had, when that stop began (None if no rank ever started), ``end_time``
    when the attempt ended (its ranks all gone; None while it runs). ``devices`` are
    ``"node/device"`` strings, ``gpus`` their number. ``outcome`` is a key of
    :data:`ATTEMPT_OUTCOMES`, ``reason`` the message of why it ended ("" while it runs).

    ``measured_gpu_s`` is the device-seconds for which the agents reported the device's activity;
    ``busy_gpu_s`` the same weighted by that activity (SM activity, or ``utilization.gpu`` where
    GPM is unsupported, as a fraction), so ``busy_gpu_s / measured_gpu_s`` is the mean activity.

    ``share`` is the part of each device the attempt holds: 1.0 for whole devices, ``shards /
    shards_per_gpu`` for ``--shards``, ``P/100`` for ``--mps P``. Every device-second above is
    scaled by it. (A record written before shares were recorded reads back as 1.0: it was billed,
    and stays billed, as whole devices.)
    """

    job_id: str
    attempt: int
    user: str
    queue: str
    pending_since: float
    admit_time: float
    nodes: tuple[str, ...]
    devices: tuple[str, ...]
    start_time: float | None = None
    end_time: float | None = None
    outcome: str = "running"
    reason: str = ""
    measured_gpu_s: float = 0.0
    busy_gpu_s: float = 0.0
    share: float = 1.0

    @property
    def gpus(self) -> float:
        """GPUs held by the attempt: its devices (an int) when whole, else devices x :attr:`share`
        (0.25 for one shard of a card split in 4)."""
        n = len(self.devices)
        return n if self.share == 1.0 else n * self.share

    @property
    def wait_s(self) -> float:
        """Seconds pending before this attempt was admitted."""
        return max(0.0, self.admit_time - self.pending_since)

    def elapsed_s(self, now: float) -> float:
        """Seconds the attempt held its devices: admission to its end (``now`` while it runs)."""
        end = self.end_time if self.end_time is not None else now
        return max(0.0, end - self.admit_time)

    def gpu_seconds(self, now: float) -> float:
        """Allocated device-seconds: :attr:`gpus` x :meth:`elapsed_s`."""
        return self.gpus * self.elapsed_s(now)

    def overlap(self, since: float | None, until: float | None, now: float) -> tuple[float, float]:
        """``(allocated device-seconds, fraction of the attempt's held time)`` within
        [``since``, ``until``] (None: unbounded); an attempt still running counts until ``now``."""
        end = self.end_time if self.end_time is not None else now
        lo = self.admit_time if since is None else max(self.admit_time, since)
        hi = end if until is None else min(end, until)
        span = end - self.admit_time
        inside = max(0.0, hi - lo)
        if span <= 0:
            return 0.0, 0.0
        return self.gpus * inside, inside / span

    def record_activity(self, seconds: float, activity_pct: float) -> None:
        """Add ``seconds`` of one device's time at ``activity_pct`` (0..100) percent activity (a share
        of a card: its :attr:`share` of those seconds)."""
        held = seconds * self.share
        self.measured_gpu_s += held
        self.busy_gpu_s += held * min(100.0, max(0.0, activity_pct)) / 100.0

    def view(self, now: float) -> dict[str, Any]:
        """The attempt as JSON (``GET /v1/history?attempts=1``, ``labgang history --attempts --json``):
        times in unix seconds, ``gpu_hours`` allocated, ``used_gpu_hours`` weighted by activity,
        ``activity_pct`` the mean activity (None before any sample); ``gpus`` the GPUs held (a share
        of a card: its part, e.g. 0.25), ``share`` the part of each device (1.0: whole)."""
        return {
            "job_id": self.job_id,
            "attempt": self.attempt,
            "user": self.user,
            "queue": self.queue,
            "outcome": self.outcome,
            "code": ATTEMPT_OUTCOMES.get(self.outcome, "?"),
            "reason": self.reason,
            "pending_since": self.pending_since,
            "admit_time": self.admit_time,
            "start_time": self.start_time,
            "end_time": self.end_time,
            "wait_s": self.wait_s,
            "elapsed_s": self.elapsed_s(now),
            "nodes": list(self.nodes),
            "devices": list(self.devices),
            "gpus": self.gpus,
            "share": self.share,
            "gpu_hours": self.gpu_seconds(now) / 3600.0,
            "used_gpu_hours": self.busy_gpu_s / 3600.0,
            "activity_pct": None if self.measured_gpu_s <= 0 else 100.0 * self.busy_gpu_s / self.measured_gpu_s,
        }

    def row(self) -> tuple[Any, ...]:
        """The ``attempts`` table row (``launcher/coordinator/store.py``), in :data:`ROW_COLUMNS` order."""
        return (
            self.job_id,
            self.attempt,
            self.user,
            self.queue,
            self.pending_since,
            self.admit_time,
            self.start_time,
            self.end_time,
            json.dumps(list(self.nodes)),
            json.dumps(list(self.devices)),
            self.gpus,
            self.outcome,
            self.reason,
            self.measured_gpu_s,
            self.busy_gpu_s,
            self.share,
        )

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> AttemptRecord:
        """Read back :meth:`row` (the ``gpus`` column is derived, not read; a null ``share``: 1.0)."""
        (job_id, attempt, user, queue, pending, admit, start, end, nodes, devs, _gpus, outcome, reason, m, b, sh) = row
        return cls(
            job_id=job_id,
            attempt=attempt,
            user=user,
            queue=queue,
            pending_since=pending,
            admit_time=admit,
            nodes=tuple(json.loads(nodes)),
            devices=tuple(json.loads(devs)),
            start_time=start,
            end_time=end,
            outcome=outcome,
            reason=reason,
            measured_gpu_s=m,
            busy_gpu_s=b,
            share=1.0 if sh is None else float(sh),
        )


ROW_COLUMNS = (
    "job_id",
    "attempt",
    "user",
    "queue",
    "pending_since",
    "admit_time",
    "start_time",
    "end_time",
    "nodes",
    "devices",
    "gpus",
    "outcome",
    "reason",
    "measured_gpu_s",
    "busy_gpu_s",
    "share",
)
"""The ``attempts`` table's columns, in :meth:`AttemptRecord.row` order."""


def job_wait_s(attempts: list[AttemptRecord], pending_since: float, end: float | None, now: float) -> float:
    """A job's WAIT: the sum of its pending periods. Each attempt's (pending to admission), plus the
    current one while the job is pending (to ``now``) or the last one when it ended while pending
    (a cancel; to ``end``). ``pending_since`` is the job's own (the start of its current or last
    pending period); a job whose last attempt ended it has no pending period after it."""
    total = sum(a.wait_s for a in attempts)
    last = max(attempts, key=lambda a: a.attempt) if attempts else None
    if last is None or (last.end_time is not None and last.outcome in ("preempted", "node_fail", "requeued")):
        # pending now, or ended while pending: the open pending period counts too
        stop = end if end is not None else now
        if last is None or pending_since >= last.admit_time:
            total += max(0.0, stop - pending_since)
    return total
