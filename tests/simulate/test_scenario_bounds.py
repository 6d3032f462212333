"""Scenario files are bounded like submissions: a huge count is one line naming the key, not a 1 GB simulation."""

from __future__ import annotations

import pytest
from labgang.launcher.simulate import ScenarioError, parse_scenario


def doc(node: dict[str, object] | None = None, job: dict[str, object] | None = None, nodes: int = 1) -> dict:
    return {
        "scenario": {"name": "t"},
        "nodes": [{"name": f"n{i}", "gpus": 8, **(node or {})} for i in range(nodes)],
        "queues": [{"name": "q", "nominal": {"gpu": 8}}],
        "jobs": [{"id": "a", "queue": "q", **(job or {})}],
    }


@pytest.mark.parametrize(
    "node,job,line",
    [
        ({"gpus": 99_999_999_999}, None, "nodes[0] ('n0').gpus: must be 1..1024, got 99999999999"),
        ({"gpus": 0}, None, "nodes[0] ('n0').gpus: must be 1..1024, got 0"),
        ({"mig": ["1g.10gb"] * 8}, None, "nodes[0] ('n0').mig: at most 7 MIG devices per GPU, got 8"),
        (None, {"workers": 10**12}, "jobs[0] ('a').workers: must be 1..4096, got 1000000000000"),
        (None, {"gpus_per_worker": 1025}, "jobs[0] ('a').gpus_per_worker: must be 1..1024, got 1025"),
        (None, {"nodes": 5000}, "jobs[0] ('a').nodes: must be 1..4096, got 5000"),
        (None, {"min_workers": 10**9}, "jobs[0] ('a').min_workers: must be 1..4096, got 1000000000"),
    ],
)
def test_a_count_out_of_bounds_is_one_line_naming_the_key(node, job, line) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc(node, job))
    assert info.value.problems == [line]


def test_too_many_gpus_in_all_is_refused_before_any_device_is_built() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc({"gpus": 1024}, nodes=65))
    assert info.value.problems == ["nodes: 66560 GPUs in all; must be at most 65536"]


def test_too_many_nodes_or_jobs_is_one_line() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc({"gpus": 1}, nodes=4097))
    assert info.value.problems == ["nodes: 4097 nodes; must be at most 4096"]
    many = doc()
    many["jobs"] = [{"id": f"j{i}", "queue": "q"} for i in range(100_001)]
    with pytest.raises(ScenarioError) as info:
        parse_scenario(many)
    assert info.value.problems == ["jobs: 100001 jobs; must be at most 100000"]


def test_the_largest_allowed_values_still_parse() -> None:
    s = parse_scenario(doc({"gpus": 1024}, {"workers": 4096, "gpus_per_worker": 1024, "nodes": 4096}))
    assert len(s.nodes[0].devices) == 1024
