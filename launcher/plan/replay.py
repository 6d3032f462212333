"""``labgang plan replay``: a period's jobs through the coordinator's own scheduler and lifecycle
(the ``labgang simulate`` engine, ``launcher/simulate/``) under a possibly changed queue policy
and cluster, with per-queue figures and what limited each queue.

The input is a scenario document (``labgang history --export``'s, or one read straight from the
store: :mod:`labgang.launcher.plan.export`). :func:`with_config` puts another ``cluster.toml``'s
policy in place, :func:`with_cluster` changes the nodes, :func:`replay` runs it and returns a
:class:`Replay` of :class:`QueueFigures` (times in seconds).

What limited a queue: every second a job spent pending is put down to the scheduler's pending
reason in force then (its ``pending`` trace events, docs/scenarios.md). For the jobs whose
wait is at or above their queue's p90 (the tail that makes the p90), those seconds are summed
per cause: **quota** (``over_quota``, ``cohort_exhausted``), **capacity** (``no_capacity``,
``waiting_for_victims``, ``host_resources``), **fragmentation** (``fragmented``, ``topology``), **reservation**
(``reserved_for_starving``: devices kept for a gang that has waited too long) and **other**
(``dependency``, ``array_limit``, ``blocked_by_head``, ...).
"""

from __future__ import annotations

import copy
import gc
import math
from collections import defaultdict
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.plan.export import policy_tables
from labgang.launcher.scheduler.shares import share_units
from labgang.launcher.simulate.engine import Simulation
from labgang.launcher.simulate.scenario import ScenarioError, parse_scenario
from labgang.launcher.simulate.summary import queue_stats

CAUSES = ("quota", "capacity", "fragmentation", "reservation", "other")
"""The causes a wait is put down to, in the order reports list them."""

_CAUSE = {
    "over_quota": "quota",
    "cohort_exhausted": "quota",
    "no_capacity": "capacity",
    "waiting_for_victims": "capacity",
    "host_resources": "capacity",
    "fragmented": "fragmentation",
    "topology": "fragmentation",
    "reserved_for_starving": "reservation",
}


def cause_of(code: str) -> str:
    """The cause (:data:`CAUSES`) a pending reason code's waiting is put down to ("other" for a
    dependency, an array cap, a hold, a begin time, a user limit...)."""
    return _CAUSE.get(code, "other")


class PlanRefused(ValueError):
    """A replay that cannot be done as asked (one line, exit 1): queues not covered, an unknown
    node to remove, an invalid changed scenario."""


@dataclass(frozen=True)
class ClusterChange:
    """How the replayed cluster differs from the recorded one.

    Attributes:
        add_nodes: nodes added, each ``node_gpus`` whole GPUs (named ``added-1``, ``added-2``, ...).
        node_gpus: GPUs per added node (None: the largest recorded node's count).
        remove: names of recorded nodes taken out.
        gpus: replace the whole cluster by one node of this many GPUs (a single box); None: keep.
        quota_to: the queue whose nominal ``gpu`` quota grows by the added GPUs (None: no quota
            grows; then added devices serve only borrowing within a cohort's unused quota).
    """

    add_nodes: int = 0
    node_gpus: int | None = None
    remove: tuple[str, ...] = ()
    gpus: int | None = None
    quota_to: str | None = None

    @property
    def changed(self) -> bool:
        """True when anything differs from the recorded cluster."""
        return bool(self.add_nodes or self.remove or self.gpus is not None)


def history_queues(data: dict[str, Any]) -> list[str]:
    """The queues the document's jobs use, in first-use order."""
    return list(dict.fromkeys(j["queue"] for j in data.get("jobs", [])))


def file_default_queue(data: dict[str, Any]) -> str | None:
    """A scenario file's default queue: ``default`` where it defines one, else its first queue
    (None: it defines none), as ``--quota-to`` defaults."""
    names = [q["name"] for q in data.get("queues", [])]
    return "default" if "default" in names else (names[0] if names else None)


def with_file_queues(data: dict[str, Any], *, map_queues: bool, source: str) -> dict[str, Any]:
    """``data`` (a scenario file replayed under its own policy) whose jobs all use a queue it
    defines: unchanged when they do; with ``map_queues``, the jobs of queues it lacks moved to its
    default queue (:func:`file_default_queue`; a tenant of theirs is dropped), as :func:`with_config`
    does for a config (e.g. a file written by ``history --export`` before it kept retired queues).

    Raises:
        PlanRefused: a queue of the jobs the file does not define, without ``map_queues`` (the
            message names it, the file's queues and ``--map-queues``), or a file with no queue.
    """
    defined = [q["name"] for q in data.get("queues", [])]
    missing = [q for q in history_queues(data) if q not in defined]
    if not missing:
        return data
    default = file_default_queue(data)
    plural = "s" if len(missing) > 1 else ""
    if default is None:
        raise PlanRefused(
            f"{source} defines no queue for its jobs' queue{plural} {', '.join(missing)}; "
            "give --config cluster.toml --map-queues to replay them under that config's queues"
        )
    if not map_queues:
        raise PlanRefused(
            f"{source} does not define the queue{plural} {', '.join(missing)} of its jobs (it has "
            f"{', '.join(defined)}); give --map-queues to replay those jobs in its queue {default!r}, "
            "or --config cluster.toml (with --map-queues) to replay under that config's queues"
        )
    out = copy.deepcopy(data)
    for job in out["jobs"]:
        if job["queue"] in missing:
            job["queue"] = default
            job.pop("tenant", None)  # a tenant of a queue that is gone: its new queue's default tenant
    return out


def with_config(data: dict[str, Any], config: ClusterConfig, *, map_queues: bool, source: str) -> dict[str, Any]:
    """``data`` with ``config``'s queue policy (queues, cohorts, priority classes, fair sharing,
    tenants). A job keeps its ``tenant`` only where ``config`` defines that tenant for its queue.

    Args:
        map_queues: replay jobs of queues ``config`` lacks in its ``default_queue``.
        source: the config's file name, for messages.

    Raises:
        PlanRefused: a history queue ``config`` does not define, without ``map_queues``.
    """
    out = copy.deepcopy(data)
    policy = policy_tables(config)
    meta = out["scenario"]
    for key in ("fair_sharing", "fair_preemption", "admission_fair_sharing"):
        meta.pop(key, None)
    meta.update(policy.pop("scenario"))
    for key in ("queues", "cohorts", "priority_classes", "sharing", "tenants"):
        out.pop(key, None)
    out.update(policy)
    known = {q.name for q in config.queues}
    missing = [q for q in history_queues(out) if q not in known]
    if missing and not map_queues:
        raise PlanRefused(
            f"{source} does not define the queue{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
            f"of the history (it has {', '.join(sorted(known))}); give --map-queues to replay "
            f"those jobs in its default queue {config.default_queue!r}"
        )
    tenants = {(t["queue"], t["name"]) for t in out.get("tenants", [])}
    for job in out.get("jobs", []):
        if job["queue"] not in known:
            job["queue"] = config.default_queue
        if "tenant" in job and (job["queue"], job["tenant"]) not in tenants:
            del job["tenant"]  # a tenant the new policy lacks: its queue's default tenant
    return out


def with_cluster(data: dict[str, Any], change: ClusterChange) -> dict[str, Any]:
    """``data`` with ``change`` applied to its ``[[nodes]]`` (and the added GPUs to
    ``change.quota_to``'s nominal quota).

    Raises:
        PlanRefused: a node to remove that the cluster lacks, a ``quota_to`` queue it lacks, or
            no node left.
    """
    out = copy.deepcopy(data)
    nodes: list[dict[str, Any]] = out["nodes"]
    if change.gpus is not None:
        nodes = [{"name": "box", "gpus": change.gpus}]
    names = [n["name"] for n in nodes]
    for name in change.remove:
        if name not in names:
            raise PlanRefused(f"--remove-node: no node {name!r} in the cluster; allowed: {', '.join(names)}")
    nodes = [n for n in nodes if n["name"] not in change.remove]
    per_node = change.node_gpus or max((n["gpus"] for n in nodes if not n.get("mig")), default=8)
    taken = {n["name"] for n in nodes}
    k = 0
    for _ in range(change.add_nodes):
        k += 1
        while f"added-{k}" in taken:
            k += 1
        nodes.append({"name": f"added-{k}", "gpus": per_node})
    if not nodes:
        raise PlanRefused("--remove-node: no node would be left to replay on")
    out["nodes"] = nodes
    if change.quota_to is not None and change.add_nodes:
        queue = next((q for q in out["queues"] if q["name"] == change.quota_to), None)
        if queue is None:
            allowed = ", ".join(q["name"] for q in out["queues"])
            raise PlanRefused(f"--quota-to: no queue {change.quota_to!r}; allowed: {allowed}")
        nominal = dict(queue.get("nominal", {}))
        nominal["gpu"] = nominal.get("gpu", 0) + change.add_nodes * per_node
        queue["nominal"] = nominal
    return out


def percentile(values: list[float], p: float) -> float | None:
    """The nearest-rank ``p`` percentile (0 < p <= 1) of ``values``, None when empty
    (p50 of 4 values is the 2nd smallest, p90 of 10 values the 9th)."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p * len(ordered)) - 1)]


@dataclass
class QueueFigures:
    """One queue's replayed figures (``queue`` is ``"(all)"`` for every job together).

    Attributes:
        jobs: jobs replayed. started: admitted at least once.
        wait_p50_s / wait_p90_s / wait_max_s: seconds pending per job (submit to first admission
            plus each requeue to readmission), over started jobs; None when none started.
        gpu_utilization: its device-seconds over the cluster's (devices x replayed span), 0..1.
        preemptions: times its jobs were preempted: stopped as a victim and requeued (a victim
            whose run ends during its grace period has finished, and is not counted).
        borrowed_gpu_h: device-hours it held above its nominal quota. peak_borrowed: most devices
            above nominal at once. A share of a card counts its fraction of a GPU in both (as in
            ``gpu_utilization``; :func:`~labgang.launcher.simulate.jobs.devices_held`).
        tail_jobs: jobs at or above its p90 wait. limits: cause -> seconds those jobs waited for it.
        reasons: pending reason code -> seconds the tail jobs waited with it.
    """

    queue: str
    jobs: int = 0
    started: int = 0
    wait_p50_s: float | None = None
    wait_p90_s: float | None = None
    wait_max_s: float | None = None
    gpu_utilization: float = 0.0
    preemptions: int = 0
    borrowed_gpu_h: float = 0.0
    peak_borrowed: float = 0
    tail_jobs: int = 0
    limits: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, float] = field(default_factory=dict)

    def main_limit(self) -> tuple[str, float] | None:
        """The cause with the most tail waiting, and its share (0..1); None when the tail did not wait."""
        total = sum(self.limits.values())
        if total <= 0:
            return None
        cause = max(CAUSES, key=lambda c: self.limits.get(c, 0.0))
        return cause, self.limits.get(cause, 0.0) / total

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` object of this queue."""
        return {
            "queue": self.queue,
            "jobs": self.jobs,
            "started": self.started,
            "wait_p50_s": self.wait_p50_s,
            "wait_p90_s": self.wait_p90_s,
            "wait_max_s": self.wait_max_s,
            "gpu_utilization": self.gpu_utilization,
            "preemptions": self.preemptions,
            "borrowed_gpu_h": self.borrowed_gpu_h,
            "peak_borrowed": self.peak_borrowed,
            "limited_by": {
                "tail_jobs": self.tail_jobs,
                "seconds": {c: self.limits.get(c, 0.0) for c in CAUSES},
                "reasons": dict(sorted(self.reasons.items())),
                "main": None if self.main_limit() is None else self.main_limit()[0],  # type: ignore[index]
            },
        }


@dataclass(frozen=True)
class Unstarted:
    """A job still pending when the replay ended: it never started in the replayed cluster.

    Attributes:
        job: its name in the history (the scenario's ``id``). queue: its queue.
        reason: the reason code it last waited for, as ``labgang queue`` shows it (``unschedulable``,
            ``dependency``, ``held``, ...; None if it never had one).
        message: that reason's words, in the history's job names ("" without one).
    """

    job: str
    queue: str
    reason: str | None
    message: str

    def to_dict(self) -> dict[str, Any]:
        """``{job, queue, reason, message}`` for ``--json``."""
        return {"job": self.job, "queue": self.queue, "reason": self.reason, "message": self.message}


@dataclass
class Replay:
    """One replay's result.

    Attributes:
        queues: per queue, in configuration order, then ``"(all)"``.
        span_s: simulated seconds from the first submission to the last job's end.
        gpus: devices in the replayed cluster. nodes: its node count.
        jobs: job waits by scenario job name (seconds, summed over admissions; absent: never started).
        unstarted: the jobs still pending at the end (they could not start), in the history's order,
            each with the reason it last waited for; :attr:`never_started` counts them.
    """

    queues: list[QueueFigures]
    span_s: float
    gpus: int
    nodes: int
    waits: dict[str, float]
    unstarted: list[Unstarted] = field(default_factory=list)

    @property
    def never_started(self) -> int:
        """How many jobs never started (:attr:`unstarted`'s length)."""
        return len(self.unstarted)

    def figures(self, queue: str) -> QueueFigures | None:
        """The figures of ``queue`` (``"(all)"``: every job), or None."""
        return next((q for q in self.queues if q.queue == queue), None)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` document: span, cluster size, ``queues`` (each with ``wait_p50_s`` and ``wait_p90_s``)."""
        return {
            "span_s": self.span_s,
            "nodes": self.nodes,
            "gpus": self.gpus,
            "never_started": self.never_started,
            "never_started_jobs": [u.to_dict() for u in self.unstarted],
            "queues": [q.to_dict() for q in self.queues if q.queue != ALL],
            "all": self.figures(ALL).to_dict(),  # type: ignore[union-attr]
        }


ALL = "(all)"


class _Recorder:
    """The trace consumer: holding, borrowing and pending-reason time per job and queue."""

    def __init__(self, nominal: dict[str, dict[str, int]]) -> None:
        self.sim: Simulation | None = None
        self.nominal = nominal
        # job -> (queue, resource, devices: a share's fraction of a GPU, exact; whole devices stay ints)
        self.holding: dict[str, tuple[str, str, int | Fraction]] = {}
        self.usage: dict[tuple[str, str], int | Fraction] = defaultdict(int)
        self.since: dict[tuple[str, str], float] = defaultdict(float)
        self.borrowed_s: dict[str, float] = defaultdict(float)
        self.peak: dict[str, int | Fraction] = defaultdict(int)
        self.preemptions: dict[str, int] = defaultdict(int)
        self.stopping: set[str] = set()  # victims told to stop, not requeued yet
        self.reason: dict[str, tuple[str, float]] = {}
        self.reason_s: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))

    def _use(self, queue: str, resource: str, delta: int | Fraction, now: float) -> None:
        key = (queue, resource)
        over = max(0, self.usage[key] - self.nominal.get(queue, {}).get(resource, 0))
        self.borrowed_s[queue] += over * (now - self.since[key])
        self.usage[key] += delta
        self.since[key] = now
        over = max(0, self.usage[key] - self.nominal.get(queue, {}).get(resource, 0))
        self.peak[queue] = max(self.peak[queue], over)

    def _close_reason(self, job: str, now: float) -> None:
        held = self.reason.pop(job, None)
        if held is not None:
            self.reason_s[job][held[0]] += now - held[1]

    def __call__(self, event: dict[str, Any]) -> None:
        kind, now = event["event"], event["t"]
        job = event.get("job")
        if job is None or self.sim is None:
            return
        if kind == "pending":
            self._close_reason(job, now)
            self.reason[job] = (event["code"], now)
        elif kind == "admit":
            self._close_reason(job, now)
            sj = self.sim.jobs[job]
            held = sj.held
            devices = share_units(held, self.sim.scenario.gpu_sharing.shards_per_gpu) if held.shared else held.total
            entry = (sj.spec.queue, sj.request.resource, devices)
            self.holding[job] = entry
            self._use(entry[0], entry[1], entry[2], now)
        elif kind in ("requeue", "finish", "cancel"):
            if kind == "cancel":
                self._close_reason(job, now)
            if job in self.stopping:
                self.stopping.discard(job)
                if kind == "requeue":  # preempted: stopped and back in its queue (a victim may finish instead)
                    self.preemptions[self.sim.jobs[job].spec.queue] += 1
            gone = self.holding.pop(job, None)
            if gone is not None:
                self._use(gone[0], gone[1], -gone[2], now)
        elif kind == "terminate":
            self.stopping.add(job)

    def finish(self, now: float) -> None:
        """Close every open interval at ``now`` (the end of the replay)."""
        for job in list(self.reason):
            self._close_reason(job, now)
        for key in list(self.usage):
            self._use(key[0], key[1], 0, now)


def replay(data: dict[str, Any], source: str = "<history>") -> Replay:
    """Run the scenario ``data`` to its end and measure it.

    Raises:
        PlanRefused: ``data`` is not a valid scenario (the first problem, naming the key), or it
            has no jobs.
    """
    # A replay keeps what it builds until it ends (jobs, records, waits, reasons: tens of objects
    # a job) and makes almost no cyclic garbage (779 objects in a 10,000-job replay), so every
    # pass of the cyclic collector is nearly all cost: each object a replay keeps was walked by
    # a young and a middle pass, 2 % of a 100,000-job replay (full passes never came). The
    # collector is paused for the replay, as the scheduler pauses it for a cycle, and put back
    # as it was after (its next pass frees what cycles there are); reference counting still
    # frees everything else. Collection changes no object and no decision.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _replay(data, source)
    finally:
        if was_enabled:
            gc.enable()


def _replay(data: dict[str, Any], source: str) -> Replay:
    """:func:`replay`'s work."""
    try:
        scenario = parse_scenario(data, source)
    except ScenarioError as exc:
        raise PlanRefused(f"{source}: {exc.problems[0]}") from None
    if not scenario.file.jobs:
        raise PlanRefused(f"{source}: no finished jobs to replay")
    nominal = {q.name: dict(q.nominal) for q in scenario.queues}
    recorder = _Recorder(nominal)
    sim = Simulation(scenario, trace=recorder)
    recorder.sim = sim
    while sim.next_time() is not None:
        sim.run_instant()
    # The span ends with the last job (a stale starvation wake may come later, with nothing to do).
    ends = [j.end_time for j in sim.jobs.values() if j.end_time is not None]
    running = any(j.state == "running" for j in sim.jobs.values())
    span = sim.now if running or not ends else max(ends)
    recorder.finish(span)
    devices = sum(len(n.devices) for n in scenario.nodes)
    held = {s.queue: s.device_seconds for s in queue_stats(sim)}
    waits = {j.id: sum(j.waits) for j in sim.jobs.values() if j.first_admit is not None}
    by_queue: dict[str, list[str]] = defaultdict(list)
    for j in sim.jobs.values():
        by_queue[j.spec.queue].append(j.id)
    out: list[QueueFigures] = []
    for name in [q.name for q in scenario.queues] + [ALL]:
        members = [j for q, js in by_queue.items() for j in js] if name == ALL else by_queue.get(name, [])
        if name != ALL and not members:
            continue
        fig = QueueFigures(name, jobs=len(members))
        mine = [waits[j] for j in members if j in waits]
        fig.started = len(mine)
        fig.wait_p50_s, fig.wait_p90_s = percentile(mine, 0.5), percentile(mine, 0.9)
        fig.wait_max_s = max(mine) if mine else None
        queues = list(held) if name == ALL else [name]
        if span > 0 and devices:
            fig.gpu_utilization = sum(held.get(q, 0.0) for q in queues) / (devices * span)
        fig.preemptions = sum(recorder.preemptions.get(q, 0) for q in queues)
        fig.borrowed_gpu_h = sum(recorder.borrowed_s.get(q, 0.0) for q in queues) / 3600
        peak = max((recorder.peak.get(q, 0) for q in queues), default=0)
        fig.peak_borrowed = int(peak) if peak == int(peak) else float(peak)
        if fig.wait_p90_s is not None and fig.wait_p90_s > 0:
            tail = [name for name in members if waits.get(name, -1.0) >= fig.wait_p90_s]
            fig.tail_jobs = len(tail)
            for name in tail:
                for code, seconds in recorder.reason_s.get(name, {}).items():
                    fig.reasons[code] = fig.reasons.get(code, 0.0) + seconds
                    cause = cause_of(code)
                    fig.limits[cause] = fig.limits.get(cause, 0.0) + seconds
        out.append(fig)
    shown = scenario.ids.shown
    unstarted = [
        Unstarted(j.id, j.spec.queue, j.record.status.reason_code, shown(j.record.status.reason_message or ""))
        for j in sim.jobs.values()
        if j.first_admit is None
    ]
    return Replay(out, span, devices, len(scenario.nodes), waits, unstarted)
