"""Where no queue names another in ``share_with`` (``ShareBook.mixing`` False) a share joins only
cards of its own queue, so the quota check's "does it lower another queue's charge"
(``ShareBook.lowered``) answers None without placing the share (``ShareBook.place_unmixed`` on: it
places it all the same). Checked against that over share backlogs without and with queues that share
cards (``share_backlogs.backlog``), and the elastic-gang backlogs of ``try_backlogs``."""

from __future__ import annotations

import pytest
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.shares import ShareBook
from share_backlogs import backlog
from try_backlogs import try_backlogs


@pytest.mark.parametrize("seed", range(150))
def test_lowered_without_placing_changes_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for snap in [backlog(seed, mixing=False), backlog(seed, mixing=True), *try_backlogs(seed)[:1]]:
        fast = run_cycle(snap)
        with monkeypatch.context() as m:
            m.setattr(ShareBook, "place_unmixed", True)
            assert run_cycle(snap) == fast


def test_lowered_answers_as_when_placing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every ``lowered`` a cycle asks answers as the one that places the share, with queues sharing cards
    and without; not vacuous: with them, charges are found lowered, and without, it is asked."""
    found = {True: 0, False: 0}
    real = ShareBook.lowered

    def both(self, queue, req, user):
        got = real(self, queue, req, user)
        ShareBook.place_unmixed = True
        try:
            assert real(self, queue, req, user) == got
        finally:
            ShareBook.place_unmixed = False
        found[self.mixing] += 1 if (got is not None or not self.mixing) else 0
        return got

    monkeypatch.setattr(ShareBook, "lowered", both)
    for seed in range(40):
        run_cycle(backlog(seed, mixing=True))
        run_cycle(backlog(seed, mixing=False))
    assert found[True] > 0 and found[False] > 0
