"""Counts in scenario files are whole numbers and times are numbers or duration strings, bounded:
``true``, ``"3"`` or ``1e300`` is one line naming the key and the allowed values (docs/scenarios.md)."""

from __future__ import annotations

import pytest
from labgang.launcher.simulate import ScenarioError, parse_scenario
from labgang.launcher.simulate.scenario import MAX_SECONDS

SECONDS = "a number of seconds, or with a unit: 30s, 5m, 2h, 1d, 1h30m; at most 315360000 s (10 years)"


def doc(node: dict[str, object] | None = None, job: dict[str, object] | None = None, **top: object) -> dict:
    return {
        "scenario": {"name": "t"},
        "nodes": [{"name": "n0", "gpus": 8, **(node or {})}],
        "queues": [{"name": "q", "nominal": {"gpu": 8}}],
        "jobs": [{"id": "a", "queue": "q", "duration": 60, **(job or {})}],
        **top,
    }


@pytest.mark.parametrize(
    "node,job,top,line",
    [
        ({"gpus": True}, None, {}, "nodes[0] ('n0').gpus: true is not allowed; allowed: a whole number 1..1024"),
        ({"gpus": "3"}, None, {}, "nodes[0] ('n0').gpus: \"3\" is not allowed; allowed: a whole number 1..1024"),
        ({"gpus": 2.0}, None, {}, "nodes[0] ('n0').gpus: 2.0 is not allowed; allowed: a whole number 1..1024"),
        (None, {"workers": True}, {}, "jobs[0] ('a').workers: true is not allowed; allowed: a whole number 1..4096"),
        (
            None,
            {"gpus_per_worker": True},
            {},
            "jobs[0] ('a').gpus_per_worker: true is not allowed; allowed: a whole number 1..1024",
        ),
        (None, {"nodes": "2"}, {}, "jobs[0] ('a').nodes: \"2\" is not allowed; allowed: a whole number 1..4096"),
        (None, {"duration": True}, {}, f"jobs[0] ('a').duration: true is not allowed; allowed: {SECONDS}"),
        (None, {"submit": False}, {}, f"jobs[0] ('a').submit: false is not allowed; allowed: {SECONDS}"),
        (None, {"submit": 1e300}, {}, f"jobs[0] ('a').submit: 1e+300 is not allowed; allowed: {SECONDS}"),
        (None, {"duration": 1e300}, {}, f"jobs[0] ('a').duration: 1e+300 is not allowed; allowed: {SECONDS}"),
        (None, {"grace": MAX_SECONDS + 1}, {}, f"jobs[0] ('a').grace: 315360001 is not allowed; allowed: {SECONDS}"),
        (None, {"submit": float("nan")}, {}, f"jobs[0] ('a').submit: nan is not allowed; allowed: {SECONDS}"),
        (
            None,
            {"priority": True},
            {},
            "jobs[0] ('a').priority: true is not allowed; allowed: a whole number or a priority class name",
        ),
        (
            None,
            None,
            {"queues": [{"name": "q", "nominal": {"gpu": True}}]},
            "queues[0] ('q').nominal.gpu: true is not allowed; allowed: a whole number of devices >= 0",
        ),
        (
            None,
            None,
            {"queues": [{"name": "q", "nominal": {"gpu": "3"}}]},
            "queues[0] ('q').nominal.gpu: \"3\" is not allowed; allowed: a whole number of devices >= 0",
        ),
        (
            None,
            None,
            {"expect": [{"at": 1e300, "running": ["a"]}]},
            f"expect[0].at: 1e+300 is not allowed; allowed: {SECONDS}",
        ),
    ],
)
def test_a_bool_string_or_huge_value_is_one_line_naming_the_key(node, job, top, line) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc(node, job, **top))
    assert info.value.problems == [line]


def test_times_as_numbers_and_duration_strings_still_load() -> None:
    s = parse_scenario(doc(job={"submit": "10m", "duration": MAX_SECONDS, "grace": 5}))
    [job] = s.file.jobs
    assert (job.submit, job.duration, job.grace) == (600.0, float(MAX_SECONDS), 5.0)
