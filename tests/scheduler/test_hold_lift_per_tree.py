"""A try lifts only the idle holds of its own cohort tree (``_Cycle.lift_own_tree_only``): a hold taken
in another tree is never read by the job's fit, search or reason, so leaving it in place around the
try changes no decision. Checked against the cycle that lifts every hold that does not bind (another
tree's never does) over random backlogs spread over two cohorts and a queue of none
(``test_failure_memo_per_tree.backlogs``: heads of one tree hold idle quota while another's jobs try),
over every cycle of the property tests' random cohort forests, and over steady-state cycles of the
scheduler benchmark's share backlog (four cohorts)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from hypothesis import given, settings
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.snapshot import Snapshot
from test_properties import run_to_end, tree_scenarios  # type: ignore[import-not-found]

from tests.scheduler.test_failure_memo_per_tree import backlogs
from tests.scheduler.test_share_pass_card_skips import bench_cycles


@contextmanager
def lifting_every_tree() -> Iterator[None]:
    saved = cycle_module._Cycle.lift_own_tree_only
    cycle_module._Cycle.lift_own_tree_only = False
    try:
        yield
    finally:
        cycle_module._Cycle.lift_own_tree_only = saved


@pytest.mark.parametrize("seed", range(150))
def test_lifting_own_tree_holds_only_changes_no_decision(seed: int) -> None:
    for snap in backlogs(seed):
        fast = run_cycle(snap)
        with lifting_every_tree():
            assert run_cycle(snap) == fast


def same_without(snap: Snapshot, result: object) -> None:
    """A cycle hook: the cycle lifting every tree's holds decides as the one that ran."""
    with lifting_every_tree():
        assert run_cycle(snap) == result


@settings(max_examples=80, deadline=None, derandomize=True, database=None)
@given(tree_scenarios())
def test_tries_decide_alike_over_cohort_forests(data: dict) -> None:
    run_to_end(data, [same_without], until=300.0)


def test_bench_backlog_decides_alike() -> None:
    for snap in bench_cycles(12):
        fast = run_cycle(snap)
        with lifting_every_tree():
            assert run_cycle(snap) == fast


def test_other_trees_holds_stay_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: over the same backlogs, jobs try while another tree's idle hold is in place."""
    tried = 0
    real = cycle_module._Cycle._try_job

    def counting(self: cycle_module._Cycle, e) -> cycle_module.Outcome:
        nonlocal tried
        root = self._root(e.spec.name)
        tried += any(self._root(q) != root for q, _ in self.idle_hold)
        return real(self, e)

    monkeypatch.setattr(cycle_module._Cycle, "_try_job", counting)
    for seed in range(30):
        for snap in backlogs(seed):
            run_cycle(snap)
    assert tried > 0
