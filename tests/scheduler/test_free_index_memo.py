"""A cycle's free-device index comes from a memo on the previous cycle's (``capacity._free_memo``,
updated for the devices whose owner changed, from ``capacity._owners``' memo): over random
sequences of snapshots (jobs on two resources and two GPU models coming and going, a device two
jobs claim, views rebuilt as new objects, a job listed twice, devices withheld, an unrelated
book between two cycles, devices taken or reserved before an index is asked for, indexes asked
for in a random order or not at all), every index a book hands out equals the index built
anew from that book's owners and reservations."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.model import GPU
from labgang.launcher.scheduler import capacity
from labgang.launcher.scheduler.capacity import DeviceBook, FreeIndex
from labgang.launcher.scheduler.snapshot import Device, Node, RankPlacement, RunningJob, Snapshot
from sched_builders import job

MIG = "mig-1g.10gb"
NODES = tuple(
    Node(
        f"n{k}",
        tuple(Device(f"G-{k}-{i}", f"n{k}", GPU, "A100" if k % 2 else "H100", f"g{i // 2}") for i in range(4))
        + tuple(Device(f"M-{k}-{i}", f"n{k}", MIG, "A100", f"G-{k}-0") for i in range(2)),
    )
    for k in range(4)
)
UUIDS = [d.uuid for n in NODES for d in n.devices]
KEYS = [(GPU, None), (GPU, "a100"), (GPU, "h100"), (MIG, None)]
TEMPLATE = job("t").running((RankPlacement(0, "n0", ("G-0-0",)),), 0)


def fresh(book: DeviceBook, res: str, model: str | None) -> FreeIndex:
    """The index built anew from ``book``'s owners and reservations now (the reference)."""
    devs = [
        d
        for d in book.by_resource.get(res, ())
        if book.owner[d] is None and book.reserved_for[d] is None and (model is None or model in book.model[d])
    ]
    return FreeIndex(len(book.node_names), devs, book.node_of)


def same(a: FreeIndex, b: FreeIndex) -> bool:
    """Equal free devices per node, buckets and total."""
    return a.free == b.free and a.buckets == b.buckets and a.total == b.total


step = st.tuples(
    st.sampled_from(["add", "add", "add", "drop", "drop", "rebuild", "withhold", "other book", "same"]),
    st.integers(0, 10**6),
    st.lists(st.sampled_from(KEYS), max_size=4),  # indexes asked for, in this order
    st.sampled_from(["none", "none", "take", "reserve"]),  # a change to the book before them
)


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(st.lists(step, min_size=5, max_size=60))
def test_free_indexes_equal_the_fresh_build(steps: list[tuple[str, int, list[tuple[str, str | None]], str]]) -> None:
    live: list[RunningJob] = []
    withheld: frozenset[str] = frozenset()
    for k, (kind, seed, asked, change) in enumerate(steps):
        if kind == "add":
            devices = tuple(UUIDS[(seed >> s) % len(UUIDS)] for s in range(0, 1 + seed % 3))
            placement = (RankPlacement(0, devices[0].split("-")[1], devices),)
            live.append(dataclasses.replace(TEMPLATE, id=f"j{k}", placement=placement, seq=k))
        elif kind == "drop" and live:
            live.pop(seed % len(live))
        elif kind == "rebuild" and live:  # an equal view, a new object
            i = seed % len(live)
            live[i] = dataclasses.replace(live[i])
        elif kind == "withhold":
            withheld = frozenset(UUIDS[seed % len(UUIDS)] for _ in range(seed % 2))
        elif kind == "other book":  # another caller's book (the never-fits checks build empty ones)
            DeviceBook(Snapshot(now=0.0, nodes=NODES, queues=(), running=(), pending=()))
        running = list(live)
        if running and seed % 17 == 0:  # the same job listed twice
            running.insert(seed % len(running), running[-1])
        snap = Snapshot(now=float(k), nodes=NODES, queues=(), running=tuple(running), pending=(), unavailable=withheld)
        book = DeviceBook(snap)
        if change != "none":
            d = seed % len(UUIDS)
            if book.is_free(d):
                (book.take if change == "take" else book.reserve)([d], "x")
        for res, model in asked:
            memo = capacity._free_memo.get((res, model))
            updated = (
                memo is not None
                and (res, model) not in book._indexes
                and book.changes == 0
                and memo[1] == book._owner_serial - 1
                and book._owner_touched is not None
            )
            HITS["updated"] += updated
            HITS["touched"] += bool(updated and book._owner_touched)
            got = book.index(res, model)
            assert same(got, fresh(book, res, model)), (k, res, model)
            if got.total:  # the cycle's own use of its index: devices taken (the memo's copy unchanged)
                n = got.buckets[max(got.buckets)][0]
                book.take([got.free[n][0]], "y")
                assert same(book.index(res, model), fresh(book, res, model))
        # an index the memo keeps is never one a book hands out (a cycle changes its own)
        for memo in capacity._free_memo.values():
            assert all(memo[2] is not ix for ix in book._indexes.values())


HITS = {"updated": 0, "touched": 0}


def test_the_memo_was_used() -> None:
    """The property above ran through the memo's update, with devices whose owner changed ."""
    HITS.update(updated=0, touched=0)
    test_free_indexes_equal_the_fresh_build()
    assert HITS["updated"] > 20 and HITS["touched"] > 10, HITS
