"""What the TUI shows, as immutable values: one :class:`ClusterState` per refresh, plus filters and sort.

Built off the UI thread (in the fetch worker) by :class:`StateBuilder`, which owns the
:class:`~labgang.launcher.pitfalls.PitfallTracker` history; the App only assigns the
result to a reactive attribute.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from labgang.launcher.pitfalls import (
    ClusterSnapshot,
    DeviceSample,
    DeviceSeries,
    Finding,
    JobView,
    PitfallThresholds,
    PitfallTracker,
    detect_all,
    iter_devices,
)

#: Sort orders for the jobs table, cycled with ``s``: (key, label).
JOB_SORTS: tuple[tuple[str, str], ...] = (
    ("state", "state, then priority"),
    ("age", "age (oldest first)"),
    ("priority", "priority (highest first)"),
    ("user", "user"),
    ("queue", "queue"),
)
_STATE_ORDER = {
    "running": 0,
    "terminating": 1,
    "admitted": 2,
    "pending": 3,
    "failed": 4,
    "timeout": 4,
    "node_fail": 4,
    "cancelled": 5,
    "succeeded": 6,
}


@dataclass(frozen=True, slots=True)
class ClusterState:
    """One refresh's worth of data for every widget.

    Attributes:
        snapshot: nodes, devices, jobs and queues at ``snapshot.now`` (unix seconds).
        findings: pitfall findings, most severe first.
        allocation_rate_pct: busy over allocated device-time in the tracker's history (%),
            or None before any allocated device-time was seen.
        mode: ``"local"`` or ``"coordinator"``.
        source: a short description of where the data came from (file, socket).
        user: the user running the TUI (for "mine" filtering and cancel checks).
        error: the last fetch error, shown in the summary line; None when the fetch worked.
    """

    snapshot: ClusterSnapshot
    findings: tuple[Finding, ...] = ()
    allocation_rate_pct: float | None = None
    mode: str = "local"
    source: str = ""
    user: str = ""
    error: str | None = None

    @property
    def devices(self) -> list[DeviceSample]:
        """Every allocatable device (full GPUs and MIG devices) in node/index order."""
        return list(iter_devices(self.snapshot))

    def with_error(self, error: str | None) -> ClusterState:
        """The same data with a new error line (the data stays: stale beats blank)."""
        return replace(self, error=error)


@dataclass(frozen=True, slots=True)
class Filters:
    """Active filters; None (or "") means "any". Matching is exact on names."""

    user: str | None = None
    queue: str | None = None
    node: str | None = None

    @property
    def active(self) -> bool:
        return bool(self.user or self.queue or self.node)

    def describe(self) -> str:
        """``"user=alice node=n1"``, or ``""`` when no filter is active."""
        return " ".join(f"{k}={v}" for k, v in (("user", self.user), ("queue", self.queue), ("node", self.node)) if v)

    @classmethod
    def parse(cls, text: str) -> Filters:
        """Parse ``"user=alice queue=vision node=n1"`` (any subset, any order; empty clears).

        Raises:
            ValueError: a word that is not ``key=value`` with key user, queue or node.
        """
        values: dict[str, str] = {}
        for word in text.split():
            key, sep, value = word.partition("=")
            if not sep or key not in ("user", "queue", "node") or not value:
                raise ValueError(f"filter {word!r}: use key=value with key one of user, queue, node")
            values[key] = value
        return cls(**values)

    def match_job(self, job: JobView) -> bool:
        return (
            (not self.user or job.user == self.user)
            and (not self.queue or job.queue == self.queue)
            and (not self.node or self.node in job.nodes or any(r.node == self.node for r in job.ranks))
        )

    def match_device(self, dev: DeviceSample) -> bool:
        h = dev.holder
        return (
            (not self.node or dev.node == self.node)
            and (not self.user or (h is not None and h.user == self.user))
            and (not self.queue or (h is not None and h.queue == self.queue))
        )

    def match_finding(self, f: Finding, state: ClusterState) -> bool:
        if not self.active:
            return True
        if self.node and f.node not in (None, self.node):
            return False
        job = state.snapshot.job(f.job) if f.job else None
        if self.user and job is not None and job.user != self.user:
            return False
        return not (self.queue and job is not None and job.queue != self.queue)


def sort_jobs(jobs: Iterable[JobView], key: str, now: float) -> list[JobView]:
    """Jobs in the order of sort ``key`` (one of :data:`JOB_SORTS`); ties broken by id.

    Raises:
        ValueError: an unknown key (the message lists the allowed ones).
    """

    def age(j: JobView) -> float:
        return -(now - (j.submit_time if j.submit_time is not None else now))

    keys = {
        "state": lambda j: (_STATE_ORDER.get(j.state, 9), -j.priority, age(j), j.id),
        "age": lambda j: (age(j), j.id),
        "priority": lambda j: (-j.priority, age(j), j.id),
        "user": lambda j: (j.user, age(j), j.id),
        "queue": lambda j: (j.queue, -j.priority, age(j), j.id),
    }
    if key not in keys:
        raise ValueError(f"sort key {key!r}: allowed {', '.join(k for k, _ in JOB_SORTS)}")
    return sorted(jobs, key=keys[key])


class StateBuilder:
    """Turns snapshots into :class:`ClusterState`, keeping the pitfall history between refreshes.

    Not thread-safe: call from one worker at a time (the App's fetch workers are exclusive).
    Without a coordinator it also keeps the recent device samples the graphs draw
    (:class:`~labgang.launcher.pitfalls.DeviceSeries`): it records a point per device at every
    build, and puts the view of every point into the state's snapshot only while
    ``series_wanted`` is set (the App sets it while the Graphs tab is shown, as it sets
    ``CoordinatorSource.series_wanted``). A view copies every device's points (512 devices ×
    10 minutes of 1 s refreshes: 300,000), and a refresh that draws no graph needs none; the
    first build after the tab is shown views every point recorded meanwhile, so the graphs are
    the same as if the view had been built each time.
    """

    def __init__(
        self, thresholds: PitfallThresholds | None = None, *, mode: str = "local", source: str = "", user: str = ""
    ) -> None:
        self.thresholds = thresholds or PitfallThresholds()
        self.tracker = PitfallTracker(self.thresholds)
        self.series = DeviceSeries()
        self.series_wanted = False  # put ``series.view()`` into each built snapshot (the Graphs tab is shown)
        self.mode, self.source, self.user = mode, source, user

    def build(self, snapshot: ClusterSnapshot) -> ClusterState:
        """Observe ``snapshot`` in the history and compute every finding; a snapshot that carries the
        coordinator's findings (``snapshot.findings``) shows those, so every view agrees."""
        if snapshot.findings is not None:
            return ClusterState(
                snapshot=snapshot,
                findings=snapshot.findings,
                allocation_rate_pct=snapshot.allocation_rate_pct,
                mode=self.mode,
                source=self.source,
                user=self.user,
            )
        self.tracker.observe(snapshot)
        busy, alloc = self.tracker.allocation_rate()
        findings = tuple(detect_all(snapshot, self.thresholds, self.tracker))
        if snapshot.series is None:  # local mode: this builder's own history feeds the graphs
            self.series.record(snapshot, findings)
            if self.series_wanted:
                snapshot = replace(snapshot, series=self.series.view())
        return ClusterState(
            snapshot=snapshot,
            findings=findings,
            allocation_rate_pct=(100.0 * busy / alloc) if alloc > 0 else None,
            mode=self.mode,
            source=self.source,
            user=self.user,
        )
