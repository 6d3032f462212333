"""``labgang simulate`` carries a job of groups' success policy where it changes timing (issue 27):
``[[jobs.groups]]`` ``duration`` gives a group its own run time, and ``success_policy =
"group:NAME"`` ends the job when that group's ranks end (the others stopped with the grace), as
the coordinator's lifecycle does (docs/group-lifecycle.md)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from labgang.launcher.lifecycle.states import JobState
from labgang.launcher.simulate import engine
from labgang.launcher.simulate.scenario import ScenarioError, parse_scenario

CASE = Path(__file__).resolve().parents[1] / "scenarios/cases/groups/success-policy-ends-the-job-with-its-launcher.toml"


def finish(data: dict) -> engine.Simulation:
    sim = engine.Simulation(parse_scenario(data))
    while sim.next_time() is not None:
        sim.run_instant()
    return sim


def test_the_job_succeeds_when_its_launcher_group_ends_and_its_workers_are_stopped() -> None:
    sim = finish(tomllib.loads(CASE.read_text()))
    mpi = sim.jobs["mpi"].record
    assert mpi.status.state is JobState.SUCCEEDED
    assert mpi.status.end_time == 7.0  # the launcher's 5 s, then the workers' 2 s grace
    assert sim.jobs["next"].record.status.start_time == 7.0


def test_with_policy_any_the_first_group_to_end_ends_the_job() -> None:
    data = tomllib.loads(CASE.read_text())
    data["jobs"][0]["success_policy"] = "any"
    data["jobs"][0]["groups"][0]["duration"] = 9.0
    data["jobs"][0]["groups"][1]["duration"] = 3.0  # the workers end first now
    sim = finish(data)
    mpi = sim.jobs["mpi"].record
    assert mpi.status.state is JobState.SUCCEEDED and mpi.status.end_time == 5.0


def test_a_success_policy_naming_no_group_is_refused() -> None:
    data = tomllib.loads(CASE.read_text())
    data["jobs"][0]["success_policy"] = "group:leader"
    with pytest.raises(ScenarioError, match=r"success_policy: .*leader"):
        parse_scenario(data)
