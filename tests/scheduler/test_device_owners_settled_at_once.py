"""DeviceBook's owner memo (``capacity._owners``) settles a device one job claims at once and
looks again only at a device several jobs claim: over random steps in which several jobs leave
and join together (shares of one card leaving in the same step, a card left by its last two
claimants and taken by a new job in one step, a job listing a device twice), every book's owners
equal the full build's (the last claimant in snapshot order) and the update path is taken."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.scheduler import capacity
from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot
from sched_builders import Cluster, device_owners, job


def _updates(monkeypatch) -> list[int]:
    """Count the calls of ``_owners`` that updated the last answer (its owner list kept)."""
    count = [0]
    build = capacity._owners

    def counting(layout, snapshot, unavailable):
        last = capacity._last_owners
        got = build(layout, snapshot, unavailable)
        count[0] += last is not None and capacity._last_owners is not None and capacity._last_owners[3] is last[3]
        return got

    monkeypatch.setattr(capacity, "_owners", counting)
    return count


def _nodes() -> tuple[tuple, list[str]]:
    cluster = Cluster()
    for k in range(4):
        cluster.node(f"n{k}", 8)
    nodes = tuple(cluster.nodes)
    return nodes, [d.uuid for n in nodes for d in n.devices]


def test_a_shared_card_left_by_both_claimants_and_taken_in_one_step(monkeypatch) -> None:
    updates = _updates(monkeypatch)
    nodes, uuids = _nodes()
    template = job("t").running((), 0)

    def on(name: str, *devs: str) -> RunningJob:
        return dataclasses.replace(template, id=name, placement=(RankPlacement(0, "n0", devs),))

    filler = [on(f"f{k}", uuids[8 + k]) for k in range(8)]  # enough jobs that updating costs less
    a, b, c, d = on("a", uuids[0]), on("b", uuids[0], uuids[1]), on("c", uuids[0]), on("d", uuids[2], uuids[2])
    steps = [
        (*filler, a, b),  # a and b share card 0: b is its owner (the last claimant)
        (*filler, c),  # both leave in one step and c takes card 0; card 1 is left to nobody
        (*filler, c, a, b),  # three claimants again
        (*filler,),  # all three leave at once
        (*filler, d),  # a job listing one card twice
        (*filler, a),  # it leaves while another job takes another card
    ]
    for k, running in enumerate(steps):
        snap = Snapshot(now=float(k), nodes=nodes, queues=(), running=running, pending=())
        assert DeviceBook(snap).owner == device_owners(snap, uuids), f"step {k}"
    assert updates[0] == len(steps) - 1


def test_several_jobs_leaving_and_joining_together_equal_the_full_build(monkeypatch) -> None:
    updates = _updates(monkeypatch)
    rng = random.Random(5)
    nodes, uuids = _nodes()
    template = job("t").running((), 0)
    live: list[RunningJob] = []
    serial = 0

    def fresh() -> RunningJob:
        nonlocal serial
        serial += 1
        roll = rng.random()
        if roll < 0.5:  # a share of one of a few cards
            devs: tuple[str, ...] = (rng.choice(uuids[:6]),)
        elif roll < 0.6:  # a device listed twice
            devs = (rng.choice(uuids[6:]),) * 2
        else:  # whole devices
            devs = tuple(rng.sample(uuids[6:], rng.choice([1, 2, 4])))
        return dataclasses.replace(template, id=f"j{serial}", placement=(RankPlacement(0, "n0", devs),))

    live = [fresh() for _ in range(40)]
    for step in range(400):
        for _ in range(rng.choice([0, 1, 2, 3])):  # several leave at once
            if live:
                live.pop(rng.randrange(len(live)))
        for _ in range(rng.choice([0, 1, 2, 3])):  # several join at once, anywhere in the order
            live.insert(rng.randrange(len(live) + 1), fresh())
        snap = Snapshot(now=float(step), nodes=nodes, queues=(), running=tuple(live), pending=())
        assert DeviceBook(snap).owner == device_owners(snap, uuids), f"step {step}"
    assert updates[0] > 300
