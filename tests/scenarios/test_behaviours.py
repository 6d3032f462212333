"""Table-driven scenarios built fluently: one behaviour each, named for it."""

from __future__ import annotations

from typing import Any

import pytest
from scenario_builder import scenario

LAB: dict[str, Any] = dict(cohort="lab")

BEHAVIOURS = {
    "gang-waits-whole-instead-of-partial-start": (
        scenario("x")
        .node("n1", 4)
        .queue("q", 4)
        .job("a", "q", gpus=1, workers=2, duration=10)
        .job("b", "q", gpus=1, workers=3, submit=1)
        .expect(at=1, running=["a"], pending=["b"])
        .expect(at=10, running=["b"])
        .max_usage("q", 4)
    ),
    "borrower-stops-at-borrowing-limit": (
        scenario("x")
        .node("n1", 8)
        .queue("a", 2, borrowing_limit=2, **LAB)
        .queue("b", 6, **LAB)
        .job("a1", "a", gpus=4)
        .job("a2", "a", gpus=1, submit=1)
        .expect(at=1, running=["a1"], pending=["a2"])
        .max_usage("a", 4)
    ),
    "reclaim-takes-newest-borrowed-job": (
        scenario("x")
        .node("n1", 4)
        .queue("a", 2, reclaim="any", **LAB)
        .queue("b", 2, **LAB)
        .job("b1", "b", gpus=2)
        .job("b2", "b", gpus=1, submit=1)
        .job("b3", "b", gpus=1, submit=2)
        .job("a1", "a", gpus=1, submit=5)
        .expect(at=5, running=["b1", "b2", "a1"], pending=["b3"], preempted=["b3"], not_preempted=["b1", "b2"])
    ),
    "reclaim-lower-priority-spares-higher": (
        scenario("x")
        .node("n1", 4)
        .queue("a", 2, reclaim="lower-priority", **LAB)
        .queue("b", 2, **LAB)
        .job("b1", "b", gpus=4, priority=5)
        .job("a1", "a", gpus=2, priority=1, submit=1)
        .expect(at=1, running=["b1"], pending=["a1"], not_preempted=["b1"])
    ),
    "within-queue-lower-priority-evicts-newest-lowest": (
        scenario("x")
        .node("n1", 3)
        .queue("q", 3, within="lower-priority")
        .job("l1", "q", priority=-1)
        .job("l2", "q", priority=-1, submit=1)
        .job("m", "q", priority=0, submit=2)
        .job("h", "q", priority=9, submit=3)
        .expect(at=3, running=["l1", "m", "h"], pending=["l2"], preempted=["l2"])
    ),
    "preemptor-waits-for-grace": (
        scenario("x")
        .node("n1", 1)
        .queue("q", 1, within="lower-priority")
        .job("v", "q", grace=4)
        .job("p", "q", priority=1, submit=1)
        .expect(at=4, running=["v"], pending=["p"])
        .expect(at=5, running=["p"], pending=["v"])
    ),
    "strict-fifo-head-blocks-queue-not-others": (
        scenario("x")
        .node("n1", 4)
        .queue("s", 2, strict=True, **LAB)
        .queue("o", 2, **LAB)
        .job("s-big", "s", gpus=4, priority=1)
        .job("s-small", "s", gpus=1)
        .job("o1", "o", gpus=1)
        .expect(at=0, running=["o1"], pending=["s-big", "s-small"])
    ),
    "fragmentation-waits-not-partial": (
        scenario("x")
        .node("n1", 2)
        .node("n2", 2)
        .queue("q", 4)
        .job("f", "q", gpus=1, duration=5)
        .job("big", "q", gpus=2, workers=2, submit=1)
        .expect(at=1, running=["f"], pending=["big"])
        .expect(at=5, running=["big"])
    ),
}


@pytest.mark.parametrize("builder", BEHAVIOURS.values(), ids=BEHAVIOURS.keys())
def test_behaviour(builder):
    report = builder.run()
    assert report.ok, "\n".join(report.failures)
    assert report.checked == len(builder.doc()["expect"])
