"""Whole-process latency of the commands people type: ``submit``, ``queue`` (1,000 jobs), ``--help``.

Starts a real coordinator (``labgang coordinator``, subprocess, no agent: every job stays
pending) on a temporary state directory, fills it with ``--jobs`` pending jobs, then runs
each command ``--runs`` times as a new process, the commands in turn (the ``labgang`` console script of the
interpreter given, exactly as a shell runs it) and prints the p50 wall time and its ratio
to ``python -c pass`` with the same interpreter (the floor every Python command pays).

Both the wall time and the CPU time (user + system, from ``wait4``) are printed: on a shared
machine the wall time includes waiting for a CPU, the CPU time does not.

Targets (bench/README.md): ``submit`` and ``queue`` at most 1.5x, ``--help`` at most 2x.

Usage: python bench/cli_latency.py [--runs 30] [--jobs 1000] [--python VENV/bin/python]
           [--importtime]   (also print the 12 slowest imports of each command)
           [--no-pyc]       (keep PYTHONDONTWRITEBYTECODE: measure without a bytecode cache)

Where ``PYTHONDONTWRITEBYTECODE`` is set (as in some CI and dev shells), the commands run with it
removed and ``PYTHONPYCACHEPREFIX`` in the temp folder instead, after one warm-up run, so the
figures are those of an environment that caches bytecode, as every installed one does.

``--python`` measures another environment (e.g. a regular ``pip install .`` into a temp venv)
against the coordinator started from this one.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from coordinator_proc import coordinator, submit_burst

TARGETS = {"submit": 1.5, "queue": 1.5, "--help": 2.0}


async def fill(sock: Path, n: int) -> None:
    """Submit ``n`` one-GPU jobs (they stay pending: no agent joins)."""
    _, statuses = await submit_burst(sock, n, 32, name="fill")
    refused = [s for s in statuses if s != 201]
    if refused:
        raise SystemExit(f"{len(refused)} fill submissions refused (HTTP {refused[0]})")


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds: user + system) of one whole process; SystemExit when it fails."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}")
    return seconds, usage.ru_utime + usage.ru_stime


def interleaved(commands: dict[str, list[str]], env: dict[str, str], runs: int) -> dict[str, tuple[float, float]]:
    """Median (wall, CPU) seconds of each command over ``runs`` rounds, each round running every
    command once in turn (after one warm-up round), so that a machine that gets slower or faster
    during the measurement shifts every command alike rather than the ones measured last."""
    for argv in commands.values():
        timed(argv, env)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name].append(timed(argv, env))
    return {
        name: (statistics.median(s[0] for s in got), statistics.median(s[1] for s in got))
        for name, got in samples.items()
    }


def slowest_imports(argv: list[str], env: dict[str, str], top: int = 12) -> list[str]:
    """The ``top`` imports with the largest cumulative time (``python -X importtime``), as text lines."""
    done = subprocess.run(
        argv, env={**env, "PYTHONPROFILEIMPORTTIME": "1"}, capture_output=True, check=False, text=True
    )
    rows = []
    for line in done.stderr.splitlines():
        if line.startswith("import time:") and "|" in line and "cumulative" not in line:
            _, cumulative, name = line.split("|")
            rows.append((int(cumulative), name.rstrip()))
    return [f"{us / 1000:7.1f} ms {name}" for us, name in sorted(rows, reverse=True)[:top]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per command (p50)")
    parser.add_argument("--jobs", type=int, default=1000, help="pending jobs listed by `queue`")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the environment to measure")
    parser.add_argument("--importtime", action="store_true", help="print each command's slowest imports")
    parser.add_argument(
        "--no-pyc", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as it is (compile every module each run)"
    )
    args = parser.parse_args()

    python = str(Path(args.python).absolute())
    labgang = str(Path(python).parent / "labgang")
    with coordinator(prefix="lgcli-") as running:
        env = {k: v for k, v in os.environ.items() if not k.startswith("LABGANG_")}
        env["LABGANG_STATE_DIR"] = str(running.state)
        bytecode = "cached, as in a normal environment"
        if env.get("PYTHONDONTWRITEBYTECODE") and not args.no_pyc:
            # Without a bytecode cache every labgang module is compiled on every run (the stdlib
            # ships compiled): a cost no installed labgang pays. Cache it beside the state dir.
            del env["PYTHONDONTWRITEBYTECODE"]
            env["PYTHONPYCACHEPREFIX"] = str(running.base / "pycache")
            bytecode = f"cached under {env['PYTHONPYCACHEPREFIX']} (PYTHONDONTWRITEBYTECODE was set)"
        elif env.get("PYTHONDONTWRITEBYTECODE"):
            bytecode = "not cached (PYTHONDONTWRITEBYTECODE): labgang's modules are compiled each run"
        sock = running.sock
        asyncio.run(fill(sock, args.jobs))
        commands = {
            "python -c pass": [python, "-c", "pass"],
            "submit": [labgang, "submit", "--", "true"],
            "queue": [labgang, "queue"],
            "--help": [labgang, "--help"],
        }
        print(f"environment: {python}; {args.jobs} pending jobs; p50 of {args.runs} whole processes")
        print(f"bytecode: {bytecode}")
        # The hot commands end by os._exit when nothing is registered to run at exit (quick._leave),
        # so they skip the interpreter's teardown, which python -c pass pays: the stricter floor
        # "no teardown" has none either, and every command is also given as a ratio to it.
        commands["no teardown"] = [python, "-c", "import os; os._exit(0)"]
        medians = interleaved(commands, env, args.runs)
        floor, floor_cpu = medians["python -c pass"]
        bare, bare_cpu = medians["no teardown"]
        print(f"{'python -c pass':>16}: wall {floor * 1000:6.1f} ms, CPU {floor_cpu * 1000:6.1f} ms")
        print(f"{'no teardown':>16}: wall {bare * 1000:6.1f} ms, CPU {bare_cpu * 1000:6.1f} ms (os._exit at once)")
        for name in ("submit", "queue", "--help"):
            seconds, cpu = medians[name]
            ratio, cpu_ratio = seconds / floor, cpu / floor_cpu if floor_cpu else float("inf")
            verdict = "meets" if ratio <= TARGETS[name] else "misses"
            print(
                f"{name:>16}: wall {seconds * 1000:6.1f} ms = {ratio:4.2f}x, CPU {cpu * 1000:6.1f} ms = "
                f"{cpu_ratio:4.2f}x python -c pass (wall {verdict} the {TARGETS[name]:g}x target); "
                f"{seconds / bare:4.2f}x / {cpu / bare_cpu if bare_cpu else float('inf'):4.2f}x no teardown"
            )
            if args.importtime:
                for line in slowest_imports(commands[name], env):
                    print(f"{'':>18}{line}")
        print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")


if __name__ == "__main__":
    main()
