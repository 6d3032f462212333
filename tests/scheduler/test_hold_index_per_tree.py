"""A try finds the idle holds of its own cohort tree and resource in a list kept per (resource, tree
root) as holds are taken (``_Cycle.holds_by_tree``), not by walking every hold. Checked against the
cycle that walks them, over share backlogs with elastic gangs and per-user limits (``try_backlogs``:
one cohort, two cohorts and a queue of none, no cohort) and the property tests' random cohort forests."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.snapshot import Snapshot
from test_properties import run_to_end, tree_scenarios  # type: ignore[import-not-found]
from try_backlogs import try_backlogs


@pytest.mark.parametrize("seed", range(120))
def test_holds_found_per_tree_change_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for snap in try_backlogs(seed):
        fast = run_cycle(snap)
        with monkeypatch.context() as m:
            m.setattr(cycle_module._Cycle, "holds_by_tree", False)
            assert run_cycle(snap) == fast


def same_without(snap: Snapshot, result: object) -> None:
    """A cycle hook: the cycle walking every hold decides as the one that ran."""
    saved = cycle_module._Cycle.holds_by_tree
    cycle_module._Cycle.holds_by_tree = False
    try:
        assert run_cycle(snap) == result
    finally:
        cycle_module._Cycle.holds_by_tree = saved


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(tree_scenarios())
def test_tries_decide_alike_over_cohort_forests(data: dict) -> None:
    run_to_end(data, [same_without], until=300.0)


def test_holds_are_lifted_from_the_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: tries lift holds found in the lists, of their own queue and of another."""
    lifted = {"own": 0, "other": 0}
    real = cycle_module._Cycle._hold_binds

    def binds(self, q, holder, res, need):
        got = real(self, q, holder, res, need)
        lifted["other"] += not got
        return got

    real_try = cycle_module._Cycle._try_job

    def trying(self, e):
        lifted["own"] += (e.spec.name, e.job.request.resource) in self.idle_hold
        return real_try(self, e)

    monkeypatch.setattr(cycle_module._Cycle, "_hold_binds", binds)
    monkeypatch.setattr(cycle_module._Cycle, "_try_job", trying)
    for seed in range(30):
        for snap in try_backlogs(seed):
            run_cycle(snap)
    assert lifted["own"] > 0 and lifted["other"] > 0
