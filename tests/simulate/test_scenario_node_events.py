"""``[[events]]`` in scenario files (docs/scenarios.md, "Node loss"): a node going down is lost at the
coordinator's first timer check past ``node_timeout``, its gangs are fenced and then requeued (or end
NODE_FAIL with ``requeue = false``), a node coming back is offered again; an event that cannot mean
anything is one line naming the key. That both drivers decide node loss alike is
``test_sim_matches_coordinator.py``'s."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from labgang.launcher.cli.simulate import simulate
from labgang.launcher.simulate import ScenarioError, Simulation, parse_scenario
from labgang.launcher.simulate.node_events import lease_check_after


def doc(events: list[dict[str, Any]], *jobs: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "scenario": {"name": "t", **meta},
        "nodes": [{"name": "n1", "gpus": 2}, {"name": "n2", "gpus": 2}],
        "queues": [{"name": "q", "nominal": {"gpu": 4}}],
        "jobs": [{"queue": "q", **j} for j in jobs],
        "events": events,
    }


@pytest.mark.parametrize(
    "events,line",
    [
        ([{"at": 1, "node": "n9", "lost": True}], "events[0].node: unknown node 'n9'; allowed: n1, n2"),
        ([{"at": 1, "node": "n1"}], "events[0]: give exactly one of lost = true or back = true"),
        ([{"at": 1, "node": "n1", "lost": True, "back": True}], "events[0]: give exactly one of lost"),
        ([{"at": 1, "node": "n1", "back": True}], "events[0].back: node 'n1' is not down at 1; allowed: lost = true"),
        (
            [{"at": 1, "node": "n1", "lost": True}, {"at": 2, "node": "n1", "lost": True}],
            "events[1].lost: node 'n1' is already down since 1; allowed: back = true first",
        ),
        (
            [{"at": 5, "node": "n1", "lost": True}, {"at": 5, "node": "n1", "back": True}],
            "events[1].at: a second event of node 'n1' at 5; allowed: one per instant",
        ),
        (
            [{"at": 1, "node": "n1", "down": True}],
            "events[0].down: unknown key 'down'; allowed keys: at, node, lost, back",
        ),
        ([{"at": True, "node": "n1", "lost": True}], "events[0].at: True is not allowed; allowed: seconds"),
        ([{"at": -1, "node": "n1", "lost": True}], "events[0].at: Input should be greater than or equal to 0"),
        ([{"at": "soon", "node": "n1", "lost": True}], "events[0].at: 'soon' is not allowed; allowed: seconds"),
    ],
)
def test_an_event_that_means_nothing_is_one_line(events: list[dict[str, Any]], line: str) -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc(events))
    (found,) = info.value.problems
    assert found.startswith(line), found


def test_node_timeout_must_be_positive() -> None:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(doc([], node_timeout=0))
    assert info.value.problems == ["scenario.node_timeout: Input should be greater than 0"]


def test_at_may_be_a_duration() -> None:
    scenario = parse_scenario(doc([{"at": "2m", "node": "n1", "lost": True}]))
    assert scenario.file.events[0].at == 120.0


def test_the_lease_check_is_the_first_timer_turn_past_the_timeout() -> None:
    assert lease_check_after(100.0, 30.0) == 130.5  # 130.0 is silent exactly 30 s: not more
    assert lease_check_after(2.2, 3.0) == 5.5
    assert lease_check_after(0.0, 1.0, interval=0.25) == 1.25


def run(sim: Simulation) -> None:
    while sim.next_time() is not None:
        sim.run_instant()


def test_a_lost_node_requeues_its_gang_and_fails_the_one_that_asked_for_no_requeue() -> None:
    """a (ranks on n1 and n2, grace 4) and b (on n1, requeue = false): n1 goes down at 10 and is lost at
    15.5 (node_timeout 5); b's fence (10 + 5 + 0) has passed, so it ends NODE_FAIL at once; a is stopped
    on n2 (killed at 19.5), its n1 rank fenced until 19, and it is requeued at 19.5, then runs again when
    n1 is back at 40."""
    sim = Simulation(
        parse_scenario(
            doc(
                [{"at": 10, "node": "n1", "lost": True}, {"at": 40, "node": "n1", "back": True}],
                {"id": "a", "workers": 2, "gpus_per_worker": 1, "nodes": 2, "duration": 100, "grace": 4},
                {"id": "b", "gpus_per_worker": 1, "duration": 100, "requeue": False, "submit": 1},
                node_timeout=5,
            )
        )
    )
    run(sim)
    a, b = sim.jobs["a"].record, sim.jobs["b"].record
    assert [h.message for h in b.history if h.event == "admitted"] == ["1 rank on n1"]
    assert (b.status.state.value, b.status.end_time) == ("node_fail", 15.5)
    assert [(h.time, h.event) for h in a.history if h.event in ("stopping", "fence-expired", "requeued")] == [
        (15.5, "stopping"),
        (19.0, "fence-expired"),
        (19.5, "requeued"),
    ]
    assert a.status.state.value == "succeeded" and a.status.start_time == 40.0 and a.status.restart_count == 1


def test_a_down_node_is_not_offered_until_it_is_back() -> None:
    """n1 goes down at 0 before anything is submitted: the two-GPU job c starts on n2, the four-GPU job
    d waits for n1 and starts when it is back at 20 (c ended at 10)."""
    sim = Simulation(
        parse_scenario(
            doc(
                [{"at": 0, "node": "n1", "lost": True}, {"at": 20, "node": "n1", "back": True}],
                {"id": "c", "gpus_per_worker": 2, "duration": 10},
                {"id": "d", "workers": 2, "gpus_per_worker": 2, "duration": 10},
            )
        )
    )
    run(sim)
    c, d = sim.jobs["c"].record, sim.jobs["d"].record
    assert [r.node for r in c.ranks.values()] == ["n2"] and c.status.start_time == 0.0
    assert d.status.start_time == 20.0 and d.status.state.value == "succeeded"


def test_labgang_simulate_exits_2_with_one_line_for_a_bad_event(tmp_path: Path) -> None:
    f = tmp_path / "s.toml"
    f.write_text(
        '[scenario]\nname = "s"\n[[nodes]]\nname = "n1"\ngpus = 2\n[[queues]]\nname = "q"\nnominal = { gpu = 2 }\n'
        '[[events]]\nat = 5\nnode = "n1"\nback = true\n'
    )
    res = CliRunner().invoke(simulate, [str(f)])
    assert res.exit_code == 2
    assert res.output.splitlines() == [
        f"ERROR {f}: events[0].back: node 'n1' is not down at 5; allowed: lost = true first"
    ]


def test_labgang_simulate_passes_the_node_loss_scenario_and_traces_the_node() -> None:
    case = Path(__file__).resolve().parents[1] / "scenarios/cases/node-loss-requeues-or-fails-by-policy.toml"
    res = CliRunner().invoke(simulate, ["--trace", str(case)])
    assert res.exit_code == 0, res.output
    nodes = [
        (e["t"], e["event"], e["node"])
        for line in res.output.splitlines()
        if line.startswith("{") and (e := json.loads(line))["event"].startswith("node_")
    ]
    assert nodes == [
        (100.0, "node_down", "n2"),
        (130.5, "node_lost", "n2"),
        (200.0, "node_down", "n3"),
        (230.5, "node_lost", "n3"),
        (300.0, "node_back", "n2"),
    ]
