"""DeviceBook's owner memo (``capacity._owners``) with cards that several running jobs claim for a
long time (shares of one card): over a random sequence of snapshots where shares come and go on
shared cards and the running jobs' order changes between snapshots, every book's owners equal the
full build's (the last claimant in snapshot order), and the memo's update path is taken."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.scheduler import capacity
from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot
from sched_builders import Cluster, device_owners, job


def test_owners_of_shared_cards_equal_the_full_build(monkeypatch) -> None:
    rng = random.Random(11)
    cluster = Cluster()
    for k in range(4):
        cluster.node(f"n{k}", 8)
    nodes = tuple(cluster.nodes)
    uuids = [d.uuid for n in nodes for d in n.devices]
    template = job("t").running((), 0)
    live: list[RunningJob] = [
        dataclasses.replace(template, id=f"s{k}", placement=(RankPlacement(0, "n0", (rng.choice(uuids[:8]),)),))
        for k in range(40)
    ]  # many shares on few cards, present from the start
    updates = 0
    build = capacity._owners

    def counting(layout, snapshot, unavailable):
        nonlocal updates
        last = capacity._last_owners
        got = build(layout, snapshot, unavailable)
        updates += last is not None and capacity._last_owners is not None and capacity._last_owners[3] is last[3]
        return got

    monkeypatch.setattr(capacity, "_owners", counting)
    for step in range(300):
        roll = rng.random()
        if roll < 0.35:  # a share joins a card (often one already shared) or a whole job starts
            devs = (rng.choice(uuids[:12]),) if rng.random() < 0.8 else tuple(rng.sample(uuids[12:], 2))
            live.insert(rng.randrange(len(live) + 1), dataclasses.replace(template, id=f"j{step}",
                        placement=(RankPlacement(0, "n0", devs),)))  # fmt: skip
        elif roll < 0.65 and live:  # one leaves
            live.pop(rng.randrange(len(live)))
        elif roll < 0.8 and len(live) > 1:  # the running jobs listed in another order
            i, k = rng.sample(range(len(live)), 2)
            live[i], live[k] = live[k], live[i]
        snap = Snapshot(now=float(step), nodes=nodes, queues=(), running=tuple(live), pending=())
        book = DeviceBook(snap)
        assert book.owner == device_owners(snap, uuids), f"step {step}"
    assert updates > 200
