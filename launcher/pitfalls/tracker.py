"""The stateful part: per-device activity history for *allocated but idle* and the *allocation rate*,
and :func:`detect_all`, which runs every detector."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from labgang.launcher.pitfalls.detectors import SNAPSHOT_DETECTORS, _pct
from labgang.launcher.pitfalls.findings import ALLOCATED, Finding, PitfallKind, Severity
from labgang.launcher.pitfalls.thresholds import PitfallThresholds
from labgang.launcher.pitfalls.views import ClusterSnapshot, DeviceSample, iter_devices

# ----------------------------------------------------------------------------------------
# History: allocated-but-idle and the allocation rate.


BUSY, IDLE, UNKNOWN = "busy", "idle", "unknown"


@dataclass(slots=True)
class _Run:
    """Consecutive samples of one device with the same holder job and activity class.

    ``start`` is the first sample's time, ``last`` the latest one's. The run lasts until the
    next run starts (or until ``last`` for the newest run).
    """

    start: float
    last: float
    job: str | None  # the holder job while allocated, else None
    activity: str  # BUSY, IDLE or UNKNOWN


class PitfallTracker:
    """Per-device activity history for the time-based findings. Pure: ``now`` comes with each snapshot.

    Call :meth:`observe` once per refresh, then :meth:`findings`. History older than
    ``thresholds.history_s`` is dropped. Samples are kept run-length encoded (one entry
    per change of holder or of busy/idle), so memory grows with changes, not refreshes:
    512 devices sampled every second for an hour stay a few thousand entries.

    The allocation rate is busy device-time over allocated device-time in the last
    ``history_s``: the time between two samples of a device counts for the state of the
    first; it is *allocated* when a job held the device and its activity was known, and
    *busy* when that activity was at least ``idle_activity_pct``.
    """

    def __init__(self, thresholds: PitfallThresholds | None = None) -> None:
        self.thresholds = thresholds or PitfallThresholds()
        self._runs: dict[str, deque[_Run]] = {}
        self._now: float | None = None

    def _classify(self, activity_pct: float | None) -> str:
        if activity_pct is None:
            return UNKNOWN
        return IDLE if activity_pct < self.thresholds.idle_activity_pct else BUSY

    def observe(self, snapshot: ClusterSnapshot) -> None:
        """Record one sample per allocatable device at ``snapshot.now``; snapshots must come in time order.

        Raises:
            ValueError: ``snapshot.now`` is earlier than the previous snapshot's.
        """
        now = snapshot.now
        if self._now is not None and now < self._now:
            raise ValueError(f"now: {now} is before the previous snapshot at {self._now}")
        self._now = now
        for dev in iter_devices(snapshot):
            h = dev.holder
            job = (h.job or "?") if h is not None and h.state == ALLOCATED else None
            activity = self._classify(dev.activity_pct)
            runs = self._runs.setdefault(dev.uuid, deque())
            if runs and runs[-1].job == job and runs[-1].activity == activity:
                runs[-1].last = now
            else:
                runs.append(_Run(now, now, job, activity))
        horizon = now - self.thresholds.history_s
        for uuid in sorted(self._runs):
            runs = self._runs[uuid]
            while len(runs) > 1 and runs[1].start <= horizon:
                runs.popleft()
            if runs[-1].last < horizon:  # a device gone for longer than the history
                del self._runs[uuid]

    def idle_since(self, uuid: str) -> float | None:
        """When the device's current run of allocated, idle samples for one job began (unix s), or None."""
        runs = self._runs.get(uuid)
        if not runs:
            return None
        last = runs[-1]
        return last.start if last.job is not None and last.activity == IDLE else None

    def allocation_rate(self) -> tuple[float, float]:
        """``(busy_s, allocated_s)`` device-seconds over the last ``history_s``."""
        if self._now is None:
            return 0.0, 0.0
        horizon = self._now - self.thresholds.history_s
        busy = alloc = 0.0
        for runs in self._runs.values():
            for i, run in enumerate(runs):
                end = runs[i + 1].start if i + 1 < len(runs) else run.last
                dt = end - max(run.start, horizon)
                if dt <= 0 or run.job is None or run.activity == UNKNOWN:
                    continue
                alloc += dt
                if run.activity == BUSY:
                    busy += dt
        return busy, alloc

    def findings(self, snapshot: ClusterSnapshot) -> list[Finding]:
        """Allocated-but-idle findings (one per job whose every known device is idle long enough)
        and the low-allocation-rate finding."""
        t = self.thresholds
        per_job: dict[str, list[tuple[DeviceSample, float]]] = {}
        all_devs: dict[str, int] = {}
        for dev in iter_devices(snapshot):
            h = dev.holder
            if h is None or h.state != ALLOCATED:
                continue
            key = h.job or "?"
            all_devs[key] = all_devs.get(key, 0) + 1
            since = self.idle_since(dev.uuid)
            if since is not None and snapshot.now - since >= t.idle_after_s:
                per_job.setdefault(key, []).append((dev, snapshot.now - since))
        out = []
        for job_id in sorted(per_job):
            idle = per_job[job_id]
            if len(idle) < all_devs[job_id]:
                continue  # some device of the gang is busy or unknown
            idle_s = min(s for _, s in idle)
            job = snapshot.job(job_id)
            first = idle[0][0]
            holder = first.holder
            who = job.user if job else (holder.user if holder else None)
            out.append(
                Finding(
                    PitfallKind.ALLOCATED_IDLE,
                    Severity.WARNING,
                    f"job {job_id}",
                    f"{len(idle)} device(s) below {t.idle_activity_pct:.0f}% activity for {span(idle_s)}"
                    + (f" (user {who})" if who else ""),
                    "the job holds GPUs it does not use: cancel it, or check for a data-loading or I/O stall",
                    {"devices": float(len(idle)), "idle_s": idle_s},
                    first.node if len({d.node for d, _ in idle}) == 1 else None,
                    first.uuid if len(idle) == 1 else None,
                    job_id,
                )
            )
        busy, alloc = self.allocation_rate()
        if alloc >= t.min_allocated_s:
            rate = 100.0 * busy / alloc
            if rate < t.allocation_rate_min_pct:
                out.append(
                    Finding(
                        PitfallKind.LOW_ALLOCATION_RATE,
                        Severity.INFO,
                        "cluster",
                        f"allocated devices were busy {_pct(rate)} of the time over the last "
                        f"{span(alloc, 'device-')} of allocation",
                        "allocated GPUs sit idle: look for idle jobs and right-size requests",
                        {"allocation_rate_pct": rate, "busy_s": busy, "allocated_s": alloc},
                    )
                )
        return out


def span(seconds: float, unit: str = "") -> str:
    """A duration as a reader says it: ``35 s`` under two minutes, ``12 min`` under two hours,
    then ``3.5 h``. ``unit`` prefixes the unit (``"device-"``: ``35 device-s``, ``12 device-min``)."""
    if seconds < 120:
        return f"{seconds:.0f} {unit}s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} {unit}min"
    return f"{seconds / 3600:.1f} {unit}h"


def detect_all(
    snapshot: ClusterSnapshot, thresholds: PitfallThresholds | None = None, tracker: PitfallTracker | None = None
) -> list[Finding]:
    """Run every detector; with a tracker, also the history-based findings (the tracker must
    already have observed this snapshot). Sorted by severity, kind, subject."""
    t = thresholds or (tracker.thresholds if tracker else PitfallThresholds())
    out: list[Finding] = []
    for detector in SNAPSHOT_DETECTORS:
        out.extend(detector(snapshot, t))
    if tracker is not None:
        out.extend(tracker.findings(snapshot))
    out.sort(key=lambda f: (f.severity.rank, f.kind.value, f.subject))
    return out
