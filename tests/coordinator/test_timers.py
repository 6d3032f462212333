"""The coordinator's timer seam (``launcher/coordinator/timers.py``): the scheduler's wakes go
through the timer handed at construction, once per instant, and the default one runs them on the
event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.store import Store
from lifecycle_driver import Clock

CONFIG = {"node_timeout_s": 10, "queues": [{"name": "default", "nominal": {"gpu": 8}}]}


class RecordingTimer:
    """A timer that keeps what it is asked to run, for the test to run when it likes."""

    def __init__(self) -> None:
        self.asked: list[tuple[float, Callable[[], None]]] = []

    def call_at(self, when: float, callback: Callable[[], None]) -> bool:
        self.asked.append((when, callback))
        return True


def test_wakes_go_through_the_timer_handed_at_construction_once_per_instant(tmp_path: Path) -> None:
    timer = RecordingTimer()
    clock = Clock()
    coord = Coordinator(parse_config(CONFIG), Store(tmp_path / "db"), clock=clock, timer=timer)
    try:
        coord.wake_at(1005.0)
        coord.wake_at(1005.0)  # the same instant: one wake
        coord.wake_at(1007.0)
        assert [when for when, _ in timer.asked] == [1005.0, 1007.0]
        assert not coord.wake.is_set()
        clock.now = 1005.0
        timer.asked[0][1]()  # the instant came: a timer check, then a kick
        assert coord.wake.is_set()
        coord.wake_at(1005.0)  # run once: that instant may be asked for again
        assert [when for when, _ in timer.asked] == [1005.0, 1007.0, 1005.0]
    finally:
        coord.store.close()


async def test_the_default_timer_wakes_the_scheduler_on_the_event_loop(tmp_path: Path) -> None:
    clock = Clock()
    coord = Coordinator(parse_config(CONFIG), Store(tmp_path / "db"), clock=clock)
    try:
        coord.wake_at(clock.now - 1)  # already due: at the loop's next turns
        await asyncio.wait_for(coord.kicked(), 10)
    finally:
        await coord.close()
        coord.store.close()


def test_without_an_event_loop_nothing_is_scheduled_and_the_instant_is_not_taken(tmp_path: Path) -> None:
    clock = Clock()
    coord = Coordinator(parse_config(CONFIG), Store(tmp_path / "db"), clock=clock)
    try:
        coord.wake_at(clock.now)  # no running loop: nothing scheduled

        async def later() -> None:
            coord.wake_at(clock.now)  # the same instant, now with a loop: scheduled after all
            await asyncio.wait_for(coord.kicked(), 10)

        asyncio.run(later())
    finally:
        coord.store.close()
