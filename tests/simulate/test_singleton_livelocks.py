"""Three workloads on which ``singleton`` and preemption used to loop forever at one instant:
a released ``singleton`` job kept a job of its name out of the cycles (``DependencyRules.admissible``),
was admitted in its place, preempted by it at once, requeued, and released again. Found by
``test_sim_matches_coordinator.py`` under the explore profile; both drivers must now settle, and
agree. The rule (launcher/lifecycle/dependents.py): a ``singleton`` job waits while a job of its
name waits for the victims it preempted, and such a preemptor is never kept out of a cycle."""

from __future__ import annotations

from typing import Any

import pytest

from tests.simulate.test_sim_matches_coordinator import coordinate, simulate

SINGLETON_TASKS_TAKE_TURNS: dict[str, Any] = {
    "scenario": {"name": "singleton_tasks_take_turns"},
    "nodes": [
        {"name": "n0", "gpus": 3, "model": "NVIDIA A100-SXM4-80GB"},
        {"name": "n1", "gpus": 2, "model": "NVIDIA A100-SXM4-80GB"},
    ],
    "queues": [
        {
            "name": "q0",
            "nominal": {"gpu": 2},
            "within_queue": "never",
            "queueing": "best-effort-fifo",
            "cohort": "lab",
            "reclaim_within_cohort": "lower-priority",
            "borrowing_limit": {"gpu": 2},
        },
        {
            "name": "q1",
            "nominal": {"gpu": 4},
            "within_queue": "lower-priority",
            "queueing": "strict-fifo",
            "cohort": "lab",
            "reclaim_within_cohort": "any",
            "borrowing_limit": {"gpu": 1},
        },
    ],
    "jobs": [
        {
            "id": "1",
            "queue": "q0",
            "workers": 1,
            "gpus_per_worker": 1,
            "priority": 0,
            "submit": 1.0,
            "duration": 8.0,
            "grace": 2.0,
            "name": "a",
            "array": "0-1",
        },
        {
            "id": "3",
            "queue": "q1",
            "workers": 2,
            "gpus_per_worker": 2,
            "priority": 0,
            "submit": 3.0,
            "duration": 20.0,
            "grace": 0.0,
            "name": "a",
            "array": "0-1",
            "dependency": "afterany:1_0",
        },
        {
            "id": "5",
            "queue": "q0",
            "workers": 1,
            "gpus_per_worker": 1,
            "priority": 0,
            "submit": 5.0,
            "duration": 20.0,
            "grace": 0.0,
            "name": "b",
            "array": "0-3%1",
            "dependency": "afternotok:1_0",
        },
        {
            "id": "9",
            "queue": "q0",
            "workers": 2,
            "gpus_per_worker": 2,
            "priority": 2,
            "submit": 6.0,
            "duration": 9.0,
            "grace": 10.0,
            "name": "a",
        },
        {
            "id": "10",
            "queue": "q1",
            "workers": 1,
            "gpus_per_worker": 2,
            "priority": 1,
            "submit": 6.0,
            "duration": 14.0,
            "grace": 0.0,
            "name": "a",
            "array": "0-4%2",
            "dependency": "singleton,after:9",
        },
        {
            "id": "15",
            "queue": "q0",
            "workers": 2,
            "gpus_per_worker": 2,
            "priority": 5,
            "submit": 6.0,
            "duration": 11.0,
            "grace": 0.0,
            "name": "a",
            "array": "0-20:10%2",
            "dependency": "singleton",
        },
        {
            "id": "18",
            "queue": "q1",
            "workers": 2,
            "gpus_per_worker": 2,
            "priority": 1,
            "submit": 9.0,
            "duration": 9.0,
            "grace": 0.0,
            "name": "a",
            "array": "0-4%2",
            "dependency": "afternotok:15?after:10_0",
        },
    ],
}

ANY_OF_SINGLETON_VICTIM: dict[str, Any] = {
    "scenario": {"name": "any_of_singleton_victim"},
    "nodes": [
        {"name": "n0", "gpus": 3, "model": "NVIDIA A100-SXM4-80GB"},
        {"name": "n1", "gpus": 2, "model": "NVIDIA A100-SXM4-80GB"},
    ],
    "queues": [
        {
            "name": "q0",
            "nominal": {"gpu": 4},
            "within_queue": "lower-or-newer-equal-priority",
            "queueing": "best-effort-fifo",
            "cohort": "lab",
            "reclaim_within_cohort": "never",
            "borrowing_limit": {"gpu": 0},
            "starvation_after": 2.0,
        }
    ],
    "jobs": [
        {
            "id": "1",
            "queue": "q0",
            "workers": 2,
            "gpus_per_worker": 2,
            "priority": 0,
            "submit": 0.0,
            "duration": 12.0,
            "grace": 0.0,
            "name": "b",
            "array": "0-2",
        },
        {
            "id": "4",
            "queue": "q0",
            "workers": 2,
            "gpus_per_worker": 1,
            "priority": 5,
            "submit": 0.0,
            "duration": 17.0,
            "grace": 0.0,
            "name": "b",
            "array": "0-20:10%2",
        },
        {
            "id": "7",
            "queue": "q0",
            "workers": 1,
            "gpus_per_worker": 1,
            "priority": 0,
            "submit": 0.0,
            "duration": 7.0,
            "grace": 0.0,
            "name": "b",
            "array": "1,3,5",
            "dependency": "after:4_10?singleton",
        },
        {
            "id": "10",
            "queue": "q0",
            "workers": 2,
            "gpus_per_worker": 1,
            "priority": 5,
            "submit": 0.0,
            "duration": 18.0,
            "grace": 10.0,
            "name": "a",
            "array": "0-4%2",
            "dependency": "afterok:1_0",
        },
        {
            "id": "15",
            "queue": "q0",
            "workers": 2,
            "gpus_per_worker": 2,
            "priority": 2,
            "submit": 0.0,
            "duration": 8.0,
            "grace": 5.0,
            "name": "a",
            "array": "0-2",
            "dependency": "afterok:10",
        },
        {
            "id": "18",
            "queue": "q0",
            "workers": 1,
            "gpus_per_worker": 1,
            "priority": 5,
            "submit": 0.0,
            "duration": 20.0,
            "grace": 5.0,
            "name": "b",
            "array": "0-4%2",
        },
    ],
}

PREEMPTED_BY_ITS_NAME: dict[str, Any] = {
    "scenario": {"name": "preempted_by_its_name"},
    "nodes": [{"name": "n0", "gpus": 2}],
    "queues": [{"name": "q0", "nominal": {"gpu": 2}, "within_queue": "lower-priority"}],
    "jobs": [
        {
            "id": "1",
            "queue": "q0",
            "workers": 1,
            "gpus_per_worker": 2,
            "grace": 0.0,
            "priority": 5,
            "submit": 0.0,
            "duration": 5.0,
        },
        {
            "id": "2",
            "queue": "q0",
            "workers": 1,
            "gpus_per_worker": 2,
            "grace": 0.0,
            "priority": 0,
            "name": "b",
            "dependency": "singleton",
            "submit": 0.0,
            "duration": 5.0,
        },
        {
            "id": "3",
            "queue": "q0",
            "workers": 1,
            "gpus_per_worker": 2,
            "grace": 0.0,
            "name": "b",
            "priority": 5,
            "submit": 1.0,
            "duration": 5.0,
        },
    ],
}
"""Singleton job 2 (name b) is admitted when 1 ends at 5 and preempted at once by 3 (same name,
priority 5): 3 runs 5-10, then 2 runs 10-15."""


@pytest.mark.parametrize(
    "doc",
    [PREEMPTED_BY_ITS_NAME, SINGLETON_TASKS_TAKE_TURNS, ANY_OF_SINGLETON_VICTIM],
    ids=lambda d: d["scenario"]["name"],
)
def test_singleton_jobs_and_their_preemptors_settle_and_both_drivers_agree(doc: dict[str, Any]) -> None:
    sim_histories, sim_outcomes = simulate(doc)  # raised "the scheduler kept deciding new things" before
    histories, outcomes, refused = coordinate(doc)
    assert not refused
    assert histories == sim_histories and outcomes == sim_outcomes


def test_the_singleton_job_preempted_by_its_name_runs_after_its_preemptor() -> None:
    histories, outcomes = simulate(PREEMPTED_BY_ITS_NAME)
    admitted = {job: [t for t, e, _ in histories[job] if e == "admitted"] for job in ("2", "3")}
    assert admitted == {"2": [5.0, 10.0], "3": [5.0]}, admitted
    assert outcomes["2"][0] == outcomes["3"][0] == "succeeded"
