"""A cycle's victim orders come from a memo on the last cycle's (``state._victims_memo``): over
a random sequence of snapshots (jobs of two queues and two resources coming and going, told to
stop, views rebuilt as new objects, equal priorities and admission times, a job listed twice),
every ``victims_in`` answer equals the full sort's (the memo off), asked in a random order and
sometimes not at all for a cycle."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.model import GPU, JobRequest
from labgang.launcher.scheduler import state
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot
from labgang.launcher.scheduler.state import CycleState
from sched_builders import Cluster, job, queue


def test_victim_orders_equal_the_full_sort_over_a_random_sequence() -> None:
    rng = random.Random(5)
    cluster = Cluster()
    cluster.node("n0", 8)
    nodes = tuple(cluster.nodes)
    queues = (queue("a").nominal(gpu=8).cohort("lab").build(), queue("b").nominal(gpu=8).cohort("lab").build())
    template = job("t").running((RankPlacement(0, "n0", ("GPU-x",)),), 0)
    requests = [JobRequest(per_worker=2), JobRequest(resource="mig-1g.10gb")]
    keys = [(q, r, t) for q in "ab" for r in (GPU, "mig-1g.10gb") for t in (False, True)]
    live: list[RunningJob] = []
    hits = dict.fromkeys(["asked", "skipped", "stopped", "rebuilt", "duplicate", "reordered"], 0)
    for step in range(600):
        roll = rng.random()
        if roll < 0.4:
            live.append(
                dataclasses.replace(
                    template,
                    id=f"j{step}",
                    queue=rng.choice("ab"),
                    request=rng.choice(requests),
                    priority=rng.choice([0, 0, 5, 10]),
                    admit_time=float(rng.randrange(0, step + 1, 7)),  # ties: seq and id decide
                    seq=rng.randrange(3),
                )
            )
        elif roll < 0.7 and live:
            live.pop(rng.randrange(len(live)))
        elif roll < 0.8 and live:  # told to stop: a new view, terminating
            i = rng.randrange(len(live))
            live[i] = dataclasses.replace(live[i], terminating=True)
            hits["stopped"] += 1
        elif roll < 0.9 and live:  # a view built anew: an equal, new object
            i = rng.randrange(len(live))
            live[i] = dataclasses.replace(live[i])
            hits["rebuilt"] += 1
        elif live:  # the snapshot lists them in another order
            rng.shuffle(live)
            hits["reordered"] += 1
        running = list(live)
        if running and rng.random() < 0.05:  # the same job listed twice
            running.insert(rng.randrange(len(running)), dataclasses.replace(rng.choice(running), priority=99))
            hits["duplicate"] += 1
        snap = Snapshot(now=float(step), nodes=nodes, queues=queues, running=tuple(running), pending=())
        if rng.random() < 0.3:  # a cycle that asks for no victims
            hits["skipped"] += 1
            continue
        asked = rng.sample(keys, rng.randint(1, len(keys)))
        kept, state.memo_victims = dict(state._last_victims), False  # the reference must not touch the memo
        try:
            reference = CycleState(snap)
            want = {k: [j.id for j in reference.victims_in(*k)] for k in asked}
        finally:
            state._last_victims.clear()
            state._last_victims.update(kept)
            state.memo_victims = True
        got = CycleState(snap)
        for k in asked:
            assert [j.id for j in got.victims_in(*k)] == want[k], f"step {step}, {k}"
            assert got.victims_in(*k) is got.victims_in(*k)  # one list per cycle
        hits["asked"] += len(asked)
    assert all(hits.values()), hits
