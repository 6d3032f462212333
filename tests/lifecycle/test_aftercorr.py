"""``aftercorr``: each task of a job array waits for the task of the named array with its own
index (launcher/lifecycle/dependency.py ``for_task``), in the simulation as in the coordinator."""

from __future__ import annotations

from labgang.launcher.lifecycle.dependency import (
    Condition,
    DependencyKind,
    for_task,
    parse_dependency,
    task_dependency,
)
from labgang.launcher.simulate import parse_scenario, run_scenario


def test_aftercorr_parses_and_becomes_afterok_on_the_same_index():
    dep = parse_dependency("aftercorr:12,afterany:7")
    assert dep.corresponding and dep.text == "aftercorr:12,afterany:7"
    assert for_task(dep, 3).conditions == (
        Condition(DependencyKind.AFTEROK, "12_3"),
        Condition(DependencyKind.AFTERANY, "7"),
    )
    assert task_dependency("aftercorr:12", 0) == "afterok:12_0"
    assert task_dependency("afterok:12", 5) == "afterok:12"  # nothing per task: unchanged
    assert task_dependency(None, 5) is None


def test_in_a_simulation_each_task_waits_only_for_its_counterpart():
    scenario = parse_scenario(
        {
            "scenario": {"name": "aftercorr"},
            "nodes": [{"name": "n1", "gpus": 4}],
            "queues": [{"name": "q", "nominal": {"gpu": 4}}],
            "jobs": [
                {"id": "prep", "queue": "q", "array": "0-1", "duration": 10.0},
                {"id": "train", "queue": "q", "array": "0-1", "dependency": "aftercorr:prep", "duration": 5.0},
            ],
            "expect": [
                {"at": 0.0, "running": ["prep"], "pending": ["train"]},
                {"at": 10.0, "running": ["train"]},
                {"at": 15.0, "finished": ["prep", "train"]},
            ],
        }
    )
    report = run_scenario(scenario)
    assert report.ok, report.failures


def test_after_with_minutes_parses_and_keeps_its_spelling():
    dep = parse_dependency("after:12+5:13,afterok:14")
    assert dep.conditions[0] == Condition(DependencyKind.AFTER, "12", 300.0)
    assert dep.conditions[1] == Condition(DependencyKind.AFTER, "13")
    assert dep.text == "after:12+5:13,afterok:14" and parse_dependency(dep.text) == dep


def test_after_plus_minutes_waits_that_long_after_the_start_in_a_simulation():
    scenario = parse_scenario(
        {
            "scenario": {"name": "after-delay"},
            "nodes": [{"name": "n1", "gpus": 4}],
            "queues": [{"name": "q", "nominal": {"gpu": 4}}],
            "jobs": [
                {"id": "server", "queue": "q", "submit": 10.0, "duration": 1000.0},
                {"id": "client", "queue": "q", "submit": 10.0, "dependency": "after:server+2", "duration": 5.0},
            ],
            "expect": [
                {"at": 10.0, "running": ["server"], "pending": ["client"]},
                {"at": 129.0, "pending": ["client"]},  # started at 10: holds from 10 + 2 min
                {"at": 130.0, "running": ["server", "client"]},
            ],
        }
    )
    report = run_scenario(scenario)
    assert report.ok, report.failures


def test_a_scenario_job_without_array_may_not_use_aftercorr():
    import pytest
    from labgang.launcher.simulate import ScenarioError

    with pytest.raises(ScenarioError) as caught:
        parse_scenario(
            {
                "scenario": {"name": "bad"},
                "nodes": [{"name": "n1", "gpus": 1}],
                "queues": [{"name": "q", "nominal": {"gpu": 1}}],
                "jobs": [
                    {"id": "prep", "queue": "q", "array": "0-1"},
                    {"id": "one", "queue": "q", "dependency": "aftercorr:prep"},
                ],
            }
        )
    assert caught.value.problems == [
        "jobs[1] ('one').dependency: 'aftercorr:prep': aftercorr is for a job array (each task waits for the "
        "task with its own index); allowed: aftercorr with array, or afterok:ID for one job"
    ]
