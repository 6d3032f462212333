"""``labgang simulate --trace``: each line is dated at the instant it tells of (docs/scenarios.md)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from labgang.launcher.cli.simulate import simulate

SCENARIO = """
[scenario]
name = "expect-dates"

[[nodes]]
name = "n1"
gpus = 2

[[queues]]
name = "q"
nominal = { gpu = 2 }

[[jobs]]
id = "a"
queue = "q"
duration = 10

[[jobs]]
id = "b"
queue = "q"
submit = 20
duration = 1

[[expect]]
at = 5
running = ["a"]

[[expect]]
at = 15
finished = ["a"]

[[expect]]
finished = ["a", "b"]
"""


def test_an_expect_line_is_dated_at_the_instant_it_is_checked(tmp_path: Path) -> None:
    """Nothing happens between t=0 and t=10, yet the expectation at 5 is checked at 5 (not at 0,
    the last event's instant), the one at 15 at 15, and the final one at the last instant (21)."""
    case = tmp_path / "expect-dates.toml"
    case.write_text(SCENARIO)
    res = CliRunner().invoke(simulate, ["--trace", str(case)])
    assert res.exit_code == 0, res.output
    lines = [json.loads(line) for line in res.stdout.splitlines()]
    expects = [(e["index"], e["t"], e["ok"]) for e in lines if e["event"] == "expect"]
    assert expects == [(0, 5.0, True), (1, 15.0, True), (2, 21.0, True)]


def test_a_reason_that_changes_only_where_the_line_does_not_show_is_not_traced_twice() -> None:
    """Two cycles give job a the same code and words, one with the preemption rule that kept it
    from looking for victims (``no_preemption``, not on the line), one without: one ``pending``
    line, not two identical ones; a new message is a new line."""
    from labgang.launcher.scheduler.decisions import (
        CycleResult,
        NoPreemption,
        NoPreemptionCode,
        Pending,
        PendingReason,
        ReasonCode,
    )
    from labgang.launcher.simulate import Simulation, parse_scenario

    lines: list[dict] = []
    doc = {
        "scenario": {"name": "one-line"},
        "nodes": [{"name": "n1", "gpus": 1}],
        "queues": [{"name": "q", "nominal": {"gpu": 1}}],
        "jobs": [{"id": "a", "queue": "q", "duration": 5}],
    }
    sim = Simulation(parse_scenario(doc), lines.append)
    model_id = sim.jobs["a"].record.id
    rule = NoPreemption(NoPreemptionCode.WOULD_BORROW, "q", "gpu", 2, 1, None, "never", "it would borrow")
    over = PendingReason(ReasonCode.OVER_QUOTA, "q uses 1 of 1 gpu; job needs 1")
    for reason in (over, PendingReason(over.code, over.message, no_preemption=rule), over):
        sim.gated(CycleResult((), (), (Pending(model_id, reason),)))
    sim.gated(CycleResult((), (), (Pending(model_id, PendingReason(ReasonCode.NO_CAPACITY, "0 gpu free")),)))
    pending = [(e["job"], e["code"], e["message"]) for e in lines if e["event"] == "pending"]
    assert pending == [("a", "over_quota", "q uses 1 of 1 gpu; job needs 1"), ("a", "no_capacity", "0 gpu free")]
