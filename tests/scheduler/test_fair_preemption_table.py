"""Fair-sharing preemption, table-driven: each row is one case of Kueue's TestFairPreemptions
(pkg/scheduler/preemption/preemption_fair_test.go) translated to GPUs and run through the
simulator's first cycle; the row's list is the exact victim set Kueue chooses.

Fractional CPU requests are doubled (``scale=2``): shares are ratios, so scaling every quantity
changes nothing. Kueue breaks ties between equally old victims by name; the submit times make the
alphabetically first one the most recently admitted, which gives the same order. The node has
more devices than any quota, so only quota decides (Kueue's test admits jobs beyond quota too).
"""

from __future__ import annotations

from typing import Any

import pytest
from labgang.launcher.simulate import Simulation, parse_scenario

Job = tuple[str, str, int, int]


def base(scale: int = 1) -> list[dict[str, Any]]:
    """Kueue's base queues a, b, c (3 each) and 'preemptible' (0) in cohort 'all'."""
    qs: list[dict[str, Any]] = [
        {
            "name": n,
            "cohort": "all",
            "nominal": {"gpu": 3 * scale},
            "within_queue": "lower-priority",
            "reclaim_within_cohort": "any",
            "borrow_within_cohort": {"policy": "lower-priority", "max_priority_threshold": -3},
        }
        for n in "abc"
    ]
    qs.append({"name": "preemptible", "cohort": "all", "nominal": {"gpu": 0}})
    return qs


def Q(
    name: str, cohort: str | None, nominal: int, w: float = 1.0, within: str = "never", reclaim: str = "never"
) -> dict[str, Any]:
    q: dict[str, Any] = {
        "name": name,
        "nominal": {"gpu": nominal},
        "within_queue": within,
        "reclaim_within_cohort": reclaim,
        "fair_weight": w,
    }
    if cohort:
        q["cohort"] = cohort
    return q


def U(name: str, cq: str, units: int = 1, prio: int = 0) -> Job:
    return (name, cq, units, prio)


def first_preemption(
    admitted: list[Job],
    incoming: Job,
    strategies: list[str] | None = None,
    scale: int = 1,
    queues: list[dict[str, Any]] | None = None,
    cohorts: list[dict[str, Any]] | None = None,
) -> set[str]:
    """The victims chosen for ``incoming`` in its first cycle."""
    names = sorted(a[0] for a in admitted)
    jobs: list[dict[str, Any]] = [
        {"id": n, "queue": cq, "gpus_per_worker": u, "priority": p, "submit": -10.0 * (names.index(n) + 1)}
        | {"running": True}
        for n, cq, u, p in admitted
    ]
    iname, icq, iunits, iprio = incoming
    jobs.append({"id": iname, "queue": icq, "gpus_per_worker": iunits, "priority": iprio, "submit": 0.0})
    meta: dict[str, Any] = {"name": "kueue-fair", "fair_sharing": True}
    if strategies:
        meta["fair_preemption"] = strategies
    doc: dict[str, Any] = {
        "scenario": meta,
        "nodes": [{"name": "n1", "gpus": 64}],
        "queues": queues or base(scale),
        "jobs": jobs,
    }
    if cohorts:
        doc["cohorts"] = cohorts
    sim = Simulation(parse_scenario(doc))
    results: list[Any] = []
    sim.add_cycle_hook(lambda snap, res: results.append(res))
    sim.run_instant()
    chosen = [p for p in results[0].preempted if p.job_id == iname]
    return set(chosen[0].victims) if chosen else set()


def C(name: str, want: list[str], *args: Any, **kw: Any) -> Any:
    return pytest.param(want, args, kw, id=name)


qs = [
    Q("a", "all", 3, within="lower-priority", reclaim="any"),
    Q("b", "all", 3, 0.0, within="lower-priority", reclaim="any"),
    Q("c", "all", 3, within="lower-priority", reclaim="any"),
]
hq = [
    Q("a", "LEFT", 1, 2.0, reclaim="any"),
    Q("b", "LEFT", 1),
    Q("c", "ROOT", 1),
    Q("d", "RIGHT", 1),
    Q("e", "RIGHT", 1, 0.99),
]
hc = [
    {"name": "ROOT", "nominal": {"gpu": 5}},
    {"name": "LEFT", "fair_weight": 2.0, "parent": "ROOT", "nominal": {"gpu": 5}},
    {"name": "RIGHT", "parent": "ROOT", "nominal": {"gpu": 5}},
]

CASES = [
    C(
        "reclaim nominal from user using the most",
        ["b1"],
        [
            U("a1", "a"),
            U("a2", "a"),
            U("a3", "a"),
            U("b1", "b"),
            U("b2", "b"),
            U("b3", "b"),
            U("b4", "b"),
            U("b5", "b"),
            U("c1", "c"),
        ],
        ("c_incoming", "c", 1, 0),
    ),
    C(
        "can reclaim from queue using less",
        ["a1"],
        [U("a1", "a", 3), U("a2", "a", 1), U("b1", "b", 2), U("b2", "b", 3)],
        ("c_incoming", "c", 3, 0),
    ),
    C(
        "preempt one from each CQ borrowing",
        ["a1", "b1"],
        [U("a1", "a", 1), U("a2", "a", 1), U("a3", "a", 6), U("b1", "b", 1), U("b2", "b", 1), U("b3", "b", 6)],
        ("c_incoming", "c", 4, 0),
        scale=2,
    ),
    C(
        "can't preempt when everyone under nominal",
        [],
        [U(f"{q}{i}", q) for q in "abc" for i in (1, 2, 3)],
        ("c_incoming", "c", 1, 0),
    ),
    C(
        "can't preempt when it would switch the imbalance",
        [],
        [
            U("a1", "a"),
            U("a2", "a"),
            U("a3", "a"),
            U("b1", "b"),
            U("b2", "b"),
            U("b3", "b"),
            U("b4", "b"),
            U("b5", "b"),
        ],
        ("a_incoming", "a", 2, 0),
    ),
    C(
        "same CQ lower priority",
        ["a1_low", "a2_low"],
        [U("a1_low", "a", 1, -1), U("a2_low", "a", 1, -1), U("a3", "a"), U("a4", "a")]
        + [U(f"b{i}", "b") for i in range(1, 6)],
        ("a_incoming", "a", 2, 0),
    ),
    C(
        "combination same CQ and highest user",
        ["a_low", "b1"],
        [U("a_low", "a", 1, -1), U("a2", "a"), U("a3", "a")] + [U(f"b{i}", "b") for i in range(1, 7)],
        ("a_incoming", "a", 2, 0),
    ),
    C("preempt huge workload", ["b1"], [U("b1", "b", 9)], ("a_incoming", "a", 2, 0)),
    C("can't preempt huge if incoming huge", [], [U("a1", "a", 2), U("b1", "b", 7)], ("a_incoming", "a", 5, 0)),
    C(
        "can't preempt 2 smaller if incoming huge",
        [],
        [U("b1", "b", 2), U("b2", "b", 2), U("b3", "b", 3)],
        ("a_incoming", "a", 6, 0),
    ),
    C(
        "preempt from target and others even if over nominal",
        ["a1_low", "b1"],
        [U("a1_low", "a", 2, -1), U("a2_low", "a", 1, -1), U("b1", "b", 3), U("b2", "b", 3)],
        ("a_incoming", "a", 4, 0),
    ),
    C(
        "prefer not making target biggest share",
        ["b2"],
        [U("b1", "b", 4), U("b2", "b", 2), U("b3", "b", 4), U("c1", "c", 2)],
        ("a_incoming", "a", 7, 0),
        scale=2,
    ),
    C(
        "different CQs smaller max share",
        ["b1", "c1"],
        [U("b1", "b", 4), U("b2", "b", 5), U("c1", "c", 4), U("c2", "c", 5)],
        ("a_incoming", "a", 7, 0),
        scale=2,
    ),
    C("does not flap", [], [U("a1", "a", 7), U("b2", "b", 5), U("c2", "c", 5)], ("b_incoming", "b", 4, 0), scale=2),
    C(
        "cannot make candidate go under nominal",
        [],
        [U("b1", "b", 3), U("b2", "b", 3), U("c1", "c", 3)],
        ("a_incoming", "a", 4, 0),
    ),
    C(
        "under threshold not capriciously preempted",
        [],
        [
            U("a1", "a"),
            U("a2", "a"),
            U("a3", "a"),
            U("b1", "b"),
            U("b2", "b"),
            U("b3", "b"),
            U("preemptible1", "preemptible", 1, -3),
            U("preemptible2", "preemptible", 1, -3),
            U("preemptible3", "preemptible", 1, -3),
        ],
        ("a_incoming", "a", 2, 0),
    ),
    C(
        "lower priority first even if big",
        ["b_low"],
        [U("a1", "a", 3), U("b_low", "b", 5, 0), U("b_high", "b", 1, 1)],
        ("a_incoming", "a", 1, 0),
        strategies=["less-than-initial-share"],
    ),
    C(
        "doesn't transfer imbalance",
        ["b_high"],
        [U("a1", "a", 3), U("b_low", "b", 5, 0), U("b_high", "b", 1, 1)],
        ("a_incoming", "a", 1, 0),
        strategies=["less-than-or-equal-to-final-share"],
    ),
    C(
        "preempt anything borrowing from 0 weight",
        ["b1", "b2", "b3"],
        [U("a1", "a"), U("a2", "a"), U("a3", "a")] + [U(f"b{i}", "b") for i in range(1, 7)],
        ("a_incoming", "a", 3, 0),
        queues=qs,
    ),
    C(
        "can't preempt nominal from 0 weight",
        [],
        [U("a1", "a"), U("a2", "a"), U("a3", "a"), U("b1", "b"), U("b2", "b"), U("b3", "b")],
        ("a_incoming", "a", 1, 0),
        queues=qs[:2],
    ),
    C(
        "can't preempt nominal from cohort with 0 weight",
        [],
        [U("right-1", "right-cq")],
        ("left-1", "left-cq", 1, 0),
        queues=[Q("left-cq", "root", 0, reclaim="any"), Q("right-cq", "right-cohort", 0, 0.0, reclaim="any")],
        cohorts=[{"name": "right-cohort", "fair_weight": 0.0, "nominal": {"gpu": 1}, "parent": "root"}],
    ),
    C(
        "within CQ no cohort",
        ["a1"],
        [U("a1", "a")],
        ("a_incoming", "a", 1, 1000),
        queues=[Q("a", None, 1, within="lower-priority")],
    ),
    C(
        "hierarchical preemption",
        ["b1", "b2", "c1", "c2", "e1"],
        [U(f"{q}{i}", q, 1, i) for q in "bcde" for i in range(1, 6)],
        ("unit", "a", 5, 0),
        queues=hq,
        cohorts=hc,
    ),
    C(
        "borrowing cq in non-borrowing cohort protected",
        ["a1", "a2", "a3"],
        [U("a1", "a", 1, -1), U("a2", "a", 1, -1), U("a3", "a", 1, -1), U("b1", "b", 1, -1)],
        ("unit", "a", 5, 0),
        queues=[Q("a", "ROOT", 5, 10.0, within="lower-priority", reclaim="any"), Q("b", "RIGHT", 0, 0.1)],
        cohorts=[{"name": "ROOT"}, {"name": "RIGHT", "parent": "ROOT", "fair_weight": 0.1, "nominal": {"gpu": 1}}],
    ),
    C(
        "forced within CQ, borrowing wl too important",
        ["a1", "a2", "a3"],
        [U("a1", "a", 1, -1), U("a2", "a", 1, -1), U("a3", "a", 1, -1), U("b1", "b", 4, 100)],
        ("unit", "a", 4, 0),
        queues=[Q("a", "ROOT", 5, 10.0, within="lower-priority", reclaim="lower-priority"), Q("b", "RIGHT", 0, 0.1)],
        cohorts=[{"name": "ROOT"}, {"name": "RIGHT", "parent": "ROOT", "fair_weight": 0.1, "nominal": {"gpu": 3}}],
    ),
    C(
        "cq zero weight reclaims nominal",
        ["b1"],
        [U("b1", "b")],
        ("a1", "a", 1, 0),
        queues=[Q("a", "ROOT", 1, 0.0, reclaim="any"), Q("b", "ROOT", 0)],
    ),
    C(
        "cohort zero weight reclaims nominal",
        ["b1"],
        [U("b1", "b")],
        ("a1", "a", 1, 0),
        queues=[Q("a", "A", 0, 0.0, reclaim="any"), Q("b", "ROOT", 0)],
        cohorts=[{"name": "A", "parent": "ROOT", "fair_weight": 0.0, "nominal": {"gpu": 1}}],
    ),
    C(
        "zero weight borrowing preemptor cannot preempt",
        [],
        [U("a1", "a"), U("b1", "b"), U("b2", "b")],
        ("a_incoming", "a", 1, 0),
        queues=[Q("a", "all", 1, 0.0, reclaim="any"), Q("b", "all", 1, 1.0)],
    ),
    C(
        "zero weight both: can preempt",
        ["b1"],
        [U("b1", "b"), U("b2", "b"), U("b3", "b")],
        ("a_incoming", "a", 2, 0),
        queues=[Q("a", "all", 1, 0.0, reclaim="any"), Q("b", "all", 0, 0.0)],
        cohorts=[{"name": "all", "nominal": {"gpu": 3}}],
    ),
    C(
        "nonzero both: can preempt",
        ["b1"],
        [U("b1", "b"), U("b2", "b"), U("b3", "b")],
        ("a_incoming", "a", 2, 0),
        queues=[Q("a", "all", 1, 1.0, reclaim="any"), Q("b", "all", 0, 1.0)],
        cohorts=[{"name": "all", "nominal": {"gpu": 3}}],
    ),
    C(
        "reclaim borrowable quota from user using the most",
        ["b1"],
        [U("a1", "a"), U("a2", "a"), U("a3", "a")] + [U(f"b{i}", "b") for i in range(1, 6)] + [U("c1", "c")],
        ("a_incoming", "a", 1, 0),
    ),
    C(
        "CQ with higher weight can preempt more",
        ["b1", "b2"],
        [U("a1", "a"), U("a2", "a"), U("a3", "a")] + [U(f"b{i}", "b") for i in range(1, 7)],
        ("a_incoming", "a", 2, 0),
        queues=[
            Q("a", "all", 3, 2.0, within="lower-priority", reclaim="any"),
            Q("b", "all", 3, within="lower-priority", reclaim="any"),
            Q("c", "all", 3, within="lower-priority", reclaim="any"),
        ],
    ),
    C(
        "deep preemption",
        ["b1"],
        [U("b1", "b")],
        ("a1", "a", 1, 0),
        queues=[Q("a", "AAA", 0, reclaim="any"), Q("b", "BBB", 0)],
        cohorts=[
            {"name": "A", "parent": "ROOT", "fair_weight": 1.01},
            {"name": "AA", "parent": "A"},
            {"name": "AAA", "parent": "AA"},
            {"name": "B", "parent": "ROOT", "fair_weight": 0.99},
            {"name": "BB", "parent": "B"},
            {"name": "BBB", "parent": "BB"},
            {"name": "C", "parent": "ROOT"},
            {"name": "CC", "parent": "C"},
            {"name": "CCC", "parent": "CC"},
            {"name": "CCCC", "parent": "CCC", "nominal": {"gpu": 1}},
        ],
    ),
    C(
        "skipped by first strategy kept for second",
        ["y1", "x1"],
        [U("p1", "p", 2), U("y1", "y", 2), U("y2", "y", 2), U("x1", "x"), U("x2", "x")],
        ("p_incoming", "p", 1, 0),
        queues=[Q("p", "A", 2, 1.0, reclaim="any"), Q("y", "A", 2, 1.0), Q("x", "ROOT", 1, 1.0)],
        cohorts=[{"name": "A", "parent": "ROOT", "fair_weight": 0.0, "nominal": {"gpu": 1}}],
    ),
]


# labgang's addition to less-than-initial-share (launcher/scheduler/fairpreempt.py): a candidate
# is refused when its removal leaves its queue's branch, with an earlier victim of that branch put
# back, below the preemptor's share. In the first two rows Kueue's rules take {b1, b2} (with both
# rules: b1 by the first, b 1000 -> 667 >= a's 500, then b2 by the second, 500 < 667), leaving b at
# 0; b1, requeued (333 < 500), would then evict a_incoming back. In the last row the second rule
# takes b2 after b1: b1 put back would leave b at 333 >= a's 133.
OWN_CASES = [
    C(
        "second rule refused when an earlier victim could return",
        [],
        [U("b1", "b", 1), U("b2", "b", 2)],
        ("a_incoming", "a", 6, 0),
        queues=[Q("a", "all", 3, reclaim="any"), Q("b", "all", 0, 0.5)],
        cohorts=[{"name": "all", "nominal": {"gpu": 3}}],
    ),
    C(
        "less-than-initial-share alone: refused the same way",
        [],
        [U("b1", "b", 1), U("b2", "b", 2)],
        ("a_incoming", "a", 6, 0),
        strategies=["less-than-initial-share"],
        queues=[Q("a", "all", 3, reclaim="any"), Q("b", "all", 0, 0.5)],
        cohorts=[{"name": "all", "nominal": {"gpu": 3}}],
    ),
    C(
        "second rule kept when no earlier victim could return",
        ["b1", "b2"],
        [U("b1", "b", 2), U("b2", "b", 1)],
        ("a_incoming", "a", 6, 0),
        queues=[Q("a", "all", 2, 5.0, reclaim="any"), Q("b", "all", 0)],
        cohorts=[{"name": "all", "nominal": {"gpu": 4}}],
    ),
]


@pytest.mark.parametrize("want,args,kw", OWN_CASES)
def test_second_rule_never_lets_a_victim_return(want: list[str], args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    assert first_preemption(*args, **kw) == set(want)


@pytest.mark.parametrize("want,args,kw", CASES)
def test_fair_preemption_matches_kueue(want: list[str], args: tuple[Any, ...], kw: dict[str, Any]) -> None:
    assert first_preemption(*args, **kw) == set(want)


def test_nominal_first_across_resources() -> None:
    """Kueue's "nominal first": a within its nominal of one resource reclaims it from a borrower even
    though its share (from borrowing another resource) is the higher one."""
    running = ["a_cheap1", "a_cheap2", "a_cheap3", "a_cheap4", "a_cheap5", "a_prem1", "a_prem2", "b_prem1"]
    jobs: list[dict[str, Any]] = [
        {"id": n, "queue": n[0], "submit": -10.0 * (i + 1), "running": True}
        | ({"mig": "1g.10gb"} if "cheap" in n else {})
        for i, n in enumerate(running)
    ]
    doc: dict[str, Any] = {
        "scenario": {"name": "nominal-first", "fair_sharing": True},
        "nodes": [{"name": "n1", "gpus": 3}, {"name": "m1", "gpus": 6, "mig": ["1g.10gb"]}],
        "queues": [
            {"name": "a", "cohort": "all", "nominal": {"gpu": 3, "mig-1g.10gb": 0}, "reclaim_within_cohort": "any"},
            {"name": "b", "cohort": "all", "nominal": {"gpu": 0, "mig-1g.10gb": 6}},
        ],
        "jobs": [*jobs, {"id": "a_incoming", "queue": "a"}],
    }
    sim = Simulation(parse_scenario(doc))
    results: list[Any] = []
    sim.add_cycle_hook(lambda snap, res: results.append(res))
    sim.run_instant()
    assert [p.victims for p in results[0].preempted] == [("b_prem1",)]
