"""``labgang explain QUEUE|JOB``: sentences a person reads once and understands."""

from __future__ import annotations

from typing import Any

import pytest
from labgang.launcher.cli.explain import explain_job, explain_queue


def test_a_borrowing_queue_says_how_much_it_borrows_and_what_its_cohort_can_reach() -> None:
    vision = {
        "name": "vision",
        "cohort": "lab",
        "used": {"gpu": 10},
        "nominal": {"gpu": 8},
        "borrowed": {"gpu": 2},
        "fair_share_basis": {"gpu": 16},
        "fair_share_ratio": 125.0,
        "fair_share": 125.0,
        "fair_weight": 1.0,
    }
    nlp = {"name": "nlp", "cohort": "lab", "nominal": {"gpu": 8}, "used": {"gpu": 6}, "fair_share": 0.0}
    lines = explain_queue(vision, [vision, nlp])
    assert lines[1] == (
        "It borrows 2 gpu beyond its nominal quota (its cohort can reach 16 gpu in all): "
        "ratio 125.00 (x 1000), divided by its weight 1 gives its share 125.00."
    )
    assert not any("above nominal of" in line or "could reach" in line for line in lines)


def test_a_queue_using_nothing_says_nothing_not_a_dash() -> None:
    teama = {"name": "teama", "used": {}, "nominal": {"gpu": 4}}
    assert explain_queue(teama, [teama])[0] == "teama uses nothing of its nominal gpu=4."
    zero = {"name": "teama", "used": {"gpu": 0}, "nominal": {"gpu": 4}}
    assert explain_queue(zero, [zero])[0] == "teama uses nothing of its nominal gpu=4."
    some = {"name": "teama", "used": {"gpu": 2, "mig-1g.10gb": 0}, "nominal": {"gpu": 4}}
    assert explain_queue(some, [some])[0] == "teama uses gpu=2 of its nominal gpu=4."
    bare = {"name": "guests", "cohort": "lab", "used": {"gpu": 1}, "nominal": {}}
    assert explain_queue(bare, [bare])[0] == "guests uses gpu=1 and has no nominal quota."


def job(state: str, history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"id": "1", "state": state, "queue": "default", "workers": 4, "gpus_per_worker": 2, "history": history}


@pytest.mark.parametrize(
    ("state", "said"),
    [
        ("pending", "is pending"),
        ("admitted", "was admitted and is starting"),
        ("running", "is running"),
        ("terminating", "is stopping"),
        ("succeeded", "has succeeded"),
        ("failed", "has failed"),
        ("cancelled", "was cancelled"),
        ("held", "is in state held"),
    ],
)
def test_the_first_sentence_says_the_state_in_plain_grammar(state: str, said: str) -> None:
    assert explain_job(job(state), [])[0] == f"job 1 (4 x 2 gpu) in queue default {said}."


WHY = (
    "preempted by job 415: job 415 (queue default, priority 10) needs 1 x 8 gpu; "
    "stopping job 1 (queue default, priority 0)"
)


def preempted(state: str, *events: tuple[str, str]) -> list[str]:
    history = [{"time": 1.0, "event": "submitted", "message": "4 x 2 gpu"}] + [
        {"time": 2.0 + i, "event": event, "message": message} for i, (event, message) in enumerate(events)
    ]
    return [line for line in explain_job(job(state, history), []) if "preempted" in line]


def test_a_requeued_victim_gets_one_sentence_saying_both_the_stop_and_the_restart() -> None:
    lines = preempted("pending", ("stopping", f"{WHY}; stopping every rank"), ("requeued", f"{WHY}; restart 1"))
    assert lines == [f"It was {WHY}; every rank was stopped and it went back to its queue as restart 1."]


def test_a_victim_still_stopping_says_so_and_a_second_preemption_gets_its_own_sentence() -> None:
    assert preempted("terminating", ("stopping", f"{WHY}; stopping every rank")) == [
        f"It was {WHY}; stopping every rank."
    ]
    later = WHY.replace("415", "416")
    lines = preempted(
        "pending",
        ("stopping", f"{WHY}; stopping every rank"),
        ("requeued", f"{WHY}; restart 1"),
        ("running", "every rank started"),
        ("stopping", f"{later}; stopping every rank"),
        ("requeued", f"{later}; attempt 3 (the last one never ran)"),
    )
    assert lines == [
        f"It was {WHY}; every rank was stopped and it went back to its queue as restart 1.",
        f"It was {later}; every rank was stopped and it went back to its queue as attempt 3 (the last one never ran).",
    ]
