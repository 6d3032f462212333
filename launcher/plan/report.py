"""The text ``labgang plan replay`` prints: the per-queue table and what limited each queue."""

from __future__ import annotations

from labgang.launcher.durations import format_duration
from labgang.launcher.plan.replay import ALL, CAUSES, Replay

UNSTARTED_SHOWN = 10
"""Never-started jobs the text names (``--json``'s ``never_started_jobs`` has them all)."""


def _d(seconds: float | None) -> str:
    return "-" if seconds is None else format_duration(seconds)


def replay_table(result: Replay) -> str:
    """Per queue (then every job together): jobs, wait p50/p90/max, GPU utilization, preemptions, borrowing."""
    lines = [
        f"replayed {format_duration(result.span_s)} on {result.nodes} node(s), {result.gpus} GPUs",
        f"{'QUEUE':<16} {'JOBS':>6} {'WAIT P50':>9} {'P90':>8} {'MAX':>8} {'GPU UTIL':>8} {'PREEMPT':>7} "
        f"{'BORROWED GPU-H':>14} {'PEAK':>5}",
    ]
    for q in result.queues:
        lines.append(
            f"{q.queue:<16} {q.jobs:>6} {_d(q.wait_p50_s):>9} {_d(q.wait_p90_s):>8} {_d(q.wait_max_s):>8} "
            f"{q.gpu_utilization * 100:>7.1f}% {q.preemptions:>7} {q.borrowed_gpu_h:>14.2f} {q.peak_borrowed:>5}"
        )
    lines.append(
        "WAIT: per job, submit to first admission plus each requeue to readmission; "
        "GPU UTIL: its GPU-seconds / the cluster's; BORROWED: above nominal quota (PEAK: most at once)"
    )
    if result.never_started:
        lines.append(
            f"{result.never_started} job(s) never started (not in the waits), each with what it last waited for:"
        )
        for u in result.unstarted[:UNSTARTED_SHOWN]:
            why = f"{u.reason}: {u.message}" if u.reason else "no reason recorded"
            lines.append(f"  {u.job} (queue {u.queue}): {why}")
        if result.never_started > UNSTARTED_SHOWN:
            lines.append(f"  ... and {result.never_started - UNSTARTED_SHOWN} more (--json lists every one)")
    return "\n".join(lines)


def limits_report(result: Replay) -> str:
    """One line per queue: what its p90 tail waited for, by cause, in hours and shares."""
    lines = ["what limited each queue (the jobs at or above its p90 wait, their pending time by cause):"]
    for q in result.queues:
        if q.queue == ALL:
            continue
        main = q.main_limit()
        if main is None:
            lines.append(f"  {q.queue}: its p90 jobs did not wait")
            continue
        total = sum(q.limits.values())
        parts = [
            f"{cause} {_d(q.limits[cause])} ({q.limits[cause] / total * 100:.0f}%)"
            for cause in CAUSES
            if q.limits.get(cause, 0.0) > 0
        ]
        codes = ", ".join(f"{code} {_d(s)}" for code, s in sorted(q.reasons.items(), key=lambda kv: -kv[1]))
        lines.append(
            f"  {q.queue}: p90 wait {_d(q.wait_p90_s)} from {main[0]} ({main[1] * 100:.0f}%): "
            f"{q.tail_jobs} job(s) waited, in all, {'; '.join(parts)} [{codes}]"
        )
    lines.append(
        "  quota: buy nothing, change quotas or borrowing; capacity: more GPUs; fragmentation: "
        "larger or emptier nodes; reservation: devices kept for starving gangs"
    )
    return "\n".join(lines)
