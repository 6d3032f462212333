"""A share's quota note (``ShareBook.quota_note``: what the share is and what its queue's shares are
charged, and why) is kept per what it reads: the queue's cards held alone, its units on cards mixed
with other queues' and its units in use, and the share asked (``ShareBook.memo_quota_notes``).
Checked against the cycle without the memo over share backlogs with and without queues sharing
cards, with elastic gangs and per-user limits (``try_backlogs``), and by asking every note both ways."""

from __future__ import annotations

import pytest
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.shares import ShareBook
from share_backlogs import backlog
from try_backlogs import try_backlogs


@pytest.mark.parametrize("seed", range(120))
def test_the_quota_note_memo_changes_no_reason(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for snap in [backlog(seed, mixing=True), *try_backlogs(seed)]:
        fast = run_cycle(snap)
        with monkeypatch.context() as m:
            m.setattr(ShareBook, "memo_quota_notes", False)
            assert run_cycle(snap) == fast


def test_every_kept_note_is_the_note_made_now(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each note the memo answers equals the one made anew; not vacuous: some are answered, of queues
    with shares on mixed cards too."""
    answered = mixed = 0
    real = ShareBook.quota_note

    def both(self, queue, req):
        nonlocal answered, mixed
        before = len(self._notes)
        got = real(self, queue, req)
        if len(self._notes) == before:
            answered += 1
            mixed += bool(self.mixed.get(queue))
        assert got == self._quota_note(queue, req)
        return got

    monkeypatch.setattr(ShareBook, "quota_note", both)
    for seed in range(60):
        run_cycle(backlog(seed, mixing=True))
        for snap in try_backlogs(seed):
            run_cycle(snap)
    assert answered > 0 and mixed > 0


def test_a_card_turning_mixed_changes_the_kept_note() -> None:
    """Another queue's share joining the card a queue held alone changes what the queue is charged (its
    units there now count on mixed cards), though its units in use do not: the note kept before is not
    the one given after."""
    from labgang.launcher.model import JobRequest
    from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot
    from labgang.launcher.scheduler.state import CycleState
    from share_backlogs import NODES, SHARING, queues

    one = JobRequest(shards=1)
    share = RunningJob("r0", "a", one, 0, 0.0, 0.0, (RankPlacement(0, "n1", ("GPU-n1-0",)),), user="u0")
    state = CycleState(Snapshot(1.0, NODES, queues(mixing=True), (share,), (), gpu_sharing=SHARING))
    cards = state.cards
    assert cards is not None
    before = cards.quota_note("a", one)
    assert "1 card held alone by a's shares" in before
    cards.take("j1", "d", "u0", one, cards.card_of["r0"])  # d shares cards with a (share_with)
    after = cards.quota_note("a", one)
    assert after == cards._quota_note("a", one) != before
    assert "on cards shared with other queues" in after
