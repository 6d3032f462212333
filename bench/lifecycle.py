"""Gang lifecycle latencies end to end, with real daemons and real rank processes.

Run by hand: ``.venv/bin/python bench/lifecycle.py [--rounds 20] [--jobs 400] [--reclaim-jobs 10]
[--reclaims 5] [--only release,makespan,reclaim]``. Prints figures and their ratios to the
targets in bench/README.md ("Targets"), all measured in this one run:

* **release**: ``labgang up --simulate config/sim/h100x8.toml``. A gang (4x2, 8x1, 2x4, 1x8 in
  turn) holds all 8 GPUs, its ranks blocked reading a FIFO each; a 4x2 gang waits behind it
  (pending, with a reason). The bench writes the FIFOs, each rank writes its exit timestamp
  and exits. Latency = the last waiting rank's start timestamp (written first thing by the
  rank) minus the last releasing rank's exit timestamp; p50/p90 over ``--rounds`` (after one
  unmeasured warm-up round). Target p50 < 50 ms; peers 2-4 s. The same stamps give the
  gang's rank start spread (its last rank's start minus its first's): target <= 10 ms.
* **makespan**: the same ``labgang up``; ``--jobs`` one-second 1-GPU jobs (``sleep 1``)
  submitted back to back; makespan = the last job's end (coordinator time) minus the first
  submit; ideal = ceil(jobs/8) x 1 s. Target <= 1.1 x ideal; peers 5-7 x.
* **reclaim**: ``labgang coordinator --config`` + ``labgang agent --config`` per simulated node,
  queues ``lender`` (nominal = every GPU, ``reclaim_within_cohort = "any"``) and ``borrower``
  (nominal 0) in cohort ``lab``. ``--reclaim-jobs`` 1-GPU jobs of ``borrower`` (8: one h100x8
  node; 10: plus an rtx4090x2 node) run on borrowed quota and ignore SIGTERM, so each is
  stopped by SIGKILL after its 0.5 s grace. Then ``lender`` submits one gang of one GPU per
  borrowed job. Reclaim = the lender's last rank start timestamp minus the submit, minus the
  grace; scheduling cycles = the growth of ``labgang_scheduling_cycle_duration_seconds_count``
  on ``/metrics``. Repeated ``--reclaims`` times (the evicted jobs requeue and run again
  between tries). Target: one cycle + grace, < 200 ms beyond grace for 10; Kueue ~1.1 s/job.

* **spread-nodes** (only when asked: ``--only spread-nodes``): ``labgang coordinator`` + two
  ``labgang agent --simulate`` (``n1-4gpu``, ``n2-4gpu``); ``--rounds`` 4x2 gangs (two ranks on each node) stamp their
  own start; the spread is the last rank's start minus the first's, across both nodes. Target
  <= 10 ms, as inside a node (the start gate: each agent parks its ranks, the coordinator releases
  every node once all are parked).
Timestamps are ``CLOCK_REALTIME`` (bash ``$EPOCHREALTIME`` in the ranks, ``time.time()`` here).
Every scenario gets a fresh temporary state directory; every process started is stopped and
every rank found by its ``LGBENCH`` environment marker is killed; the last line counts what
was left over (0 expected).
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import lifecycle_harness as harness
from lifecycle_harness import (
    FINISHED,
    GATED_RANK,
    GRACE_S,
    LENDER_RANK,
    SHAPES,
    SIM,
    STUBBORN_RANK,
    Instance,
    free_port,
    make_gates,
    open_gates,
    percentile,
    stamps,
    start_up,
    wait_for,
)

# ----- 1. release -> start of a waiting gang -----------------------------------------------------


def bench_release(rounds: int) -> dict[str, Any]:
    """Run ``rounds`` (+1 warm-up) release rounds; return latencies in seconds (last start, first start)."""
    inst = start_up("rel")
    last, first, admit, ended, shapes, spread = [], [], [], [], [], []
    try:
        with inst.client() as c:
            for i in range(rounds + 1):
                workers, gpus = SHAPES[i % len(SHAPES)]
                holder, waiter = f"r{i}", f"w{i}"
                make_gates(inst, holder, workers)
                make_gates(inst, waiter, 4)
                holder_id = inst.submit(c, holder, GATED_RANK, workers=workers, gpus=gpus)
                stamps(inst, holder, "start", workers, (c, holder_id))
                waiter_id = inst.submit(c, waiter, GATED_RANK, workers=4, gpus=2)
                wait_for(
                    lambda waiter_id=waiter_id: (j := c.job(waiter_id))["state"] == "pending" and j.get("reason"),
                    10,
                    f"job {waiter_id} pending with a reason",
                    interval=0.01,
                )
                open_gates(inst, holder, workers)
                started = stamps(inst, waiter, "start", 4, (c, waiter_id))
                released = max(stamps(inst, holder, "end", workers))
                if i > 0:
                    last.append(max(started) - released)
                    first.append(min(started) - released)
                    spread.append(max(started) - min(started))
                    admit.append(c.job(waiter_id)["admit_time"] - released)
                    ended.append(c.job(holder_id)["end_time"] - released)
                    shapes.append(f"{workers}x{gpus}")
                open_gates(inst, waiter, 4)
                for job_id in (holder_id, waiter_id):
                    wait_for(
                        lambda job_id=job_id: c.job(job_id)["state"] in FINISHED, 20, f"job {job_id} finished", 0.01
                    )
    finally:
        inst.close()
    return {
        "last": last,
        "first": first,
        "admit": admit,
        "ended": ended,
        "shapes": shapes,
        "spread": spread,
        "leftover": inst.leftover,
    }


# ----- 2. makespan of N one-second 1-GPU jobs -------------------------------------------------------


def bench_makespan(jobs: int, gpus: int = 8) -> dict[str, Any]:
    """Submit ``jobs`` ``sleep 1`` 1-GPU jobs back to back; return makespan figures in seconds."""
    inst = start_up("mk")
    try:
        with inst.client() as c:
            body = {
                "workers": 1,
                "gpus_per_worker": 1,
                "grace_s": GRACE_S,
                "argv": ["sleep", "1"],
                "cwd": str(inst.base),
                "env": inst.env(),
            }
            t0 = time.time()
            ids = {str(c.submit({**body, "name": f"j{i}"})["id"]) for i in range(jobs)}
            submitted = time.time() - t0

            def all_done() -> list[dict[str, Any]] | None:
                mine = [j for j in c.jobs(all_users=True) if str(j["id"]) in ids]
                return mine if len(mine) == jobs and all(j["state"] in FINISHED for j in mine) else None

            done = wait_for(all_done, 60 + 3 * jobs, f"{jobs} jobs finished", interval=1.0)
    finally:
        inst.close()
    ends = [j["end_time"] for j in done]
    busy = sum(j["end_time"] - j["start_time"] for j in done if j.get("start_time"))
    makespan = max(ends) - t0
    ideal = math.ceil(jobs / gpus) * 1.0
    return {
        "jobs": jobs,
        "submitted_s": submitted,
        "makespan": makespan,
        "ideal": ideal,
        "failed": sum(1 for j in done if j["state"] != "succeeded"),
        "mean_run": busy / jobs,
        "mean_gap": (gpus * makespan - busy) / jobs,
        "utilization": busy / (gpus * makespan),
        "leftover": inst.leftover,
    }


# ----- 3. reclaim of N borrowed jobs --------------------------------------------------------------


RECLAIM_NODES = {8: {"n0": "h100x8.toml"}, 10: {"n0": "h100x8.toml", "n1": "rtx4090x2.toml"}}


def start_cluster(borrowed: int) -> Instance:
    """Coordinator (cluster.toml with queues lender/borrower in cohort lab) + one agent per simulated node."""
    nodes = RECLAIM_NODES[borrowed]
    inst = Instance("rc")
    port = free_port()
    token = inst.base / "token"
    token.write_text("bench-cluster-token\n")
    token.chmod(0o600)
    cluster = inst.base / "cluster.toml"
    cluster.write_text(
        f'default_queue = "lender"\ntoken_file = "{token}"\ntcp_host = "127.0.0.1"\ntcp_port = {port}\n'
        f"requeue_backoff_s = 0.2\ndefault_grace_s = {GRACE_S}\n\n"
        '[[cohorts]]\nname = "lab"\n\n'
        f'[[queues]]\nname = "lender"\ncohort = "lab"\nnominal = {{ gpu = {borrowed} }}\n'
        'reclaim_within_cohort = "any"\n\n'
        '[[queues]]\nname = "borrower"\ncohort = "lab"\nnominal = { gpu = 0 }\n'
    )
    inst.spawn("coordinator", ["coordinator", "--config", str(cluster), "--state-dir", str(inst.state)], signal.SIGTERM)
    for node, machine in nodes.items():
        cfg = inst.base / f"{node}.toml"
        cfg.write_text(
            f'node = "{node}"\ncoordinator = "http://127.0.0.1:{port}"\ntoken_file = "{token}"\n'
            f'address = "127.0.0.1"\nstate_dir = "{inst.base / node}"\nuser_socket = false\n'
            "[supervisor]\nallow_root = true\n"
        )
        inst.spawn(
            f"agent-{node}",
            ["agent", "--config", str(cfg), "--simulate", str(SIM / machine), "--stop-jobs-on-exit"],
            signal.SIGTERM,
        )
    inst.wait_nodes(len(nodes))
    return inst


def bench_reclaim(borrowed: int, tries: int) -> dict[str, Any]:
    """``tries`` reclaims of ``borrowed`` borrowed 1-GPU jobs; return seconds from submit to running, cycles."""
    inst = start_cluster(borrowed)
    totals, admits, cycles, evicted = [], [], [], []
    cycles_metric = "labgang_scheduling_cycle_duration_seconds_count"
    try:
        with inst.client() as c:
            victims = [
                inst.submit(c, f"b{k}", STUBBORN_RANK, workers=1, gpus=1, queue="borrower") for k in range(borrowed)
            ]
            for t in range(tries):
                wait_for(
                    lambda: all(c.job(v)["state"] == "running" for v in victims),
                    30,
                    f"{borrowed} borrowed jobs running",
                    interval=0.05,
                )
                before = inst.metric(c, cycles_metric)
                tag = f"l{t}"
                t0 = time.time()
                lender_id = inst.submit(c, tag, LENDER_RANK, workers=borrowed, gpus=1, queue="lender")
                ran = max(stamps(inst, tag, "start", borrowed, (c, lender_id)))
                totals.append(ran - t0)
                admits.append(c.job(lender_id)["admit_time"] - t0)
                after = inst.metric(c, cycles_metric)
                if before is not None and after is not None:
                    cycles.append(after - before)
                wait_for(
                    lambda lender_id=lender_id: c.job(lender_id)["state"] in FINISHED,
                    20,
                    f"lender job {lender_id}",
                    0.02,
                )
                evicted.append(sum(1 for v in victims if c.job(v).get("restart_count", 0) > t))
    finally:
        inst.close()
    return {
        "borrowed": borrowed,
        "totals": totals,
        "admits": admits,
        "cycles": cycles,
        "evicted": evicted,
        "leftover": inst.leftover,
    }


# ----- 4. rank start spread of a gang over two nodes ---------------------------------------------


def bench_spread_nodes(rounds: int) -> dict[str, Any]:
    """``rounds`` (+1 warm-up) 4x2 gangs over two 4-GPU nodes (two ranks on each); return each
    gang's rank start spread (last rank's own start stamp minus the first's) in seconds."""
    inst = Instance("sn")
    port = free_port()
    token = inst.base / "token"
    token.write_text("bench-cluster-token\n")
    token.chmod(0o600)
    cluster = inst.base / "cluster.toml"
    cluster.write_text(
        f'token_file = "{token}"\ntcp_host = "127.0.0.1"\ntcp_port = {port}\ndefault_grace_s = {GRACE_S}\n\n'
        '[[queues]]\nname = "default"\nnominal = { gpu = 8 }\n'
    )
    spreads: list[float] = []
    try:
        inst.spawn(
            "coordinator", ["coordinator", "--config", str(cluster), "--state-dir", str(inst.state)], signal.SIGTERM
        )
        for node, machine in (("n1", "n1-4gpu.toml"), ("n2", "n2-4gpu.toml")):
            cfg = inst.base / f"{node}.toml"
            cfg.write_text(
                f'node = "{node}"\ncoordinator = "http://127.0.0.1:{port}"\ntoken_file = "{token}"\n'
                f'address = "127.0.0.1"\nstate_dir = "{inst.base / node}"\nuser_socket = false\n'
                "[supervisor]\nallow_root = true\n"
            )
            inst.spawn(
                f"agent-{node}",
                ["agent", "--config", str(cfg), "--simulate", str(SIM / machine), "--stop-jobs-on-exit"],
                signal.SIGTERM,
            )
        inst.wait_nodes(2)
        with inst.client() as c:
            for k in range(rounds + 1):
                tag = f"s{k}"
                job_id = inst.submit(c, tag, LENDER_RANK, workers=4, gpus=2)
                started = stamps(inst, tag, "start", 4, (c, job_id))
                if k:
                    spreads.append(max(started) - min(started))
                wait_for(lambda job_id=job_id: c.job(job_id)["state"] in FINISHED, 20, f"gang {job_id}", 0.02)
    finally:
        inst.close()
    return {"spread": spreads, "leftover": inst.leftover}


# ----- report -----------------------------------------------------------------------------------


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:7.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="release rounds measured (default 20)")
    parser.add_argument("--jobs", type=int, default=400, help="one-second 1-GPU jobs on 8 GPUs (default 400)")
    parser.add_argument(
        "--reclaim-jobs",
        type=int,
        choices=sorted(RECLAIM_NODES),
        default=10,
        help="borrowed jobs reclaimed: 8 (one h100x8 node) or 10 (plus an rtx4090x2 node)",
    )
    parser.add_argument("--reclaims", type=int, default=5, help="reclaim tries (default 5)")
    parser.add_argument(
        "--only",
        default="release,makespan,reclaim",
        help="comma-separated scenarios to run (release, makespan, reclaim, spread-nodes)",
    )
    parser.add_argument(
        "--keep-logs", type=Path, default=None, metavar="DIR", help="copy the daemons' logs into DIR before cleanup"
    )
    parser.add_argument(
        "--debug", action="store_true", help="daemons log debug lines (per-step timing; slows them a little)"
    )
    args = parser.parse_args()
    harness.KEEP_LOGS, harness.DAEMON_DEBUG = args.keep_logs, args.debug
    chosen = set(args.only.split(","))
    unknown = chosen - {"release", "makespan", "reclaim", "spread-nodes"}
    if unknown:
        parser.error(
            f"--only: unknown scenario(s) {sorted(unknown)}; allowed: release, makespan, reclaim, spread-nodes"
        )
    leftover = 0
    started = time.monotonic()
    print(f"labgang lifecycle bench: {os.cpu_count()} cpus, simulated GPUs, real daemons and rank processes")

    if "release" in chosen:
        r = bench_release(args.rounds)
        leftover += r["leftover"]
        p50, p90 = percentile(r["last"], 0.5), percentile(r["last"], 0.9)
        print(
            f"\n1. release -> start of a waiting 4x2 gang ({args.rounds} rounds behind "
            f"{', '.join(sorted(set(r['shapes'])))} on 8 GPUs; labgang up --simulate h100x8)"
        )
        print(
            f"   last releasing rank exit -> last waiting rank start: p50 {ms(p50)}  p90 {ms(p90)}  "
            f"max {ms(max(r['last']))}"
        )
        print(f"   last releasing rank exit -> first waiting rank start: p50 {ms(percentile(r['first'], 0.5))}")
        print(
            f"   last releasing rank exit -> releasing gang ended (every rank gone, coordinator clock): "
            f"p50 {ms(percentile(r['ended'], 0.5))}"
        )
        print(
            f"   last releasing rank exit -> waiting gang admitted (coordinator clock): "
            f"p50 {ms(percentile(r['admit'], 0.5))}"
        )
        print(f"   p50 / target 50 ms = {p50 / 0.050:.2f}   peers 2-4 s / p50 = {2.0 / p50:.0f}-{4.0 / p50:.0f}x")
        spread50, spread90 = percentile(r["spread"], 0.5), percentile(r["spread"], 0.9)
        print(
            f"   rank start spread of the 4x2 gang (last rank start - first rank start, one node): "
            f"p50 {ms(spread50)}  p90 {ms(spread90)}  max {ms(max(r['spread']))}; "
            f"p50 / target 10 ms = {spread50 / 0.010:.2f} (Slurm 18-29 ms)"
        )

    if "makespan" in chosen:
        m = bench_makespan(args.jobs)
        leftover += m["leftover"]
        ratio = m["makespan"] / m["ideal"]
        print(
            f"\n2. makespan: {m['jobs']} one-second 1-GPU jobs (sleep 1) on 8 GPUs, submitted back to back "
            f"in {m['submitted_s']:.2f} s; labgang up --simulate h100x8"
        )
        print(
            f"   makespan {m['makespan']:.2f} s  ideal {m['ideal']:.0f} s  ratio {ratio:.3f}  "
            f"(target <= 1.1; peers 5-7)  not succeeded {m['failed']}"
        )
        print(
            f"   per job: start -> end as the coordinator saw it {m['mean_run']:.3f} s (sleep 1); "
            f"idle GPU time between jobs {m['mean_gap'] * 1e3:.0f} ms; GPU busy {m['utilization'] * 100:.1f}%"
        )

    if "reclaim" in chosen:
        rc = bench_reclaim(args.reclaim_jobs, args.reclaims)
        leftover += rc["leftover"]
        beyond = [t - GRACE_S for t in rc["totals"]]
        med = statistics.median(beyond)
        nodes = " + ".join(RECLAIM_NODES[rc["borrowed"]].values())
        print(
            f"\n3. reclaim of {rc['borrowed']} borrowed 1-GPU jobs by a {rc['borrowed']}x1 lender gang "
            f"({args.reclaims} tries; grace {GRACE_S} s, victims ignore SIGTERM; nodes {nodes})"
        )
        print(
            f"   submit -> last lender rank start: median {ms(statistics.median(rc['totals']))}; beyond grace "
            f"median {ms(med)}  max {ms(max(beyond))}  ({', '.join(f'{b * 1e3:.0f}' for b in beyond)} ms)"
        )
        print(
            f"   submit -> lender admitted (coordinator clock, includes grace): median "
            f"{ms(statistics.median(rc['admits']))}"
        )
        print(
            f"   scheduling cycles from submit to running: "
            f"{', '.join(f'{n:g}' for n in rc['cycles']) or 'not observable'}; "
            f"victims evicted per try: {', '.join(map(str, rc['evicted']))}"
        )
        print(
            f"   beyond grace / target 200 ms = {med / 0.200:.2f}   "
            f"Kueue ~1.1 s/job x {rc['borrowed']} / total = "
            f"{1.1 * rc['borrowed'] / statistics.median(rc['totals']):.0f}x"
        )

    if "spread-nodes" in chosen:
        sn = bench_spread_nodes(args.rounds)
        leftover += sn["leftover"]
        p50, p90 = percentile(sn["spread"], 0.5), percentile(sn["spread"], 0.9)
        print(
            f"\n4. rank start spread of a 4x2 gang over two 4-GPU nodes, two ranks on each ({args.rounds} rounds; "
            f"coordinator + 2 agents; load average {Path('/proc/loadavg').read_text().split()[0]})"
        )
        print(
            f"   last rank start - first rank start: p50 {ms(p50)}  p90 {ms(p90)}  max {ms(max(sn['spread']))}; "
            f"p50 / target 10 ms = {p50 / 0.010:.2f}"
        )

    print(f"\nwall time {time.monotonic() - started:.0f} s; leftover processes killed at cleanup: {leftover}")


if __name__ == "__main__":
    main()
