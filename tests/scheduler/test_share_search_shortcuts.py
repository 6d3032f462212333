"""The victim search's shortcuts for shares change no decision: checked against the cycle with each
of them switched off, over random backlogs of shares of many users, whole jobs and preemptors
(``share_backlogs.backlog``).

- the failed-search memo (``_Cycle._search_known_to_fail``): a share's verdict answers a larger
  share of its mode, and other users' (``ShareBook.readers``);
- a whole-device preemptor not checking its fit again after taking off a share that freed neither
  a quota gpu nor its card (``CycleState.remove`` returning False);
- nominal-only candidates not collected for a search that runs only its borrowing pass;
- the share book's open-card index brought up to date only when read (``ShareBook._flush``).
"""

from __future__ import annotations

import pytest
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import preemption, run_cycle
from labgang.launcher.scheduler.shares import ShareBook
from labgang.launcher.scheduler.state import CycleState
from share_backlogs import backlog


def switch_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cycle_module._Cycle, "_search_known_to_fail", lambda self, e: False)
    remove = CycleState.remove

    def seen_always(self: CycleState, job_id: str) -> bool:
        remove(self, job_id)
        return True

    monkeypatch.setattr(CycleState, "remove", seen_always)
    candidates = preemption.candidates
    monkeypatch.setattr(
        preemption,
        "candidates",
        lambda state, spec, job, excluded, nominal_only=True: candidates(state, spec, job, excluded),
    )
    reopen = ShareBook._reopen

    def eager(self: ShareBook, d: int) -> None:
        reopen(self, d)
        self._flush()

    monkeypatch.setattr(ShareBook, "_reopen", eager)


@pytest.mark.parametrize("seed", range(150))
def test_the_search_shortcuts_change_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = backlog(seed)
    fast = run_cycle(snap)
    switch_off(monkeypatch)
    assert run_cycle(snap) == fast


def test_the_shortcuts_are_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: over the same backlogs a larger share is answered by a smaller one's failed search,
    and shares are taken off that change nothing a whole-device request reads (where a whole-device
    search skips its fit check)."""
    larger = skipped = 0
    failed = cycle_module._Cycle._search_failed

    def counting(self, e, key, stamp, user=None):
        nonlocal larger
        got = failed(self, e, key, stamp, user)
        if got and e.job.request.shared:
            per = e.job.request.shards or e.job.request.mps
            larger += all(p < per for _, _, p, *_ in self._search_fails[key][1])
        return got

    remove = CycleState.remove

    def counting_remove(self: CycleState, job_id: str) -> bool:
        nonlocal skipped
        seen = remove(self, job_id)
        skipped += not seen
        return seen

    monkeypatch.setattr(cycle_module._Cycle, "_search_failed", counting)
    monkeypatch.setattr(CycleState, "remove", counting_remove)
    for seed in range(60):
        run_cycle(backlog(seed))
    assert larger > 0 and skipped > 0
