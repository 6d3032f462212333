"""How busy each attempt's devices were: the agents' device samples added up into the attempt records.

The coordinator's pitfall watch takes a snapshot of every node's devices about every 2 s (the
inventories the agents report). :class:`ActivityMeter` looks at each snapshot: for every device a
job holds, the time since the device's previous sample counts for that job's current attempt
(``AttemptRecord.record_activity``) at the device's activity in this sample: GPM SM activity
where the GPU reports it, else ``utilization.gpu`` (MIG devices report SM activity only). A
device whose activity is unknown adds nothing, and a gap longer than :data:`MAX_GAP_S` (an agent
silent, the coordinator busy) counts only :data:`MAX_GAP_S`: unmeasured time is not guessed.

``labgang report``'s used GPU-hours and activity, ``history``'s ``ACT%`` and the
``labgang_gpu_used_seconds_total`` counter are these sums.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from labgang.launcher.lifecycle.attempts import AttemptRecord
from labgang.launcher.pitfalls.findings import ALLOCATED
from labgang.launcher.pitfalls.views import ClusterSnapshot, DeviceSample, iter_devices

MAX_GAP_S = 10.0
"""The most seconds one sample of a device stands for (samples come about every 2 s)."""

PERSIST_S = 60.0
"""How often a running attempt's activity is written to the store (seconds). A record is one
object in memory: whatever writes it next (its close, at the latest) writes its activity so far,
so this only bounds what a coordinator crash could lose, without a commit every sample."""


def device_activity_pct(dev: DeviceSample) -> float | None:
    """The device's activity in percent: SM activity (GPM) when known, else ``utilization.gpu``
    (a full GPU only); None when neither is known."""
    for value in (getattr(dev.info, "sm_active_pct", None), getattr(dev.info, "utilization_gpu_pct", None)):
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


class ActivityMeter:
    """Adds each snapshot's device activity to the open attempt records of the jobs holding the devices.

    Args:
        records: ``job id -> its current attempt's record`` (None: no open attempt), read at each
            snapshot (the coordinator's jobs in memory).
        saved: called with a record whose activity changed, at most every :data:`PERSIST_S`
            seconds per record (the coordinator buffers it in the store).
    """

    def __init__(
        self,
        records: Callable[[str], AttemptRecord | None],
        saved: Callable[[AttemptRecord], None],
    ) -> None:
        self._records = records
        self._saved = saved
        self._last: dict[str, tuple[float, str, int]] = {}  # device uuid -> (time, job id, attempt)
        self._saved_at: dict[tuple[str, int], float] = {}  # (job id, attempt) -> when last handed to ``saved``

    def observe(self, snapshot: ClusterSnapshot) -> None:
        """Count the time since each held device's previous sample for its holder's attempt."""
        now = snapshot.now
        seen: dict[str, tuple[float, str, int]] = {}
        changed: dict[tuple[str, int], AttemptRecord] = {}
        for dev in iter_devices(snapshot):
            h = dev.holder
            if h is None or h.state != ALLOCATED or not h.job:
                continue
            rec = self._records(h.job)
            if rec is None or rec.end_time is not None:
                continue
            seen[dev.uuid] = (now, h.job, rec.attempt)
            last = self._last.get(dev.uuid)
            if last is None or last[1:] != (h.job, rec.attempt):
                continue  # its first sample for this attempt: the time before it is not this attempt's
            pct = device_activity_pct(dev)
            dt = min(MAX_GAP_S, now - last[0])
            if pct is None or dt <= 0:
                continue
            rec.record_activity(dt, pct)
            changed[(rec.job_id, rec.attempt)] = rec
        self._last = seen
        live = {(job, attempt) for _, job, attempt in seen.values()}
        self._saved_at = {key: at for key, at in self._saved_at.items() if key in live}
        for key, rec in changed.items():
            if now - self._saved_at.get(key, -PERSIST_S) >= PERSIST_S:
                self._saved_at[key] = now
                self._saved(rec)


def open_record(jobs: Mapping[str, Any]) -> Callable[[str], AttemptRecord | None]:
    """A ``records`` lookup for :class:`ActivityMeter` over the coordinator's active jobs
    (``JobRecord`` by id): the job's current attempt record, or None."""

    def lookup(job_id: str) -> AttemptRecord | None:
        job = jobs.get(job_id)
        if job is None:
            return None
        rec: AttemptRecord | None = job.attempt_record
        return rec if rec is not None and rec.attempt == job.status.attempt else None

    return lookup
