"""Verdicts shared across users: a share's failure, or failed preemption search, that met no shared
card with room for it answers the same share of every user of its queue. Checked against the cycle
without that sharing (the memos per user only) over random backlogs of shares, whole jobs and
preemptors."""

from __future__ import annotations

import random

import pytest
from labgang.launcher.model import GPU, GpuSharing, JobRequest, QueueSpec, ReclaimWithinCohort, WithinQueue
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.snapshot import Device, Node, PendingJob, RunningJob, Snapshot

SHARING = GpuSharing(shards_per_gpu=4, mps=True)
NODES = tuple(Node(n, tuple(Device(f"GPU-{n}-{i}", n, GPU) for i in range(4))) for n in ("n1", "n2"))


def queues() -> tuple[QueueSpec, ...]:
    lower, reclaim = WithinQueue.LOWER_PRIORITY, ReclaimWithinCohort.ANY
    return (
        QueueSpec(
            "a",
            nominal={GPU: 3},
            share_gpus="queue",
            share_with=("d",),
            cohort="lab",
            within_queue=lower,
            reclaim_within_cohort=reclaim,
        ),
        QueueSpec("d", nominal={GPU: 1}, share_gpus="user", share_with=("a",), cohort="lab", within_queue=lower),
        QueueSpec(
            "b", nominal={GPU: 3}, share_gpus="user", cohort="lab", within_queue=lower, reclaim_within_cohort=reclaim
        ),
        QueueSpec("c", nominal={GPU: 2}, cohort="lab", within_queue=lower),
    )


def request(rng: random.Random, queue: str) -> JobRequest:
    if queue != "c" and rng.random() < 0.7:
        return JobRequest(mps=rng.choice([25, 50, 75])) if rng.random() < 0.3 else JobRequest(shards=rng.randint(1, 3))
    return JobRequest(per_worker=rng.choice([1, 1, 2]))


def backlog(seed: int) -> Snapshot:
    """A cluster run full by low-priority jobs, then a burst of pending jobs of mixed priority."""
    rng = random.Random(seed)
    specs = queues()
    running: list[RunningJob] = []
    for i in range(12):  # fill, one cycle per job, keeping what each cycle admits
        q = rng.choice("abcd")
        pj = PendingJob(f"r{i}", q, request(rng, q), 0, float(i), i, float(i), user=f"u{rng.randrange(3)}")
        snap = Snapshot(float(i), NODES, specs, tuple(running), (pj,), gpu_sharing=SHARING)
        for a in run_cycle(snap).admitted:
            running.append(
                RunningJob(a.job_id, q, pj.request, 0, pj.submit_time, pj.submit_time, a.placement, user=pj.user)
            )
    pending = []
    for i in range(20):
        q = rng.choice("abcd")
        at, user = 100.0 + i, f"u{rng.randrange(4)}"
        pending.append(PendingJob(f"p{i}", q, request(rng, q), rng.choice([0, 5, 10]), at, 100 + i, at, user=user))
    return Snapshot(200.0, NODES, specs, tuple(running), tuple(pending), gpu_sharing=SHARING)


@pytest.mark.parametrize("seed", range(150))
def test_sharing_a_share_search_verdict_across_users_changes_no_decision(seed: int, monkeypatch) -> None:
    snap = backlog(seed)
    shared = run_cycle(snap)
    monkeypatch.setattr(cycle_module._Cycle, "share_verdicts_across_users", False)
    assert run_cycle(snap) == shared


def test_a_verdict_of_one_user_answers_another_users_share(monkeypatch) -> None:
    """Used at all: over the same backlogs some share is answered by another user's failed search,
    and some by another user's failure."""
    searches = failures = 0
    failed, known = cycle_module._Cycle._search_failed, cycle_module._Cycle._known_failure

    def counting_search(self, e, key, stamp, user=None):
        nonlocal searches
        got = failed(self, e, key, stamp, user)
        searches += got and cycle_module.ANY_USER in (key[-1] or ())
        return got

    def counting_failure(self, e):
        nonlocal failures
        own = self._fail_memo.get(e.cls)
        got = known(self, e)
        failures += got and (own is None or own[0] != self.version)
        return got

    monkeypatch.setattr(cycle_module._Cycle, "_search_failed", counting_search)
    monkeypatch.setattr(cycle_module._Cycle, "_known_failure", counting_failure)
    for seed in range(100):
        run_cycle(backlog(seed))
    assert searches > 0 and failures > 0
