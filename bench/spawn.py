"""How fast the supervisor starts an 8-rank gang on one node, against a bare ``posix_spawn``.

Run by hand: ``.venv/bin/python bench/spawn.py [--ranks 8] [--rounds 7]``. Measured in one run:

* ``posix_spawn``: ``os.posix_spawn("/bin/true")`` + ``waitpid``, the floor for starting a process;
* ``launch``: the 8 ``Supervisor.launch()`` calls returning (journal written, each rank's
  small parent spawned in its own session);
* ``started``: from the first ``launch()`` until ``tick()`` has reported ``started`` for all 8
  (each small parent has run, dropped privileges and ``exec``-ed its rank).

Prints medians and the ratios to the bare spawn. Ranks are ``sleep 60`` as the current
user, stopped (grace 0) and awaited "gone" between rounds, outside the timed part.

Then the gang's **rank start spread** (``--spread-rounds``, 0 = skip): one ``Supervisor.launch_all``
of the ``--ranks`` ranks (one node's ranks of a gang, as the agent's ``launch`` command starts
them; with as many spare small parents, as an idle agent has), each rank ``bash -c 'echo
$EPOCHREALTIME > FILE'``: the spread is the last rank's own start stamp minus the first's. Printed:
p50/p90/max, whether p50 is under the 10 ms target, and the load average beside it (on a shared
machine the ranks' ``exec`` waits for a CPU).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from labgang.agent.supervisor import LaunchSpec, RankState, Supervisor


def bare_spawn_s(count: int) -> float:
    """Median seconds of one ``posix_spawn`` of ``/bin/true`` plus its ``waitpid``."""
    samples = []
    for _ in range(count):
        t0 = time.perf_counter()
        pid = os.posix_spawn("/bin/true", ["/bin/true"], os.environ)
        os.waitpid(pid, 0)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def gang_round(ranks: int, spares: int = 0) -> tuple[float, float]:
    """Start one gang of ``ranks`` ranks; return (seconds until all launch() returned, until all started).

    With ``spares``, the supervisor first starts that many spare small parents and the clock
    starts once they have had 1 s to finish their interpreter start-up, as an idle agent's have.
    """
    state = Path(tempfile.mkdtemp(prefix="lgbench-"))
    try:
        sup = Supervisor(state, allow_root=True, spare_shims=spares)
        if spares:
            sup.refill_spares()
            time.sleep(1.0)
        specs = [
            LaunchSpec(
                job_id="bench",
                rank=r,
                local_rank=r,
                world_size=ranks,
                local_world_size=ranks,
                node_rank=0,
                master_addr="127.0.0.1",
                master_port=29400,
                devices=(f"GPU-{r}",),
                argv=("sleep", "60"),
                env={"PATH": "/usr/bin:/bin"},
                cwd="/tmp",
                uid=os.getuid(),
                grace=0.0,
            )
            for r in range(ranks)
        ]
        t0 = time.perf_counter()
        for spec in specs:
            sup.launch(spec)
        launched = time.perf_counter() - t0
        started = 0
        while started < ranks:
            started += sum(1 for e in sup.tick() if e.kind == "started")
        all_started = time.perf_counter() - t0
        sup.stop_job("bench", grace=0)
        while any(r.state is not RankState.GONE for r in sup.ranks()):
            sup.tick()
            time.sleep(0.005)
        sup.close()
        return launched, all_started
    finally:
        shutil.rmtree(state, ignore_errors=True)


def spread_round(ranks: int) -> float:
    """Start one gang of ``ranks`` stamping ranks with ``launch_all`` (spares ready); return the
    spread of their own start stamps in seconds (last minus first)."""
    state = Path(tempfile.mkdtemp(prefix="lgbench-"))
    try:
        sup = Supervisor(state, allow_root=True, spare_shims=ranks)
        sup.refill_spares()
        time.sleep(1.0)  # the spares' interpreter start-up is done, as an idle agent's is
        out = state / "stamps"
        out.mkdir()
        specs = [
            LaunchSpec(
                job_id="spread",
                rank=r,
                local_rank=r,
                world_size=ranks,
                local_world_size=ranks,
                node_rank=0,
                master_addr="127.0.0.1",
                master_port=29400,
                devices=(f"GPU-{r}",),
                argv=("/usr/bin/bash", "-c", f"echo $EPOCHREALTIME > {out}/{r}"),
                env={"PATH": "/usr/bin:/bin"},
                cwd="/tmp",
                uid=os.getuid(),
                grace=0.0,
            )
            for r in range(ranks)
        ]
        results = sup.launch_all(specs)
        failed = [r for r in results if isinstance(r, Exception)]
        if failed:
            raise SystemExit(f"launch_all refused a rank: {failed[0]}")
        while any(r.state is not RankState.GONE for r in sup.ranks()):
            sup.tick()
            time.sleep(0.005)
        sup.close()
        stamps = [float((out / str(r)).read_text()) for r in range(ranks)]
        return max(stamps) - min(stamps)
    finally:
        shutil.rmtree(state, ignore_errors=True)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--spread-rounds", type=int, default=15, help="gangs started for the spread (0 = skip)")
    args = parser.parse_args()
    gang_round(args.ranks)  # warm the page cache and the interpreter's imports
    bare = bare_spawn_s(50)
    results = {spares: [gang_round(args.ranks, spares) for _ in range(args.rounds)] for spares in (0, args.ranks)}
    bare_after = bare_spawn_s(50)
    bare = statistics.median([bare, bare_after])
    print(f"cpus: {os.cpu_count()}  ranks: {args.ranks}  rounds: {args.rounds}")
    print(f"bare posix_spawn(/bin/true)+wait : {bare * 1e3:8.3f} ms")
    for spares, rounds in results.items():
        launch = statistics.median(r[0] for r in rounds)
        started = statistics.median(r[1] for r in rounds)
        print(f"-- {spares} spare small parents" + (" (the agent's default keeps min(8, devices))" if spares else ""))
        print(
            f"{args.ranks} x launch() returned        : {launch * 1e3:8.3f} ms  "
            f"({launch / args.ranks * 1e3:.3f} ms/rank, {launch / bare:.1f}x one bare spawn, "
            f"{launch / (bare * args.ranks):.1f}x {args.ranks} bare spawns)"
        )
        print(
            f"{args.ranks} ranks all started           : {started * 1e3:8.3f} ms  "
            f"({started / bare:.1f}x one bare spawn, {started / (bare * args.ranks):.1f}x {args.ranks} bare spawns)"
        )

    if args.spread_rounds:
        load_before = Path("/proc/loadavg").read_text().split()[0]
        spreads = [spread_round(args.ranks) for _ in range(args.spread_rounds)]
        load_after = Path("/proc/loadavg").read_text().split()[0]
        p50, p90 = percentile(spreads, 0.5), percentile(spreads, 0.9)
        print(
            f"-- rank start spread, {args.ranks} ranks of a gang in one launch_all, {args.spread_rounds} rounds "
            f"(load average {load_before} before, {load_after} after)"
        )
        print(
            f"last rank start - first rank start  : p50 {p50 * 1e3:8.3f} ms  p90 {p90 * 1e3:8.3f} ms  "
            f"max {max(spreads) * 1e3:8.3f} ms  (p50 under the 10 ms target: {'yes' if p50 < 0.010 else 'no'}, "
            f"p50 / 10 ms = {p50 / 0.010:.2f})"
        )


if __name__ == "__main__":
    main()
