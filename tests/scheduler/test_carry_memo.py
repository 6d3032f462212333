"""A cycle's running jobs by id, quota usage and victim orders come from the previous cycle's,
updated for the jobs gone and new (``scheduler/carry.py``): over a random sequence of snapshots
(jobs starting and ending, views rebuilt as new objects, jobs told to stop, a job id listed
twice, the same object twice, a whole snapshot of new views, the same tuple handed again),
every :class:`CycleState` equals the full build: jobs by id in snapshot order (the first of an
id), usage summed per queue and resource, and each victim list a fresh sort of its queue's jobs in victim order."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.model import GPU, JobRequest, mig_resource
from labgang.launcher.scheduler.carry import build
from labgang.launcher.scheduler.snapshot import RunningJob, Snapshot, victim_order
from labgang.launcher.scheduler.state import CycleState
from sched_builders import Cluster, queue

QUEUES = ("a", "b", "c")
RESOURCES = (GPU, mig_resource("1g.10gb"))


def _reference(running: tuple[RunningJob, ...]) -> tuple[list[tuple[str, RunningJob]], dict[tuple[str, str], int]]:
    first: dict[str, RunningJob] = {}
    for j in running:
        first.setdefault(j.id, j)
    usage: dict[tuple[str, str], int] = {}
    for j in first.values():
        usage[(j.queue, j.request.resource)] = usage.get((j.queue, j.request.resource), 0) + j.request.total
    return list(first.items()), usage


def test_carried_state_equals_the_full_build_over_a_random_sequence() -> None:
    rng = random.Random(11)
    cluster = Cluster().node("n0", 8)
    nodes = tuple(cluster.nodes)
    queues = tuple(queue(q).nominal(gpu=8).build() for q in QUEUES)
    live: list[RunningJob] = []
    hits = {"started": 0, "ended": 0, "rebuilt": 0, "stopping": 0, "duplicate_id": 0, "same_object": 0, "all_new": 0}
    hits["same_tuple"] = 0
    last_tuple: tuple[RunningJob, ...] | None = None
    again = random.Random(12)  # its own draws: the sequence of changes above stays the same
    for step in range(600):
        roll = rng.random()
        if roll < 0.35 or not live:
            req = JobRequest(workers=rng.randint(1, 2), per_worker=rng.randint(1, 4), resource=rng.choice(RESOURCES))
            live.append(
                RunningJob(
                    f"j{step}", rng.choice(QUEUES), req, rng.choice((0, 0, 5, 10)), float(step),
                    float(rng.choice((step, step - 1, 3))), (), seq=step,
                )
            )  # fmt: skip
            hits["started"] += 1
        elif roll < 0.6:
            live.pop(rng.randrange(len(live)))
            hits["ended"] += 1
        elif roll < 0.75:  # a view built anew: an equal, new object
            i = rng.randrange(len(live))
            live[i] = dataclasses.replace(live[i])
            hits["rebuilt"] += 1
        elif roll < 0.85:  # told to stop: a new object in another victim list
            i = rng.randrange(len(live))
            live[i] = dataclasses.replace(live[i], terminating=True)
            hits["stopping"] += 1
        elif roll < 0.88:  # another caller: every view new
            live = [dataclasses.replace(j) for j in live]
            hits["all_new"] += 1
        running = list(live)
        if rng.random() < 0.05:  # another job with a taken id: the first in snapshot order counts
            twin = dataclasses.replace(rng.choice(running), priority=99, seq=-1)
            running.insert(rng.randrange(len(running) + 1), twin)
            hits["duplicate_id"] += 1
        if rng.random() < 0.05:  # the same object listed twice
            running.append(running[0])
            hits["same_object"] += 1
        given = tuple(running)
        if last_tuple is not None and again.random() < 0.1:  # nothing changed: the driver hands the same tuple
            given = last_tuple
            hits["same_tuple"] += 1
        last_tuple = given
        snap = Snapshot(now=float(step), nodes=nodes, queues=queues, running=given, pending=())
        state = CycleState(snap)
        by_id, usage = _reference(snap.running)
        assert list(state.running.items()) == by_id, f"step {step}"
        for q in QUEUES:
            for res in RESOURCES:
                assert state.quota.usage(q, res) == usage.get((q, res), 0), f"step {step}"
                for terminating in (False, True):
                    want = sorted(
                        (
                            j
                            for _, j in by_id
                            if j.queue == q and j.request.resource == res and j.terminating == terminating
                        ),
                        key=victim_order,
                    )
                    got = state.victims_in(q, res, terminating)
                    assert [id(j) for j in got] == [id(j) for j in want], f"step {step} {q} {res} {terminating}"
    assert all(hits.values()), hits


def test_build_keeps_the_first_job_of_an_id() -> None:
    req = JobRequest(workers=1, per_worker=2)
    one = RunningJob("x", "a", req, 0, 0.0, 0.0, ())
    two = dataclasses.replace(one, queue="b")
    out = build((one, two))
    assert out.running == {"x": one}
    assert out.usage == {("a", GPU): 2}
