"""``FreeIndex.copy`` shares the nodes' lists until one side changes a node (copy on write): over
random adds and removes on an index, its copies and copies of those, every index equals one built
anew from its own free devices (each node's list, the buckets, the total), whichever side changed
first; and a copy shares the lists of the nodes neither side changed."""

from __future__ import annotations

import random

from labgang.launcher.scheduler.capacity import FreeIndex


def _same(ix: FreeIndex, free: set[int], node_count: int, node_of: list[int]) -> None:
    fresh = FreeIndex(node_count, free, node_of)
    assert ix.free == fresh.free
    assert ix.buckets == fresh.buckets
    assert ix.total == fresh.total


def test_copies_change_apart() -> None:
    rng = random.Random(3)
    node_count, per_node = 12, 8
    node_of = [d // per_node for d in range(node_count * per_node)]
    devices = range(len(node_of))
    first = set(rng.sample(devices, 50))
    indexes: list[tuple[FreeIndex, set[int]]] = [(FreeIndex(node_count, first, node_of), set(first))]
    for step in range(3000):
        roll = rng.random()
        if roll < 0.05 and len(indexes) < 12:  # a copy of any index (a copy of a copy too)
            ix, free = rng.choice(indexes)
            indexes.append((ix.copy(), set(free)))
        else:  # one index frees or takes a device
            ix, free = rng.choice(indexes)
            d = rng.choice(devices)
            if d in free:
                ix.remove(d)
                free.discard(d)
            else:
                ix.add(d)
                free.add(d)
        for k, (other, its) in enumerate(indexes):
            assert sorted(d for devs in other.free for d in devs) == sorted(its), f"step {step}, index {k}"
    for ix, free in indexes:
        _same(ix, free, node_count, node_of)


def test_a_copy_shares_the_nodes_neither_side_changed() -> None:
    node_of = [d // 4 for d in range(16)]
    ix = FreeIndex(4, range(16), node_of)
    copy = ix.copy()
    copy.remove(5)  # node 1 of the copy
    assert copy.free[1] == [4, 6, 7] and ix.free[1] == [4, 5, 6, 7]
    assert all(copy.free[n] is ix.free[n] for n in (0, 2, 3))
    ix.remove(8)  # node 2 of the original: the copy keeps it
    assert copy.free[2] == [8, 9, 10, 11] and ix.free[2] == [9, 10, 11]
    _same(ix, set(range(16)) - {8}, 4, node_of)
    _same(copy, set(range(16)) - {5}, 4, node_of)
