"""Backlogs for the tests of ``_Cycle._try``'s shortcuts (the quota check the size loop made, the quota
reasons kept, the idle holds found per tree): the share backlogs (``share_backlogs.backlog``) with
elastic gangs and per-user device limits added, in one cohort, spread over two cohorts and a queue of
none, and with no cohort at all."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler.snapshot import PendingJob, Snapshot
from share_backlogs import USERS, backlog

SPREAD = {"a": "lab1", "d": "lab1", "b": "lab2", "e": "lab2", "c": None}


def with_elastic(snap: Snapshot, seed: int) -> Snapshot:
    """``snap`` with elastic gangs (2-5 ranks of 1-2 gpus, at least 1 rank) pending in every queue, at
    priorities around its other jobs', and, for odd seeds, a device limit per user on two queues (an
    elastic gang then starts no larger than its user's room)."""
    rng = random.Random(seed * 7 + 3)
    extra = []
    for i in range(12):
        q = rng.choice("abdec")
        workers = rng.randint(2, 5)
        req = JobRequest(workers=workers, per_worker=rng.choice([1, 1, 2]), min_workers=rng.randint(1, workers - 1))
        at = 150.0 + i
        extra.append(PendingJob(f"x{i}", q, req, rng.choice([0, 5, 10]), at, 500 + i, at, user=rng.choice(USERS)))
    queues = snap.queues
    if seed % 2:
        queues = tuple(dataclasses.replace(q, max_gpus_per_user=2) if q.name in "bc" else q for q in queues)
    return dataclasses.replace(snap, queues=queues, pending=(*snap.pending, *extra))


def spread(snap: Snapshot, cohorts: dict[str, str | None]) -> Snapshot:
    """``snap`` with each queue moved to the cohort ``cohorts`` names (None: no cohort)."""
    return dataclasses.replace(snap, queues=tuple(dataclasses.replace(q, cohort=cohorts[q.name]) for q in snap.queues))


def try_backlogs(seed: int) -> list[Snapshot]:
    """``seed``'s share backlog with elastic gangs, in one cohort, spread over two, and with none."""
    snap = with_elastic(backlog(seed, mixing=seed % 3 == 0), seed)
    return [snap, spread(snap, SPREAD), spread(snap, dict.fromkeys("abdec"))]
