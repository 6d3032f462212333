"""A failed job's quota reason is kept per (version of the cycle's copy, queue, resource, devices,
devices asked) and answers the next job of the same key (``_Cycle.memo_quota_reasons``): a share and
a one-gpu job of one queue get the same words. A try that took an idle hold reads the hold unlifted
(later jobs of its queue see it lifted): its reason is neither kept nor answered from the memo; an
elastic gang's reason is of its floor, but the holds lifted for it are those its whole request
decides. Checked against the cycle without the memo over share backlogs with elastic gangs and
per-user limits (``try_backlogs``) and steady-state cycles of the scheduler benchmark's share backlog."""

from __future__ import annotations

import pytest
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import run_cycle
from try_backlogs import try_backlogs

from tests.scheduler.test_share_pass_card_skips import bench_cycles


@pytest.mark.parametrize("seed", range(120))
def test_the_quota_reason_memo_changes_no_reason(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    for snap in try_backlogs(seed):
        fast = run_cycle(snap)
        with monkeypatch.context() as m:
            m.setattr(cycle_module._Cycle, "memo_quota_reasons", False)
            assert run_cycle(snap) == fast


def test_bench_backlog_gets_the_same_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    for snap in bench_cycles(6):
        fast = run_cycle(snap)
        with monkeypatch.context() as m:
            m.setattr(cycle_module._Cycle, "memo_quota_reasons", False)
            assert run_cycle(snap) == fast


def test_the_memo_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Not vacuous: the memo answers reasons of shares and of whole jobs, and tries that took a hold occur."""
    answered: set[bool] = set()
    holds = 0
    real = cycle_module._Cycle._quota_reason

    def counting(self, q, req, asked, kept):
        nonlocal holds
        key = (self.version, q, req.resource, req.total, asked, cycle_module.NEED_MARK)
        if kept and self._quota_reasons_at == self.version and key in self._quota_reasons:
            answered.add(req.shared)
        holds += not kept
        return real(self, q, req, asked, kept)

    monkeypatch.setattr(cycle_module._Cycle, "_quota_reason", counting)
    for seed in range(30):
        for snap in try_backlogs(seed):
            run_cycle(snap)
    assert answered == {True, False}
    assert holds > 0


def test_holds_lifted_for_the_whole_request_key_the_reason() -> None:
    """An elastic gang and a plain job of one queue with the same floor, one right after the other at
    one version: the other queue's idle hold binds the gang's whole request (its queue's borrowing
    limit) but not the plain job's, so their reasons differ (1 gpu the cohort could lend, or 0); the
    memo keeps them apart by the devices asked."""
    from labgang.launcher.model import GPU, JobRequest, QueueSpec, ReclaimWithinCohort
    from labgang.launcher.scheduler.snapshot import Device, Node, PendingJob, RankPlacement, RunningJob, Snapshot

    never = ReclaimWithinCohort.NEVER
    nodes = (Node("n1", tuple(Device(f"G{i}", "n1", GPU) for i in range(8))),)
    queues = (
        QueueSpec("x", nominal={GPU: 3}, borrowing_limit={GPU: 0}, cohort="lab", reclaim_within_cohort=never),
        QueueSpec("y", nominal={GPU: 3}, cohort="lab", reclaim_within_cohort=never),
        QueueSpec("z", nominal={GPU: 2}, cohort="lab"),
    )
    running = tuple(
        RunningJob(f"r{i}", "z", JobRequest(), 0, 0.0, 0.0, (RankPlacement(0, "n1", (f"G{i}",)),)) for i in range(7)
    )
    pending = (
        PendingJob("y1", "y", JobRequest(per_worker=3), 10, 1.0, 1, 1.0),  # holds y's idle quota
        PendingJob("x0", "x", JobRequest(workers=3), 5, 2.0, 2, 2.0),  # holds x's
        PendingJob("x1", "x", JobRequest(workers=2, per_worker=2, min_workers=1), 5, 3.0, 3, 3.0),
        PendingJob("x2", "x", JobRequest(per_worker=2), 5, 4.0, 4, 4.0),
    )
    result = run_cycle(Snapshot(10.0, nodes, queues, running, pending))
    said = {p.job_id: p.reason.message for p in result.pending}
    assert result.held == ("y1", "x0")
    assert "has 0 of 8 lendable gpu unused" in said["x1"] and "can get 0 more" in said["x1"]
    assert "has 1 of 8 lendable gpu unused" in said["x2"] and "can get 1 more" in said["x2"]
