"""Random backlogs of shares of many users (partly used cards of their own), whole jobs and
preemptors, for the tests that check a share shortcut of the cycle against the cycle without it."""

from __future__ import annotations

import random

from labgang.launcher.model import GPU, GpuSharing, JobRequest, QueueSpec, ReclaimWithinCohort, WithinQueue
from labgang.launcher.scheduler import run_cycle
from labgang.launcher.scheduler.snapshot import Device, Node, PendingJob, RunningJob, Snapshot

SHARING = GpuSharing(shards_per_gpu=4, mps=True)
NODES = tuple(Node(n, tuple(Device(f"GPU-{n}-{i}", n, GPU) for i in range(4))) for n in ("n1", "n2", "n3"))
USERS = [f"u{i}" for i in range(8)]


def queues(mixing: bool = True) -> tuple[QueueSpec, ...]:
    """The backlogs' queues; with ``mixing``, a and d share cards with each other (``share_with``)."""
    lower, reclaim = WithinQueue.LOWER_PRIORITY, ReclaimWithinCohort.ANY
    a_with, d_with = (("d",), ("a",)) if mixing else ((), ())
    return (
        QueueSpec("a", nominal={GPU: 3}, share_gpus="queue", share_with=a_with, cohort="lab", within_queue=lower),
        QueueSpec("d", nominal={GPU: 2}, share_gpus="user", share_with=d_with, cohort="lab", within_queue=lower),
        QueueSpec(
            "b", nominal={GPU: 3}, share_gpus="user", cohort="lab", within_queue=lower, reclaim_within_cohort=reclaim
        ),
        QueueSpec(
            "e",
            nominal={GPU: 2},
            share_gpus="user",
            cohort="lab",
            within_queue=WithinQueue.LOWER_OR_NEWER_EQUAL_PRIORITY,
            reclaim_within_cohort=reclaim,
        ),
        QueueSpec("c", nominal={GPU: 2}, cohort="lab", within_queue=lower),
    )


def request(rng: random.Random, queue: str) -> JobRequest:
    if queue != "c" and rng.random() < 0.8:
        return JobRequest(mps=rng.choice([25, 50])) if rng.random() < 0.3 else JobRequest(shards=rng.randint(1, 3))
    return JobRequest(per_worker=rng.choice([1, 1, 2]))


def backlog(seed: int, mixing: bool = True) -> Snapshot:
    """A cluster filled by low-priority jobs of many users (partly used cards of their own), then a
    burst of pending shares and whole jobs of mixed priority, several per user and size; with
    ``mixing`` two of its queues share cards with each other (:func:`queues`)."""
    rng = random.Random(seed)
    specs = queues(mixing)
    running: list[RunningJob] = []
    for i in range(24):  # fill, one cycle per job, keeping what each cycle admits
        q = rng.choice("abdec")
        pj = PendingJob(f"r{i}", q, request(rng, q), 0, float(i), i, float(i), user=rng.choice(USERS))
        snap = Snapshot(float(i), NODES, specs, tuple(running), (pj,), gpu_sharing=SHARING)
        for a in run_cycle(snap).admitted:
            running.append(
                RunningJob(a.job_id, q, pj.request, 0, pj.submit_time, pj.submit_time, a.placement, user=pj.user)
            )
    pending = []
    for i in range(40):
        q = rng.choice("abdec")
        at = 100.0 + i
        pj = PendingJob(f"p{i}", q, request(rng, q), rng.choice([0, 0, 5, 10]), at, 100 + i, at, user=rng.choice(USERS))
        pending.append(pj)
    return Snapshot(200.0, NODES, specs, tuple(running), tuple(pending), gpu_sharing=SHARING)
