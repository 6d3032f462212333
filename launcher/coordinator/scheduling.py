"""The scheduling loop: the shared cycle driver (``lifecycle/driver.py``) builds a
:class:`Snapshot` from the lifecycle model and the live inventories, runs the pure
``run_cycle`` and hands its result to the lifecycle model (``CycleDecided``); then the loop
commits and dispatches. This module gives the driver the coordinator's seams: its clock, the
``Commits`` part as effect executor (store and agents), the cluster facts from the agents'
inventories and the configuration, and metrics and logs as observer. The functions here take
the coordinator's parts they use (the driver, ``Kicks``, ``Commits``, the :class:`AdmissionGate`,
the store...), never the coordinator.

Events that can change a decision (submission, cancellation, a job leaving its devices
or starting to stop, a device freed or taken outside labgang, a timer) only *kick* the
loop. A kick after a quiet spell runs a cycle at once; kicks that come within the
coalescing window after the last cycle wait for the rest of that window and share one
cycle, so a burst of submissions costs one cycle per window and a lone release costs no
wait at all. The window is :func:`coalescing_window`: ``COALESCE_COST_FACTOR`` times what
the last cycle cost, at most ``cycle_coalesce_s``, so cycles take at most about a fifth of
the loop under a stream of kicks, and a cheap cycle (a few pending jobs) does not hold a
freed GPU idle for the whole configured window. Decisions are assumed in memory and written to the store; only after the
commit are victims stopped and admitted gangs launched (assume, then confirm).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.coordinator.agents import AgentRegistry
from labgang.launcher.coordinator.sharing import SharingState
from labgang.launcher.coordinator.topology import node_from_inventory
from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle.arrays import ArrayGate, queue_caps
from labgang.launcher.lifecycle.driver import CycleDriver, EffectExecutor
from labgang.launcher.lifecycle.machine import Lifecycle
from labgang.launcher.lifecycle.records import JobRecord, JobSpec
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.model import CohortSpec, GpuSharing, JobRequest, QueueSpec, SharingPolicy
from labgang.launcher.scheduler.decisions import CycleResult
from labgang.launcher.scheduler.quota import QuotaBook
from labgang.launcher.scheduler.snapshot import Node, Snapshot
from labgang.launcher.scheduler.unschedulable import never_schedulable, quota_fault_field, quota_never_fits

if TYPE_CHECKING:
    from labgang.launcher.coordinator.commits import Commits
    from labgang.launcher.coordinator.drains import NodeDrains
    from labgang.launcher.coordinator.metrics import SchedulerMetrics
    from labgang.launcher.coordinator.node_events import NodeEvents
    from labgang.launcher.coordinator.store import Store
    from labgang.launcher.coordinator.timers import Kicks

log = logging.getLogger("labgang.coordinator.scheduling")

MAX_CYCLES_PER_WAKE = 32
# The coalescing window is this many times the last cycle's own duration (at most
# cycle_coalesce_s): the loop spends at most 1 / (1 + factor) of its time in cycles.
COALESCE_COST_FACTOR = 4.0


def coalescing_window(coalesce_s: float, coalesce_max_s: float, last_cycle_s: float) -> float:
    """Seconds after a cycle during which further kicks wait and share the next cycle.

    Args:
        coalesce_s: ``cycle_coalesce_s``, the longest window.
        coalesce_max_s: ``cycle_coalesce_max_s``, the longest any kick waits.
        last_cycle_s: how long the last cycle (snapshot and decisions, not the commit) took.

    Returns:
        ``COALESCE_COST_FACTOR * last_cycle_s``, capped by both settings; 0 when either is 0.
    """
    return max(0.0, min(coalesce_s, coalesce_max_s, COALESCE_COST_FACTOR * last_cycle_s))


def cluster_nodes(agents: AgentRegistry) -> tuple[Node, ...]:
    """Every node of ``agents`` with a known inventory and all its allocatable devices, in name order."""
    nodes = []
    for name in sorted(agents.nodes):
        conn = agents.nodes[name]
        if conn.inventory is None:
            continue
        nodes.append(node_from_inventory(name, conn.inventory))
    return tuple(nodes)


def busy_unheld(device_pids: Mapping[str, frozenset[int]], held: Container[str]) -> frozenset[str]:
    """Devices that NVML shows processes on while no job holds them (foreign processes, memory
    still held after a job): never offered to the scheduler.

    Args:
        device_pids: device UUID → pids NVML shows on it (``NodeInventory.device_pids()``).
        held: UUIDs of devices some job holds (e.g. ``Coordinator.held_devices()``).
    """
    return frozenset(uuid for uuid, pids in device_pids.items() if pids and uuid not in held)


def unavailable_devices(
    agents: AgentRegistry, held: Mapping[str, JobRecord], drained: frozenset[str] = frozenset()
) -> frozenset[str]:
    """UUIDs of the devices of ``agents`` not offered: on nodes that are disconnected, lost or
    ``drained`` (node names: ``labgang drain``), on lost GPUs, or showing processes while no job
    in ``held`` (device UUID → job) holds them (foreign processes, memory still held)."""
    out: set[str] = set()
    for name, conn in agents.nodes.items():
        if conn.inventory is None:
            continue
        offered = conn.connected and not conn.lost and name not in drained
        busy = busy_unheld(conn.inventory.device_pids(), held)
        for d in conn.inventory.allocatable():
            if not offered or d.uuid in busy:
                out.add(d.uuid)
        for gpu in conn.inventory.gpus:
            if gpu.lost:  # a UUID NVML could not read names no device the scheduler is offered
                out.update(u for u in (gpu.uuid, *(m.uuid for m in gpu.mig_devices)) if isinstance(u, str))
    return frozenset(out)


class CoordinatorCluster:
    """The cycle driver's :class:`~labgang.launcher.lifecycle.driver.Cluster` of a coordinator:
    nodes from the agents' inventories, queues and sharing from its configuration, devices not
    offered (:func:`unavailable_devices`: drained nodes' too), tenants from the users' groups.

    Args:
        agents: the coordinator's agent registry.
        config: the cluster configuration.
        tenants: the fair sharing state that names each job's tenant.
        drains: the drained nodes (``labgang drain``).
    """

    def __init__(self, agents: AgentRegistry, config: ClusterConfig, tenants: SharingState, drains: NodeDrains) -> None:
        self._agents = agents
        self._config = config
        self._tenants = tenants
        self._drains = drains

    def nodes(self) -> tuple[Node, ...]:
        """:func:`cluster_nodes`."""
        return cluster_nodes(self._agents)

    def queues(self) -> tuple[QueueSpec, ...]:
        """The configured queues."""
        return self._config.queue_specs()

    def cohorts(self) -> tuple[CohortSpec, ...]:
        """The configured cohorts."""
        return self._config.cohort_specs()

    def sharing(self) -> SharingPolicy:
        """The configured fair sharing settings."""
        return self._config.sharing_policy()

    def gpu_sharing(self) -> GpuSharing:
        """The configured ``[sharing]`` table."""
        return self._config.gpu_sharing()

    def unavailable(self, holding: Sequence[JobRecord]) -> frozenset[str]:
        """:func:`unavailable_devices`, given the devices ``holding`` (the jobs holding devices) hold."""
        held = {uuid: job for job in holding for rank in job.ranks.values() for uuid in rank.devices}
        return unavailable_devices(self._agents, held, self._drains.nodes)

    def tenant(self, spec: JobSpec) -> str | None:
        """The job's tenant (``SharingState.tenant``)."""
        return self._tenants.tenant(spec)


class CycleMetrics:
    """The cycle driver's observer in a coordinator: the cycle count, the last cycle's time,
    ``labgang_scheduling_cycle_duration_seconds`` and a debug log line per cycle.

    Args:
        metrics: the collectors cycles are reported to, asked at each cycle (None: no /metrics
            served, e.g. a coordinator driven by tests; ``Coordinator.metrics``).

    Attributes:
        cycles: cycles run so far.
        last_cycle_at: the instant (unix seconds) of the last cycle's snapshot; 0.0 before the first.
    """

    def __init__(self, metrics: Callable[[], SchedulerMetrics | None]) -> None:
        self._metrics = metrics
        self.cycles = 0
        self.last_cycle_at = 0.0

    def cycle(self, snapshot: Snapshot, result: CycleResult, effects: Sequence[fx.Effect], seconds: float) -> None:
        """Count the cycle and observe its duration (snapshot and decisions, not the commit)."""
        self.cycles += 1
        self.last_cycle_at = snapshot.now
        metrics = self._metrics()
        if metrics is not None:
            metrics.observe_cycle(seconds)
        log.debug(
            "cycle %d: %d pending, %d admitted, %d preempting, %.1f ms",
            self.cycles,
            len(snapshot.pending),
            len(result.admitted),
            len(result.preempted),
            seconds * 1e3,
        )

    def gated(self, result: CycleResult) -> None:
        """Nothing to count: no cycle ran."""


def cycle_driver(
    model: Lifecycle,
    clock: Callable[[], float],
    executor: EffectExecutor,
    cluster: CoordinatorCluster,
    sharing: SharingState,
    observer: CycleMetrics,
) -> CycleDriver:
    """The shared cycle driver with the coordinator's seams: its clock, ``executor`` (the coordinator's
    ``Commits``: ``apply`` writes the store and queues agent commands; ``wake_at``),
    :class:`CoordinatorCluster` over its agents, configuration and tenants, the persisted cycle
    memory (``sharing``) and ``observer``. A burst runs at most ``MAX_CYCLES_PER_WAKE`` cycles."""
    return CycleDriver(
        model,
        lambda: clock(),
        executor,
        cluster,
        sharing.memory,
        max_cycles=MAX_CYCLES_PER_WAKE,
        remembered=sharing.remember,
        observer=observer,
    )


class AdmissionGate:
    """Whether cycles may admit: open until a shutdown closes it (``Coordinator.stop_jobs_for_shutdown``);
    jobs requeued by the shutdown wait for the next start."""

    def __init__(self) -> None:
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`close` was called: no cycle runs any more."""
        return self._closed

    def close(self) -> None:
        """Admit nothing from now on."""
        self._closed = True


def build_snapshot(driver: CycleDriver, now: float) -> Snapshot:
    """The scheduler's view at ``now`` through the coordinator's cycle driver: nodes, queues, jobs
    holding devices, jobs waiting.

    A requeued job in backoff (``not_before`` > now) and a job held by its dependency are left
    out of ``pending`` (the lifecycle model's ``admissible``), and so are the array tasks the
    array rules hold back (:func:`gated_snapshot`).
    """
    return gated_snapshot(driver, now)[0]


def gated_snapshot(driver: CycleDriver, now: float) -> tuple[Snapshot, ArrayGate]:
    """:func:`build_snapshot` and the :class:`ArrayGate` that chose its array tasks
    (``launcher/lifecycle/arrays.py``: the ``%N`` cap and the window); admission fair sharing
    samples first when a sampling instant is due (``CycleDriver.gated``)."""
    return driver.gated(now)


def quota_caps(config: ClusterConfig) -> dict[str, dict[str, int]]:
    """Queue → resource → the most devices its jobs may hold at once, for the array window
    (``launcher/lifecycle/arrays.py``): ``nominal + borrowing_limit`` for a queue in a cohort
    with a borrowing limit, ``nominal`` for a queue without a cohort (it cannot borrow)."""
    return queue_caps(config.queue_specs())


def run_cycles(driver: CycleDriver, admissions: AdmissionGate | None = None) -> int:
    """Run cycles through ``driver`` until one decides nothing new (no admission, no new victim),
    as ``labgang simulate`` does at each instant (both through ``CycleDriver.burst``); return how
    many gangs were admitted (their dispatch runs after the next commit). The scheduler is woken
    again exactly when a pending job starts starving. Nothing runs once ``admissions`` is closed
    (a shutdown; None: always open).

    A cycle's duration (``labgang_scheduling_cycle_duration_seconds``, the debug log line) covers
    building the snapshot and ``run_cycle``."""
    if admissions is not None and admissions.closed:
        return 0  # jobs requeued by the shutdown wait for the next start
    return driver.burst().admitted


async def scheduling_loop(
    kicks: Kicks,
    commits: Commits,
    driver: CycleDriver,
    admissions: AdmissionGate,
    store: Store,
    config: ClusterConfig,
) -> None:
    """Forever: wait for one of ``kicks``, run cycles through ``driver`` (at once, or at the end of
    the current coalescing window: ``config.cycle_coalesce_s`` / ``cycle_coalesce_max_s``) while
    ``admissions`` is open, commit through ``commits``; admitted gangs are dispatched once their
    admission is committed. A commit of ``store`` under way is let land first."""
    loop = asyncio.get_running_loop()
    last_cycle_end = float("-inf")
    window = 0.0
    while True:
        await kicks.kicked()
        # Leading edge: the first kick after a quiet window runs a cycle now; kicks inside the
        # window after a cycle wait for its end, and all of them share the next cycle.
        wait = last_cycle_end + window - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        kicks.take_kicks()
        if store.committing:
            # A submission (or cancel) is waiting for its commit, already under way: let it
            # land and its answer go out before the cycle holds the loop (a cycle over
            # thousands of pending jobs takes milliseconds). No extra commit is made.
            await store.durable()
            await asyncio.sleep(0)
        try:
            began = time.perf_counter()
            run_cycles(driver, admissions)
            cost = time.perf_counter() - began
            await commits.flush()
        except Exception:  # a bug in one cycle must not stop scheduling for good
            log.exception("scheduling cycle failed")
            await asyncio.sleep(1.0)
            continue
        last_cycle_end = loop.time()
        window = coalescing_window(config.cycle_coalesce_s, config.cycle_coalesce_max_s, cost)


async def timer_loop(
    nodes: NodeEvents,
    model: Lifecycle,
    commits: Commits,
    kicks: Kicks,
    clock: Callable[[], float],
    interval_s: float,
) -> None:
    """Every ``interval_s`` seconds (``config.timer_interval_s``): ``nodes``' timers (node leases,
    the model's timed arrows), committed through ``commits``, then one of ``kicks`` when a backoff
    of one of ``model``'s pending jobs expired."""
    last = clock()
    while True:
        await asyncio.sleep(interval_s)
        now = clock()
        try:
            nodes.check_timers()
            await commits.flush()
        except Exception:
            log.exception("timer check failed")
        if backoff_ended(model.jobs.values(), last, now):
            kicks.kick()
        last = now


def backoff_ended(jobs: Iterable[JobRecord], last: float, now: float) -> bool:
    """Whether a pending job of ``jobs`` has a real backoff (``not_before`` after it went back to
    pending) that ended after ``last`` and by ``now`` (unix seconds), e.g. one recorded before a
    restart; a backoff ending while the coordinator runs also wakes it exactly (``WakeAt``).

    One plain loop, the times compared first: the timer loop asks twice a second, over every job.
    """
    for job in jobs:
        st = job.status
        if last < st.not_before <= now and st.not_before > st.pending_since and st.state == JobState.PENDING:
            return True
    return False


class SubmissionCheck:
    """Whether a submission could ever start on this cluster (quota or hardware), remembered per
    (queue, request) until the set of allocatable devices changes (:meth:`forget`).

    Args:
        config: the cluster configuration (queues, cohorts).
        agents: the agent registry, whose inventories give the nodes.
    """

    def __init__(self, config: ClusterConfig, agents: AgentRegistry) -> None:
        self._config = config
        self._agents = agents
        # (queue, JobRequest) -> why it could never start (None = it could)
        self._answers: dict[tuple[str, JobRequest], tuple[str, str] | None] = {}

    def forget(self) -> None:
        """The allocatable devices or the hosts' CPUs and memory changed: judge every request again."""
        self._answers.clear()

    def __call__(self, spec: JobSpec) -> tuple[str, str] | None:
        """Why ``spec`` could never start and the body field at fault ("workers", "gpus_per_worker",
        "mig", "gpu_model", "nodes", "queue"), or None.

        Without any node known yet (the agents have not connected), only quota is judged.
        """
        key = (spec.queue, spec.request)
        if key in self._answers:
            return self._answers[key]
        config = self._config
        queue = next(q for q in config.queue_specs() if q.name == spec.queue)
        nodes = cluster_nodes(self._agents)
        # With no node known, an empty node list leaves only the quota check able to object.
        # an elastic gang can start when its minimum can
        found = (
            never_schedulable(spec.request.floor(), queue, config.queue_specs(), nodes, config.cohort_specs())
            if nodes
            else _quota_only(config, spec)
        )
        answer = None if found is None else (found[0].message, found[1])
        if answer is None and spec.request.gpu_mem:
            answer = _gpu_mem_never_fits(self._agents, spec.request.gpu_mem)
        self._answers[key] = answer
        return answer


def _gpu_mem_never_fits(agents: AgentRegistry, gpu_mem: int) -> tuple[str, str] | None:
    """Why a share's device-memory budget (``gpu_mem``, bytes) fits no card of the nodes with a known
    inventory (their largest card's memory named), and the field; None when one fits or none is known."""
    sizes = [
        gpu.memory_total_bytes
        for conn in agents.nodes.values()
        if conn.inventory is not None
        for gpu in conn.inventory.gpus
        if isinstance(gpu.memory_total_bytes, int)
    ]
    if not sizes or gpu_mem <= max(sizes):
        return None
    gib = 1024**3
    return (
        f"gpu_mem: job asks for {gpu_mem / gib:.1f} GiB of device memory but the largest card has "
        f"{max(sizes) / gib:.1f} GiB ({max(sizes)} bytes)",
        "gpu_mem",
    )


def _quota_only(config: ClusterConfig, spec: JobSpec) -> tuple[Any, str] | None:
    book = QuotaBook(config.queue_specs(), {}, config.cohort_specs())
    req = spec.request.floor()
    if req.groups:  # a job of groups: its quota is the sum over its groups
        req = replace(req, workers=1, per_worker=req.total, groups=(), colocate=())
    reason = quota_never_fits(book, spec.queue, req)
    return None if reason is None else (reason, quota_fault_field(book, spec.queue, req))
