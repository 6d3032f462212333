"""Recent samples of each device (utilization, SM activity, memory) and when each pitfall fired:
the data of ``labgang top``'s history graphs.

The coordinator's pitfall watch (``coordinator/pitfall_watch.py``) records one point per device
each time it samples, beside its :class:`~labgang.launcher.pitfalls.PitfallTracker`, and
``GET /v1/series`` serves them; ``labgang top --local`` keeps its own. Points older than
``window_s`` are dropped, so memory is bounded by devices × window / sample interval
(512 devices × 10 min / 2 s ≈ 150 k small tuples).

A *marker* is a finding that was not among the previous sample's findings: the moment a
pitfall fired, drawn on the graphs of its device (or of every device of its job).
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from labgang.launcher.pitfalls.findings import ALLOCATED, Finding
from labgang.launcher.pitfalls.views import ClusterSnapshot, _num, iter_devices

#: Seconds of history kept and served by default (the graphs' width: "the last minutes").
WINDOW_S = 600.0


@dataclass(frozen=True, slots=True)
class Point:
    """One sample of one device.

    Attributes:
        t: unix seconds.
        util_pct: ``utilization.gpu`` (percent; None on MIG devices or when NVML had none).
        sm_pct: GPM SM activity (percent; None where NVML gives none).
        mem_used_bytes, mem_total_bytes: device memory (None when unknown).
        job: the job holding the device then, or None.
    """

    t: float
    util_pct: float | None
    sm_pct: float | None
    mem_used_bytes: float | None
    mem_total_bytes: float | None
    job: str | None

    @property
    def mem_pct(self) -> float | None:
        """Used memory as a percent of the total, or None."""
        if self.mem_used_bytes is None or not self.mem_total_bytes:
            return None
        return 100.0 * self.mem_used_bytes / self.mem_total_bytes


@dataclass(frozen=True, slots=True)
class Marker:
    """A pitfall that fired at ``t`` (unix seconds) on a device (``uuid``) or a job's devices (``job``)."""

    t: float
    kind: str
    severity: str
    subject: str
    uuid: str | None
    job: str | None


@dataclass(frozen=True, slots=True)
class DeviceHistory:
    """The recent points of one device, oldest first."""

    node: str
    uuid: str
    label: str
    points: tuple[Point, ...]


@dataclass(frozen=True, slots=True)
class SeriesView:
    """What the graphs draw: every device's history and the markers (the ``GET /v1/series`` body, parsed)."""

    window_s: float
    devices: tuple[DeviceHistory, ...] = ()
    markers: tuple[Marker, ...] = ()

    def device(self, uuid: str) -> DeviceHistory | None:
        """The history of the device with this UUID, or None."""
        return next((d for d in self.devices if d.uuid == uuid), None)

    def job_points(self, job_id: str) -> list[Point]:
        """One point per sample time while ``job_id`` held devices: mean utilization and SM
        activity over its devices (those known), summed memory; oldest first."""
        by_t: dict[float, list[Point]] = {}
        for d in self.devices:
            for p in d.points:
                if p.job == job_id:
                    by_t.setdefault(p.t, []).append(p)
        out = []
        for t in sorted(by_t):
            pts = by_t[t]
            out.append(
                Point(
                    t,
                    _mean(p.util_pct for p in pts),
                    _mean(p.sm_pct for p in pts),
                    _sum(p.mem_used_bytes for p in pts),
                    _sum(p.mem_total_bytes for p in pts),
                    job_id,
                )
            )
        return out

    def markers_for(self, *, uuid: str | None = None, job: str | None = None) -> list[Marker]:
        """Markers of one device (findings on it, or on the job then holding it) or of one job."""
        if job is not None:
            return [m for m in self.markers if m.job == job]
        held: set[str] = set()
        hist = self.device(uuid) if uuid is not None else None
        if hist is not None:
            held = {p.job for p in hist.points if p.job}
        return [
            m for m in self.markers if (m.uuid is not None and m.uuid == uuid) or (m.uuid is None and m.job in held)
        ]

    def to_dict(self) -> dict[str, Any]:
        """The ``GET /v1/series`` body: per device ``t``, ``util_pct``, ``sm_pct``, ``mem_used_bytes``,
        ``mem_total_bytes`` and ``job`` as parallel lists (null where unknown), and the markers."""
        return {
            "window_s": self.window_s,
            "devices": [
                {
                    "node": d.node,
                    "uuid": d.uuid,
                    "label": d.label,
                    "t": [p.t for p in d.points],
                    "util_pct": [p.util_pct for p in d.points],
                    "sm_pct": [p.sm_pct for p in d.points],
                    "mem_used_bytes": [p.mem_used_bytes for p in d.points],
                    "mem_total_bytes": [p.mem_total_bytes for p in d.points],
                    "job": [p.job for p in d.points],
                }
                for d in self.devices
            ],
            "markers": [
                {"t": m.t, "kind": m.kind, "severity": m.severity, "subject": m.subject, "uuid": m.uuid, "job": m.job}
                for m in self.markers
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SeriesView:
        """Parse :meth:`to_dict` output.

        Raises:
            ValueError: a device's lists differ in length, or a required key is missing (named).
        """
        devices = []
        for i, d in enumerate(data.get("devices") or ()):
            try:
                cols = [d[k] for k in ("t", "util_pct", "sm_pct", "mem_used_bytes", "mem_total_bytes", "job")]
                if len({len(c) for c in cols}) != 1:
                    raise ValueError(f"series.devices[{i}]: t, util_pct, sm_pct, mem_*, job differ in length")
                points = tuple(Point(float(t), u, s, mu, mt, j) for t, u, s, mu, mt, j in zip(*cols, strict=True))
                devices.append(DeviceHistory(str(d["node"]), str(d["uuid"]), str(d.get("label", "")), points))
            except KeyError as exc:
                raise ValueError(f"series.devices[{i}]: missing {exc.args[0]}") from None
        markers = tuple(
            Marker(
                float(m["t"]),
                str(m["kind"]),
                str(m.get("severity", "")),
                str(m.get("subject", "")),
                m.get("uuid"),
                m.get("job"),
            )
            for m in data.get("markers") or ()
        )
        return cls(float(data.get("window_s", WINDOW_S)), tuple(devices), markers)


class DeviceSeries:
    """Keeps the last ``window_s`` seconds of points per device and the pitfall markers.

    Call :meth:`record` once per sample with the snapshot and the findings computed for it.
    Snapshots must come in time order; an older one is ignored.
    """

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._points: dict[str, deque[Point]] = {}
        self._where: dict[str, tuple[str, str]] = {}
        self._markers: deque[Marker] = deque()
        self._firing: set[tuple[str, str, str | None, str | None]] = set()
        self._last: float | None = None
        self._oldest: float | None = None  # the time of the oldest point kept (None: no point)

    def record(self, snapshot: ClusterSnapshot, findings: Iterable[Finding]) -> None:
        """Add one point per allocatable device at ``snapshot.now`` and a marker per new finding."""
        now = snapshot.now
        if self._last is not None and now <= self._last:
            return
        self._last = now
        points = self._points
        for dev in iter_devices(snapshot):
            h = dev.holder
            info = dev.info
            util = None if dev.is_mig else _num(info.utilization_gpu_pct)
            point = Point(
                now,
                util,
                _num(info.sm_active_pct),
                _num(info.memory_used_bytes),
                _num(info.memory_total_bytes),
                h.job if h is not None and h.state == ALLOCATED else None,
            )
            kept = points.get(dev.uuid)
            if kept is None:  # a new device (``setdefault`` would make a deque for every device, every time)
                kept = points[dev.uuid] = deque()
            kept.append(point)
            self._where[dev.uuid] = (dev.node, dev.label)
        firing = set()
        for f in findings:
            key = (f.kind.value, f.subject, f.uuid, f.job)
            firing.add(key)
            if key not in self._firing:
                self._markers.append(Marker(now, f.kind.value, f.severity.value, f.subject, f.uuid, f.job))
        self._firing = firing
        horizon = now - self.window_s
        if self._oldest is None:
            self._oldest = now
        if self._oldest < horizon:  # some point is out of the window (none in the first window_s seconds)
            oldest = now
            for uuid in list(self._points):
                pts = self._points[uuid]
                while pts and pts[0].t < horizon:
                    pts.popleft()
                if not pts:
                    del self._points[uuid], self._where[uuid]
                elif pts[0].t < oldest:
                    oldest = pts[0].t
            self._oldest = oldest
        while self._markers and self._markers[0].t < horizon:
            self._markers.popleft()

    def view(self, seconds: float | None = None, uuids: Sequence[str] | None = None) -> SeriesView:
        """The last ``seconds`` (default and at most ``window_s``) of the devices ``uuids`` (default all)."""
        span = self.window_s if seconds is None else min(seconds, self.window_s)
        since = (self._last or 0.0) - span
        wanted = set(uuids) if uuids is not None else None
        devices = tuple(
            DeviceHistory(self._where[u][0], u, self._where[u][1], _since(pts, since))
            for u, pts in self._points.items()
            if wanted is None or u in wanted
        )
        markers = tuple(m for m in self._markers if m.t >= since)
        return SeriesView(span, devices, markers)


def _since(points: deque[Point], since: float) -> tuple[Point, ...]:
    """The ``points`` at ``since`` or later (unix seconds). They are in time order, so those
    before ``since`` are a prefix, and none when the first is not (the window's whole width,
    :meth:`DeviceSeries.view`'s default: the deque is copied as it is, without a look at each point)."""
    if not points or points[0].t >= since:
        return tuple(points)
    return tuple(itertools.dropwhile(lambda p: p.t < since, points))


def _mean(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _sum(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return float(sum(known)) if known else None


__all__ = ["WINDOW_S", "DeviceHistory", "DeviceSeries", "Marker", "Point", "SeriesView"]
