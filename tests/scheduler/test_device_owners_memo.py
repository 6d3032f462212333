"""DeviceBook's owners come from a memo on the previous snapshot (``capacity._owners``): over a
random sequence of snapshots on one nodes tuple (jobs coming and going, views rebuilt as new
objects, overlapping claims, a job listed twice, devices withheld and given back), every book's
owners equal the full build's: the last job in snapshot order claiming a device, else
``UNAVAILABLE`` for a withheld one, else None."""

from __future__ import annotations

import dataclasses
import random

from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob, Snapshot
from sched_builders import Cluster, device_owners, job


def test_owners_equal_the_full_build_over_a_random_sequence() -> None:
    rng = random.Random(7)
    cluster = Cluster()
    for k in range(6):
        cluster.node(f"n{k}", 8)
    nodes = tuple(cluster.nodes)
    uuids = [d.uuid for n in nodes for d in n.devices]
    template = job("t").running((), 0)
    free = list(uuids)
    live: list[RunningJob] = []
    withheld: frozenset[str] = frozenset()
    hits = {"overlap": 0, "duplicate": 0, "rebuilt": 0, "unavailable": 0}
    for step in range(400):
        roll = rng.random()
        if roll < 0.4 and free:  # a job starts on free devices (sometimes on a device gone from the node list)
            rng.shuffle(free)
            take, free = free[: rng.randint(1, 4)], free[4:]
            devs = tuple(take) + (("GPU-gone-0",) if rng.random() < 0.1 else ())
            live.append(dataclasses.replace(template, id=f"j{step}", placement=(RankPlacement(0, "n0", devs),)))
        elif roll < 0.7 and live:  # a job ends
            gone = live.pop(rng.randrange(len(live)))
            free += [u for rp in gone.placement for u in rp.devices if u in uuids]
        elif roll < 0.8 and live:  # a job's view built anew: an equal, new object
            i = rng.randrange(len(live))
            live[i] = dataclasses.replace(live[i])
            hits["rebuilt"] += 1
        elif roll < 0.9:  # devices withheld or given back (a new frozenset, maybe equal)
            withheld = frozenset(rng.sample(uuids, rng.randint(0, 3)))
            hits["unavailable"] += 1
        running = list(live)
        if running and rng.random() < 0.1:  # a claim on a device another job holds
            victim = rng.choice(running)
            dev = victim.placement[0].devices[0]
            running.insert(rng.randrange(len(running) + 1), dataclasses.replace(template, id=f"x{step}",
                           placement=(RankPlacement(0, "n0", (dev,)),)))  # fmt: skip
            hits["overlap"] += 1
        if running and rng.random() < 0.05:  # the same job object listed twice
            running.append(running[0])
            hits["duplicate"] += 1
        snap = Snapshot(now=float(step), nodes=nodes, queues=(), running=tuple(running), pending=(),
                        unavailable=withheld)  # fmt: skip
        book = DeviceBook(snap)
        assert book.owner == device_owners(snap, uuids), f"step {step}"
        book.take([d for d in range(len(uuids)) if book.is_free(d)][:2], "someone")  # a book's changes stay its own
    assert all(hits.values()), hits
