"""A share's failed victim search answers later shares of its queue only while the queue's exact share
use is as it was (``_Cycle._own_stamp``): a share admitted in between can leave room inside the whole
gpu the queue's rounded-up share use already counts, where a later share fits at no quota charge once a
victim is taken off, so room does not only shrink for shares. Before, a stronger share's failed search
(recorded before such an admission) answered a weaker share that finds victims.

Over random backlogs of shares of many users, whole jobs and preemptors (``share_backlogs.backlog``)
with the pending jobs' submit times shuffled (so a weaker job is often submitted later than a stronger
one), the cycle's decisions and reasons equal the cycle's that runs every search (214, 773 and 911
were found differing before the search stamps counted claims from other queues and before a failure
answered by a search verdict stopped answering other users: test_search_memo_claims.py)."""

from __future__ import annotations

import dataclasses
import random

import pytest
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.snapshot import Snapshot
from share_backlogs import backlog


def shuffled(seed: int) -> Snapshot:
    """``backlog(seed)`` with its pending jobs' submit times shuffled among them."""
    snap = backlog(seed)
    times = [j.submit_time for j in snap.pending]
    random.Random(seed).shuffle(times)
    pending = tuple(dataclasses.replace(j, submit_time=t) for j, t in zip(snap.pending, times, strict=True))
    return dataclasses.replace(snap, pending=pending)


def test_a_share_admitted_in_between_ends_the_verdict(monkeypatch: pytest.MonkeyPatch) -> None:
    """A case where the share use in the stamps decides (the cards charged held alone: seed 47): p29
    (queue a, priority 5, 3 shards) finds a victim (r9, a share of a) only because shares admitted
    to a (or to d, which shares cards with a) since an earlier share's failed search ended that
    verdict; without the share use in the stamps the verdict answers p29 and it waits. (Under the
    earlier charge, ``ceil`` of a queue's summed shares, the case was backlog(111) with p20 submitted
    at 124.5; under cards held alone that backlog's decisions no longer depend on the stamps.)"""
    snap = shuffled(47)
    got = run_cycle(snap)
    assert "p29" in [p.job_id for p in got.preempted]
    monkeypatch.setattr(cycle_module._Cycle, "share_use_in_search_stamps", False)
    assert "p29" not in [p.job_id for p in run_cycle(snap).preempted]
    monkeypatch.setattr(cycle_module._Cycle, "share_use_in_search_stamps", True)
    monkeypatch.setattr(cycle_module._Cycle, "_search_known_to_fail", lambda self, e: False)
    assert run_cycle(snap) == got


# 1107: a seed where the verdicts without the share use in their stamps change a decision (this fixes it)
# 47, 127, 193, 1358: seeds whose decisions depend on the share use in the stamps under cards charged held alone
@pytest.mark.parametrize("seed", [*range(200), 1107, 214, 773, 911, 1358])
def test_search_verdicts_change_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = shuffled(seed)
    fast = run_cycle(snap)
    monkeypatch.setattr(cycle_module._Cycle, "_search_known_to_fail", lambda self, e: False)
    assert run_cycle(snap) == fast
