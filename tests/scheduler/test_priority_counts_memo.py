"""The running jobs' priority counts per (queue, resource) (``state._priority_counts``, what
``CycleState.lowest_priority`` and so ``preemption.no_candidates`` read) are updated from the last
snapshot's: over random sequences of snapshots (jobs of two queues, two resources and three
priorities coming and going, new ones in the middle of the order, views rebuilt as new objects with
another priority or terminating) every answer equals the full count, every answer handed out earlier
still says what it said, and the lowest priority is the first of ``victims_in``'s lists, also for a
snapshot that lists one view twice or one id with two views."""

from __future__ import annotations

import dataclasses
import random

import pytest
from labgang.launcher.model import JobRequest, QueueSpec
from labgang.launcher.scheduler import state as state_module
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot
from labgang.launcher.scheduler.state import CycleState
from sched_builders import Cluster, job

QUEUES = ("a", "b")
RESOURCES = ("gpu", "mig-1g.10gb")


def _snapshots(seed: int, steps: int) -> list[Snapshot]:
    rng = random.Random(seed)
    cluster = Cluster()
    cluster.node("n0", 8)
    nodes = tuple(cluster.nodes)
    queues = tuple(QueueSpec(name=q, nominal={r: 8 for r in RESOURCES}) for q in QUEUES)
    template = job("t").running((RankPlacement(0, "n0", ("GPU-x",)),), 0)
    live: list[RunningJob] = []
    out = []
    for step in range(steps):
        for _ in range(rng.choice([0, 1, 1, 2])):
            new = dataclasses.replace(
                template,
                id=f"j{step}_{rng.random():.4f}",
                queue=rng.choice(QUEUES),
                request=JobRequest(resource=rng.choice(RESOURCES)),
                priority=rng.choice([0, 0, 5, 10]),
                seq=step,
            )
            if rng.random() < 0.1 and live:  # a new job that is not the last in the order
                live.insert(rng.randrange(len(live)), new)
            else:
                live.append(new)
        for _ in range(rng.choice([0, 1, 1, 2])):
            if live:
                live.pop(rng.randrange(len(live)))
        if live and rng.random() < 0.3:  # a view built anew: another priority, or terminating now
            i = rng.randrange(len(live))
            live[i] = dataclasses.replace(live[i], priority=rng.choice([0, 5, 10]), terminating=rng.random() < 0.5)
        pending = (job(f"p{step}").pending(0),)
        out.append(Snapshot(now=float(step), nodes=nodes, queues=queues, running=tuple(live), pending=pending))
    return out


def _full(snap: Snapshot) -> dict[tuple[str, str], dict[int, int]]:
    counts: dict[tuple[str, str], dict[int, int]] = {}
    for j in snap.running:
        per = counts.setdefault((j.queue, j.request.resource), {})
        per[j.priority] = per.get(j.priority, 0) + 1
    return counts


def _positive(counts: dict[tuple[str, str], dict[int, int]] | None) -> dict[tuple[str, str], dict[int, int]]:
    assert counts is not None
    assert all(n > 0 for per in counts.values() for n in per.values())  # a count at 0 is dropped
    return {k: per for k, per in counts.items() if per}


@pytest.mark.parametrize("seed", range(6))
def test_counts_are_the_full_count_and_answers_handed_out_stay(seed: int) -> None:
    state_module._last_priorities = None
    handed: list[tuple[dict[tuple[str, str], dict[int, int]], dict[tuple[str, str], dict[int, int]]]] = []
    updated = 0
    for k, snap in enumerate(_snapshots(seed, 300)):
        last = state_module._last_priorities
        got = state_module._priority_counts(snap.running)
        updated += last is not None and got is not last[1]
        assert _positive(got) == _full(snap), f"step {k}"
        assert got is not None
        handed.append((got, {key: dict(per) for key, per in got.items()}))
        for i, (answer, as_it_was) in enumerate(handed[-50:]):
            assert answer == as_it_was, f"an answer handed out at step {k - len(handed[-50:]) + 1 + i} changed"
    assert updated > 200  # the update path was taken


@pytest.mark.parametrize("seed", range(3))
def test_lowest_priority_is_the_first_of_the_victim_lists(seed: int) -> None:
    snaps = _snapshots(100 + seed, 200)
    last = snaps[-1].running
    twice = dataclasses.replace(snaps[-1], running=(*last, last[0]))  # one view listed twice
    # one id twice, as two views of other priorities (the state keeps the first: the later one is not counted)
    two_views = dataclasses.replace(snaps[-1], running=(*last, dataclasses.replace(last[0], priority=-1)))
    for k, snap in enumerate([*snaps, twice, two_views]):
        st = CycleState(snap)
        for q in QUEUES:
            for res in RESOURCES:
                firsts = [jobs[0].priority for t in (True, False) if (jobs := st.victims_in(q, res, t))]
                assert st.lowest_priority(q, res) == min(firsts, default=None), f"step {k}, {q}, {res}"
