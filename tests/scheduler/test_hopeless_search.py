"""A job no running job can be evicted for makes no victim search (``_Cycle.skip_hopeless_searches``,
``preemption.no_candidates``): its queue reclaims nothing within a cohort and none of its own queue's
running jobs of its resource, terminating or not, has a priority ``within_queue`` lets it evict.
Checked over random clusters full of jobs of three priorities (some terminating) whose queues take
every ``within_queue`` and ``reclaim_within_cohort`` policy, in a cohort or not: every cycle's decisions
are the ones of the cycle that searches for every job, and wherever ``no_candidates`` says so the
search's own candidate list is empty."""

from __future__ import annotations

import random

import pytest
from labgang.launcher.model import QueueSpec
from labgang.launcher.scheduler import cycle as cycle_module
from labgang.launcher.scheduler import preemption, run_cycle
from labgang.launcher.scheduler.snapshot import PendingJob, Snapshot
from labgang.launcher.scheduler.state import CycleState
from sched_builders import Cluster, job, queue

POLICIES = ["never", "lower-priority", "lower-or-newer-equal-priority"]


def full_cluster(seed: int) -> Snapshot:
    """Two or three queues (random ``within_queue``, ``reclaim_within_cohort`` and cohort) on three
    8-GPU nodes filled with jobs of priorities 0, 5 and 10, some terminating, some submitted after
    the pending jobs; pending jobs of those priorities and 1-8 GPUs, mostly not fitting."""
    rng = random.Random(seed)
    names = ["a", "b", "c"][: rng.randint(2, 3)]
    queues = []
    for name in names:
        qb = queue(name).nominal(gpu=8).within_queue(rng.choice(POLICIES))
        if rng.random() < 0.7:
            qb = qb.cohort("lab").reclaim(rng.choice(["never", "never", "any", "lower-priority"]))
        queues.append(qb.build())
    cluster = Cluster().node("n0", gpus=8).node("n1", gpus=8).node("n2", gpus=8)
    free = 24
    k = 0
    while free > 0:
        # whole nodes' worth first (4, 2, 1 GPUs each): the placement never splits what is left
        n = min(rng.choice([1, 1, 2, 4]), 1 << ((free & -free).bit_length() - 1))
        b = job(f"r{k}").queue(rng.choice(names)).gpus(n).priority(rng.choice([0, 0, 5, 10]))
        b = b.submitted(rng.uniform(0.0, 80.0)).admitted(80.0 + k)  # some submitted after pending jobs
        if rng.random() < 0.2:
            b = b.terminating()
        cluster.run(b)
        free -= n
        k += 1
    pending = [
        job(f"p{i}").queue(rng.choice(names)).gpus(rng.choice([1, 2, 4, 8])).priority(rng.choice([0, 0, 5, 10]))
        .submitted(30.0 + i)
        for i in range(rng.randint(4, 14))
    ]  # fmt: skip
    return cluster.snapshot(queues, pending, now=100.0)


@pytest.mark.parametrize("seed", range(200))
def test_skipping_hopeless_searches_changes_no_decision(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = full_cluster(seed)
    fast = run_cycle(snap)
    monkeypatch.setattr(cycle_module._Cycle, "skip_hopeless_searches", False)
    assert run_cycle(snap) == fast


def test_no_candidates_only_where_the_search_has_none(monkeypatch: pytest.MonkeyPatch) -> None:
    """Wherever a cycle's try finds a job hopeless, :func:`.preemption.candidates` (both of its
    forms) lists nobody for it; and not vacuous: jobs are found hopeless, others are not and some
    of those preempt."""
    verdicts = {True: 0, False: 0}
    real = preemption.no_candidates

    def checked(state: CycleState, spec: QueueSpec, pending: PendingJob) -> bool:
        answer = real(state, spec, pending)
        verdicts[answer] += 1
        if answer:
            for nominal_only in (True, False):
                assert preemption.candidates(state, spec, pending, set(), nominal_only) == []
        return answer

    monkeypatch.setattr(cycle_module, "no_candidates", checked)
    preempted = 0
    for seed in range(200):
        preempted += len(run_cycle(full_cluster(seed)).preempted)
    assert verdicts[True] > 100 and verdicts[False] > 100
    assert preempted > 20
