"""The running jobs' identity map and delta updated from the change the snapshot's builder tells
(``capacity.note_running_change``): over random sequences of running tuples (views coming and
going, rebuilt as new objects, taken out and put back, reordered), told rightly, not at all, or
about another tuple, every map equals the full build and every delta the set difference; a
change that leaves out a view gone, or names a view new that was there, is not applied."""

from __future__ import annotations

import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st
from labgang.launcher.scheduler import capacity
from labgang.launcher.scheduler.capacity import identity_delta, note_running_change, running_by_identity
from labgang.launcher.scheduler.snapshot import RankPlacement, RunningJob
from sched_builders import job

TEMPLATE = job("t").running((RankPlacement(0, "n0", ("GPU-x",)),), 0)

step = st.tuples(
    st.sampled_from(["add", "add", "drop", "drop", "rebuild", "back", "reorder"]),
    st.integers(0, 10**6),
    st.sampled_from(["told", "told", "told", "not told", "other tuple", "gone left out", "new was there"]),
)


def full(running: tuple[RunningJob, ...]) -> dict[int, RunningJob]:
    return dict(zip(map(id, running), running, strict=True))


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(st.lists(step, min_size=2, max_size=40))
def test_maps_and_deltas_equal_the_full_build(steps: list[tuple[str, int, str]]) -> None:
    capacity._change = capacity._last_ident = None
    live: list[RunningJob] = []
    before: tuple[RunningJob, ...] = ()
    keep = [running_by_identity(before)]  # every map stays alive: no identity reused
    for k, (kind, seed, told) in enumerate(steps):
        gone: list[RunningJob] = []
        new: list[RunningJob] = []
        if kind == "add":
            view = dataclasses.replace(TEMPLATE, id=f"j{k}")
            live.insert(seed % (len(live) + 1), view)
            new.append(view)
        elif kind == "drop" and live:
            gone.append(live.pop(seed % len(live)))
        elif kind == "rebuild" and live:  # a new, equal object in its place
            i = seed % len(live)
            gone.append(live[i])
            live[i] = dataclasses.replace(live[i])
            new.append(live[i])
        elif kind == "back" and live:  # taken out and put back: in both lists
            gone.append(live[seed % len(live)])
            new.append(gone[-1])
        elif kind == "reorder":
            live.reverse()
        after = tuple(live)
        if told == "told":
            note_running_change(before, after, gone, new)
        elif told == "other tuple":
            note_running_change(before, tuple(live), gone, new)  # an equal tuple, another object
        elif told == "gone left out" and gone:
            note_running_change(before, after, [], new)
        elif told == "new was there" and before:
            note_running_change(before, after, gone, [*new, before[0]])
        last = running_by_identity(before)
        got = running_by_identity(after)
        # made from the change: the delta to the last map is known before anyone asks for it
        HITS["applied"] += capacity._deltas is not None and capacity._deltas[0] is got
        assert got == full(after), (k, kind, told)
        was, now = set(last), set(got)
        assert identity_delta(last, got) == (was - now, now - was), (k, kind, told)
        keep.append(got)
        before = after


HITS = {"applied": 0}


def test_the_change_was_applied() -> None:
    """The property above ran through the update from a change, not only the full build."""
    HITS["applied"] = 0
    test_maps_and_deltas_equal_the_full_build()
    assert HITS["applied"] > 300, HITS


def test_a_change_told_rightly_is_applied() -> None:
    """Without a pass over the tuple: the map comes from the last one (checked by breaking the
    full build for the one call)."""
    capacity._change = capacity._last_ident = None
    a = dataclasses.replace(TEMPLATE, id="a")
    b = dataclasses.replace(TEMPLATE, id="b")
    c = dataclasses.replace(TEMPLATE, id="c")
    first = (a, b)
    base = running_by_identity(first)
    second = (a, c)
    note_running_change(first, second, [b], [c])
    assert capacity._from_change(second) == {id(a): a, id(c): c}
    assert identity_delta(base, running_by_identity(second)) == ({id(b)}, {id(c)})
    note_running_change(second, (c, a), [b], [])  # b was not there: not applied
    assert capacity._from_change((c, a)) is None
