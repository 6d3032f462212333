"""The order phase's height memo (``_Cycle.memo_heights``: a job's fitting-subtree height kept per
queue, resource and devices until the cycle's copy changes) changes no decision: checked against the
cycle that asks the quota book every time, over random backlogs of shares of many users, whole jobs
and preemptors (``share_backlogs.backlog``), in a flat cohort, in a tree of cohorts, and with fair
sharing (whose heads ask the height too).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from labgang.launcher.model import GPU, CohortSpec
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.quota import QuotaBook
from labgang.launcher.scheduler.snapshot import Snapshot
from share_backlogs import backlog


def in_a_tree(snap: Snapshot) -> Snapshot:
    """``snap`` with its queues in two child cohorts of one root (one owning quota, one with a
    borrowing limit), so heights reach 2."""
    where = {"a": "lab1", "d": "lab1", "b": "lab2", "e": "lab2"}
    queues = tuple(replace(q, cohort=where.get(q.name, "lab")) for q in snap.queues)
    cohorts = (
        CohortSpec("lab"),
        CohortSpec("lab1", parent="lab", nominal={GPU: 1}),
        CohortSpec("lab2", parent="lab", borrowing_limit={GPU: 2}),
    )
    return replace(snap, queues=queues, cohorts=cohorts)


def with_fair_sharing(snap: Snapshot) -> Snapshot:
    return replace(in_a_tree(snap), sharing=replace(snap.sharing, fair_sharing=True))


@pytest.mark.parametrize("shape", [lambda s: s, in_a_tree, with_fair_sharing], ids=["flat", "tree", "fair"])
@pytest.mark.parametrize("seed", range(60))
def test_the_height_memo_changes_no_decision(seed: int, shape, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = shape(backlog(seed))
    fast = run_cycle(snap)
    monkeypatch.setattr(cycle_module._Cycle, "memo_heights", False)
    assert run_cycle(snap) == fast


def test_the_memo_answers_and_heights_vary(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: the memo answers some asks, and the heights asked differ (0, 1 and 2 occur)."""
    asked = computed = 0
    heights: set[int] = set()
    height = cycle_module._Cycle.height

    def counting(self, e):
        nonlocal asked
        asked += 1
        got = height(self, e)
        heights.add(got)
        return got

    real = QuotaBook.fit_height

    def counting_fit(self, queue, res, request):
        nonlocal computed
        computed += 1
        return real(self, queue, res, request)

    monkeypatch.setattr(cycle_module._Cycle, "height", counting)
    monkeypatch.setattr(QuotaBook, "fit_height", counting_fit)
    for seed in range(40):
        run_cycle(in_a_tree(backlog(seed)))
    assert 0 < computed < asked
    assert {0, 1, 2} <= heights
