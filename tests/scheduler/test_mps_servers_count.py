"""An MPS share's reason names whose MPS servers hold the cards with room for it; the share book reads
that off open MPS cards counted per first sharer's user and room (``ShareBook.count_servers``), kept
beside the open-card index, instead of walking the index's cards of every queue and user. Over random
backlogs of shares of many users (``share_backlogs.backlog``) and the same backlogs with every share
an MPS one, the cycle's decisions and reasons equal the cycle's with the count off; and the count
agrees with the walk after every change of the index, victim searches' removals included."""

from __future__ import annotations

import dataclasses

import pytest
from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.shares import ShareBook
from labgang.launcher.scheduler.snapshot import Snapshot
from share_backlogs import backlog


def all_mps(snap: Snapshot) -> Snapshot:
    """``snap`` with every pending share asking MPS (25 % per shard it asked), so MPS cards meet many users."""

    def mps(req: JobRequest) -> JobRequest:
        return JobRequest(mps=25 * req.shards) if req.shards else req

    pending = tuple(dataclasses.replace(j, request=mps(j.request)) for j in snap.pending)
    return dataclasses.replace(snap, pending=pending)


@pytest.mark.parametrize("seed", range(100))
def test_the_count_changes_no_reason(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for snap in (backlog(seed), all_mps(backlog(seed))):
        fast = run_cycle(snap)
        with monkeypatch.context() as m:
            m.setattr(ShareBook, "count_servers", False)
            assert run_cycle(snap) == fast


def test_the_count_agrees_with_the_walk_at_every_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: the notes are asked for with servers to name, and after every change of the
    open-card index the counts per user are the walk's."""
    index = ShareBook._index
    checked = named = 0

    def checking(self: ShareBook, d: int) -> None:
        nonlocal checked
        index(self, d)
        walked: dict[str, dict[int, int]] = {}
        for by_user in self._open["mps"].values():
            for owner, rooms in by_user.items():
                for room, cards in rooms.items():
                    walked.setdefault(owner, {})[room] = walked.get(owner, {}).get(room, 0) + len(cards)
        assert self._servers == walked
        checked += 1

    note = ShareBook._mps_servers_note

    def counting(self: ShareBook, units: int, roomy: int) -> str:
        nonlocal named
        got = note(self, units, roomy)
        named += "whose MPS server" in got
        return got

    monkeypatch.setattr(ShareBook, "_index", checking)
    monkeypatch.setattr(ShareBook, "_mps_servers_note", counting)
    for seed in range(40):
        run_cycle(all_mps(backlog(seed)))
    assert checked > 100 and named > 10, (checked, named)
