"""What a job mix did under a queue configuration: per-queue waits and device utilization.

For ``labgang simulate`` on a plain job list (no ``[[expect]]``): "what would my queue
config do with this job mix?". Times are simulated seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from labgang.launcher.simulate.engine import Simulation
from labgang.launcher.simulate.jobs import devices_held


@dataclass(frozen=True)
class QueueStats:
    """One queue's figures.

    Attributes:
        queue: queue name.
        jobs: jobs submitted to it.
        started: jobs admitted at least once.
        finished: jobs that finished.
        preempted: jobs preempted at least once.
        wait_mean_s / wait_p50_s / wait_max_s: seconds each job spent pending before it
            ran: submit to first admission plus, after each preemption, requeue to
            readmission (:data:`WAIT_NOTE`); over jobs admitted at least once by the
            scheduler (None when none was).
        device_seconds: devices x seconds its jobs held, up to the horizon (a share of a card
            counts its GPU fraction: :func:`~labgang.launcher.simulate.jobs.devices_held`).
    """

    queue: str
    jobs: int
    started: int
    finished: int
    preempted: int
    wait_mean_s: float | None
    wait_p50_s: float | None
    wait_max_s: float | None
    device_seconds: float


WAIT_NOTE = "WAIT: seconds pending per job, submit to first admission plus each requeue to readmission"
"""The line under the table that says what the wait columns count."""


def _held_until(sim: Simulation, horizon: float) -> dict[str, float]:
    out = {}
    for j in sim.jobs.values():
        held = j.device_seconds
        if j.state == "running":
            held += (horizon - max(0.0, j.admit_time)) * devices_held(j.held, sim.scenario.gpu_sharing)
        out[j.id] = held
    return out


def queue_stats(sim: Simulation) -> list[QueueStats]:
    """Per-queue figures, in configuration order, up to the time of the last event."""
    horizon = sim.now
    held = _held_until(sim, horizon)
    out = []
    for spec in sim.scenario.queues:
        mine = [j for j in sim.jobs.values() if j.spec.queue == spec.name]
        waits = sorted(sum(j.waits) for j in mine if j.waits)
        out.append(
            QueueStats(
                queue=spec.name,
                jobs=len(mine),
                started=sum(1 for j in mine if j.first_admit is not None),
                finished=sum(1 for j in mine if j.state == "finished"),
                preempted=sum(1 for j in mine if j.preempted),
                wait_mean_s=sum(waits) / len(waits) if waits else None,
                wait_p50_s=waits[(len(waits) - 1) // 2] if waits else None,
                wait_max_s=waits[-1] if waits else None,
                device_seconds=sum(held[j.id] for j in mine),
            )
        )
    return out


def utilization(sim: Simulation) -> dict[str, float]:
    """Fraction (0..1) of each resource's device-seconds used from t=0 to the last event."""
    horizon = sim.now
    if horizon <= 0:
        return {}
    held = _held_until(sim, horizon)
    capacity: dict[str, int] = {}
    for n in sim.scenario.nodes:
        for d in n.devices:
            capacity[d.resource] = capacity.get(d.resource, 0) + 1
    used: dict[str, float] = {}
    for j in sim.jobs.values():
        used[j.request.resource] = used.get(j.request.resource, 0.0) + held[j.id]
    return {res: used.get(res, 0.0) / (cap * horizon) for res, cap in sorted(capacity.items()) if cap}


def count(n: int, noun: str) -> str:
    """``"1 job"``, ``"0 jobs"``, ``"3 jobs"``: ``n`` and ``noun``, plural (``+s``) unless ``n`` is 1."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def format_summary(sim: Simulation) -> str:
    """A plain-text table of :func:`queue_stats` and :func:`utilization`."""

    def sec(v: float | None) -> str:
        return "-" if v is None else f"{v:.1f}"

    lines = [f"simulated {sim.now:g} s, {count(len(sim.jobs), 'job')}, {count(sim.cycles, 'scheduling cycle')}", ""]
    header = (
        f"{'QUEUE':<16} {'JOBS':>5} {'STARTED':>7} {'DONE':>5} {'PREEMPTED':>9} "
        f"{'WAIT MEAN':>9} {'P50':>7} {'MAX':>7} {'DEVICE-H':>9}"
    )
    lines.append(header)
    for s in queue_stats(sim):
        lines.append(
            f"{s.queue:<16} {s.jobs:>5} {s.started:>7} {s.finished:>5} {s.preempted:>9} "
            f"{sec(s.wait_mean_s):>9} {sec(s.wait_p50_s):>7} {sec(s.wait_max_s):>7} "
            f"{s.device_seconds / 3600:>9.2f}"
        )
    lines.append(WAIT_NOTE)
    lines.append("")
    for res, frac in utilization(sim).items():
        lines.append(f"utilization {res}: {frac * 100:.1f}%")
    return "\n".join(lines)
