"""A simulated rank of a plain gang exiting 0, reported as one ``gone`` report with its exit
status (``engine.EXIT_REPORTS``, the replay's speed: one model event a rank), gives exactly what an
agent's two reports, ``exited`` then ``gone``, give: every job's history (time, event, message),
final state, admit/end times and waits, the whole trace and the cycle count, over random
workloads (the differential test's, with cancels, node loss, MIG, elastic gangs; its arrays and
dependencies), random jobs of groups with success policies and group durations, every scenario
kept under tests/ and the seeded varied histories."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from engine_digest import scenario_files, varied_history
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from labgang.launcher.lifecycle.states import RankPhase
from labgang.launcher.simulate import engine
from sim_runs import everything_shown

from tests.simulate.test_sim_matches_coordinator import pipelines, workloads

REPO = Path(__file__).resolve().parents[2]
AGENT = engine.AGENT_REPORTS
"""What an agent reports for a rank's exit, in order: the un-shortcut path."""


@contextmanager
def reports(phases: tuple[RankPhase, ...]) -> Iterator[None]:
    before = engine.EXIT_REPORTS
    engine.EXIT_REPORTS = phases
    try:
        yield
    finally:
        engine.EXIT_REPORTS = before


def run(doc: dict[str, Any], phases: tuple[RankPhase, ...], source: str = "<random>") -> dict[str, Any]:
    """Everything a replay or ``labgang simulate`` shows of ``doc``, its exits reported as ``phases``."""
    with reports(phases):
        return everything_shown(doc, source)


def same(doc: dict[str, Any], source: str = "<random>") -> None:
    merged, agent = run(doc, engine.EXIT_REPORTS, source), run(doc, AGENT, source)
    for job_id, want in agent["jobs"].items():
        assert merged["jobs"][job_id] == want, f"job {job_id}"
    assert merged["trace"] == agent["trace"]
    assert merged["cycles"] == agent["cycles"]


@st.composite
def group_jobs(draw: st.DrawFn) -> dict[str, Any]:
    """Jobs of groups (own durations, success policies, grace) among plain jobs that compete
    for them (priority preemption within a queue, reclaim across a cohort)."""
    queues = [
        {"name": "a", "cohort": "lab", "nominal": {"gpu": 4}, "within_queue": "lower-priority"},
        {"name": "b", "cohort": "lab", "nominal": {"gpu": 2}, "reclaim_within_cohort": "any"},
    ]
    jobs: list[dict[str, Any]] = []
    for i in range(draw(st.integers(2, 7))):
        job: dict[str, Any] = {
            "id": f"j{i}",
            "queue": draw(st.sampled_from(["a", "b"])),
            "priority": draw(st.sampled_from([0, 0, 5])),
            "submit": float(draw(st.integers(0, 10))),
            "grace": float(draw(st.sampled_from([0, 2, 5]))),
        }
        if draw(st.booleans()):
            names = ["launcher", "worker", "ps"][: draw(st.integers(2, 3))]
            job["groups"] = [
                {
                    "name": name,
                    "workers": draw(st.integers(1, 2)),
                    "gpus_per_worker": draw(st.integers(0 if k == 0 else 1, 2)),
                    **({"duration": float(draw(st.integers(1, 15)))} if draw(st.integers(0, 3)) else {}),
                }
                for k, name in enumerate(names)
            ]
            if all("duration" not in g for g in job["groups"]) or draw(st.booleans()):
                job["duration"] = float(draw(st.integers(1, 20)))
            policy = draw(st.sampled_from([None, "all", "any", *(f"group:{n}" for n in names)]))
            if policy is not None:
                job["success_policy"] = policy
        else:
            job["workers"] = draw(st.integers(1, 2))
            job["gpus_per_worker"] = draw(st.integers(1, 3))
            job["duration"] = float(draw(st.integers(1, 20)))
        if draw(st.integers(0, 4)) == 0:
            job["time_limit"] = float(draw(st.integers(1, 12)))
        jobs.append(job)
    return {
        "scenario": {"name": "groups"},
        "nodes": [{"name": "n0", "gpus": 4}, {"name": "n1", "gpus": 4}],
        "queues": queues,
        "jobs": jobs,
    }


PROPERTY = settings(
    max_examples=150, deadline=None, derandomize=True, database=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY
@given(workloads())
def test_one_gone_report_equals_exited_then_gone(doc: dict[str, Any]) -> None:
    same(doc)


@PROPERTY
@given(pipelines())
def test_one_gone_report_equals_exited_then_gone_with_arrays_and_dependencies(doc: dict[str, Any]) -> None:
    same(doc)


@PROPERTY
@given(group_jobs())
def test_one_gone_report_equals_exited_then_gone_for_jobs_of_groups(doc: dict[str, Any]) -> None:
    same(doc)


def test_the_replay_reports_each_exit_once() -> None:
    assert engine.EXIT_REPORTS == (RankPhase.GONE,)


@pytest.mark.parametrize("path", scenario_files())
def test_kept_scenarios_give_the_same_with_one_report(path: str) -> None:
    same(tomllib.loads((REPO / path).read_text()), path)


@pytest.mark.parametrize("seed", [1, 2])
def test_varied_histories_give_the_same_with_one_report(seed: int) -> None:
    same(varied_history(seed))
