"""``hold`` and ``release`` in scenario files (docs/scenarios.md): a held job is pending with
reason ``held`` until its ``release``, and a ``release`` that cannot mean anything is one line."""

from __future__ import annotations

from typing import Any

import pytest
from labgang.launcher.simulate import ScenarioError, Simulation, parse_scenario


def doc(*jobs: dict[str, Any]) -> dict[str, Any]:
    return {
        "scenario": {"name": "t"},
        "nodes": [{"name": "n1", "gpus": 4}],
        "queues": [{"name": "q", "nominal": {"gpu": 4}}],
        "jobs": [{"queue": "q", **j} for j in jobs],
    }


@pytest.mark.parametrize(
    "job,line",
    [
        ({"id": "a", "release": 5}, "jobs[0] ('a'): release is when a held job is released: it needs hold = true"),
        (
            {"id": "a", "hold": True, "submit": 9, "release": 5},
            "jobs[0] ('a'): release (5) must not be before the job is submitted (9)",
        ),
        ({"id": "a", "hold": True, "running": True}, "jobs[0] ('a'): a running job cannot be held"),
    ],
)
def test_a_release_that_means_nothing_is_one_line(job: dict[str, Any], line: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc(job))
    (found,) = info.value.problems
    assert found.startswith(line), found


def test_a_held_job_waits_with_reason_held_until_released() -> None:
    sim = Simulation(parse_scenario(doc({"id": "a", "hold": True, "release": 5, "duration": 1})))
    while (t := sim.next_time()) is not None and t < 4:
        sim.run_instant()
    assert sim.next_time() == 5
    record = sim.jobs["a"].record
    assert (record.status.state.value, record.status.reason_code) == ("pending", "held")
    while sim.next_time() is not None:
        sim.run_instant()
    assert record.status.state.value == "succeeded" and record.status.start_time == 5
    assert [h.event for h in record.history][:3] == ["submitted", "held", "released"]
