"""Per-job outcomes of a simulation run, for the differential test of the engine's speed work
(``test_engine_unchanged.py``): what a change that must not change any decision compares.

:func:`digest` runs a scenario document to its end and returns, per job (the file's names),
``[first admit, end, [waits...], preempted]`` (seconds, rounded to microseconds; None where it
never happened), the number of scheduling cycles, and a SHA-256 of the whole ``--trace`` (every
admission, placement, preemption, requeue and pending reason, in order).
:func:`varied_histories` gives seeded synthetic histories with gangs, arrays (``%N`` caps),
priorities, preemption, dependencies, cohorts with borrowing limits and grace periods.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from labgang.launcher.simulate.engine import Simulation
from labgang.launcher.simulate.scenario import parse_scenario


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 6)


def digest(data: dict[str, Any], source: str = "<digest>") -> dict[str, Any]:
    """Run ``data`` (a scenario document) to its end; returns ``{"jobs": {id: [admit, end,
    waits, preempted]}, "cycles": int, "trace_sha256": str, "events": int}``."""
    h = hashlib.sha256()
    count = 0

    def trace(event: dict[str, Any]) -> None:
        nonlocal count
        count += 1
        h.update(json.dumps(event, sort_keys=True, default=str).encode())
        h.update(b"\n")

    sim = Simulation(parse_scenario(data, source), trace=trace)
    while sim.next_time() is not None:
        sim.run_instant()
    jobs = {
        j.id: [_r(j.first_admit), _r(j.end_time), [_r(w) for w in j.waits], bool(j.preempted)]
        for j in sim.jobs.values()
    }
    return {"jobs": jobs, "cycles": sim.cycles, "trace_sha256": h.hexdigest(), "events": count}


def varied_history(seed: int, n: int = 150, nodes: int = 6) -> dict[str, Any]:
    """A seeded history of about ``n`` submissions on ``nodes`` 8-GPU nodes, over-loaded, in
    three queues (two in a cohort with a borrowing limit, reclaim and within-queue preemption,
    one alone with strict FIFO and starvation reservation)."""
    rng = random.Random(seed)
    gpus = nodes * 8
    jobs: list[dict[str, Any]] = []
    t = 0.0
    for i in range(n):
        queue = rng.choice(["a", "a", "b", "c"])
        kind = rng.random()
        job: dict[str, Any] = {"id": f"j{i}", "queue": queue, "priority": rng.choice([0, 0, 0, 5, 10])}
        run = rng.uniform(20, 400)
        if kind < 0.45:
            job["gpus_per_worker"] = rng.choice([1, 1, 2, 4])
        elif kind < 0.65:
            job.update(workers=rng.choice([2, 3, 4]), gpus_per_worker=rng.choice([2, 4, 8]))
            if rng.random() < 0.3:
                job["nodes"] = job["workers"]
        elif kind < 0.8:
            lo = rng.randint(0, 3)
            job["array"] = f"{lo}-{lo + rng.randint(1, 6)}" + (f"%{rng.randint(1, 3)}" if rng.random() < 0.6 else "")
            job["gpus_per_worker"] = rng.choice([1, 2])
        elif kind < 0.92 and jobs:
            dep = rng.choice(jobs[-10:])["id"]
            job["dependency"] = f"{rng.choice(['afterok', 'afterany', 'afternotok'])}:{dep}"
            job["gpus_per_worker"] = rng.choice([1, 2])
        else:
            job.update(gpus_per_worker=8, priority=10)
        if rng.random() < 0.3:
            job["grace"] = round(rng.uniform(0, 30), 3)
        job["duration"] = round(run, 3)
        job["submit"] = round(t, 3)
        t += rng.expovariate(1.0) * run * 3 / gpus
        jobs.append(job)
    return {
        "scenario": {"name": f"varied-{seed}"},
        "nodes": [{"name": f"n{k}", "gpus": 8} for k in range(nodes)],
        "queues": [
            {
                "name": "a", "cohort": "lab", "nominal": {"gpu": gpus // 2}, "borrowing_limit": {"gpu": gpus // 4},
                "within_queue": "lower-priority", "reclaim_within_cohort": "any",
            },
            {
                "name": "b", "cohort": "lab", "nominal": {"gpu": gpus // 4},
                "within_queue": "lower-or-newer-equal-priority", "reclaim_within_cohort": "lower-priority",
                "borrow_within_cohort": {"policy": "lower-priority"},
            },
            {"name": "c", "nominal": {"gpu": gpus // 4}, "queueing": "strict-fifo", "starvation_after": 600.0},
        ],
        "jobs": jobs,
    }  # fmt: skip


def scenario_files() -> list[str]:
    """The scenario files kept under tests/ (relative to the repository root, sorted)."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    found = [*(root / "tests/fixtures/scenarios").rglob("*.toml"), *(root / "tests/scenarios/cases").rglob("*.toml")]
    return sorted(str(p.relative_to(root)) for p in found)
