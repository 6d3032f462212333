"""The running jobs' maps a cycle's state was handed by the memos on the previous snapshot (its
``running`` by id, ``state._plain_usage``; the device book's request map,
``capacity._running_requests``) are changed in place into the next snapshot's once the state is
retired (``CycleState.retire``: ``run_cycle`` does it when its cycle is over), and copied while
it is not: over a random sequence of snapshots (jobs coming and going, new ones in the middle of
the order, views rebuilt as new equal objects), every state's map equals the full build and the
in-place path is taken; a state that was never retired keeps its maps as they were, however
many snapshots come after it."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.model import QueueSpec
from labgang.launcher.scheduler import capacity
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot
from labgang.launcher.scheduler.state import CycleState
from sched_builders import Cluster, job


def _snapshots(seed: int, steps: int) -> list[Snapshot]:
    rng = random.Random(seed)
    cluster = Cluster()
    cluster.node("n0", 8)
    nodes = tuple(cluster.nodes)
    queues = (QueueSpec(name="default", nominal={"gpu": 8}),)
    template = job("t").running((RankPlacement(0, "n0", ("GPU-x",)),), 0)
    live: list[RunningJob] = []
    out = []
    for step in range(steps):
        for _ in range(rng.choice([0, 1, 1, 2])):
            roll = rng.random()
            new = dataclasses.replace(template, id=f"j{step}_{roll:.3f}", queue="default", seq=step)
            if roll < 0.1 and live:  # a new job that is not the last in the order
                live.insert(rng.randrange(len(live)), new)
            else:
                live.append(new)
        for _ in range(rng.choice([0, 1, 1, 2])):
            if live:
                live.pop(rng.randrange(len(live)))
        if live and rng.random() < 0.2:  # a view built anew: an equal, new object
            i = rng.randrange(len(live))
            live[i] = dataclasses.replace(live[i])
        pending = (job(f"p{step}").pending(0),)
        out.append(Snapshot(now=float(step), nodes=nodes, queues=queues, running=tuple(live), pending=pending))
    return out


def _full(snap: Snapshot) -> list[tuple[str, RunningJob]]:
    return [(j.id, j) for j in snap.running]


def _same(got: dict[str, RunningJob], want: list[tuple[str, RunningJob]]) -> bool:
    return list(got) == [k for k, _ in want] and all(a is b for a, (_, b) in zip(got.values(), want, strict=True))


def test_retired_maps_are_reused_and_stay_the_full_build() -> None:
    reused = dict.fromkeys(["running", "requests"], 0)
    last: CycleState | None = None
    for k, snap in enumerate(_snapshots(7, 400)):
        before = None if last is None else (last.running, capacity._last_requests and capacity._last_requests[1])
        st = CycleState(snap)
        assert _same(st.running, _full(snap)), f"step {k}"
        expected = {p.id: p.request for p in snap.pending} | {r.id: r.request for r in snap.running}
        if before is not None:
            reused["running"] += st.running is before[0]
            reused["requests"] += capacity._last_requests is not None and capacity._last_requests[1] is before[1]
        if k % 3 == 0:  # the request map read now (the book builds its own from the memo's)
            assert st.devices.requests == expected, f"step {k}"
        st.retire()
        last = st
    assert reused["running"] > 250
    assert reused["requests"] > 250


def test_a_state_not_retired_keeps_its_maps() -> None:
    kept: list[tuple[CycleState, list[tuple[str, RunningJob]], dict]] = []
    for k, snap in enumerate(_snapshots(8, 300)):
        st = CycleState(snap)
        expected = {p.id: p.request for p in snap.pending} | {r.id: r.request for r in snap.running}
        if k % 10 == 0:
            kept.append((st, _full(snap), expected))  # never retired: read again below
        else:
            st.retire()
        for old, running, _ in kept:
            assert _same(old.running, running), f"step {k}: a kept state's running jobs changed"
    for old, _, requests in kept:  # its request map, read only now (it is built when first read)
        assert old.devices.requests == requests
