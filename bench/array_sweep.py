"""A sweep of 100 one-second jobs on 8 simulated GPUs, as one job array and as a shell loop.

Issue 13's end-to-end figure: ``labgang up --simulate config/sim/h100x8.toml``, then the time from
the start of the ``labgang submit`` command to the end of the last task, against the ideal
100 x 1 s / 8 GPUs = 12.5 s (target: <= 1.1x for the array). Each task is ``sleep 1`` in bash
and writes ``$EPOCHREALTIME`` as it ends; the submit command is a real process (its start-up
counts). For contrast, the same 100 jobs from a shell loop of 100 ``labgang submit`` commands.

Usage::

    python bench/array_sweep.py [--runs 3] [--tasks 100] [--no-loop]

Prints each run's wall time and its ratio to the ideal, then the median.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

from lifecycle_harness import Instance, read_stamp, start_up, wait_for

GPUS = 8
TASK_S = 1.0
TASK = "${LABGANG_ARRAY_TASK_ID:-$LGB_N}"
SCRIPT = (
    f'echo "$EPOCHREALTIME" > "$LGB_DIR/$LGB_TAG.start.{TASK}"; sleep 1; '
    f'echo "$EPOCHREALTIME" > "$LGB_DIR/$LGB_TAG.end.{TASK}"'
)


def _cli_env(inst: Instance, tag: str) -> dict[str, str]:
    """The submitting shell's environment: the job inherits it (``LGB_DIR``, ``LGB_TAG``)."""
    return dict(os.environ, **inst.env(), LGB_TAG=tag, LABGANG_STATE_DIR=str(inst.state))


def _stamps(inst: Instance, tag: str, kind: str, tasks: int, timeout: float) -> list[float]:
    paths = [inst.base / f"{tag}.{kind}.{i}" for i in range(tasks)]

    def found() -> list[float] | None:
        times = [read_stamp(p) for p in paths]
        return None if any(t is None for t in times) else [t for t in times if t is not None]

    return list(wait_for(found, timeout, f"{tasks} task {kind} stamps", interval=0.02))


def _last_end(inst: Instance, tag: str, tasks: int, timeout: float) -> float:
    """The last task's end; also prints where the time went: submit to the first start, and the
    mean gap between a GPU's task ending and its next task starting (the scheduling turnaround)."""
    ends = _stamps(inst, tag, "end", tasks, timeout)
    starts = _stamps(inst, tag, "start", tasks, timeout)
    gaps = []
    for start in sorted(starts)[GPUS:]:  # each later start follows the latest end before it
        before = [end for end in ends if end <= start]
        if before:
            gaps.append(start - max(before))
    _last_end.first_start = min(starts)  # type: ignore[attr-defined]
    _last_end.gap = statistics.mean(gaps) if gaps else float("nan")  # type: ignore[attr-defined]
    return max(ends)


def as_array(inst: Instance, tag: str, tasks: int) -> float:
    """Seconds from the start of ``labgang submit --array 0-(tasks-1)`` to the last task's end."""
    env = _cli_env(inst, tag)
    argv = [sys.executable, "-m", "labgang.launcher", "submit", "--array", f"0-{tasks - 1}", "--grace", "1s"]
    start = time.time()
    subprocess.run([*argv, "--", "/bin/bash", "-c", SCRIPT], env=env, check=True, capture_output=True)
    return _last_end(inst, tag, tasks, timeout=30 * tasks) - start


def as_loop(inst: Instance, tag: str, tasks: int) -> float:
    """Seconds from the first of ``tasks`` ``labgang submit`` commands run one after another (a shell
    loop) to the last job's end."""
    env = _cli_env(inst, tag)
    argv = [sys.executable, "-m", "labgang.launcher", "submit", "--grace", "1s"]
    start = time.time()
    for n in range(tasks):
        subprocess.run(
            [*argv, "--", "/bin/bash", "-c", SCRIPT], env={**env, "LGB_N": str(n)}, check=True, capture_output=True
        )
    return _last_end(inst, tag, tasks, timeout=30 * tasks) - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--no-loop", action="store_true", help="skip the shell-loop comparison")
    args = parser.parse_args()
    ideal = args.tasks * TASK_S / GPUS
    print(f"{args.tasks} x {TASK_S:g} s jobs on {GPUS} simulated GPUs; ideal {ideal:g} s; target <= 1.1x as one array")
    results: dict[str, list[float]] = {"array": [], "loop": []}
    for run in range(args.runs):
        ways = (("array", as_array),) if args.no_loop else (("array", as_array), ("loop", as_loop))
        for name, way in ways:
            inst = start_up(f"sw{name[0]}")
            try:
                seconds = way(inst, f"r{run}", args.tasks)
            finally:
                inst.close()
            results[name].append(seconds)
            gap = _last_end.gap  # type: ignore[attr-defined]
            print(
                f"run {run + 1} {name:>5}: {seconds:6.2f} s = {seconds / ideal:.3f} x ideal "
                f"(end -> next start on a freed GPU: mean {gap * 1e3:.0f} ms)",
                flush=True,
            )
    for name, values in results.items():
        if values:
            median = statistics.median(values)
            verdict = ("met" if median / ideal <= 1.1 else "NOT met") if name == "array" else "(no target)"
            print(f"median {name:>5}: {median:6.2f} s = {median / ideal:.3f} x ideal {verdict}")


if __name__ == "__main__":
    main()
