"""``plan replay`` pauses the cyclic collector while it replays (a replay keeps nearly all it
builds until it ends and makes almost no cyclic garbage, so the collector's passes over its
growing heap are nearly all cost) and puts it back as it was afterwards, also when the replay
fails; the figures are the same as with the collector running."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from labgang.launcher.plan import replay as replay_module
from labgang.launcher.plan.replay import replay
from labgang.launcher.simulate.engine import Simulation

HISTORY: dict[str, Any] = {
    "scenario": {"name": "t"},
    "nodes": [{"name": "n1", "gpus": 4}],
    "queues": [{"name": "default", "nominal": {"gpu": 4}}],
    "jobs": [
        {"id": j, "queue": "default", "gpus_per_worker": 4, "submit": s, "duration": 50}
        for j, s in (("a", 0), ("b", 10), ("c", 20))
    ],
}


@pytest.fixture
def collector() -> Iterator[None]:
    """The collector enabled at the test's start, put back as it was after."""
    was = gc.isenabled()
    gc.enable()
    yield
    if was:
        gc.enable()
    else:
        gc.disable()


def test_collector_paused_during_the_replay_and_restored(collector: None, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    run_instant = Simulation.run_instant

    def spy(self: Simulation) -> None:
        seen.append(gc.isenabled())
        run_instant(self)

    monkeypatch.setattr(Simulation, "run_instant", spy)
    figures = replay(HISTORY).to_dict()
    assert seen and set(seen) == {False}
    assert gc.isenabled()
    seen.clear()
    running = replay_module._replay(HISTORY, "<history>").to_dict()  # the same work, collector running
    assert seen and set(seen) == {True}
    assert running == figures


def test_a_paused_collector_stays_paused(collector: None) -> None:
    gc.disable()
    replay(HISTORY)
    assert not gc.isenabled()


def test_collector_restored_when_the_replay_fails(collector: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(self: Simulation) -> None:
        raise RuntimeError("the scheduler kept deciding new things")

    monkeypatch.setattr(Simulation, "run_instant", broken)
    with pytest.raises(RuntimeError):
        replay(HISTORY)
    assert gc.isenabled()
