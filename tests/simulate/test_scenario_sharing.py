"""Scenario files' GPU sharing keys ([sharing], a job's shards / mps / gpu_mem, share_gpus / share_with):
one line naming the key for each bad value, and the values reaching the scheduler."""

from __future__ import annotations

import pytest
from labgang.launcher.simulate.checks import run_scenario
from labgang.launcher.simulate.scenario import ScenarioError, parse_scenario
from labgang.launcher.simulate.summary import queue_stats, utilization


def _file(job: dict, sharing: dict | None = None, queue: dict | None = None) -> dict:
    data = {
        "scenario": {"name": "s"},
        "nodes": [{"name": "n1", "gpus": 2}],
        "queues": [{"name": "q", "nominal": {"gpu": 2}, "share_gpus": "queue", **(queue or {})}],
        "jobs": [{"id": "j", "queue": "q", **job}],
    }
    if sharing is not None:
        data["sharing"] = sharing
    return data


@pytest.mark.parametrize(
    "job, expected",
    [
        ({"shards": 1, "mps": 50}, "shards and mps exclude each other"),
        ({"shards": 1, "mig": "1g.10gb"}, "shards and mig exclude each other"),
        ({"mps": 50, "workers": 2}, "mps is a share of one GPU for one rank; allowed: workers 1 and gpus_per_worker 1"),
        ({"shards": 1, "gpus_per_worker": 2}, "shards is a share of one GPU for one rank"),
        ({"shards": 65}, "jobs[0] ('j').shards: must be 0..64, got 65"),
        ({"mps": 101}, "jobs[0] ('j').mps: must be 0..100, got 101"),
        ({"shards": True}, "jobs[0] ('j').shards: true is not allowed"),
        ({"shards": 1, "running": True}, "running = true places whole devices"),
    ],
    ids=[
        "shards-and-mps",
        "shards-and-mig",
        "mps-gang",
        "shards-multi-gpu",
        "shards-range",
        "mps-range",
        "bool",
        "running",
    ],
)
def test_bad_share_requests_are_one_line_naming_the_key(job: dict, expected: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(_file(job, {"shards_per_gpu": 4, "mps": True}))
    assert any(expected in p for p in info.value.problems), info.value.problems


def test_share_with_must_be_mutual_in_scenarios_too() -> None:
    data = _file({}, queue={"share_with": ["r"]})
    data["queues"].append({"name": "r", "nominal": {"gpu": 1}, "share_gpus": "queue"})
    with pytest.raises(ScenarioError) as info:
        parse_scenario(data)
    assert info.value.problems == [
        "queues[0].share_with: queue 'r' does not name 'q' in its share_with; both queues must name each other"
    ]


def test_sharing_values_reach_the_scenario() -> None:
    sc = parse_scenario(_file({"shards": 2, "gpu_mem": "4G"}, {"shards_per_gpu": 4, "nodes": {"n1": {"mps": True}}}))
    assert sc.gpu_sharing.node("n1").mps and not sc.gpu_sharing.mps
    req = sc.file.jobs[0].request()
    assert (req.shards, req.mps, req.gpu_mem, req.shared) == (2, 0, 4 << 30, True)
    assert sc.queues[0].share_gpus == "queue"


def test_simulate_counts_a_share_as_its_gpu_fraction_in_device_hours_and_utilization() -> None:
    data = {
        "scenario": {"name": "s"},
        "sharing": {"shards_per_gpu": 4, "mps": True},
        "nodes": [{"name": "n1", "gpus": 3}],  # a shard card, an MPS card, a whole card
        "queues": [{"name": "q", "nominal": {"gpu": 3}, "share_gpus": "queue"}],
        "jobs": [
            {"id": "s", "queue": "q", "array": "1-2", "shards": 1, "duration": 100},  # 2 x 1/4 gpu x 100 s
            {"id": "m", "queue": "q", "mps": 50, "duration": 100},  # 1/2 gpu x 100 s
            {"id": "w", "queue": "q", "duration": 100},  # 1 gpu x 100 s
        ],
    }
    sim = run_scenario(parse_scenario(data)).simulation
    assert sim.now == 100
    (stats,) = queue_stats(sim)
    assert stats.device_seconds == pytest.approx(200.0)  # 50 + 50 + 50 + 100, not 4 devices x 100 s
    assert utilization(sim) == {"gpu": pytest.approx(200.0 / (3 * 100))}


@pytest.mark.parametrize(
    ("job", "sharing", "queue", "key", "text"),
    [
        ({"shards": 5}, {"shards_per_gpu": 4}, None, "shards", "job asks for 5 shards of a gpu; cards have 4"),
        ({"shards": 1}, {"shards_per_gpu": 4}, {"share_gpus": "none"}, "shards", "share_gpus = 'none'"),
        ({"mps": 50}, {"shards_per_gpu": 4}, None, "mps", "no node allows MPS"),
    ],
    ids=["too-many-shards", "queue-without-share-gpus", "mps-not-allowed"],
)
def test_a_share_that_can_never_start_is_warned_about_as_the_coordinator_refuses_it(
    job: dict, sharing: dict, queue: dict | None, key: str, text: str
) -> None:
    from labgang.launcher.simulate.startable import never_starting

    found = never_starting(parse_scenario(_file(job, sharing, queue)))
    assert [(w.job, w.key) for w in found] == [("j", key)]
    assert text in found[0].reason and "can never start (" + key + ")" in found[0].line()
