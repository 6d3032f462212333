"""Scenario files take ``cpu`` and ``memory`` in a queue's or cohort's quota tables, as cluster.toml
does (docs/host-resources.md, "Quotas"; the shared schema, launcher/config/queues.py): ``memory`` is
a size (or a whole number of MiB) held in bytes, and a bad entry is one line naming the key and
what is allowed."""

from __future__ import annotations

import pytest
from labgang.launcher.simulate import ScenarioError, parse_scenario

GIB = 1024**3


def doc(**queue: object) -> dict:
    return {
        "scenario": {"name": "t"},
        "nodes": [{"name": "n0", "gpus": 8}],
        "cohorts": [{"name": "lab", "nominal": {"cpu": 4, "memory": "1T"}}],
        "queues": [{"name": "q", "nominal": {"gpu": 8}, **queue}],
        "jobs": [{"id": "a", "queue": "q", "duration": 60}],
    }


def test_cpu_and_memory_quotas_reach_the_scheduler_in_cpus_and_bytes() -> None:
    s = parse_scenario(
        doc(
            cohort="lab",
            nominal={"gpu": 8, "cpu": 32, "memory": "256G"},
            borrowing_limit={"cpu": 16, "memory": 8192},  # a bare number of memory is MiB, as --mem reads it
            lending_limit={"memory": "128GiB"},
        )
    )
    [q] = s.queues
    assert q.nominal == {"gpu": 8, "cpu": 32, "memory": 256 * GIB}
    assert q.borrowing_limit == {"cpu": 16, "memory": 8 * GIB}
    assert q.lending_limit == {"memory": 128 * GIB}
    [lab] = s.cohorts
    assert lab.nominal == {"cpu": 4, "memory": 1024 * GIB}


@pytest.mark.parametrize(
    "queue,line",
    [
        (
            {"nominal": {"gpu": 8, "memory": "lots"}},
            "queues[0] ('q').nominal: memory: 'lots' is not a memory size; allowed: a whole number with an "
            "optional unit K, M (default), G or T, e.g. 16G or 8000",
        ),
        (
            {"nominal": {"gpu": 8, "cpu": -3}},
            "queues[0] ('q').nominal: cpu: -3 is out of range; allowed: a CPU count from 0 to 16777216",
        ),
        (
            {"nominal": {"gpu": 8, "tpu": 1}},
            "queues[0] ('q').nominal: unknown resource 'tpu' in nominal; allowed: 'gpu' or 'mig-<profile>' "
            "such as 'mig-1g.10gb' (devices), 'cpu' or 'memory' (host)",
        ),
        (
            {"nominal": {"gpu": 8, "cpu": True}},
            "queues[0] ('q').nominal.cpu: true is not allowed; allowed: a whole number of devices >= 0",
        ),
    ],
)
def test_a_bad_cpu_or_memory_quota_is_one_line_naming_the_key(queue: dict, line: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc(**queue))
    assert info.value.problems == [line]
