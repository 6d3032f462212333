"""A job that did not start takes its quota fit (for its reason and its idle hold) from the check the
size loop made of the same request (``_Cycle.reuse_quota_check``), not from a second check: nothing
the loop did changed the cycle's copy. An elastic gang is judged at its floor, which the loop checked
last (or, where its user's limit cut its size, not as asked): it is checked again. Checked against the
cycle that always checks again, over share backlogs with elastic gangs and per-user limits
(``try_backlogs``) in one cohort, two and none."""

from __future__ import annotations

import pytest
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.state import CycleState
from try_backlogs import try_backlogs


@pytest.mark.parametrize("seed", range(120))
def test_reusing_the_size_loops_quota_check_changes_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for snap in try_backlogs(seed):
        fast = run_cycle(snap)
        with monkeypatch.context() as m:
            m.setattr(cycle_module._Cycle, "reuse_quota_check", False)
            assert run_cycle(snap) == fast


def test_checks_are_saved_and_elastic_gangs_fit_quota_only_at_their_floor(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: quota checks are saved, and elastic gangs that failed occur whose full size did not
    fit the quota while their floor did (a reused first check would give them a quota reason)."""
    calls = {True: 0, False: 0}
    floor_only = 0
    real_check = CycleState.quota_fits

    def counting(self, queue, req, **kw):
        calls[cycle_module._Cycle.reuse_quota_check] += 1
        return real_check(self, queue, req, **kw)

    real_try = cycle_module._Cycle._try_job

    def trying(self, e):
        nonlocal floor_only
        req = e.job.request
        if req.elastic:
            top = real_check(self.state, e.spec.name, req, job=e.job)
            low = real_check(self.state, e.spec.name, req.floor(), job=e.job)
            floor_only += not top and low
        return real_try(self, e)

    monkeypatch.setattr(CycleState, "quota_fits", counting)
    monkeypatch.setattr(cycle_module._Cycle, "_try_job", trying)
    for seed in range(30):
        for snap in try_backlogs(seed):
            run_cycle(snap)
            monkeypatch.setattr(cycle_module._Cycle, "reuse_quota_check", False)
            run_cycle(snap)
            monkeypatch.setattr(cycle_module._Cycle, "reuse_quota_check", True)
    assert calls[True] < calls[False]
    assert floor_only > 0
