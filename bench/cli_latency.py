"""Whole-process latency of the commands people type: ``submit``, ``queue`` (1,000 jobs), ``cancel``,
``show`` and ``--help``, in the development venv and (``--regular``) a regular install, in one run.

Starts a real coordinator (``labgang coordinator``, subprocess, no agent: every job stays
pending) on a temporary state directory, fills it with ``--jobs`` pending jobs, then runs
each command ``--runs`` times as a new process, the commands in turn (the ``labgang`` console script of the
interpreter given, exactly as a shell runs it) and prints the p50 wall time and its ratios
to three floors of the same interpreter: ``python -c pass`` (what every Python command pays there),
``python -I -S -c pass`` (the interpreter without ``site``) and ``no teardown``.

Both the wall time and the CPU time (user + system, from ``wait4``) are printed: on a shared
machine the wall time includes waiting for a CPU, the CPU time does not.

Targets (issue 23, bench/README.md): the hot commands (``submit``, ``queue``, ``cancel``, ``show``)
at most 1.5x ``python -I -S -c pass`` in a regular install and 1.5x ``python -c pass`` in the
editable one; ``--help`` at most 2x ``python -c pass``. ``cancel`` cancels the same job every round
(after the first, "already cancelled": the same request and answer); ``show`` shows job 1.

Usage: python bench/cli_latency.py [--runs 30] [--jobs 1000] [--regular] [--python VENV/bin/python ...]
           [--importtime]   (also print the 12 slowest imports of each command)
           [--no-pyc]       (keep PYTHONDONTWRITEBYTECODE: measure without a bytecode cache)
           [--instructions N]  (also count each command's instructions, valgrind's callgrind, median of N)

In a regular install the hot commands are also run as a user on an installed machine runs them: without
``LABGANG_STATE_DIR``, finding the coordinator through the system config ``labgang install`` writes (the
venv's own ``etc/labgang/system.toml``, read before ``/etc``'s, naming this run's state directory):
``submit, system config``...

``--instructions``: the user-space instructions each command executes (callgrind's ``Ir``), which other
work on a shared machine does not change, as a ratio to the same floor. They leave out the kernel's part
of a start (``exec``, page faults), which the CPU time has: a command's instruction ratio is a little
above its CPU ratio on a quiet machine. Needs ``valgrind``; each count takes seconds.

Where ``PYTHONDONTWRITEBYTECODE`` is set (as in some CI and dev shells), the commands run with it
removed and ``PYTHONPYCACHEPREFIX`` in the temp folder instead, after one warm-up run, so the
figures are those of an environment that caches bytecode, as every installed one does.

``--regular`` makes the regular install ``labgang install --venv`` makes, of this checkout, in a temporary
venv (``regular_install.py`` runs that command: pip's install of a copy of the checkout and the
``bin/labgang`` launcher that starts without ``site``) and measures it beside this environment; there the
hot commands are also run as ``python bin/labgang ...`` (the same code started with ``site``, as pip's
console script starts it), for contrast. Each command gets PASS or NOT MET, on CPU and on wall time.
``--python`` (repeatable) measures other environments instead of or beside this one (e.g. regular
installs of two commits, ``regular_install.py --source``), against the coordinator started from this
one; each is labelled editable or regular by where its labgang lies.
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
from typing import TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))

from coordinator_proc import coordinator, submit_burst

K = TypeVar("K")

TARGETS = {"submit": 1.5, "queue": 1.5, "cancel": 1.5, "show": 1.5, "--help": 2.0}


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


def interleaved(commands: dict[K, list[str]], envs: dict[K, dict[str, str]], runs: int) -> dict[K, tuple[float, float]]:
    """Median (wall, CPU) seconds of each command (run with its environment in ``envs``) over ``runs``
    rounds, each round running every command once in turn (after one warm-up round), so that a machine
    that gets slower or faster during the measurement shifts every command alike rather than the ones
    measured last."""
    for name, argv in commands.items():
        timed(argv, envs[name])
    samples: dict[K, list[tuple[float, float]]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, argv in commands.items():
            samples[name].append(timed(argv, envs[name]))
    return {
        name: (statistics.median(s[0] for s in got), statistics.median(s[1] for s in got))
        for name, got in samples.items()
    }


def instructions(argv: list[str], env: dict[str, str]) -> int:
    """The user-space instructions one run of ``argv`` executes (valgrind's callgrind ``Ir``).

    Raises:
        SystemExit: valgrind is missing or reported no count.
    """
    done = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    for line in done.stderr.splitlines():
        if "Collected : " in line:
            return int(line.rsplit(" ", 1)[1])
    raise SystemExit(f"valgrind counted nothing for {' '.join(argv)}: {done.stderr.strip()[-300:]}")


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


HOT = ("submit", "queue", "cancel", "show")
FOUND = ", system config"
"""Suffix of a command run without ``LABGANG_STATE_DIR``: it finds the coordinator through the system
config (:func:`system_config`)."""


def system_config(python: str, state: Path) -> None:
    """Write the system config ``labgang install`` writes into ``python``'s venv (``etc/labgang/system.toml``,
    read before ``/etc/labgang/system.toml``), naming ``state``, so that a command without
    ``LABGANG_STATE_DIR`` finds this run's coordinator as a user's finds the machine's."""
    from labgang.launcher.cli.install import SYSTEM_TOML

    config = Path(python).parent.parent / "etc" / "labgang" / "system.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(SYSTEM_TOML.replace(b"/var/lib/labgang", str(state).encode()))


def env_for(name: str, env: dict[str, str]) -> dict[str, str]:
    """The environment command ``name`` runs with: without ``LABGANG_STATE_DIR`` for a ``FOUND`` one."""
    if name.endswith(FOUND):
        return {key: value for key, value in env.items() if key != "LABGANG_STATE_DIR"}
    return env


def kind(python: str) -> str:
    """``"regular install"`` when ``python``'s labgang is in its site-packages, else ``"editable"``."""
    where = subprocess.run(
        [python, "-c", "import labgang.launcher; print(labgang.launcher.__file__)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return "regular install" if "site-packages" in where else "editable"


def environment_commands(python: str, job_id: str, cancelled_id: str) -> dict[str, list[str]]:
    """The floors and the commands measured in one environment (``python``'s venv). In a regular install
    (``labgang install --venv``: its ``bin/labgang`` starts without ``site``) the hot commands are also
    run as ``python bin/labgang ...``, the same code started with ``site`` as pip's console script would
    start it, for contrast."""
    labgang = str(Path(python).parent / "labgang")
    hot = {
        "submit": ["submit", "--", "true"],
        "queue": ["queue"],
        # The same job each round: after the first, "already cancelled" (the same request and answer).
        "cancel": ["cancel", cancelled_id],
        "show": ["show", job_id],
    }
    with_site = {}
    if Path(labgang).read_text(errors="replace").startswith(f"#!{python} -IS"):
        with_site = {f"{name}, with site": [python, labgang, *args] for name, args in hot.items()}
        with_site.update({f"{name}{FOUND}": [labgang, *args] for name, args in hot.items()})
    return {
        "python -c pass": [python, "-c", "pass"],
        "python -I -S -c pass": [python, "-I", "-S", "-c", "pass"],
        # The hot commands end by os._exit when nothing is registered to run at exit (quick._leave),
        # so they skip the interpreter's teardown, which python -c pass pays: this stricter floor has none.
        "no teardown": [python, "-c", "import os; os._exit(0)"],
        **{name: [labgang, *args] for name, args in hot.items()},
        "--help": [labgang, "--help"],
        **with_site,
    }


def verdict(ratio: float, target: float) -> str:
    """``PASS`` when ``ratio`` is within ``target``, else ``NOT MET``."""
    return "PASS" if ratio <= target else "NOT MET"


def report(
    label: str,
    medians: dict[str, tuple[float, float]],
    importtime: dict[str, list[str]],
    counted: dict[str, float] | None = None,
) -> None:
    """Print one environment's floors and each command's ratios to them, with the target's verdict on the
    CPU time (the fairer figure on a shared machine) and on the wall time; with ``counted`` (median
    instructions of each command), the instruction ratios to the same floor too."""
    print(f"{label}:")
    for floor in ("python -c pass", "python -I -S -c pass", "no teardown"):
        wall, cpu = medians[floor]
        print(f"{floor:>22}: wall {wall * 1000:6.1f} ms, CPU {cpu * 1000:6.1f} ms")
    # The issue 23 targets: in a regular install against `python -I -S -c pass`, in the editable
    # one against `python -c pass` (its import hook is part of every start there).
    target_floor = "python -I -S -c pass" if label.startswith("regular") else "python -c pass"
    extra = [f"{hot}{kind}" for kind in (", with site", FOUND) for hot in HOT if f"{hot}{kind}" in medians]
    for name in (*HOT, "--help", *extra):
        wall, cpu = medians[name]
        floor = "python -c pass" if name == "--help" else target_floor
        target = TARGETS[name.partition(",")[0]]
        ratio = wall / medians[floor][0]
        cpu_ratio = cpu / medians[floor][1] if medians[floor][1] else float("inf")
        others = ", ".join(
            f"{wall / medians[other][0]:4.2f}x {other}"
            for other in ("python -c pass", "python -I -S -c pass", "no teardown")
            if other != floor
        )
        print(
            f"{name:>22}: CPU {cpu * 1000:6.1f} ms = {cpu_ratio:4.2f}x {verdict(cpu_ratio, target):7}, "
            f"wall {wall * 1000:6.1f} ms = {ratio:4.2f}x {verdict(ratio, target):7} "
            f"(target {target:g}x {floor}); wall {others}"
        )
        for line in importtime.get(name, []):
            print(f"{'':>24}{line}")
    if counted:
        print(f"{'instructions':>22}: {target_floor} {counted[target_floor] / 1e6:.2f}M (callgrind Ir, median)")
        for name in (*HOT, *extra):
            ratio = counted[name] / counted[target_floor]
            target = TARGETS[name.partition(",")[0]]
            print(f"{name:>22}: {counted[name] / 1e6:6.2f}M = {ratio:4.2f}x {verdict(ratio, target)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30, help="runs per command (p50)")
    parser.add_argument("--jobs", type=int, default=1000, help="pending jobs listed by `queue`")
    parser.add_argument(
        "--python",
        action="append",
        default=[],
        help="interpreter of an environment to measure (repeat to measure several in one run; default: this one)",
    )
    parser.add_argument(
        "--regular",
        action="store_true",
        help="also build a regular install of this checkout (regular_install.py) and measure both in one run",
    )
    parser.add_argument("--importtime", action="store_true", help="print each command's slowest imports")
    parser.add_argument(
        "--no-pyc", action="store_true", help="keep PYTHONDONTWRITEBYTECODE as it is (compile every module each run)"
    )
    parser.add_argument(
        "--instructions",
        type=int,
        default=0,
        metavar="N",
        help="also count each hot command's instructions (valgrind callgrind), median of N runs",
    )
    args = parser.parse_args()

    given = [str(Path(python).absolute()) for python in args.python or [sys.executable]]
    if args.regular:
        from regular_install import make

        given.append(str(make()))
    pythons = {f"{kind(python)} {python}": python for python in given}
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
        asyncio.run(fill(running.sock, args.jobs))
        first = next(iter(pythons.values()))
        labgang = str(Path(first).parent / "labgang")
        submitted = subprocess.run(
            [labgang, "submit", "--", "true"], env=env, capture_output=True, text=True, check=True
        )
        cancelled_id = submitted.stdout.strip()
        subprocess.run([labgang, "cancel", cancelled_id], env=env, capture_output=True, check=True)
        commands = {
            (label, name): argv
            for label, python in pythons.items()
            for name, argv in environment_commands(python, "1", cancelled_id).items()
        }
        for label, python in pythons.items():
            if (label, f"submit{FOUND}") in commands:
                system_config(python, running.state)
        envs = {key: env_for(key[1], env) for key in commands}
        print("load average {:.1f} {:.1f} {:.1f} at the start".format(*os.getloadavg()))
        print(f"{args.jobs} pending jobs; p50 of {args.runs} rounds, every command once a round, in turn")
        print(f"bytecode: {bytecode}")
        medians = interleaved(commands, envs, args.runs)
        for label in pythons:
            counted = {}
            if args.instructions:
                for key, argv in commands.items():
                    name = key[1]
                    if key[0] == label and (name.partition(",")[0] in HOT or name.startswith("python ")):
                        counts = [instructions(argv, envs[key]) for _ in range(args.instructions)]
                        counted[name] = statistics.median(counts)
            importtime = (
                {name: slowest_imports(commands[label, name], env) for name in (*HOT, "--help")}
                if args.importtime
                else {}
            )
            report(label, {name: medians[key, name] for key, name in commands if key == label}, importtime, counted)
        print("load average {:.1f} {:.1f} {:.1f} on {} CPUs".format(*os.getloadavg(), os.cpu_count()))


if __name__ == "__main__":
    main()
