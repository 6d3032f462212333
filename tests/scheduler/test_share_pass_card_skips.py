"""A share's victim pass that skips the quota check after a share of its own queue is taken off that
changed no queue's charge and left a card the preemptor may not join (``preemption.skip_unjoinable_cards``,
:meth:`.shares.ShareBook.may_join`) changes no decision, and every search logs the same readers
(``ShareBook.readers``: whom a failed search's verdict does not answer) as the pass that checks the
quota after each such victim. Checked against the cycle with it switched off over random backlogs of
shares of many users, whole jobs and preemptors (``share_backlogs.backlog``, with and without queues
that share cards with each other), and over steady-state cycles of the scheduler benchmark's share
backlog, where these searches are most of a cycle's share searches."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from labgang.launcher.scheduler import preemption, run_cycle
from labgang.launcher.scheduler.shares import ShareBook
from labgang.launcher.simulate import engine
from labgang.launcher.simulate.scenario import parse_scenario
from share_backlogs import backlog

from tests.scheduler.test_share_pass_end_first import searches


@contextmanager
def skipping(on: bool) -> Iterator[None]:
    saved = preemption.skip_unjoinable_cards
    preemption.skip_unjoinable_cards = on
    try:
        yield
    finally:
        preemption.skip_unjoinable_cards = saved


@pytest.mark.parametrize("seed", range(300))
def test_skipping_unjoinable_cards_changes_no_decision(seed: int) -> None:
    snap = backlog(seed, mixing=seed % 3 == 0)  # with queues sharing cards the share pass is not used
    fast = run_cycle(snap)
    with skipping(False):
        assert run_cycle(snap) == fast


@pytest.mark.parametrize("seed", range(150))
def test_each_search_logs_the_same_readers(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = searches(monkeypatch, seed)
    with skipping(False):
        slow = searches(monkeypatch, seed)
    assert fast == slow


def test_checks_are_skipped_and_cards_joined(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: over the same backlogs checks are skipped, and some cards a victim left are ones
    the preemptor may join (the check then runs)."""
    answers = {True: 0, False: 0}
    real = ShareBook.may_join

    def counting(self, d, req, queue, user):
        got = real(self, d, req, queue, user)
        answers[got] += 1
        return got

    monkeypatch.setattr(ShareBook, "may_join", counting)
    for seed in range(150):
        run_cycle(backlog(seed, mixing=False))
    assert answers[True] > 0 and answers[False] > 0, answers


def bench_cycles(count: int) -> list:
    """The first ``count`` steady-state snapshots (after the fill) of ``bench/scheduler_scale.py
    --nodes 100 --shares``'s share backlog (2,000 jobs)."""
    path = Path(__file__).resolve().parents[2] / "bench" / "scheduler_scale.py"
    spec = importlib.util.spec_from_file_location("scheduler_scale_bench", path)
    assert spec is not None and spec.loader is not None
    scheduler_scale = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scheduler_scale)
    scenario = parse_scenario(scheduler_scale.build(100, 2000, 1, shares=1))
    real = engine.run_cycle
    seen: list = []
    filled = False

    def capture(snapshot):
        nonlocal filled
        result = real(snapshot)
        if filled:
            seen.append(snapshot)
        filled = filled or bool(result.admitted)
        return result

    engine.run_cycle = capture
    try:
        sim = engine.Simulation(scenario)
        while sim.next_time() is not None and len(seen) < count:
            sim.run_instant()
    finally:
        engine.run_cycle = real
    return seen


def test_bench_share_backlog_decides_alike() -> None:
    """The benchmark's own backlog (user-keyed and queue-keyed share queues, MPS and shards, quotas
    over-full): every captured cycle decides alike with the skip on and off."""
    for snap in bench_cycles(12):
        fast = run_cycle(snap)
        with skipping(False):
            assert run_cycle(snap) == fast
