"""``plan replay`` runs the cyclic collector's full passes rarely while it replays (the heap a
replay keeps grows with the history, and a full pass walks all of it) and puts the thresholds
back afterwards, also when the replay fails; the figures are the same either way."""

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
def thresholds() -> Iterator[tuple[int, int, int]]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield 700, 10, 10
    gc.set_threshold(*before)


def test_full_passes_rare_during_the_replay_and_thresholds_restored(
    thresholds: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[int, int, int]] = []
    run_instant = Simulation.run_instant

    def spy(self: Simulation) -> None:
        seen.append(gc.get_threshold())
        run_instant(self)

    monkeypatch.setattr(Simulation, "run_instant", spy)
    figures = replay(HISTORY).to_dict()
    assert seen and set(seen) == {(700, 10, replay_module._GC_FULL)}
    assert gc.get_threshold() == thresholds
    monkeypatch.setattr(Simulation, "run_instant", run_instant)
    monkeypatch.setattr(replay_module, "_GC_FULL", 10)  # the default: the same figures
    assert replay(HISTORY).to_dict() == figures


def test_thresholds_restored_when_the_replay_fails(
    thresholds: tuple[int, int, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(self: Simulation) -> None:
        raise RuntimeError("the scheduler kept deciding new things")

    monkeypatch.setattr(Simulation, "run_instant", broken)
    with pytest.raises(RuntimeError):
        replay(HISTORY)
    assert gc.get_threshold() == thresholds
