"""How long the agent's event loop stalls while its supervisor starts and stops many ranks, with the
journal written on the loop (``InlineWriter``, as before) and on the journal's own thread
(``ThreadWriter``, as the agent now does; ``agent/supervisor/writer.py``).

Run by hand: ``.venv/bin/python bench/agent_loop.py [--ranks 64] [--rounds 3] [--contend]``.
Each round, for each writer: a real ``Supervisor`` on a fresh temporary state dir, driven on an
asyncio loop the way the agent drives it (one ``launch`` command for every rank, a tick every
10 ms, each tick's events awaited through ``journal_written()``), starts ``--ranks`` ranks
(``sleep 600`` as the current user), waits until all run, stops them all in one ``stop_jobs``
(grace 5 s: they end on SIGTERM) and waits until all are gone (deleting their folders is not
counted: the agent did that on a worker thread before too). Meanwhile a probe task sleeps
1 ms at a time and records how late it wakes: the loop's stall. Printed per writer and phase
(start: launches and "started"; stop: stops, exits, "gone"), the worst over the rounds:

* ``max stall``: the probe's largest lateness (ms);
* ``in writes``: loop time spent inside the journal writer's calls (ms, all ranks);

and the ratio thread / inline of each. ``--contend`` runs a process that writes and fsyncs
1 MiB blocks on the same file system meanwhile, as a busy disk would. Spawning the small
parents stalls the start phase whichever writer is used; the stop phase is mostly journal.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from labgang.agent.supervisor import LaunchSpec, RankState, Supervisor
from labgang.agent.supervisor.writer import InlineWriter, JournalWriter, ThreadWriter

CONTEND = """
import os, sys
path = sys.argv[1]
block = os.urandom(1 << 20)
with open(path, 'wb') as f:
    while True:
        f.write(block)
        f.flush()
        os.fsync(f.fileno())
        if f.tell() > (256 << 20):
            f.seek(0)
"""


class TimedWriter:
    """A journal writer that adds up the time its calls take on the caller's thread."""

    def __init__(self, inner: JournalWriter) -> None:
        self.inner = inner
        self.spent = 0.0

    def _timed(self, call: Callable[[], Any]) -> Any:
        began = time.perf_counter()
        try:
            return call()
        finally:
            self.spent += time.perf_counter() - began

    def write(self, path: Path, data: Any) -> None:
        self._timed(lambda: self.inner.write(path, data))

    def then(self, step: Callable[[], object]) -> None:
        self._timed(lambda: self.inner.then(step))

    def written(self) -> Future[None]:
        result: Future[None] = self._timed(self.inner.written)
        return result

    def flush(self) -> None:
        self.inner.flush()

    def close(self) -> None:
        self.inner.close()


def spec(rank: int, ranks: int) -> LaunchSpec:
    return LaunchSpec(
        job_id="bench",
        rank=rank,
        local_rank=rank,
        world_size=ranks,
        local_world_size=ranks,
        node_rank=0,
        master_addr="127.0.0.1",
        master_port=29400,
        devices=(f"GPU-bench-{rank}",),
        argv=("sleep", "600"),
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LGBENCH": "agent_loop"},
        cwd="/tmp",
        uid=os.getuid(),
        grace=5.0,
    )


async def one_round(ranks: int, make_writer: Callable[[], JournalWriter]) -> dict[str, tuple[float, float]]:
    """Start and stop ``ranks`` ranks; per phase (max stall s, time in writer calls s)."""
    state = Path(tempfile.mkdtemp(prefix="lgbench-loop-"))
    writer = TimedWriter(make_writer())
    sup = Supervisor(state, allow_root=True, journal_writer=writer)
    stalls: list[float] = []
    done = asyncio.Event()

    async def probe() -> None:
        while not done.is_set():
            began = time.perf_counter()
            await asyncio.sleep(0.001)
            stalls.append(time.perf_counter() - began - 0.001)

    async def tick_until(state_wanted: RankState) -> None:
        while not all(s.state is state_wanted for s in sup.ranks()):
            sup.tick()
            await asyncio.wrap_future(sup.journal_written())
            await asyncio.sleep(0.01)

    task = asyncio.create_task(probe())
    out: dict[str, tuple[float, float]] = {}
    try:
        await asyncio.sleep(0.05)
        stalls.clear()
        for r in range(ranks):
            sup.launch(spec(r, ranks))
        await asyncio.wrap_future(sup.journal_written())
        await tick_until(RankState.RUNNING)
        out["start"] = (max(stalls), writer.spent)
        stalls.clear()
        writer.spent = 0.0
        sup.stop_jobs([("bench", None, False)])
        await asyncio.wrap_future(sup.journal_written())
        await tick_until(RankState.GONE)
        out["stop"] = (max(stalls), writer.spent)
        sup.forget("bench")  # not measured: the agent deleted rank folders off the loop before too
    finally:
        done.set()
        await task
        for s in sup.ranks():
            if s.state is not RankState.GONE:
                sup.stop_job(s.job_id, grace=0)
        sup.close()
        shutil.rmtree(state, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contend", action="store_true", help="write and fsync 1 MiB blocks meanwhile")
    args = parser.parse_args()
    contender = None
    scratch = Path(tempfile.mkdtemp(prefix="lgbench-disk-"))
    if args.contend:
        contender = subprocess.Popen([sys.executable, "-c", CONTEND, str(scratch / "blocks")])
    writers: dict[str, Callable[[], JournalWriter]] = {"inline": InlineWriter, "thread": ThreadWriter}
    worst: dict[tuple[str, str], tuple[float, float]] = {}
    try:
        for _ in range(args.rounds):
            for name, make in writers.items():
                for phase, (stall, spent) in asyncio.run(one_round(args.ranks, make)).items():
                    old = worst.get((name, phase), (0.0, 0.0))
                    worst[(name, phase)] = (max(old[0], stall), max(old[1], spent))
    finally:
        if contender is not None:
            contender.kill()
            contender.wait()
        shutil.rmtree(scratch, ignore_errors=True)
    load = os.getloadavg()[0]
    contended = ", disk contended" if args.contend else ""
    print(f"{args.ranks} ranks, worst of {args.rounds} rounds, load {load:.1f}{contended}")
    print(f"{'writer':<8} {'phase':<6} {'max stall ms':>13} {'in writes ms':>13}")
    for (name, phase), (stall, spent) in sorted(worst.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        print(f"{name:<8} {phase:<6} {stall * 1e3:>13.1f} {spent * 1e3:>13.1f}")
    for phase in ("start", "stop"):
        inline, thread = worst[("inline", phase)], worst[("thread", phase)]
        print(
            f"{phase}: thread/inline max stall {thread[0] / inline[0]:.2f}x, "
            f"time in writes {thread[1] / max(inline[1], 1e-9):.2f}x"
        )


if __name__ == "__main__":
    main()
