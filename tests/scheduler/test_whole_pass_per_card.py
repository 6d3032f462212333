"""A whole-device victim pass that checks only its last state and asks per card which sharers to take
off (``preemption.per_card_whole_passes``: a share that leaves a sharer on its card stays on it, the
card's sharers are taken off together when its last one is reached) changes no decision against the
pass that takes every share it held on paper off for real before one that frees its card
(:class:`.shares.QuietLeaves`). Checked over random backlogs of shares of many users, whole jobs and
preemptors (``share_backlogs.backlog``) and over steady-state cycles of the scheduler benchmark's share
backlog, where whole-device preemptors walk many shares of their queue."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from labgang.launcher.scheduler import preemption, run_cycle
from labgang.launcher.scheduler.state import CycleState
from share_backlogs import backlog

from tests.scheduler.test_share_pass_card_skips import bench_cycles


@contextmanager
def per_card(on: bool) -> Iterator[None]:
    saved = preemption.per_card_whole_passes
    preemption.per_card_whole_passes = on
    try:
        yield
    finally:
        preemption.per_card_whole_passes = saved


@pytest.mark.parametrize("seed", range(300))
def test_per_card_whole_passes_change_no_decision(seed: int) -> None:
    snap = backlog(seed, mixing=seed % 3 == 0)  # with queues sharing cards the last-state pass is not used
    fast = run_cycle(snap)
    with per_card(False):
        assert run_cycle(snap) == fast


@pytest.mark.parametrize("seed", range(100))
def test_each_whole_pass_answers_alike(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pass by pass: the same answer, the cycle's copy (quota usage, devices, share book) as it was."""
    real = preemption._whole_pass_fails
    seen: list[tuple[str, bool]] = []

    def both(state, spec, job, cands, allow_borrow):
        before = (dict(state.quota._usage), list(state.devices.owner), dict(state.cards.used) if state.cards else None)
        with per_card(False):
            slow = real(state, spec, job, cands, allow_borrow)
        fast = real(state, spec, job, cands, allow_borrow)
        assert fast == slow
        after = (dict(state.quota._usage), list(state.devices.owner), dict(state.cards.used) if state.cards else None)
        assert after == before
        seen.append((job.id, fast))
        return fast

    monkeypatch.setattr(preemption, "_whole_pass_fails", both)
    run_cycle(backlog(seed, mixing=False))


def test_shares_stay_on_their_cards_and_cards_are_freed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: over the same backlogs whole-device passes walk shares that stay on their card
    and shares taken off (their card freed)."""
    counts = {"share candidates": 0, "shares taken off": 0}
    inside = False
    remove = CycleState.remove

    def counting(state, job_id):
        counts["shares taken off"] += inside and state.running[job_id].request.shared
        return remove(state, job_id)

    walk = preemption._whole_pass_fails_per_card

    def walking(state, spec, job, cands, allow_borrow):
        nonlocal inside
        counts["share candidates"] += sum(1 for c in cands if c.job.request.shared)
        inside = True
        try:
            return walk(state, spec, job, cands, allow_borrow)
        finally:
            inside = False

    monkeypatch.setattr(preemption, "_whole_pass_fails_per_card", walking)
    monkeypatch.setattr(CycleState, "remove", counting)
    for seed in range(150):
        run_cycle(backlog(seed, mixing=False))
    assert 0 < counts["shares taken off"] < counts["share candidates"], counts


def test_bench_share_backlog_decides_alike() -> None:
    """The benchmark's own backlog: every captured cycle decides alike with per-card passes on and off."""
    for snap in bench_cycles(12):
        fast = run_cycle(snap)
        with per_card(False):
            assert run_cycle(snap) == fast
