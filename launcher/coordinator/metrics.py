"""Prometheus metrics for the coordinator (``GET /metrics``, read-only).

Three sources feed one :class:`prometheus_client.CollectorRegistry`:

- :class:`ClusterCollector` turns a :class:`~labgang.launcher.pitfalls.ClusterSnapshot`
  (the nodes, jobs and queues exactly as the coordinator's API shows them) into
  gauges at scrape time: per-device utilization, SM activity, memory, temperature
  and power; per-queue quota accounting and pending jobs by reason; jobs by state;
  node liveness; the pitfall detectors' findings; shared cards' sharers (``share_metrics.py``).
- :class:`SchedulerMetrics` holds what only the scheduling loop sees as it happens:
  admission latency and scheduling-cycle duration histograms and the preemption
  counter. The coordinator calls its ``observe_*``/``count_*`` methods.
- :class:`GpuSecondsCollector`: the GPU-seconds counters per queue and user, from the
  attempt records (``launcher/accounting.py``).

:func:`add_metrics_routes` puts ``GET /metrics`` on the coordinator's application.

Names follow Prometheus conventions: a ``labgang_`` prefix, base units in the name
(``_seconds``, ``_bytes``, ``_celsius``, ``_watts``, ``_ratio`` for 0..1 fractions,
``_devices`` and ``_jobs`` for counts) and ``_total`` on counters. A value NVML could
not give is left out (no series), never exported as 0.

Per-device series carry the labels ``node``, ``gpu`` (NVML index of the physical GPU),
``uuid``, ``mig_profile`` ("" for a full GPU), and ``job``, ``user``, ``queue`` of
the job holding the device ("" when none). Temperature and power belong to the
physical GPU: on a GPU in MIG mode they are exported once for the GPU (its UUID,
``mig_profile=""``, no job), while memory and SM activity are per MIG device.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from labgang.agent.inventory import is_known
from labgang.launcher.coordinator import keys, views
from labgang.launcher.coordinator.share_metrics import sharer_families
from labgang.launcher.coordinator.view_cache import JobMemo
from labgang.launcher.host_quota import is_host_resource
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.model import JobState
from labgang.launcher.pitfalls import (
    DEVICE_STATES,
    ClusterSnapshot,
    DeviceView,
    JobView,
    PitfallKind,
    PitfallThresholds,
    PitfallTracker,
    detect_all,
)
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, Info, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

log = logging.getLogger("labgang.metrics")

DEVICE_LABELS = ("node", "gpu", "uuid", "mig_profile", "job", "user", "queue")
#: Histogram buckets for submit → admit, seconds (interactive jobs up to day-long waits).
ADMISSION_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 43200.0, 86400.0)
#: Histogram buckets for one scheduling cycle, seconds.
CYCLE_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)

SnapshotProvider = Callable[[], ClusterSnapshot]
JobCounter = Callable[[], Mapping[tuple[str, str], int]]


@dataclass(frozen=True, slots=True)
class _DeviceRow:
    """One exported device: its label values and the readings it has (None = not exported)."""

    labels: tuple[str, ...]
    gpu_utilization_pct: Any = None
    sm_active_pct: Any = None
    memory_used_bytes: Any = None
    memory_total_bytes: Any = None
    temperature_c: Any = None
    power_w: Any = None
    state: str | None = None


def _holder_labels(holder: DeviceView | None) -> tuple[tuple[str, str, str], str | None]:
    """(job, user, queue) of a device's holder and the device state; empty strings when free or unknown."""
    if holder is None:
        return ("", "", ""), None
    if holder.state == "allocated":
        return (holder.job or "", holder.user or "", holder.queue or ""), holder.state
    return ("", "", ""), holder.state


def device_rows(snapshot: ClusterSnapshot) -> Iterator[_DeviceRow]:
    """Every device row to export, in node and NVML index order.

    A full GPU gives one row with all readings. A GPU in MIG mode gives one row for
    the physical GPU (temperature, power, utilization if NVML has it; also when it has
    no MIG device yet, which is why this does not reuse ``pitfalls.iter_devices``) and
    one row per MIG device (memory, SM activity, holder).
    """
    for node in snapshot.nodes:
        if node.inventory is None:
            continue
        holders = {d.uuid: d for d in node.devices}
        for gpu in node.inventory.gpus:
            if not is_known(gpu.uuid):
                continue
            gpu_index = str(gpu.index)
            if gpu.mig_mode_current is True:
                yield _DeviceRow(
                    (node.name, gpu_index, gpu.uuid, "", "", "", ""),
                    gpu_utilization_pct=gpu.utilization_gpu_pct,
                    temperature_c=gpu.temperature_c,
                    power_w=gpu.power_w,
                )
                for mig in gpu.mig_devices:
                    if not (is_known(mig.uuid) and is_known(mig.profile)):
                        continue
                    holder, state = _holder_labels(holders.get(mig.uuid))
                    yield _DeviceRow(
                        (node.name, gpu_index, mig.uuid, mig.profile, *holder),
                        sm_active_pct=mig.sm_active_pct,
                        memory_used_bytes=mig.memory_used_bytes,
                        memory_total_bytes=mig.memory_total_bytes,
                        state=state,
                    )
            else:
                holder, state = _holder_labels(holders.get(gpu.uuid))
                yield _DeviceRow(
                    (node.name, gpu_index, gpu.uuid, "", *holder),
                    gpu_utilization_pct=gpu.utilization_gpu_pct,
                    sm_active_pct=gpu.sm_active_pct,
                    memory_used_bytes=gpu.memory_used_bytes,
                    memory_total_bytes=gpu.memory_total_bytes,
                    temperature_c=gpu.temperature_c,
                    power_w=gpu.power_w,
                    state=state,
                )


def _gauge(name: str, doc: str, labels: Iterable[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=list(labels))


class ClusterCollector(Collector):
    """Gauges computed from a cluster snapshot at each scrape.

    Args:
        provider: returns the current :class:`ClusterSnapshot` (``now`` in unix seconds);
            called once per scrape, on the scraping thread or event loop.
        thresholds: pitfall thresholds (defaults if None).
        track_history: keep a :class:`PitfallTracker` fed by the scrapes, so the
            history-based findings (allocated but idle, low allocation rate) are exported too.
        job_counts: returns jobs per ``(queue, state)``; None counts ``snapshot.jobs``. The
            coordinator passes its own count so a snapshot need not carry every finished job.
    """

    def __init__(
        self,
        provider: SnapshotProvider,
        *,
        thresholds: PitfallThresholds | None = None,
        track_history: bool = True,
        job_counts: JobCounter | None = None,
    ) -> None:
        self.provider = provider
        self.job_counts = job_counts
        self.thresholds = thresholds or PitfallThresholds()
        self.tracker = PitfallTracker(self.thresholds) if track_history else None

    def describe(self) -> list[Metric]:
        """Nothing up front: the families depend on the snapshot (avoids a provider call at registration)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield every gauge family for the current snapshot."""
        snapshot = self.provider()
        yield from self._devices(snapshot)
        yield from self._nodes(snapshot)
        yield from self._queues(snapshot)
        yield from self._jobs(snapshot)
        yield from self._pitfalls(snapshot)
        yield from sharer_families(snapshot)

    # ----- families -----------------------------------------------------------------------

    def _devices(self, snapshot: ClusterSnapshot) -> Iterator[Metric]:
        util = _gauge(
            "labgang_device_gpu_utilization_ratio",
            "Fraction of time a kernel ran (NVML utilization.gpu / 100; nvmlDeviceGetUtilizationRates).",
            DEVICE_LABELS,
        )
        sm = _gauge(
            "labgang_device_sm_active_ratio",
            "Fraction of SMs busy (GPM SM_UTIL / 100; Hopper and later).",
            DEVICE_LABELS,
        )
        used = _gauge(
            "labgang_device_memory_used_bytes", "Device memory in use (nvmlDeviceGetMemoryInfo).", DEVICE_LABELS
        )
        total = _gauge(
            "labgang_device_memory_total_bytes", "Device memory size (nvmlDeviceGetMemoryInfo).", DEVICE_LABELS
        )
        temp = _gauge(
            "labgang_device_temperature_celsius", "GPU core temperature (nvmlDeviceGetTemperature).", DEVICE_LABELS
        )
        power = _gauge("labgang_device_power_watts", "Power draw (nvmlDeviceGetPowerUsage / 1000).", DEVICE_LABELS)
        state = _gauge(
            "labgang_device_state",
            f"1 for the allocatable device's current state ({', '.join(DEVICE_STATES)}).",
            (*DEVICE_LABELS, "state"),
        )
        for row in device_rows(snapshot):
            for family, value, scale in (
                (util, row.gpu_utilization_pct, 0.01),
                (sm, row.sm_active_pct, 0.01),
                (used, row.memory_used_bytes, 1),
                (total, row.memory_total_bytes, 1),
                (temp, row.temperature_c, 1),
                (power, row.power_w, 1),
            ):
                if is_known(value):
                    family.add_metric(row.labels, float(value) * scale)
            if row.state is not None:
                state.add_metric((*row.labels, row.state), 1.0)
        yield from (util, sm, used, total, temp, power, state)

    def _nodes(self, snapshot: ClusterSnapshot) -> Iterator[Metric]:
        connected = _gauge("labgang_node_connected", "1 while the node's agent is connected.", ("node",))
        seen = _gauge(
            "labgang_node_last_seen_timestamp_seconds", "When the node's agent last reported (unix s).", ("node",)
        )
        for node in snapshot.nodes:
            connected.add_metric((node.name,), 1.0 if node.connected else 0.0)
            if node.last_seen is not None:
                seen.add_metric((node.name,), node.last_seen)
        yield from (connected, seen)

    def _queues(self, snapshot: ClusterSnapshot) -> Iterator[Metric]:
        labels = ("queue", "cohort", "resource")
        families = {
            key: _gauge(f"labgang_queue_{key}_devices", doc, labels)
            for key, doc in (
                ("nominal", "The queue's nominal quota."),
                ("used", "Devices held by the queue's admitted jobs (terminating ones included)."),
                ("borrowed", "Devices used above nominal, borrowed from the cohort."),
                ("lent", "Unused nominal quota other queues of the cohort are using."),
            )
        }
        for q in snapshot.queues:
            for key, family in families.items():
                amounts = getattr(q, key)
                for resource in sorted(set(amounts) | set(q.nominal)):
                    if is_host_resource(resource):
                        continue  # cpu and memory quotas are not devices (labgang queues shows them)
                    family.add_metric((q.name, q.cohort or "", resource), float(amounts.get(resource, 0)))
        share = _gauge(
            "labgang_queue_fair_share",
            "The queue's fair share: dominant resource share above nominal (x 1000 of what its cohort "
            "could reach) divided by its fair_weight; +Inf for weight 0 while borrowing.",
            ("queue", "cohort"),
        )
        for q in snapshot.queues:
            if q.fair_share is not None:  # None: the coordinator did not report it
                share.add_metric((q.name, q.cohort or ""), q.fair_share)
        pending = _gauge(
            "labgang_queue_pending_jobs", "Pending jobs by queue and pending reason code.", ("queue", "reason")
        )
        counts: dict[tuple[str, str], int] = {}
        for job in snapshot.jobs:
            if job.state == JobState.PENDING.value:
                queue_reason = (job.queue, (job.reason_code or "unknown").lower())
                counts[queue_reason] = counts.get(queue_reason, 0) + 1
        for queue_reason in sorted(counts):
            pending.add_metric(queue_reason, float(counts[queue_reason]))
        yield from (*families.values(), share, pending)

    def _jobs(self, snapshot: ClusterSnapshot) -> Iterator[Metric]:
        jobs = _gauge("labgang_jobs", "Jobs the coordinator knows, by queue and state.", ("queue", "state"))
        if self.job_counts is not None:
            known = dict(self.job_counts())
        else:
            known = {}
            for job in snapshot.jobs:
                known[(job.queue, job.state)] = known.get((job.queue, job.state), 0) + 1
        queues = {q.name for q in snapshot.queues} | {queue for queue, _ in known}
        counts = {(queue, state.value): 0 for queue in queues for state in JobState}
        counts.update(known)
        for key in sorted(counts):
            jobs.add_metric(key, float(counts[key]))
        yield jobs
        yield self._group_devices(snapshot)

    def _group_devices(self, snapshot: ClusterSnapshot) -> Metric:
        """``labgang_job_group_devices``: the devices each group of a job of groups holds, for
        every such job holding devices (docs/job-groups.md; a deviceless launcher group: 0);
        nothing for one-group jobs."""
        held = _gauge(
            "labgang_job_group_devices",
            "Devices held by each group of a job of groups (docs/job-groups.md).",
            ("queue", "job", "group"),
        )
        for job in snapshot.jobs:
            if job.groups and job.holds_devices:
                for name, workers, per in job.groups:
                    held.add_metric((job.queue, job.id, name), float(workers * per))
        return held

    def _pitfalls(self, snapshot: ClusterSnapshot) -> Iterator[Metric]:
        tracker = self.tracker
        if snapshot.findings is not None:  # the coordinator's pitfall watch already judged it
            tracker = None
        elif tracker is not None:
            try:
                tracker.observe(snapshot)
            except ValueError:  # the clock stepped back: start the history again
                log.warning("pitfall history reset: snapshot time went backwards")
                tracker = self.tracker = PitfallTracker(self.thresholds)
                tracker.observe(snapshot)
        findings = (
            list(snapshot.findings) if snapshot.findings is not None else detect_all(snapshot, self.thresholds, tracker)
        )
        count = _gauge("labgang_pitfall_findings", "Current findings of each pitfall detector.", ("kind",))
        active = _gauge(
            "labgang_pitfall_active",
            "1 per current pitfall finding.",
            ("kind", "severity", "subject", "node", "uuid", "job"),
        )
        per_kind = {kind.value: 0 for kind in PitfallKind}
        for f in findings:
            per_kind[f.kind.value] += 1
            active.add_metric((f.kind.value, f.severity.value, f.subject, f.node or "", f.uuid or "", f.job or ""), 1.0)
        for kind in sorted(per_kind):
            count.add_metric((kind,), float(per_kind[kind]))
        yield from (count, active)


class SchedulerMetrics:
    """What the scheduling loop reports as it happens.

    Series: ``labgang_admission_latency_seconds{queue}`` (histogram, submit or last
    requeue → admission), ``labgang_scheduling_cycle_duration_seconds`` (histogram) and
    ``labgang_preemptions_total{queue, reason}`` (one per victim job; ``queue`` is the victim's).

    Args:
        registry: where the series are registered.
    """

    def __init__(self, registry: CollectorRegistry) -> None:
        self.admission_latency = Histogram(
            "labgang_admission_latency_seconds",
            "Time from submission (or requeue) to admission.",
            ("queue",),
            buckets=ADMISSION_BUCKETS,
            registry=registry,
        )
        self.cycle_duration = Histogram(
            "labgang_scheduling_cycle_duration_seconds",
            "Wall time of one scheduling cycle.",
            buckets=CYCLE_BUCKETS,
            registry=registry,
        )
        self.preemptions = Counter(
            "labgang_preemptions",
            "Jobs preempted, by the victim's queue and the reason.",
            ("queue", "reason"),
            registry=registry,
        )

    def observe_admission(self, queue: str, wait_s: float) -> None:
        """Record one admission that waited ``wait_s`` seconds (negative clock steps count as 0)."""
        self.admission_latency.labels(queue=queue).observe(max(0.0, wait_s))

    def observe_cycle(self, duration_s: float) -> None:
        """Record one scheduling cycle that took ``duration_s`` seconds."""
        self.cycle_duration.observe(max(0.0, duration_s))

    def count_preemption(self, queue: str, reason: str, victims: int = 1) -> None:
        """Count ``victims`` jobs of ``queue`` preempted for ``reason`` (a short code, e.g. ``reclaim``).

        Raises:
            ValueError: ``victims`` is negative.
        """
        if victims < 0:
            raise ValueError(f"victims: {victims} must be >= 0")
        self.preemptions.labels(queue=queue, reason=reason).inc(victims)


class CoordinatorMetrics:
    """The coordinator's registry: cluster gauges, scheduler histograms and counters, build info.

    Args:
        provider: returns the current :class:`ClusterSnapshot`.
        version: the coordinator's labgang version (``labgang_build_info{version}``).
        thresholds: pitfall thresholds.
        job_counts: jobs per ``(queue, state)`` (see :class:`ClusterCollector`).
    """

    def __init__(
        self,
        provider: SnapshotProvider,
        *,
        version: str = "",
        thresholds: PitfallThresholds | None = None,
        job_counts: JobCounter | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.cluster = ClusterCollector(provider, thresholds=thresholds, job_counts=job_counts)
        self.registry.register(self.cluster)
        self.scheduler = SchedulerMetrics(self.registry)
        Info("labgang_build", "The coordinator's labgang version.", registry=self.registry).info(
            {"version": version or "unknown"}
        )


class GpuSecondsCollector(Collector):
    """``labgang_gpu_seconds_total{queue,user}`` (allocated device-seconds of every attempt) and
    ``labgang_gpu_used_seconds_total{queue,user}`` (the same weighted by the devices' sampled
    activity), from the attempt records (``launcher/accounting.py``): the same numbers as
    ``labgang report``, and a restarted coordinator starts again from what its store holds.

    Args:
        totals: returns ``(queue, user) -> (allocated, busy)`` device-seconds so far.
    """

    def __init__(self, totals: Callable[[], Mapping[tuple[str, str], tuple[float, float]]]) -> None:
        self.totals = totals

    def describe(self) -> list[Metric]:
        """Nothing up front (no totals call at registration)."""
        return []

    def collect(self) -> Iterator[Metric]:
        """Yield both counter families."""
        allocated = CounterMetricFamily(
            "labgang_gpu_seconds",
            "Device-seconds allocated to jobs (devices x time held, every start attempt), by queue and user.",
            labels=["queue", "user"],
        )
        used = CounterMetricFamily(
            "labgang_gpu_used_seconds",
            "Allocated device-seconds weighted by the devices' sampled activity (SM activity, or "
            "utilization.gpu where GPM is unsupported), by queue and user.",
            labels=["queue", "user"],
        )
        for (queue, user), (alloc, busy) in sorted(self.totals().items()):
            allocated.add_metric([queue, user], alloc)
            used.add_metric([queue, user], busy)
        yield from (allocated, used)


# ----- HTTP ---------------------------------------------------------------------------------


def metrics_handler(registry: CollectorRegistry) -> Callable[[web.Request], Awaitable[web.Response]]:
    """An aiohttp GET handler serving ``registry`` in the Prometheus text exposition format."""

    async def handle(request: web.Request) -> web.Response:
        return _exposition(registry)

    return handle


def _exposition(registry: CollectorRegistry) -> web.Response:
    return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE_LATEST})


# ----- the coordinator's /metrics route -----------------------------------------------------


def coordinator_snapshot(
    now: float,
    jobs: Mapping[str, JobRecord],
    nodes: list[dict[str, Any]],
    queues: list[dict[str, Any]],
    memo: JobMemo[JobView],
    *,
    finished_within_s: float = 3600.0,
) -> ClusterSnapshot:
    """The coordinator's state as the pitfall detectors and the collectors read it
    (``Coordinator.pitfall_snapshot`` hands it the parts).

    Built from the same views the user API returns (``GET /v1/nodes``, ``/v1/queues``,
    ``/v1/jobs?all=1``), so /metrics and the API never disagree. Jobs that ended more than
    ``finished_within_s`` seconds ago are left out (they only matter to "memory held after
    the job ended"); :func:`coordinator_job_counts` still counts them.

    Each job's :class:`~labgang.launcher.pitfalls.views.JobView` is the one parsed from its
    ``views.job_view`` (as :meth:`ClusterSnapshot.from_api` would), kept from the last snapshot
    while the job has not changed (``memo``, a :class:`~labgang.launcher.coordinator.view_cache.JobMemo`):
    the pitfall watch takes a snapshot every 2 s, and 10,000 pending jobs do not change between two.

    Args:
        now: unix seconds.
        jobs: the jobs in memory by id (active and recently finished).
        nodes: ``views.node_views``; queues: ``views.queue_views``.
        memo: the coordinator's pitfall job views, kept across snapshots.
        finished_within_s: how long a finished job stays in the snapshot, seconds.
    """
    kept = memo.all((job for job in jobs.values() if _recent(job, now, finished_within_s)), _pitfall_job)
    memo.trim(len(jobs))
    snapshot = ClusterSnapshot.from_api(now, {"nodes": nodes}, None, {"queues": queues})
    return dataclasses.replace(snapshot, jobs=tuple(kept))


def _recent(job: JobRecord, now: float, finished_within_s: float) -> bool:
    """Whether ``job`` is in the snapshot: not finished, or finished ``finished_within_s`` seconds
    ago at most. A job not ended yet (no ``end_time``: every pending one) is decided without
    asking its state, which costs more."""
    end = job.status.end_time
    if end is None and finished_within_s >= 0:
        return True
    return not job.status.state.finished or now - (end or now) <= finished_within_s


def _pitfall_job(job: JobRecord) -> JobView:
    """The pitfall detectors' view of ``job``: its JobView as the API shows it, parsed."""
    return JobView.from_api(views.job_view(job))


def coordinator_job_counts(
    finished_counts: Mapping[tuple[str, str], int], active: Iterable[JobRecord]
) -> dict[tuple[str, str], int]:
    """Every job the coordinator knows, counted per ``(queue, state)``: the ``active`` ones (the
    lifecycle model's, in memory) plus its running count of finished ones (the store holds those),
    ``Coordinator.finished_counts``."""
    counts: dict[tuple[str, str], int] = dict(finished_counts)
    for job in active:
        key = (job.spec.queue, job.status.state.value)
        counts[key] = counts.get(key, 0) + 1
    return counts


def add_metrics_routes(app: web.Application) -> None:
    """Serve ``GET /metrics`` from the coordinator application ``app`` (read-only, every listener).

    Call it after the coordinator's own ``cleanup_ctx`` entries are registered and before
    the application starts: the metrics are set up once the coordinator exists and are
    kept under ``app[keys.METRICS]``.
    """

    async def metrics_ctx(app: web.Application) -> AsyncIterator[None]:
        coord = app[keys.COORDINATOR]

        def snapshot() -> ClusterSnapshot:
            # With a pitfall watch (launcher/coordinator/pitfall_watch.py) its findings are exported,
            # so /metrics agrees with GET /v1/pitfalls, `labgang top` and `labgang show`.
            watch = coord.pitfalls
            current = coord.pitfall_snapshot()
            return current if watch is None else watch.with_findings(current)

        app[keys.METRICS] = CoordinatorMetrics(
            snapshot,
            version=coord.version,
            thresholds=coord.config.pitfall_thresholds(),
            job_counts=lambda: coordinator_job_counts(coord.finished_counts, coord.model.jobs.values()),
        )
        app[keys.METRICS].registry.register(
            GpuSecondsCollector(lambda: coord.usage.totals(coord.desk.open_attempts(), coord.clock()))
        )
        yield

    async def handle(request: web.Request) -> web.Response:
        return _exposition(request.app[keys.METRICS].registry)

    app.cleanup_ctx.append(metrics_ctx)
    app.router.add_get("/metrics", handle, name="metrics")
