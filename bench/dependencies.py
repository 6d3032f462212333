"""Job dependencies in the lifecycle model, in process: what held jobs cost the events around them.

For N pending jobs that all wait for one job (``afterok:1``, a sweep behind its data preparation)
it measures, on the pure lifecycle model:

- an event that concerns no dependency (a tick, a rank report of an unrelated job) with the N
  held jobs present, as a ratio to the same event without them (target: about 1: held jobs
  must cost nothing until something they name changes);
- one submission with a dependency, as a ratio to a plain submission;
- the target's steps that re-judge all N (admitted, running, succeeded: releases all N), per
  held job, in microseconds.

Usage: ``.venv/bin/python bench/dependencies.py [--jobs 1000,10000] [--repeat 200]``
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.machine import Lifecycle, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, JobSpec, JobStatus
from labgang.launcher.lifecycle.states import RankPhase
from labgang.launcher.scheduler.decisions import Admit, CycleResult
from labgang.launcher.scheduler.snapshot import RankPlacement

POLICY = LifecyclePolicy(
    startup_timeout_s=60, requeue_backoff_s=5, requeue_backoff_max_s=300, max_start_failures=3, default_grace_s=10
)


def job(seq: int, dependency: str | None = None) -> JobRecord:
    spec = JobSpec(
        name=f"j{seq}", user="alice", uid=1000, gid=None, queue="default", priority=0, workers=1, per_worker=1,
        resource="gpu", gpu_model=None, nodes=None, argv=["x"], env={}, cwd="/tmp", grace_s=1.0, time_limit_s=None,
        requeue=True, signal=None, dependency=dependency,
    )  # fmt: skip
    return JobRecord(id=str(seq), seq=seq, spec=spec, status=JobStatus(submit_time=0.0))


def model_with(n: int, dependency: str | None) -> Lifecycle:
    """Job 1 running on n1, job 2 running on n2, and ``n`` pending jobs with ``dependency``."""
    model = Lifecycle(POLICY)
    for seq in (1, 2):
        model.apply(ev.JobSubmitted(0.0, job(seq)))
        place = (RankPlacement(0, f"n{seq}", (f"GPU-{seq}",)),)
        model.apply(ev.CycleDecided(0.0, CycleResult(admitted=(Admit(str(seq), place),), preempted=(), pending=())))
        model.apply(ev.RankObserved(0.0, f"n{seq}", f"{seq}.0", 0, RankPhase.RUNNING, pid=100 + seq))
    for seq in range(3, n + 3):
        model.apply(ev.JobSubmitted(0.0, job(seq, dependency)))
    return model


def per_event_us(model: Lifecycle, make: Callable[[int], ev.Event], repeat: int) -> float:
    """Median microseconds of ``model.apply(make(i))`` over ``repeat`` calls."""
    times = []
    for i in range(repeat):
        event = make(i)
        started = time.perf_counter()
        model.apply(event)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--jobs", default="1000,10000", help="held jobs, comma-separated")
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    for n in (int(x) for x in args.jobs.split(",")):
        held, plain = model_with(n, "afterok:1"), model_with(n, None)
        assert all(j.id in held.held for j in held.jobs.values() if int(j.id) > 2)

        def unrelated(i: int) -> ev.Event:
            return ev.RankObserved(1.0 + i, "n2", "2.0", 0, RankPhase.RUNNING, pid=102)

        quiet_held, quiet_plain = (
            per_event_us(held, unrelated, args.repeat),
            per_event_us(plain, unrelated, args.repeat),
        )
        sub_dep = per_event_us(held, lambda i: ev.JobSubmitted(2.0, job(10**7 + i, "afterok:1")), args.repeat)
        sub_plain = per_event_us(plain, lambda i: ev.JobSubmitted(2.0, job(10**7 + i)), args.repeat)
        waiting = len(held.held)
        started = time.perf_counter()
        held.apply(ev.RankObserved(3.0, "n1", "1.0", 0, RankPhase.GONE, exit_status=0))
        release = time.perf_counter() - started
        assert not held.held, "every held job is released once job 1 succeeded"
        print(
            f"{n:>6} held: unrelated event {quiet_held:.1f} us vs {quiet_plain:.1f} us without them "
            f"(ratio {quiet_held / quiet_plain:.2f}); submit with a dependency {sub_dep:.1f} us vs plain "
            f"{sub_plain:.1f} us (ratio {sub_dep / sub_plain:.2f}); releasing {waiting} held jobs "
            f"{release * 1e3:.1f} ms ({release / waiting * 1e6:.1f} us per job)"
        )


if __name__ == "__main__":
    main()
