"""A cycle's quota usage comes from a memo on the previous snapshot when every running job is
plain (``state._plain_usage``): over a random sequence of snapshots (jobs coming and going in
two queues of a cohort and a MIG resource, views rebuilt as new objects, a job listed twice,
now and then a share of a card, an ``--exclusive`` job or a job counting host memory, and
queues that count memory in their quota or not), every cycle's usage and running jobs equal
the job-by-job sum's (the memo off): the running jobs by id in snapshot order, each the very view
of its snapshot, also where the map is updated from the last cycle's (``state._by_id_from``: new
jobs put in the middle, views built anew)."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.model import GPU, JobRequest
from labgang.launcher.scheduler import state
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot
from labgang.launcher.scheduler.state import CycleState
from sched_builders import Cluster, job, queue


def _figures(cs: CycleState, resources: list[str]) -> tuple[list[tuple[str, int]], dict[tuple[str, str], int]]:
    """The running jobs by id in the map's order, each with its view's identity (the very view of
    this snapshot, not an equal one of an earlier cycle), and the usage per (queue, resource)."""
    usage = {(q.name, r): cs.quota.usage(q.name, r) for q in cs.snapshot.queues for r in resources}
    return [(job_id, id(view)) for job_id, view in cs.running.items()], usage


def test_usage_equals_the_job_by_job_sum_over_a_random_sequence() -> None:
    rng = random.Random(11)
    cluster = Cluster()
    for k in range(4):
        cluster.node(f"n{k}", 8)
    nodes = tuple(cluster.nodes)
    resources = [GPU, "mig-1g.10gb", "memory"]
    plain = [queue("a").nominal(gpu=16).cohort("lab").build(), queue("b").nominal(gpu=16).cohort("lab").build()]
    host = [dataclasses.replace(q, nominal={**q.nominal, "memory": 1 << 40}) for q in plain]
    template = job("t").running((RankPlacement(0, "n0", ("GPU-x",)),), 0)
    kinds = {
        "plain": JobRequest(workers=1, per_worker=2),
        "gang": JobRequest(workers=2, per_worker=1),
        "mig": JobRequest(resource="mig-1g.10gb"),
        "share": JobRequest(shards=2),
        "exclusive": JobRequest(exclusive=True),
        "memory": JobRequest(mem=1 << 30),
    }
    weights = {"plain": 10, "gang": 5, "mig": 3, "share": 0.3, "exclusive": 0.3, "memory": 0.6}
    live: list[RunningJob] = []
    queues = plain
    hits = dict.fromkeys(["memo", "fallback", "rebuilt", "duplicate", "host quota", "inserted"], 0)
    for step in range(500):
        roll = rng.random()
        if roll < 0.45:
            kind = rng.choices(list(weights), list(weights.values()))[0]
            new = dataclasses.replace(template, id=f"j{step}", queue=rng.choice("ab"), request=kinds[kind], seq=step)
            if live and rng.random() < 0.3:  # not last in the snapshot (the driver keeps submission order)
                live.insert(rng.randrange(len(live)), new)
                hits["inserted"] += 1
            else:
                live.append(new)
        elif roll < 0.8 and live:
            live.pop(rng.randrange(len(live)))
        elif roll < 0.9 and live:  # a view built anew: an equal, new object
            i = rng.randrange(len(live))
            live[i] = dataclasses.replace(live[i])
            hits["rebuilt"] += 1
        elif roll < 0.95:  # the config changes: memory counted in quotas or not
            queues = host if queues is plain else plain
            hits["host quota"] += queues is host
        running = list(live)
        if running and rng.random() < 0.05:  # the same job listed twice
            running.insert(rng.randrange(len(running)), dataclasses.replace(rng.choice(running)))
            hits["duplicate"] += 1
        snap = Snapshot(now=float(step), nodes=nodes, queues=tuple(queues), running=tuple(running), pending=())
        kept, state.memo_usage = state._last_plain, False  # the reference must not reset the memo
        try:
            reference = _figures(CycleState(snap), resources)
        finally:
            state._last_plain, state.memo_usage = kept, True
        got = _figures(CycleState(snap), resources)
        hits["memo" if state._last_plain is not None else "fallback"] += 1
        assert got == reference, f"step {step}"
    assert all(hits.values()), hits
