"""The victim-order memo (``state._victims_memo``) updates its own members and keys in place from
one cycle to the next, and hands out a new list of jobs each time the order changed: over a random
sequence of snapshots, every ``victims_in`` answer equals the full sort (by ``victim_order``), and
an answer handed out earlier (states kept, never retired) still lists what it listed then,
however many snapshots came after it."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.model import GPU, JobRequest
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot, victim_order
from labgang.launcher.scheduler.state import CycleState
from sched_builders import Cluster, job, queue


def test_kept_answers_stay_and_new_ones_equal_the_full_sort() -> None:
    rng = random.Random(6)
    cluster = Cluster()
    cluster.node("n0", 8)
    nodes = tuple(cluster.nodes)
    queues = (queue("a").nominal(gpu=8).cohort("lab").build(), queue("b").nominal(gpu=8).cohort("lab").build())
    template = job("t").running((RankPlacement(0, "n0", ("GPU-x",)),), 0)
    live: list[RunningJob] = []
    kept: list[tuple[list[RunningJob], list[RunningJob]]] = []  # (an answer, what it listed then)
    for step in range(500):
        for _ in range(rng.choice([0, 1, 2])):
            live.append(
                dataclasses.replace(
                    template,
                    id=f"j{step}_{len(live)}",
                    queue=rng.choice("ab"),
                    request=JobRequest(per_worker=rng.choice([1, 2])),
                    priority=rng.choice([0, 5]),
                    admit_time=float(rng.randrange(0, step + 1, 3)),
                    seq=step,
                )
            )
        for _ in range(rng.choice([0, 1, 2])):
            if live:
                live.pop(rng.randrange(len(live)))
        snap = Snapshot(now=float(step), nodes=nodes, queues=queues, running=tuple(live), pending=())
        st = CycleState(snap)
        for q in "ab":
            got = st.victims_in(q, GPU)
            want = sorted((j for j in live if j.queue == q and not j.terminating), key=victim_order)
            assert got == want, f"step {step}, queue {q}"
            if step % 7 == 0:
                kept.append((got, list(got)))
        for answer, then in kept:
            assert answer == then, f"step {step}: an answer handed out earlier changed"
    assert len(kept) > 100
