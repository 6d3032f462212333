"""Scheduler scale benchmark: cycle time and admission rate as the cluster grows.

Cluster: N nodes x 8 GPUs, one node in 8 with its GPUs in MIG mode (7 x 1g.10gb each);
20 queues in 4 cohorts (nominal quota split evenly, borrowing allowed, mixed preemption
policies, one strict-fifo queue per cohort); 10,000 pending gangs of 1-16 ranks x 1-8 GPUs
(one in ten asks for 1g.10gb MIG devices), mixed priorities, random durations.

The run uses ``labgang simulate``'s engine (the real :func:`run_cycle`) and times every
cycle: the first one (empty cluster, thousands of admissions) separately, then the steady
state where each job exit triggers cycles over the full pending backlog.

With ``--fair``: fair sharing on, and the 20 queues sit in a tree of cohorts 4 levels deep
(one root, 2 organisations, 4 departments, 8 labs; the labs own a share of the quota, the
departments have borrowing limits, weights vary), so every admission is a tournament down
the tree and every preemption search is a fair-sharing one.

With ``--topology`` every full-GPU node gets the topology of a DGX-1-style V100 box (the
hybrid cube-mesh of ``tests/fixtures/real-topology/v100-8gpu-dgx1-cube-mesh-1nic.txt``: NV1/NV2
links, two NUMA nodes) and one multi-GPU single-node gang in five requires a level (``nvlink``,
``pcie-switch``, ``numa`` or ``node`` in turn), so placement runs its topology search.

With ``--array N`` the cycle of a real in-process coordinator (its store, lifecycle model and
snapshot building; the scenario's nodes, no agents) is timed with the same backlog three ways at
each size: without a job array, with an array of N one-GPU tasks fed in full to every cycle, and
with the coordinator's array gate (``launcher/lifecycle/arrays.py``: the window, and the ``%N``
cap with ``--array-limit``) choosing what each cycle sees, its own cost included.

With ``--host`` every node offers 128 CPUs and 1 TiB of memory to jobs, one full-GPU gang in
three asks ``cpus_per_task`` 8-48 and one in five ``mem`` 64-512G, so placement caps ranks
per node by host resources (docs/host-resources.md); the p50 ratio against the same run
without ``--host`` is printed.

With ``--groups`` one job in three becomes a job of groups (docs/job-groups.md): its ranks split
into 2-4 groups of the same GPUs per rank (a job of one rank gets a deviceless launcher group
instead, as MPI's), so each needs what it needed before, admitted all or nothing; the p50/p99
ratio against the same backlog with one group per job is printed (target: p99 < 100 ms).

With ``--shares`` ``[sharing]`` gives 4 shards per card and MPS on every node, queues alternate
``share_gpus = "queue"`` and ``"user"``, and one job in three (a job that would ask for whole GPUs)
asks for a share of one card instead: 1-3 shards, or 25/50 % through MPS (docs/sharing.md). The
p50/p99 ratios against the same backlog with those jobs as one-GPU jobs are printed.

Usage::

    python bench/scheduler_scale.py [--nodes 100,300,1000] [--jobs 10000] [--cycles 300] [--seed 1]
                                    [--topology] [--fair] [--array 10000 [--array-limit N]] [--host] [--shares]

Prints p50/p99 cycle time (ms) and admissions per second for each cluster size, and the
growth ratio against the smallest size. Target: p99 < 100 ms at 1,000 nodes.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import statistics
import time
from typing import Any

from labgang.launcher.scheduler.snapshot import DeviceLink, Node, Snapshot
from labgang.launcher.simulate import engine
from labgang.launcher.simulate.scenario import parse_scenario

# DGX-1 hybrid cube-mesh (tests/fixtures/real-topology/v100-8gpu-dgx1-cube-mesh-1nic.txt): pair -> NVLinks
CUBE_MESH = {
    (0, 1): 1, (0, 2): 1, (0, 3): 2, (0, 4): 2, (1, 2): 2, (1, 3): 1, (1, 5): 2, (2, 3): 2,
    (2, 6): 1, (3, 7): 1, (4, 5): 1, (4, 6): 1, (4, 7): 2, (5, 6): 2, (5, 7): 1, (6, 7): 2,
}  # fmt: skip
LEVELS = ("nvlink", "pcie-switch", "numa", "node")

COHORTS = 4
QUEUES = 20


def build(
    nodes: int, jobs: int, seed: int, fair: bool = False, host: bool = False, groups: bool = False, shares: int = 0
) -> dict:
    """A scenario document (docs/scenarios.md) for the benchmark; ``fair``: fair sharing over a
    4-level cohort tree; ``host``: host CPUs and memory on nodes and in some jobs; ``groups``: one
    full-GPU job in three split into groups (same devices; the other draws unchanged); ``shares``: 1
    to share cards (one full-GPU job in three asks for a share), 2 for the same jobs asking one whole
    GPU instead (the baseline), 0 for neither (the jobs' other draws are the same in all three)."""
    rng = random.Random(seed)
    split_rng = random.Random(seed + 1)
    share_rng = random.Random(seed + 7919)  # its own stream, so the other draws do not change
    node_tables = []
    full_gpus = mig_devices = 0
    for i in range(nodes):
        if i % 8 == 7:
            node_tables.append(
                {"name": f"m{i:04d}", "gpus": 8, "mig": ["1g.10gb"] * 7, "model": "NVIDIA A100-SXM4-80GB"}
            )
            mig_devices += 56
        else:
            node_tables.append({"name": f"n{i:04d}", "gpus": 8, "model": "NVIDIA H100 80GB HBM3"})
            full_gpus += 8
    queues = []
    for q in range(QUEUES):
        cohort = q % COHORTS
        table = {
            "name": f"q{q:02d}",
            "cohort": f"c{cohort}",
            "nominal": {"gpu": full_gpus // QUEUES, "mig-1g.10gb": mig_devices // QUEUES},
            "borrowing_limit": {"gpu": full_gpus // QUEUES},
            "within_queue": ["never", "lower-priority", "lower-or-newer-equal-priority"][q % 3],
            "reclaim_within_cohort": ["never", "lower-priority", "any"][q % 3],
            "queueing": "strict-fifo" if q < COHORTS else "best-effort-fifo",
        }
        queues.append(table)
    cohorts: list[dict] = []
    if fair:
        labs = 8
        cohorts.append({"name": "root"})
        cohorts += [{"name": f"org{i}", "parent": "root", "fair_weight": 1.0 + i} for i in range(2)]
        cohorts += [
            {"name": f"dept{i}", "parent": f"org{i // 2}", "borrowing_limit": {"gpu": full_gpus // 2}} for i in range(4)
        ]
        cohorts += [
            {
                "name": f"lab{i}",
                "parent": f"dept{i // 2}",
                "nominal": {"gpu": full_gpus // (4 * labs)},
                "fair_weight": [0.5, 1.0, 2.0][i % 3],
            }
            for i in range(labs)
        ]
        for q, table in enumerate(queues):
            table["cohort"] = f"lab{q % labs}"
            table["nominal"] = {"gpu": 3 * full_gpus // (4 * QUEUES), "mig-1g.10gb": mig_devices // QUEUES}
            table["fair_weight"] = [1.0, 2.0, 0.5, 1.0][q % 4]
            table.pop("borrowing_limit", None)
    job_tables = []
    for j in range(jobs):
        table = {
            "id": f"j{j:05d}",
            "queue": f"q{rng.randrange(QUEUES):02d}",
            "priority": rng.choice([-1, 0, 0, 0, 1, 2]),
            "submit": round(rng.uniform(-600, 0), 3),
            "duration": round(rng.uniform(30, 600), 3),
        }
        if rng.random() < 0.1:
            table["workers"] = rng.randint(1, 8)
            table["mig"] = "1g.10gb"
        else:
            workers = rng.choice([1, 1, 1, 2, 2, 4, 8, 16])
            table["workers"] = workers
            table["gpus_per_worker"] = rng.choice([1, 2, 4, 8] if workers <= 2 else [1, 2])
            if host and j % 3 == 0:
                table["cpus_per_task"] = rng.choice([8, 16, 32, 48])
            if host and j % 5 == 0:
                table["mem"] = rng.choice(["64G", "128G", "512G"])
            if groups and j % 3 == 0:
                _split(table, split_rng)
            if shares and j % 3 == 1:
                table["workers"] = 1
                table.pop("gpus_per_worker", None)
                kind = share_rng.choice(["shards", "shards", "mps"])
                amount = share_rng.choice([1, 1, 2, 3] if kind == "shards" else [25, 50])
                if shares == 1:
                    table[kind] = amount
                table["user"] = f"u{share_rng.randrange(40)}"
        job_tables.append(table)
    if host:
        for node in node_tables:
            node["cpus"], node["memory"] = 128, "1T"
    if shares:
        for q, table in enumerate(queues):
            table["share_gpus"] = "queue" if q % 2 == 0 else "user"
    doc = {"scenario": {"name": f"scale-{nodes}"}, "nodes": node_tables, "queues": queues, "jobs": job_tables}
    if shares == 1:
        doc["sharing"] = {"shards_per_gpu": 4, "mps": True}
    if fair:
        doc["scenario"]["fair_sharing"] = True
        doc["cohorts"] = cohorts
    return doc


def _split(table: dict, rng: random.Random) -> None:
    """Make a one-group job table a job of 2-4 groups needing the same devices: its ranks cut into
    groups of the same GPUs per rank, or (one rank) a deviceless launcher group before it."""
    workers, per = table.pop("workers"), table.pop("gpus_per_worker")
    host = {k: table.pop(k) for k in ("cpus_per_task", "mem") if k in table}
    if workers == 1:
        parts = [1]
        groups = [{"name": "launcher", "workers": 1, "gpus_per_worker": 0}]
    else:
        k = rng.randint(2, min(4, workers))
        cuts = sorted(rng.sample(range(1, workers), k - 1))
        parts = [b - a for a, b in zip([0, *cuts], [*cuts, workers], strict=True)]
        groups = []
    groups += [{"name": f"g{i}", "workers": n, "gpus_per_worker": per, **host} for i, n in enumerate(parts)]
    table["groups"] = groups


def with_topology(node: Node) -> Node:
    """``node`` with the cube-mesh links and two NUMA nodes on its first 8 full GPUs."""
    gpus = [d for d in node.devices if d.resource == "gpu"][:8]
    if len(gpus) < 8:
        return node
    numa = {d.uuid: f"numa{i // 4}" for i, d in enumerate(gpus)}
    devices = tuple(dataclasses.replace(d, numa=numa.get(d.uuid, "")) for d in node.devices)
    links = []
    for a in range(8):
        for b in range(a + 1, 8):
            n = CUBE_MESH.get((a, b), 0)
            pcie = "SYS" if a // 4 != b // 4 else ("" if n else "NODE")
            links.append(DeviceLink(gpus[a].uuid, gpus[b].uuid, n, pcie))
    return Node(node.name, devices, tuple(links))


class TopologyAdder:
    """Adds topology to a snapshot's nodes (one converted tuple per nodes tuple, so the scheduler's
    layout memo still hits) and a required level to one multi-GPU single-node gang in five."""

    def __init__(self) -> None:
        self.source: Any = None
        self.nodes: tuple[Node, ...] = ()

    def __call__(self, snap: Snapshot) -> Snapshot:
        if snap.nodes is not self.source:
            self.source, self.nodes = snap.nodes, tuple(with_topology(n) for n in snap.nodes)
        pending = []
        for job in snap.pending:
            req = job.request
            if req.resource == "gpu" and req.per_worker > 1 and req.total <= 8 and int(job.id[1:]) % 5 == 0:
                level = LEVELS[int(job.id[1:]) // 5 % 4]
                job = dataclasses.replace(job, request=dataclasses.replace(req, topology=level))
            pending.append(job)
        return dataclasses.replace(snap, nodes=self.nodes, pending=tuple(pending))


ARRAY_QUEUE = "q05"


def coordinator_cycles(doc: dict, array: int, limit: int | None, mode: str, cycles: int) -> list[float]:
    """CPU seconds of ``cycles`` steady-state cycles of a real in-process coordinator (SQLite store,
    lifecycle model, ``gated_snapshot`` + ``run_cycle`` + ``follow_reasons`` + the model applying the
    result) holding ``doc``'s backlog and, unless ``mode`` is "no array", a job array of ``array``
    one-GPU tasks. ``mode`` "all fed" turns the array gate off (every pending task reaches every
    cycle); "gated" is the coordinator as it is. The nodes are the scenario's (no agents run)."""
    import asyncio
    import tempfile

    from labgang.launcher.arrays import ArraySpec
    from labgang.launcher.config.cluster import parse_config
    from labgang.launcher.coordinator import arrays, scheduling
    from labgang.launcher.coordinator.core import Coordinator
    from labgang.launcher.coordinator.requests import Caller, build_spec
    from labgang.launcher.coordinator.store import Store
    from labgang.launcher.lifecycle import driver as lifecycle_driver
    from labgang.launcher.lifecycle import events as ev
    from labgang.launcher.lifecycle.arrays import ArrayGate, follow_reasons
    from labgang.launcher.lifecycle.records import JobStatus
    from labgang.launcher.lifecycle.states import JobState
    from labgang.launcher.scheduler.cycle import run_cycle

    scenario = parse_scenario(doc)
    nodes = engine.Simulation(scenario).snapshot().nodes
    config = parse_config({"queues": doc["queues"], "default_queue": ARRAY_QUEUE})
    caller = Caller(uid=0, user="root")  # an admin: the jobs carry any priority
    saved = scheduling.cluster_nodes, lifecycle_driver.gate_pending
    scheduling.cluster_nodes = lambda agents: nodes
    if mode == "all fed":
        lifecycle_driver.gate_pending = lambda waiting, *rest: ArrayGate(tuple(waiting))
    try:
        with tempfile.TemporaryDirectory(prefix="lgb") as d:
            coord = Coordinator(config, Store(f"{d}/db", synchronous="OFF"), clock=lambda: 0.0)
            for table in doc["jobs"]:
                body = {"argv": ["x"], "queue": table["queue"], "priority": table["priority"]}
                body["workers"] = table["workers"]
                if "mig" in table:
                    body["mig"] = table["mig"]
                else:
                    body["gpus_per_worker"] = table["gpus_per_worker"]
                job = coord.store.insert_job(build_spec(body, caller, config), JobStatus(JobState.PENDING))
                coord.apply(ev.JobSubmitted(0.0, job))
            if mode != "no array":
                spec = build_spec({"argv": ["x"], "queue": ARRAY_QUEUE}, caller, config)
                arrays.insert_tasks(coord.store, coord.apply, spec, ArraySpec(tuple(range(array)), limit), 0.0)
            scheduling.run_cycles(coord.driver, coord.admissions)  # the fill: admissions on the empty cluster
            coord.store.commit()
            times = []
            for _ in range(cycles):
                c0 = time.process_time()
                snapshot, gate = scheduling.gated_snapshot(coord.driver, 0.0)
                result = follow_reasons(gate, run_cycle(snapshot))
                coord.apply(ev.CycleDecided(0.0, result))
                times.append(time.process_time() - c0)
                coord.store.commit()
            asyncio.run(coord.close())
            coord.store.close()
            return times
    finally:
        scheduling.cluster_nodes, lifecycle_driver.gate_pending = saved


def measure(
    nodes: int,
    jobs: int,
    cycles: int,
    seed: int,
    topology: bool = False,
    fair: bool = False,
    host: bool = False,
    groups: bool = False,
    shares: int = 0,
) -> dict:
    """Run the simulation until ``cycles`` cycles have been timed; return the figures."""
    scenario = parse_scenario(build(nodes, jobs, seed, fair, host, groups, shares))
    times: list[float] = []
    cpu: list[float] = []
    admitted: list[int] = []
    real = engine.run_cycle
    adder = TopologyAdder() if topology else None

    def timed(snapshot):
        if adder is not None:
            snapshot = adder(snapshot)
        c0, t0 = time.process_time(), time.perf_counter()
        result = real(snapshot)
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
        admitted.append(len(result.admitted))
        return result

    engine.run_cycle = timed
    try:
        sim = engine.Simulation(scenario)
        while sim.next_time() is not None and len(times) < cycles:
            sim.run_instant()
    finally:
        engine.run_cycle = real
    first_big = next(i for i, n in enumerate(admitted) if n > 0)
    ordered = sorted(times[first_big + 1 :] or times)
    ordered_cpu = sorted(cpu[first_big + 1 :] or cpu)

    def p99(xs: list[float]) -> float:
        return xs[min(len(xs) - 1, int(0.99 * len(xs)))] * 1e3

    return {
        "nodes": nodes,
        "cycles": len(times),
        "fill_ms": times[first_big] * 1e3,
        "fill_admitted": admitted[first_big],
        "p50_ms": statistics.median(ordered) * 1e3,
        "p99_ms": p99(ordered),
        "max_ms": ordered[-1] * 1e3,
        "cpu_p50_ms": statistics.median(ordered_cpu) * 1e3,
        "cpu_p99_ms": p99(ordered_cpu),
        "admissions_per_s": sum(admitted) / sum(times),
        "pending": len(scenario.file.jobs),
    }


def compare_host(args: argparse.Namespace) -> None:
    """p50/p99 cycle time with host CPUs and memory counted, against the same backlog without them."""
    print(f"{args.jobs} pending gangs; with host: 128 cpus and 1T per node, 1 gang in 3 asks -c, 1 in 5 --mem")
    print(f"{'nodes':>6} {'p50 ms':>7} {'p99 ms':>7} {'host p50':>8} {'host p99':>8} {'p50 x':>6} {'adm/s x':>7}")
    for n in args.nodes.split(","):
        plain = measure(int(n), args.jobs, args.cycles, args.seed, args.topology, args.fair)
        host = measure(int(n), args.jobs, args.cycles, args.seed, args.topology, args.fair, host=True)
        print(
            f"{int(n):>6} {plain['p50_ms']:>7.2f} {plain['p99_ms']:>7.2f} {host['p50_ms']:>8.2f} "
            f"{host['p99_ms']:>8.2f} {host['p50_ms'] / plain['p50_ms']:>6.2f} "
            f"{host['admissions_per_s'] / plain['admissions_per_s']:>7.2f}"
        )


def compare_groups(args: argparse.Namespace) -> None:
    """p50/p99 cycle time (wall and this process's CPU) with one job in three a job of 2-4 groups,
    against the same backlog with one group per job; x = groups / one group."""
    print(f"{args.jobs} pending gangs; with groups: 1 in 3 full-GPU gangs split into 2-4 groups (same devices)")
    head = ("nodes", "p50 ms", "p99 ms", "grp p50", "grp p99", "p50 x", "p99 x", "cpu p99", "grp cpu", "cpu x")
    print(" ".join(f"{h:>8}" for h in head))
    het: dict = {}
    for n in args.nodes.split(","):
        plain = measure(int(n), args.jobs, args.cycles, args.seed, args.topology, args.fair)
        het = measure(int(n), args.jobs, args.cycles, args.seed, args.topology, args.fair, groups=True)
        cells = (
            plain["p50_ms"],
            plain["p99_ms"],
            het["p50_ms"],
            het["p99_ms"],
            het["p50_ms"] / plain["p50_ms"],
            het["p99_ms"] / plain["p99_ms"],
            plain["cpu_p99_ms"],
            het["cpu_p99_ms"],
            het["cpu_p99_ms"] / plain["cpu_p99_ms"],
        )
        print(f"{int(n):>8} " + " ".join(f"{c:>8.2f}" for c in cells))
    verdict = "met" if het["cpu_p99_ms"] < 100 else "NOT met"
    print(f"target: p99 < 100 ms with groups -> cpu p99 {het['cpu_p99_ms']:.1f} ms ({verdict})")


def compare_shares(args: argparse.Namespace) -> None:
    """p50/p99 cycle time with one job in three a share of one card, against the same backlog with
    those jobs asking one whole GPU each (wall and this process's CPU time, ratios from one run)."""
    print(f"{args.jobs} pending jobs; with shares: 4 shards per card and MPS on every node, 1 job in 3 a share")
    print(
        f"{'nodes':>6} {'p50 ms':>7} {'p99 ms':>7} {'shr p50':>8} {'shr p99':>8} {'p50 x':>6} {'p99 x':>6} "
        f"{'cpu p50':>7} {'cpu p99':>7} {'shr cpu p50':>11} {'shr cpu p99':>11} {'cpu p99 x':>9}"
    )
    shared: dict = {}
    for n in args.nodes.split(","):
        plain = measure(int(n), args.jobs, args.cycles, args.seed, args.topology, args.fair, shares=2)
        shared = measure(int(n), args.jobs, args.cycles, args.seed, args.topology, args.fair, shares=1)
        print(
            f"{int(n):>6} {plain['p50_ms']:>7.2f} {plain['p99_ms']:>7.2f} {shared['p50_ms']:>8.2f} "
            f"{shared['p99_ms']:>8.2f} {shared['p50_ms'] / plain['p50_ms']:>6.2f} "
            f"{shared['p99_ms'] / plain['p99_ms']:>6.2f} {plain['cpu_p50_ms']:>7.2f} {plain['cpu_p99_ms']:>7.2f} "
            f"{shared['cpu_p50_ms']:>11.2f} {shared['cpu_p99_ms']:>11.2f} "
            f"{shared['cpu_p99_ms'] / plain['cpu_p99_ms']:>9.2f}"
        )
    print(
        f"target: p99 < 100 ms at {args.nodes.split(',')[-1]} nodes with shares -> wall {shared['p99_ms']:.1f} ms, "
        f"cpu {shared['cpu_p99_ms']:.1f} ms ({'met' if shared['cpu_p99_ms'] < 100 else 'NOT met'})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", default="100,300,1000")
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--cycles", type=int, default=300)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--topology", action="store_true", help="cube-mesh topology on every node, some levels required"
    )
    parser.add_argument("--fair", action="store_true", help="fair sharing over a 4-level cohort tree")
    parser.add_argument("--array", type=int, default=0, help="add a job array of this many one-GPU tasks")
    parser.add_argument("--array-limit", type=int, default=None, help="the array's %%N cap")
    parser.add_argument("--host", action="store_true", help="host CPUs and memory counted (vs. the same run without)")
    parser.add_argument("--groups", action="store_true", help="1 job in 3 a job of groups (vs. one group per job)")
    parser.add_argument("--shares", action="store_true", help="1 job in 3 a share of a card (vs. one whole GPU)")
    args = parser.parse_args()
    if args.groups:
        compare_groups(args)
        return
    if args.shares:
        compare_shares(args)
        return
    if args.array:
        compare_array(args)
        return
    if args.host:
        compare_host(args)
        return
    rows = [measure(int(n), args.jobs, args.cycles, args.seed, args.topology, args.fair) for n in args.nodes.split(",")]
    if args.topology:
        print(
            "with topology: DGX-1 cube-mesh links and 2 NUMA nodes per node; 1 in 5 small multi-GPU gangs need a level"
        )
    shape = "a 4-level cohort tree, fair sharing on" if args.fair else "4 cohorts"
    print(f"{args.jobs} pending gangs, 20 queues in {shape}, 8 GPUs per node (1 node in 8 MIG)")
    print("wall = elapsed (includes time other processes take the CPU); cpu = this process's CPU time;")
    print("fill = the first cycle on the empty cluster; percentiles over the steady-state cycles after it;")
    print("adm/s = admissions over all timed cycles / their total time")
    print(
        f"{'nodes':>6} {'cycles':>6} {'fill ms':>8} {'fill adm':>8} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>7} "
        f"{'cpu p50':>7} {'cpu p99':>7} {'adm/s':>8} {'fill adm/s':>10} {'p50 x':>6}"
    )
    base = rows[0]["p50_ms"]
    for r in rows:
        print(
            f"{r['nodes']:>6} {r['cycles']:>6} {r['fill_ms']:>8.1f} {r['fill_admitted']:>8} {r['p50_ms']:>7.2f} "
            f"{r['p99_ms']:>7.2f} {r['max_ms']:>7.2f} {r['cpu_p50_ms']:>7.2f} {r['cpu_p99_ms']:>7.2f} "
            f"{r['admissions_per_s']:>8.0f} {r['fill_admitted'] / r['fill_ms'] * 1e3:>10.0f} "
            f"{r['p50_ms'] / base:>6.2f}"
        )
    last = rows[-1]
    print(
        f"target: p99 < 100 ms at {last['nodes']} nodes -> wall p99 {last['p99_ms']:.1f} ms "
        f"({'met' if last['p99_ms'] < 100 else 'NOT met'}), cpu p99 {last['cpu_p99_ms']:.1f} ms "
        f"({'met' if last['cpu_p99_ms'] < 100 else 'NOT met'})"
    )


def compare_array(args: argparse.Namespace) -> None:
    """Time a real coordinator's cycle at each size without the array, with every task fed, and
    gated; print the ratios to the run without the array."""
    cap = "" if args.array_limit is None else f", %{args.array_limit}"
    print(f"{args.jobs} pending gangs + a job array of {args.array} one-GPU tasks ({ARRAY_QUEUE}{cap})")
    print("a real coordinator in process: snapshot from its jobs, the array gate, run_cycle, the lifecycle")
    print("model applying the result; cpu ms per steady-state cycle; x = / the same without the array")
    print(f"{'nodes':>6} {'run':>10} {'cycles':>6} {'cpu p50':>8} {'cpu p99':>8} {'p50 x':>6} {'p99 x':>6}")
    for n in (int(n) for n in args.nodes.split(",")):
        doc = build(n, args.jobs, args.seed)
        base: tuple[float, float] | None = None
        for mode in ("no array", "all fed", "gated"):
            times = sorted(coordinator_cycles(doc, args.array, args.array_limit, mode, args.cycles))
            p50, p99 = statistics.median(times) * 1e3, times[min(len(times) - 1, int(0.99 * len(times)))] * 1e3
            base = base or (p50, p99)
            print(
                f"{n:>6} {mode:>10} {len(times):>6} {p50:>8.2f} {p99:>8.2f} {p50 / base[0]:>6.2f} {p99 / base[1]:>6.2f}"
            )


if __name__ == "__main__":
    main()
