"""A whole-device victim search that takes off on paper only the share victims that leave a sharer
on a card their queue holds alone (``shares.QuietLeaves``; such a card stays held alone, so its
queue's share charge does not change) changes no decision: checked against the search that takes every victim off
the cycle's copy, over random backlogs of shares of many users, whole jobs and preemptors
(``share_backlogs.backlog``).
"""

from __future__ import annotations

import pytest
from labgang.launcher.scheduler import preemption, run_cycle
from labgang.launcher.scheduler.shares import QuietLeaves
from labgang.launcher.scheduler.snapshot import RunningJob
from labgang.launcher.scheduler.state import CycleState
from share_backlogs import backlog


@pytest.mark.parametrize("seed", range(150))
def test_quiet_share_leaves_change_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = backlog(seed)
    fast = run_cycle(snap)
    monkeypatch.setattr(preemption, "defer_quiet_shares", False)
    assert run_cycle(snap) == fast


def test_shares_are_held_and_taken_off_later(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: over the same backlogs, whole-device searches hold shares on paper and take some
    of them off for real later (before a share that frees its card, or a fill-back). None held takes
    a gpu off its queue's count: it leaves a sharer on a card its queue holds alone, still charged
    whole (``shares`` module doc)."""
    held: set[str] = set()
    held_n = taken_later = gpus_off = 0
    hold, remove = QuietLeaves.hold, CycleState.remove

    def counting_hold(self: QuietLeaves, job: RunningJob) -> int | None:
        nonlocal held_n, gpus_off
        got = hold(self, job)
        if got is not None:
            held.add(job.id)
            held_n += 1
            gpus_off += got > 0
        return got

    def counting_remove(self: CycleState, job_id: str) -> bool:
        nonlocal taken_later
        taken_later += job_id in held
        return remove(self, job_id)

    monkeypatch.setattr(QuietLeaves, "hold", counting_hold)
    monkeypatch.setattr(CycleState, "remove", counting_remove)
    for seed in range(60):
        held.clear()
        run_cycle(backlog(seed))
    assert held_n > 0 and taken_later > 0 and gpus_off == 0
