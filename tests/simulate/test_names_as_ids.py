"""A scenario whose lifecycle model reads no job numbering (no job array, no dependency, no job
held at submission) runs with the file's names as the model's job ids (``JobIds.use_names``: no
renaming of each cycle's snapshot and result, the replay's speed), and gives exactly what it gives
with the coordinator's numbering (1, 2, ...): every job's history (its messages as people read them,
``JobIds.shown``), final state, exit status, admit/end times, waits, preemption and device time,
the whole trace and the cycle count, and ``plan replay``'s figures. Over the differential test's
random workloads (cancels, node loss, MIG, elastic gangs), random jobs of groups, every scenario
kept under tests/ and the seeded varied histories, and a synthetic replay history."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from engine_digest import scenario_files, varied_history
from hypothesis import given
from labgang.launcher.plan.replay import replay
from labgang.launcher.simulate.naming import JobIds
from sim_runs import everything_shown

from tests.simulate.test_exit_reports import PROPERTY, group_jobs
from tests.simulate.test_sim_matches_coordinator import workloads

REPO = Path(__file__).resolve().parents[2]


@contextmanager
def numbered() -> Iterator[None]:
    """Scenarios parsed meanwhile keep the coordinator's numbering as the model's ids."""
    before = JobIds.use_names
    JobIds.use_names = lambda self: False  # type: ignore[method-assign]
    try:
        yield
    finally:
        JobIds.use_names = before  # type: ignore[method-assign]


def same(doc: dict[str, Any], source: str = "<random>") -> bool:
    """Compare the two runs of ``doc``; True when the names were the model's ids."""
    by_name = everything_shown(doc, source, as_people_read=True)
    with numbered():
        by_number = everything_shown(doc, source, as_people_read=True)
    assert not by_number["by_name_only"]
    for job_id, want in by_number["jobs"].items():
        assert by_name["jobs"][job_id] == want, f"job {job_id}"
    assert by_name["trace"] == by_number["trace"]
    assert by_name["cycles"] == by_number["cycles"]
    return bool(by_name["by_name_only"])


@PROPERTY
@given(workloads())
def test_names_as_ids_equal_the_numbering(doc: dict[str, Any]) -> None:
    same(doc)


@PROPERTY
@given(group_jobs())
def test_names_as_ids_equal_the_numbering_for_jobs_of_groups(doc: dict[str, Any]) -> None:
    assert same(doc)  # no arrays, dependencies or holds here: always by name


def test_names_as_ids_equal_the_numbering_in_kept_scenarios() -> None:
    by_name = 0
    for path in scenario_files():
        by_name += same(tomllib.loads((REPO / path).read_text()), path)
    assert by_name > 10  # most kept scenarios have no array, dependency or hold


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_names_as_ids_equal_the_numbering_in_varied_histories(seed: int) -> None:
    same(varied_history(seed))


def test_replay_figures_equal_the_numbering() -> None:
    jobs = [
        {"id": f"j{i}", "queue": "ab"[i % 2], "workers": 1 + (i % 3 == 0), "gpus_per_worker": (1, 2, 4)[i % 3],
         "priority": 10 * (i % 5 == 0), "submit": float(i * 7 % 90), "duration": float(60 + i * 37 % 400)}
        for i in range(120)
    ]  # fmt: skip
    doc = {
        "scenario": {"name": "replay"},
        "nodes": [{"name": f"n{k}", "gpus": 8} for k in range(4)],
        "queues": [
            {"name": "a", "cohort": "lab", "nominal": {"gpu": 16}, "within_queue": "lower-priority"},
            {"name": "b", "cohort": "lab", "nominal": {"gpu": 16}, "within_queue": "lower-priority"},
        ],
        "jobs": jobs,
    }
    by_name = replay(doc)
    with numbered():
        by_number = replay(doc)
    assert by_name.waits == by_number.waits
    assert (by_name.span_s, by_name.never_started) == (by_number.span_s, by_number.never_started)
    assert by_name.queues == by_number.queues
    assert any(f.preemptions for f in by_name.queues)  # the check covers preemption
