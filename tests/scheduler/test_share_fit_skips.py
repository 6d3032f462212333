"""A greedy victim pass that skips a fit check whose inputs did not change changes no decision
(``preemption.skip_unchanged_fits``): after a check failed on the quota, a victim that changed no
quota usage (nor, for a share preemptor, a share of its queue or of one it shares cards with: the
card it would take, and so its charge, may change) leaves it failing; after a
whole-device placement failed, a victim that freed no device leaves it failing. Checked against
the cycle that checks every step, over random backlogs of shares of many users, whole jobs and
preemptors (``share_backlogs.backlog``), with ``preemption.end_first`` on and off: with it, a pass that
can only fail is answered before its first step (``test_share_pass_end_first.py``; a share's still
skips quota checks on the way), so most steps these skips save are taken only without it.
"""

from __future__ import annotations

import pytest
from labgang.launcher.scheduler import preemption, run_cycle
from share_backlogs import backlog


@pytest.mark.parametrize("end_first", [True, False])
@pytest.mark.parametrize("seed", [*range(150), 348])
def test_skipping_unchanged_fit_checks_changes_no_decision(
    seed: int, end_first: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(preemption, "end_first", end_first)
    snap = backlog(seed)
    fast = run_cycle(snap)
    monkeypatch.setattr(preemption, "skip_unchanged_fits", False)
    assert run_cycle(snap) == fast


def test_fit_checks_are_skipped_for_both_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: over the same backlogs, checks are skipped after a share preemptor's quota
    failures and after whole-device placement failures."""
    skipped: dict[tuple[int, bool], int] = {}
    same = preemption._same_answer

    def counting(state, q, job, victim, why):
        got = same(state, q, job, victim, why)
        if got:
            key = (why, job.request.shared)
            skipped[key] = skipped.get(key, 0) + 1
        return got

    monkeypatch.setattr(preemption, "_same_answer", counting)
    monkeypatch.setattr(preemption, "end_first", False)
    # the differential test's backlogs: a share's quota check is skipped rarely (only after a share of
    # a queue it may not share with left a card whole), a whole-device placement check only after a
    # share on a card mixed with another queue's changed a charge but freed no card (seed 348)
    for seed in [*range(150), 348]:
        run_cycle(backlog(seed))
    assert skipped.get((preemption.QUOTA, True), 0) > 0
    # a whole-device preemptor's quota check is never skipped here: under cards charged held alone a
    # victim that changes no queue's charge frees no card either, and the greedy pass skips the check
    # before asking (a share that changed nothing a whole-device request reads)
    assert skipped.get((preemption.QUOTA, False), 0) == 0
    assert skipped.get((preemption.PLACE, False), 0) > 0
