"""The cycle's failure memo keys on the failing queue's cohort tree (``_Cycle.stamp``): an idle hold
taken in another tree leaves a class's failure valid, every other change of the cycle's copy ends it.
Over random backlogs of shares of many users, whole jobs and preemptors (``share_backlogs.backlog``)
with the queues spread over two cohorts and a queue of none (so heads of one tree hold idle quota while
classes of another keep failing), the cycle's decisions and reasons equal the cycle's with the memo
keyed on every change (``memo_per_tree`` off)."""

from __future__ import annotations

import dataclasses

import pytest
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.snapshot import Snapshot
from share_backlogs import backlog

COHORT = {"a": "lab1", "d": "lab1", "b": "lab2", "e": "lab2", "c": None}


def spread(snap: Snapshot, cohorts: dict[str, str | None]) -> Snapshot:
    """``snap`` with each queue moved to the cohort ``cohorts`` names (None: no cohort)."""
    queues = tuple(dataclasses.replace(q, cohort=cohorts[q.name]) for q in snap.queues)
    return dataclasses.replace(snap, queues=queues)


def backlogs(seed: int) -> list[Snapshot]:
    other = {**COHORT, "c": "lab2", "e": None}
    return [spread(backlog(seed), COHORT), spread(backlog(seed), other), backlog(seed)]


@pytest.mark.parametrize("seed", range(150))
def test_the_memo_per_tree_changes_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for snap in backlogs(seed):
        fast = run_cycle(snap)
        with monkeypatch.context() as m:
            m.setattr(cycle_module._Cycle, "memo_per_tree", False)
            assert run_cycle(snap) == fast


def test_the_memo_outlives_other_trees_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: over the same backlogs, failures are answered from the memo after an idle hold
    was taken in another tree since they were recorded (the global version moved, the stamp did not)."""
    answered = 0
    seen: dict[tuple, int] = {}  # per memo key: the cycle's version when it was recorded
    known = cycle_module._Cycle._known_failure

    def counting(self: cycle_module._Cycle, e) -> bool:
        nonlocal answered
        got = known(self, e)
        if got:
            stamp = self.stamp(e.spec.name)
            keys = [k for k in (e.cls, cycle_module._any_user_cls(e)) if k in self._fail_memo]
            answering = [k for k in keys if self._fail_memo[k][0] == stamp]
            answered += all(seen[k] != self.version for k in answering)
        return got

    remember = cycle_module._Cycle._remember_failure

    def remembering(self: cycle_module._Cycle, e, reason, readers=None) -> None:
        remember(self, e, reason, readers)
        seen[e.cls] = seen[cycle_module._any_user_cls(e)] = self.version

    monkeypatch.setattr(cycle_module._Cycle, "_known_failure", counting)
    monkeypatch.setattr(cycle_module._Cycle, "_remember_failure", remembering)
    for seed in range(60):
        for snap in backlogs(seed)[:2]:
            run_cycle(snap)
    assert answered > 0
