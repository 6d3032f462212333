"""Fair-sharing admission order in cohort trees, table-driven: cases of Kueue's
TestScheduleForFairSharing (pkg/scheduler/scheduler_fs_test.go, "hierarchical nominal-first")
translated to GPUs; the row's list is what the first cycle admits."""

from __future__ import annotations

from typing import Any

import pytest
from labgang.launcher.simulate import Simulation, parse_scenario


def Q(name: str, cohort: str, nominal: int) -> dict[str, Any]:
    return {"name": name, "cohort": cohort, "nominal": {"gpu": nominal}}


def first_admissions(
    queues: list[dict[str, Any]],
    cohorts: list[dict[str, Any]],
    running: list[tuple[str, str, int]],
    pending: list[tuple[str, str, int]],
) -> list[str]:
    jobs: list[dict[str, Any]] = [
        {"id": n, "queue": q, "gpus_per_worker": g, "submit": -10.0, "running": True} for n, q, g in running
    ]
    jobs += [{"id": n, "queue": q, "gpus_per_worker": g, "submit": 0.0} for n, q, g in pending]
    doc = {
        "scenario": {"name": "kueue-fs", "fair_sharing": True},
        "nodes": [{"name": "n1", "gpus": 64}],
        "queues": queues,
        "cohorts": cohorts,
        "jobs": jobs,
    }
    sim = Simulation(parse_scenario(doc))
    results: list[Any] = []
    sim.add_cycle_hook(lambda snap, res: results.append(res))
    sim.run_instant()
    return [a.job_id for a in results[0].admitted]


CASES = [
    pytest.param(
        [Q("cq-a", "Cohort-A", 0), Q("cq-b", "Cohort-B", 5), Q("cq-c", "Cohort-B", 0)],
        [
            {"name": "root"},
            {"name": "Cohort-A", "parent": "root", "nominal": {"gpu": 10}},
            {"name": "Cohort-B", "parent": "root"},
        ],
        [("c0", "cq-c", 10)],
        [("wl-b", "cq-b", 5), ("wl-a", "cq-a", 5)],
        ["wl-a"],
        id="prefers non-borrowing subtree",
    ),
    pytest.param(
        [Q("cq-a", "SUB-A", 0), Q("cq-b", "Cohort-B", 5), Q("cq-c", "Cohort-B", 0)],
        [
            {"name": "root"},
            {"name": "Cohort-A", "parent": "root"},
            {"name": "SUB-A", "parent": "Cohort-A", "nominal": {"gpu": 10}},
            {"name": "Cohort-B", "parent": "root"},
        ],
        [("c0", "cq-c", 10)],
        [("wl-b", "cq-b", 5), ("wl-a", "cq-a", 5)],
        ["wl-a"],
        id="deeper nesting",
    ),
    pytest.param(
        [Q("cq-a1", "Cohort-A", 5), Q("cq-a2", "Cohort-A", 3), Q("cq-b", "Cohort-B", 5), Q("cq-c", "Cohort-B", 3)],
        [
            {"name": "root"},
            {"name": "Cohort-A", "parent": "root", "nominal": {"gpu": 10}},
            {"name": "Cohort-B", "parent": "root", "nominal": {"gpu": 10}},
        ],
        [("a2-admitted", "cq-a2", 6), ("c-admitted", "cq-c", 20)],
        [("wl-b", "cq-b", 4), ("wl-a1", "cq-a1", 7)],
        ["wl-a1"],
        id="mixed queue and cohort quotas",
    ),
]


@pytest.mark.parametrize("queues,cohorts,running,pending,want", CASES)
def test_tournament_admits_like_kueue(
    queues: list[dict[str, Any]],
    cohorts: list[dict[str, Any]],
    running: list[tuple[str, str, int]],
    pending: list[tuple[str, str, int]],
    want: list[str],
) -> None:
    assert first_admissions(queues, cohorts, running, pending) == want
