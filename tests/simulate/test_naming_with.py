"""The scenario naming copies views and decisions with one field changed through
``naming._with``: for every field of each class it is used on, the copy equals
``dataclasses.replace``'s, and the original is unchanged."""

from __future__ import annotations

import dataclasses

import pytest
from labgang.launcher.model import JobRequest
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Pending, PendingReason, Preempt, ReasonCode
from labgang.launcher.scheduler.snapshot import RankPlacement, Snapshot
from labgang.launcher.simulate.naming import _with
from sched_builders import job

RUNNING = job("7").priority(5).running((RankPlacement(0, "n0", ("GPU-a", "GPU-b")),), 3)
PENDING = dataclasses.replace(job("8").gang(2, 2).pending(4), nominated=("7",))
ADMIT = Admit("8", (RankPlacement(0, "n0", ("GPU-a",)),), ("n0/GPU-a",), "joined")
WAITING = Pending("8", PendingReason(ReasonCode.NO_CAPACITY, "no room"))
PREEMPT = Preempt("8", ("7", "6"), "reclaim 2 gpu")
OBJECTS: list[object] = [RUNNING, PENDING, ADMIT, WAITING, PREEMPT]


@pytest.mark.parametrize("obj", OBJECTS, ids=lambda o: type(o).__name__)
def test_with_equals_replace_for_every_field(obj: object) -> None:
    before = dataclasses.replace(obj)  # type: ignore[type-var]
    for f in dataclasses.fields(obj):  # type: ignore[arg-type]
        value = "changed" if isinstance(getattr(obj, f.name), str) else JobRequest(per_worker=3)
        got = _with(obj, **{f.name: value})
        assert type(got) is type(obj)
        assert got == dataclasses.replace(obj, **{f.name: value}), f.name  # type: ignore[type-var]
        assert got != obj and obj == before, f.name
    names = [f.name for f in dataclasses.fields(obj)][:2]  # type: ignore[arg-type]
    two = {names[0]: "x", names[1]: "y"}
    assert _with(obj, **two) == dataclasses.replace(obj, **two)  # type: ignore[type-var]


def test_with_a_snapshot_and_a_cycle_result() -> None:
    snap = Snapshot(now=1.0, nodes=(), queues=(), running=(RUNNING,), pending=())
    assert _with(snap, running=(), pending=(PENDING,)) == dataclasses.replace(snap, running=(), pending=(PENDING,))
    result = CycleResult((ADMIT,), (PREEMPT,), (WAITING,), ("8",), ())
    assert _with(result, held=(), admitted=()) == dataclasses.replace(result, held=(), admitted=())
