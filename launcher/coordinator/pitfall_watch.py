"""The coordinator's pitfall watch: one history of device activity, so every view shows the same findings.

Every :data:`SAMPLE_S` seconds the watch takes the coordinator's snapshot (the same views
``GET /v1/nodes``, ``/v1/jobs`` and ``/v1/queues`` return), feeds its
:class:`~labgang.launcher.pitfalls.PitfallTracker` and keeps the findings of
:func:`~labgang.launcher.pitfalls.detect_all` with the thresholds of the cluster config's
``[pitfalls]`` table. ``GET /v1/pitfalls`` serves them; ``labgang top`` (live and ``--once``),
``labgang show JOB`` and ``/metrics`` all read these, so a job idle for 14 minutes is idle
for 14 minutes in every one of them, however recently the viewer started.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from aiohttp import web
from labgang.launcher.pitfalls import (
    ClusterSnapshot,
    DeviceSeries,
    Finding,
    PitfallThresholds,
    PitfallTracker,
    detect_all,
)

log = logging.getLogger("labgang.coordinator.pitfalls")

SAMPLE_S = 2.0
"""Seconds between two samples of the watch (agents report their devices about this often)."""


class PitfallWatch:
    """Pitfall history and current findings over snapshots from ``provider``.

    Args:
        provider: returns the coordinator's current :class:`ClusterSnapshot` (``now`` in unix seconds).
        thresholds: the detectors' thresholds (the cluster config's ``[pitfalls]``).
    """

    def __init__(self, provider: Callable[[], ClusterSnapshot], thresholds: PitfallThresholds) -> None:
        self.provider = provider
        self.thresholds = thresholds
        self.tracker = PitfallTracker(thresholds)
        self.series = DeviceSeries()  # recent points per device and pitfall markers (GET /v1/series)
        self.findings: tuple[Finding, ...] = ()
        self.allocation_rate_pct: float | None = None
        self.sampled_at: float | None = None
        self.listeners: list[Callable[[ClusterSnapshot], None]] = []
        """Called with every snapshot taken (the accounting's ``ActivityMeter.observe``)."""

    def sample(self) -> ClusterSnapshot:
        """Take a snapshot, add it to the history and recompute the findings.

        Returns:
            The snapshot, carrying the new findings and allocation rate.
        """
        snapshot = self.provider()
        for listener in self.listeners:
            listener(snapshot)
        try:
            self.tracker.observe(snapshot)
        except ValueError:  # the clock stepped back: start the history again
            log.warning("pitfall history reset: the clock went backwards")
            self.tracker = PitfallTracker(self.thresholds)
            self.tracker.observe(snapshot)
        self.findings = tuple(detect_all(snapshot, self.thresholds, self.tracker))
        self.series.record(snapshot, self.findings)
        busy, allocated = self.tracker.allocation_rate()
        self.allocation_rate_pct = 100.0 * busy / allocated if allocated > 0 else None
        self.sampled_at = snapshot.now
        return self.with_findings(snapshot)

    def with_findings(self, snapshot: ClusterSnapshot) -> ClusterSnapshot:
        """``snapshot`` carrying the current findings (what /metrics exports)."""
        return dataclasses.replace(snapshot, findings=self.findings, allocation_rate_pct=self.allocation_rate_pct)

    def view(self, job_id: str | None = None) -> dict[str, Any]:
        """The ``GET /v1/pitfalls`` body: findings (of one job when ``job_id`` is given), the
        allocation rate (percent, or None before any allocated time), when the last sample was
        taken (unix seconds) and the thresholds in force."""
        findings = [f for f in self.findings if job_id is None or f.job == job_id]
        return {
            "findings": [f.to_dict() for f in findings],
            "allocation_rate_pct": self.allocation_rate_pct,
            "sampled_at": self.sampled_at,
            "thresholds": dataclasses.asdict(self.thresholds),
        }


async def watch_loop(watch: PitfallWatch, interval_s: float = SAMPLE_S) -> None:
    """Sample ``watch`` every ``interval_s`` seconds until cancelled; a failed sample is logged, not fatal."""
    while True:
        try:
            watch.sample()
        except Exception:
            log.exception("pitfall sample failed")
        await asyncio.sleep(interval_s)


def add_pitfall_watch(app: web.Application) -> None:
    """Run a :class:`PitfallWatch` beside the coordinator of ``app`` (``Coordinator.watch_pitfalls``).

    Call it after the coordinator's own ``cleanup_ctx`` entries and before
    :func:`labgang.launcher.coordinator.metrics.add_metrics_routes`, which exports the watch's findings.
    """
    from labgang.launcher.coordinator import keys
    from labgang.launcher.coordinator.activity import ActivityMeter, open_record

    async def watch_ctx(app: web.Application) -> AsyncIterator[None]:
        coord = app[keys.COORDINATOR]
        watch = PitfallWatch(coord.pitfall_snapshot, coord.config.pitfall_thresholds())
        meter = ActivityMeter(open_record(coord.model.jobs), coord.store.save_attempt)
        watch.listeners.append(meter.observe)  # the attempts' device activity, from the same samples
        coord.watch_pitfalls(watch)
        task = asyncio.create_task(watch_loop(watch), name="labgang-pitfalls")
        yield
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    app.cleanup_ctx.append(watch_ctx)
