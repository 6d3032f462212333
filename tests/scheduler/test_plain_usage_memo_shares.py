"""The cycle's usage memo (``state._plain_usage``) keeps its sums when running jobs are shares of a
card (their queues' shares are counted by the share book, not by the memo): over random sequences of
snapshots where shares and whole jobs come and go, all the shares now and then leave (the share book
is then not built where ``[sharing]`` is off), views are rebuilt as new objects, a job is listed twice
and now and then an ``--exclusive`` job forces the job-by-job sum, every cycle's running jobs, quota
usage, share use per queue and whether a share book is built equal the job-by-job sum's (the memo off).
"""

from __future__ import annotations

import dataclasses
import random

import pytest
from labgang.launcher.model import GPU, GpuSharing, JobRequest
from labgang.launcher.scheduler import state
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot
from labgang.launcher.scheduler.state import CycleState
from sched_builders import Cluster, job, queue

KINDS = {
    "whole": JobRequest(workers=1, per_worker=2),
    "gang": JobRequest(workers=2, per_worker=1),
    "mig": JobRequest(resource="mig-1g.10gb"),
    "shard": JobRequest(shards=1),
    "shards": JobRequest(shards=3),
    "mps": JobRequest(mps=50),
    "exclusive": JobRequest(exclusive=True),
}
WEIGHTS = {"whole": 6, "gang": 3, "mig": 2, "shard": 6, "shards": 3, "mps": 3, "exclusive": 0.3}


def _figures(cs: CycleState) -> tuple[list[str], dict[tuple[str, str], int], dict[str, int] | None]:
    usage = {(q.name, r): cs.quota.usage(q.name, r) for q in cs.snapshot.queues for r in (GPU, "mig-1g.10gb")}
    return list(cs.running), usage, None if cs.cards is None else dict(cs.cards.queue_use)


@pytest.mark.parametrize("seed", range(6))
def test_usage_with_shares_equals_the_job_by_job_sum(seed: int) -> None:
    rng = random.Random(seed)
    cluster = Cluster()
    for k in range(4):
        cluster.node(f"n{k}", 8)
    nodes = tuple(cluster.nodes)
    uuids = [d.uuid for n in nodes for d in n.devices]
    queues = (queue("a").nominal(gpu=16).cohort("lab").build(), queue("b").nominal(gpu=16).cohort("lab").build())
    sharing = [GpuSharing(), GpuSharing(shards_per_gpu=4, mps=True)][seed % 2]  # [sharing] off or on
    template = job("t").running((), 0)
    live: list[RunningJob] = []
    hits = dict.fromkeys(["memo with shares", "memo without", "fallback", "all shares left", "no book"], 0)
    state._last_plain = None
    for step in range(400):
        roll = rng.random()
        if roll < 0.45:
            kind = rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
            devs = (rng.choice(uuids[:6]),) if KINDS[kind].shared else (rng.choice(uuids[6:]),)
            live.append(
                dataclasses.replace(
                    template,
                    id=f"j{step}",
                    queue=rng.choice("ab"),
                    request=KINDS[kind],
                    seq=step,
                    placement=(RankPlacement(0, "n0", devs),),
                )
            )
        elif roll < 0.8 and live:
            live.pop(rng.randrange(len(live)))
        elif roll < 0.9 and live:  # a view built anew: an equal, new object
            i = rng.randrange(len(live))
            live[i] = dataclasses.replace(live[i])
        elif roll < 0.95:  # every share leaves at once
            hits["all shares left"] += any(j.request.shared for j in live)
            live = [j for j in live if not j.request.shared]
        running = list(live)
        if running and rng.random() < 0.03:  # the same job listed twice
            running.insert(rng.randrange(len(running)), dataclasses.replace(rng.choice(running)))
        snap = Snapshot(
            now=float(step), nodes=nodes, queues=queues, running=tuple(running), pending=(), gpu_sharing=sharing
        )
        kept, state.memo_usage = state._last_plain, False  # the reference must not reset the memo
        try:
            reference = _figures(CycleState(snap))
        finally:
            state._last_plain, state.memo_usage = kept, True
        got = _figures(CycleState(snap))
        memo = state._last_plain
        if memo is None:
            hits["fallback"] += 1
        else:
            hits["memo with shares" if memo[3] else "memo without"] += 1
        hits["no book"] += got[2] is None
        assert got == reference, f"step {step}"
    if sharing.enabled:
        hits["no book"] = 1  # [sharing] on: the share book is always built
    assert all(hits.values()), hits
