"""Does the coordinator slow down as finished jobs pile up? Ratios to an empty store.

Run by hand: ``.venv/bin/python bench/history_scale.py [--sizes 0,100000,1000000] [--rounds 10]
[--lists 50]``. For each size N:

1. a fresh state directory whose store is seeded with N finished jobs through the store's own
   API (``Store.insert_job``, ``save_rank``, ``save_event``; no hand-written SQL): each a
   1-GPU job of one of 50 users that ran 10 minutes, with its rank row and three history lines;
2. ``labgang up --simulate config/sim/h100x8.toml`` on that directory (coordinator and agent in
   one process, debug log on);
3. **release→start**: ``--rounds`` (+1 warm-up) rounds of bench/lifecycle.py's release: a gang
   holds all 8 GPUs, a 4x2 gang waits; the holder's ranks exit; latency = the waiting gang's last
   rank start minus the holder's last rank exit; p50;
4. **cycle**: p99 of the durations of every scheduling cycle of the run (snapshot + run_cycle,
   the coordinator's debug line ``cycle N: … X ms``);
5. **GET /v1/jobs**: p50 of ``--lists`` calls of ``labgang queue --all``'s request;
6. **RSS**: VmRSS of the ``labgang up`` process at the end (coordinator and local agent).

Each figure is printed with its ratio to the N = 0 run of the same invocation (target: every
ratio <= 1.1 at 1,000,000). The machine is shared: rerun before trusting a ratio near the line.
"""

from __future__ import annotations

import argparse
import re
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lifecycle_harness as lb
from labgang.agent import paths
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.records import HistoryEntry, JobSpec, JobStatus, RankRecord
from labgang.launcher.lifecycle.states import JobState, RankPhase

BATCH = 20_000
_CYCLE_RE = re.compile(r"cycle \d+: .* ([0-9.]+) ms")


def seed(state_dir: Path, n: int) -> float:
    """Write ``n`` finished jobs into the store of ``state_dir``; return the seconds it took."""
    began = time.monotonic()
    store = Store(paths.db_path(state_dir), synchronous="NORMAL")
    start = time.time() - 90 * 86400  # spread over the last 90 days
    for i in range(n):
        user = f"user{i % 50}"
        submit = start + i * (90 * 86400 / max(n, 1))
        spec = JobSpec(
            name=f"sweep-{i}", user=user, uid=2000 + i % 50, gid=None, queue="default", priority=0, workers=1,
            per_worker=1, resource="gpu", gpu_model=None, nodes=None, argv=["python", "train.py", f"--seed={i}"],
            env={"WANDB_MODE": "offline"}, cwd=f"/home/{user}/proj", grace_s=10.0, time_limit_s=None,
            requeue=True, signal=None,
        )  # fmt: skip
        status = JobStatus(
            state=JobState.SUCCEEDED, submit_time=submit, pending_since=submit, admit_time=submit + 5,
            start_time=submit + 6, end_time=submit + 606, exit_status=0, reason_code="completed",
            reason_message="all ranks exited with status 0",
        )  # fmt: skip
        job = store.insert_job(spec, status)
        job.ranks[0] = RankRecord(0, "h100x8", (f"GPU-{i % 8:08d}",), RankPhase.GONE, 10_000 + i % 50_000, 0)
        store.save_rank(job, job.ranks[0])
        for at, event, message in (
            (submit, "submitted", f"by {user} to queue default: 1 x 1 gpu"),
            (submit + 5, "admitted", "1 ranks on h100x8"),
            (submit + 606, "succeeded", "all ranks exited with status 0 (exit status 0)"),
        ):
            store.save_event(job.id, HistoryEntry(at, event, message))
        if (i + 1) % BATCH == 0:
            store.commit()
    store.close()
    return time.monotonic() - began


def rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` in KiB (``/proc/PID/status``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


def release_rounds(inst: lb.Instance, rounds: int) -> list[float]:
    """bench/lifecycle.py's release rounds on ``inst``: seconds from the holder's last rank exit
    to the waiting 4x2 gang's last rank start, per measured round."""
    out = []
    with inst.client() as c:
        for i in range(rounds + 1):
            workers, gpus = lb.SHAPES[i % len(lb.SHAPES)]
            holder, waiter = f"r{i}", f"w{i}"
            lb.make_gates(inst, holder, workers)
            lb.make_gates(inst, waiter, 4)
            holder_id = inst.submit(c, holder, lb.GATED_RANK, workers=workers, gpus=gpus)
            lb.stamps(inst, holder, "start", workers, (c, holder_id))
            waiter_id = inst.submit(c, waiter, lb.GATED_RANK, workers=4, gpus=2)
            lb.wait_for(
                lambda w=waiter_id: (j := c.job(w))["state"] == "pending" and j.get("reason"),
                10,
                f"job {waiter_id} pending with a reason",
                interval=0.01,
            )
            lb.open_gates(inst, holder, workers)
            started = lb.stamps(inst, waiter, "start", 4, (c, waiter_id))
            released = max(lb.stamps(inst, holder, "end", workers))
            if i > 0:
                out.append(max(started) - released)
            lb.open_gates(inst, waiter, 4)
            for job_id in (holder_id, waiter_id):
                lb.wait_for(lambda j=job_id: c.job(j)["state"] in lb.FINISHED, 20, f"job {job_id} finished", 0.01)
    return out


def measure(n: int, rounds: int, lists: int) -> dict[str, Any]:
    """Seed, start ``labgang up``, measure; every process stopped and the directory removed after."""
    inst = lb.Instance(f"hs{n}")
    seconds = seed(inst.state, n)
    lb.DAEMON_DEBUG = True
    inst.spawn("up", ["up", "--simulate", str(lb.SIM / "h100x8.toml"), "--state-dir", str(inst.state)], signal.SIGINT)
    try:
        inst.wait_nodes(1, timeout=600)
        release = release_rounds(inst, rounds)
        with inst.client() as c:
            listing = []
            for _ in range(lists):
                t0 = time.perf_counter()
                c.jobs(all_users=True)
                listing.append(time.perf_counter() - t0)
        rss = rss_kib(inst.procs[0][0].pid)
        log = (inst.base / "up.log").read_text(errors="replace")
        cycles = [float(m.group(1)) / 1e3 for m in _CYCLE_RE.finditer(log)]
    finally:
        inst.close()
    return {
        "n": n,
        "seed_s": seconds,
        "release_p50": statistics.median(release),
        "cycle_p99": lb.percentile(cycles, 0.99),
        "cycles": len(cycles),
        "list_p50": statistics.median(listing),
        "rss_kib": rss,
        "leftover": inst.leftover,
    }


def main() -> None:
    """Parse the arguments, run each size, print the table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="0,100000,1000000", help="finished jobs to seed, comma-separated (first: base)")
    ap.add_argument("--rounds", type=int, default=10, help="measured release rounds per size")
    ap.add_argument("--lists", type=int, default=50, help="GET /v1/jobs calls per size")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows = []
    for n in sizes:
        row = measure(n, args.rounds, args.lists)
        rows.append(row)
        print(
            f"seeded {n:>9,} finished jobs in {row['seed_s']:.0f} s; {row['cycles']} cycles; "
            f"{row['leftover']} process(es) left over",
            flush=True,
        )
    base = rows[0]
    titles = ("release→start p50", "cycle p99", "GET /v1/jobs p50", "RSS")
    print(
        f"\n{'finished jobs':>13} | " + " | ".join(f"{t:>{w}}" for t, w in zip(titles, (20, 17, 18, 16), strict=True))
    )
    for row in rows:
        cells = [
            f"{row['release_p50'] * 1e3:7.1f} ms ({row['release_p50'] / base['release_p50']:.2f}x)",
            f"{row['cycle_p99'] * 1e3:6.2f} ms ({row['cycle_p99'] / base['cycle_p99']:.2f}x)",
            f"{row['list_p50'] * 1e3:6.2f} ms ({row['list_p50'] / base['list_p50']:.2f}x)",
            f"{row['rss_kib'] / 1024:5.0f} MiB ({row['rss_kib'] / base['rss_kib']:.2f}x)",
        ]
        print(f"{row['n']:>13,} | {cells[0]:>20} | {cells[1]:>17} | {cells[2]:>18} | {cells[3]:>16}")


if __name__ == "__main__":
    main()
