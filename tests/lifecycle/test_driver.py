"""The cycle driver (``lifecycle/driver.py``) through its seams alone: a fixed clock, an executor
that applies events to a real lifecycle model and records what it was asked, and a one-node
cluster. What the coordinator and ``labgang simulate`` share: the burst stops once a cycle decides
nothing new, later cycles of a burst are told the gangs it admitted, no pending job means no
cycle, and a starving queue asks for a wake."""

from __future__ import annotations

from collections.abc import Sequence

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.cycle_memory import CycleMemory
from labgang.launcher.lifecycle.driver import Burst, CycleDriver
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.model import CohortSpec, GpuSharing, QueueSpec, SharingPolicy
from labgang.launcher.scheduler.decisions import CycleResult
from labgang.launcher.scheduler.snapshot import Device, Node, Snapshot

POLICY = LifecyclePolicy(
    startup_timeout_s=30, requeue_backoff_s=0, requeue_backoff_max_s=0, max_start_failures=3, default_grace_s=5
)


def job(job_id: str, gpus: int, *, priority: int = 0) -> JobRecord:
    spec = JobSpec(
        name="j", user="alice", uid=1000, gid=None, queue="q", priority=priority, workers=1, per_worker=gpus,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=0.0, time_limit_s=None,
        requeue=True, signal=None,
    )  # fmt: skip
    return JobRecord(id=job_id, seq=int(job_id), spec=spec, status=JobStatus(submit_time=0.0))


class Executor:
    """Applies events to the model; remembers the events and the wakes asked for."""

    def __init__(self, model: Lifecycle) -> None:
        self.model = model
        self.events: list[ev.Event] = []
        self.wakes: list[float] = []

    def apply(self, event: ev.Event) -> list[fx.Effect]:
        self.events.append(event)
        return self.model.apply(event)

    def wake_at(self, when: float) -> None:
        self.wakes.append(when)


class OneNode:
    """One node with ``gpus`` GPUs and queue ``q`` (``starvation_after`` as given)."""

    def __init__(self, gpus: int, starvation_after: float | None = None) -> None:
        self._nodes = (Node("n1", tuple(Device(f"GPU-{i}", "n1", "gpu", "", "") for i in range(gpus))),)
        self._queues = (QueueSpec("q", nominal={"gpu": gpus}, starvation_after=starvation_after),)

    def nodes(self) -> tuple[Node, ...]:
        return self._nodes

    def queues(self) -> tuple[QueueSpec, ...]:
        return self._queues

    def cohorts(self) -> tuple[CohortSpec, ...]:
        return ()

    def sharing(self) -> SharingPolicy:
        return SharingPolicy()

    def gpu_sharing(self) -> GpuSharing:
        return GpuSharing()

    def unavailable(self, holding: Sequence[JobRecord]) -> frozenset[str]:
        return frozenset()

    def tenant(self, spec: JobSpec) -> str | None:
        return None


class Cycles:
    """The observer: the snapshots' pending ids and what each cycle admitted."""

    def __init__(self) -> None:
        self.seen: list[tuple[list[str], list[str]]] = []
        self.gated_only = 0

    def cycle(self, snapshot: Snapshot, result: CycleResult, effects: Sequence[fx.Effect], seconds: float) -> None:
        assert seconds >= 0
        self.seen.append(([p.id for p in snapshot.pending], [a.job_id for a in result.admitted]))

    def gated(self, result: CycleResult) -> None:
        self.gated_only += 1


def driver(cluster: OneNode, *records: JobRecord, now: float = 10.0) -> tuple[CycleDriver, Executor, Cycles]:
    model = Lifecycle(POLICY)
    executor = Executor(model)
    for record in records:
        executor.apply(ev.JobSubmitted(0.0, record))
    observer = Cycles()
    memory = CycleMemory(None, {}, 0.0)
    cycles = CycleDriver(model, lambda: now, executor, cluster, memory, max_cycles=8, observer=observer)
    return cycles, executor, observer


def test_a_burst_admits_what_fits_and_stops_when_a_cycle_decides_nothing_new() -> None:
    d, executor, seen = driver(OneNode(2), job("1", 1), job("2", 1), job("3", 2))
    burst = d.burst()
    assert (burst.admitted, burst.settled) == (2, True)
    # the first cycle admits 1 and 2; the second sees only 3, which does not fit: nothing new
    assert seen.seen == [(["1", "2", "3"], ["1", "2"]), (["3"], [])]
    assert burst.cycles == d.cycles == 2
    assert [type(e) for e in executor.events].count(ev.CycleDecided) == 2
    assert d.memory.held == set()


def test_each_later_cycle_of_a_burst_names_the_gangs_the_burst_admitted() -> None:
    """The lifecycle model never evicts those (``CycleDecided.admitted_before``)."""
    d, executor, _ = driver(OneNode(1), job("1", 1), job("2", 1, priority=5))
    d.burst()
    decided = [e for e in executor.events if isinstance(e, ev.CycleDecided)]
    assert len(decided) == 2
    assert [a.job_id for a in decided[0].result.admitted] == ["2"]  # the higher priority first
    assert decided[0].admitted_before == frozenset() and decided[1].admitted_before == {"2"}


def test_no_pending_job_runs_no_cycle() -> None:
    d, executor, seen = driver(OneNode(1))
    assert d.burst() == Burst(admitted=0, cycles=0, settled=True)
    assert seen.seen == [] and seen.gated_only == 0 and executor.wakes == []


def test_a_starving_queue_asks_for_a_wake_when_its_head_starts_starving() -> None:
    d, executor, _ = driver(OneNode(1, starvation_after=30.0), job("1", 1), job("2", 1), now=5.0)
    d.burst()
    assert executor.wakes == [30.0]  # job 2 waits from t=0: it starts starving at 0 + 30
