"""``begin`` in scenario files (``--begin``): the simulation's scheduler does not admit the job
before that time and wakes exactly then, as the coordinator does."""

from __future__ import annotations

from labgang.launcher.simulate import parse_scenario, run_scenario


def test_a_job_waits_for_its_begin_time_and_starts_exactly_then() -> None:
    scenario = parse_scenario(
        {
            "scenario": {"name": "begin"},
            "nodes": [{"name": "n1", "gpus": 4}],
            "queues": [{"name": "q", "nominal": {"gpu": 4}}],
            "jobs": [
                {"id": "later", "queue": "q", "begin": "10m", "duration": 5.0},
                {"id": "now", "queue": "q", "duration": 1.0},
            ],
            "expect": [
                {"at": 0.0, "running": ["now"], "pending": ["later"]},
                {"at": 599.0, "pending": ["later"]},
                {"at": 600.0, "running": ["later"]},
                {"at": 605.0, "finished": ["later", "now"]},
            ],
        }
    )
    report = run_scenario(scenario)
    assert report.ok, report.failures


def test_a_begin_time_already_past_changes_nothing() -> None:
    scenario = parse_scenario(
        {
            "scenario": {"name": "begin-past"},
            "nodes": [{"name": "n1", "gpus": 1}],
            "queues": [{"name": "q", "nominal": {"gpu": 1}}],
            "jobs": [{"id": "a", "queue": "q", "submit": 30.0, "begin": 10.0, "duration": 1.0}],
            "expect": [{"at": 30.0, "running": ["a"]}],
        }
    )
    report = run_scenario(scenario)
    assert report.ok, report.failures
