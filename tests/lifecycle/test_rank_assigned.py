"""``RankRecord.assigned`` builds a just-placed rank from a kept instance dict (an admission makes
one a rank) instead of the dataclass build's write of every field through
``CountsChanges.__setattr__``: it must give exactly that build's object, whatever the rank, node
and devices, and count the writes made to it afterwards exactly alike (the driver's view caches
rely on the count)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.lifecycle.records import RankRecord
from labgang.launcher.lifecycle.states import RankPhase


def built(rank: int, node: str, devices: tuple[str, ...]) -> RankRecord:
    """The un-shortcut build: the dataclass ``__init__``, every field through ``__setattr__``."""
    return RankRecord(rank=rank, node=node, devices=devices)


VALUES: dict[str, Any] = {
    "rank": st.integers(0, 9),
    "node": st.sampled_from(["n1", "n2"]),
    "devices": st.sampled_from([(), ("GPU-a",), ("GPU-a", "GPU-b")]),
    "state": st.sampled_from(list(RankPhase)),
    "pid": st.none() | st.integers(1, 5),
    "exit_status": st.none() | st.integers(-9, 2),
    "start_time": st.none() | st.floats(allow_nan=False),
    "end_time": st.none() | st.floats(allow_nan=False) | st.integers(0, 3),
}
WRITES = st.lists(st.one_of(*(st.tuples(st.just(name), values) for name, values in VALUES.items())), max_size=30)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    rank=st.integers(0, 2**20),
    node=st.text(max_size=5),
    devices=st.lists(st.text(max_size=5), max_size=4).map(tuple),
    writes=WRITES,
)
def test_assigned_is_the_dataclass_build_and_counts_alike(
    rank: int, node: str, devices: tuple[str, ...], writes: list[tuple[str, Any]]
) -> None:
    fast, slow = RankRecord.assigned(rank, node, devices), built(rank, node, devices)
    assert type(fast) is RankRecord
    assert list(vars(fast).items()) == list(vars(slow).items())  # fields, change count, order
    assert [type(v) for v in vars(fast).values()] == [type(v) for v in vars(slow).values()]
    assert fast == slow
    for name, value in writes:
        setattr(fast, name, value)
        setattr(slow, name, value)
        assert fast.changes == slow.changes, name
    assert list(vars(fast).items()) == list(vars(slow).items())


def test_two_assigned_ranks_share_no_mutable_state() -> None:
    a, b = RankRecord.assigned(0, "n1", ("GPU-a",)), RankRecord.assigned(1, "n1", ("GPU-b",))
    a.state = RankPhase.RUNNING
    a.pid = 7
    assert b == built(1, "n1", ("GPU-b",)) and b.changes == built(1, "n1", ("GPU-b",)).changes
    for field in dataclasses.fields(RankRecord):  # every kept default is immutable: nothing to share
        hash(getattr(b, field.name))
