"""``labgang explain QUEUE``: sentences a person reads once and understands."""

from __future__ import annotations

from labgang.launcher.cli.explain import explain_queue


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
