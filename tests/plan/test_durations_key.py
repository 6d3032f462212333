"""The scenario key ``durations``: one run time per array task (written by ``history --export``)."""

from __future__ import annotations

from typing import Any

import pytest
from labgang.launcher.simulate import ScenarioError, Simulation, parse_scenario


def scenario(**sweep: Any) -> dict[str, Any]:
    return {
        "scenario": {"name": "d"},
        "nodes": [{"name": "n", "gpus": 1}],
        "queues": [{"name": "q", "nominal": {"gpu": 1}}],
        "jobs": [{"id": "s", "queue": "q", "array": "0,2,5", **sweep}],
    }


def test_each_task_runs_its_own_time() -> None:
    sim = Simulation(parse_scenario(scenario(durations=[10, "1m", 5])))
    while sim.next_time() is not None:
        sim.run_instant()
    ends = {name: job.end_time for name, job in sim.jobs.items()}
    assert ends == {"s_0": 10.0, "s_2": 70.0, "s_5": 75.0}


@pytest.mark.parametrize(
    ("keys", "problem"),
    [
        ({"durations": [1, 2]}, "jobs[0] ('s').durations: 2 run times for 3 array tasks; allowed: one per task"),
        ({"durations": [1, 2, 3], "duration": 4}, "give either duration or durations, not both"),
        ({"durations": [1, -2, 3]}, "jobs[0] ('s').durations[1]: Input should be greater than or equal to 0"),
    ],
)
def test_bad_durations(keys: dict[str, Any], problem: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario(**keys))
    assert any(problem in line for line in err.value.problems), err.value.problems


def test_durations_only_with_array() -> None:
    data = scenario(durations=[1])
    del data["jobs"][0]["array"]
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data)
    assert err.value.problems == ["jobs[0] ('s').durations: only allowed with array; use duration"]
