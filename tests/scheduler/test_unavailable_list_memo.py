"""A device book's unavailable devices (``DeviceBook.unavailable``) come from the layout's last
list while the snapshot's set of unavailable UUIDs is equal (``_Layout.unavailable_list``): over
a random sequence of snapshots (the same set, an equal new set, another set, UUIDs no node has),
every book's list equals the one made from its own snapshot, and an equal set gets the same list."""

from __future__ import annotations

import random

from labgang.launcher.scheduler.capacity import DeviceBook
from labgang.launcher.scheduler.snapshot import Snapshot
from sched_builders import Cluster


def test_unavailable_lists_follow_the_snapshots() -> None:
    rng = random.Random(4)
    cluster = Cluster()
    for k in range(3):
        cluster.node(f"n{k}", 4)
    nodes = tuple(cluster.nodes)
    uuids = [d.uuid for n in nodes for d in n.devices]
    current: frozenset[str] = frozenset()
    shared = 0
    last: DeviceBook | None = None
    for step in range(300):
        roll = rng.random()
        if roll < 0.2:  # another set (now and then with a UUID no node has)
            current = frozenset(rng.sample(uuids, rng.randrange(4)) + (["GPU-gone"] if rng.random() < 0.2 else []))
        elif roll < 0.4:  # an equal set, a new object
            current = frozenset(current)
        snap = Snapshot(now=float(step), nodes=nodes, queues=(), running=(), pending=(), unavailable=current)
        book = DeviceBook(snap)
        assert book.unavailable == [u in current for u in uuids], f"step {step}"
        if last is not None and last._snapshot.unavailable == current:
            assert book.unavailable is last.unavailable
            shared += 1
        last = book
    assert shared > 150
