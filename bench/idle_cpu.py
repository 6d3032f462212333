"""What an idle coordinator costs: CPU seconds per minute with 10,000 pending jobs and nobody asking.

Starts a real coordinator (``labgang coordinator``, subprocess, :mod:`coordinator_proc`; no agent
joins, so every job stays pending), first with no job, then (a second coordinator) with
``--pending`` jobs submitted over the Unix socket. After each has settled (``--settle`` seconds:
the scheduling cycles the submissions caused are over), the coordinator's own CPU time (user +
system, from ``/proc``) is read over ``--seconds`` seconds in which nobody calls it: what is left
is its background work (the pitfall watch's sample every 2 s, the timer loop). Prints CPU seconds
per minute for both, the share of one core, and the ratio of the loaded to the empty one.

Usage: python bench/idle_cpu.py [--pending 10000] [--seconds 20] [--settle 5] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from coordinator_proc import coordinator, submit_burst

TARGET_CPU_S_PER_MIN = 1.0
"""Target: an idle coordinator with 10,000 pending jobs spends at most 1 CPU second a minute
(under 2% of one core) on its own."""


def idle_cpu_per_minute(pending: int, seconds: float, settle: float, rounds: int) -> list[float]:
    """CPU seconds per minute of an idle coordinator holding ``pending`` pending jobs: one figure
    per round of ``seconds`` seconds, after ``settle`` seconds of quiet once the jobs are in."""
    with coordinator() as running:
        if pending:
            _, statuses = asyncio.run(submit_burst(running.sock, pending, 32, name="idle"))
            refused = [s for s in statuses if s != 201]
            if refused:
                raise SystemExit(f"{len(refused)} submissions refused (HTTP {refused[0]})")
        server = psutil.Process(running.proc.pid)
        time.sleep(settle)
        figures = []
        for _ in range(rounds):
            cpu_before, start = sum(server.cpu_times()[:2]), time.monotonic()
            time.sleep(seconds)
            cpu, wall = sum(server.cpu_times()[:2]) - cpu_before, time.monotonic() - start
            figures.append(cpu / wall * 60.0)
        return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pending", type=int, default=10000, help="pending jobs in the loaded coordinator")
    parser.add_argument("--seconds", type=float, default=20.0, help="length of one idle measurement")
    parser.add_argument("--settle", type=float, default=5.0, help="quiet seconds before measuring")
    parser.add_argument("--rounds", type=int, default=2, help="idle measurements per coordinator")
    args = parser.parse_args()

    empty = idle_cpu_per_minute(0, args.seconds, args.settle, args.rounds)
    loaded = idle_cpu_per_minute(args.pending, args.seconds, args.settle, args.rounds)
    base, full = statistics.median(empty), statistics.median(loaded)
    print(
        f"idle coordinator, no job: {base:.2f} CPU s/min ({base / 60 * 100:.1f}% of a core); rounds "
        + ", ".join(f"{x:.2f}" for x in empty)
    )
    print(
        f"idle coordinator, {args.pending} pending: {full:.2f} CPU s/min ({full / 60 * 100:.1f}% of a core); "
        f"rounds {', '.join(f'{x:.2f}' for x in loaded)}; ratio to no job {full / base if base else float('inf'):.1f}; "
        f"target {TARGET_CPU_S_PER_MIN:g} CPU s/min, ratio {full / TARGET_CPU_S_PER_MIN:.2f}"
    )
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs; {args.seconds:g} s per round")


if __name__ == "__main__":
    main()
