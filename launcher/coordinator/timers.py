"""When the coordinator's scheduler wakes: now, when something happened it should look at
(:class:`Kicks`), or at an instant it asked for (``WakeAt`` effects, :class:`Wakes`) through the
:class:`Timer` seam handed to :class:`~labgang.launcher.coordinator.core.Coordinator` at
construction; :class:`LoopTimer` is the event loop's timer on the coordinator's clock.

A test that drives a coordinator on a simulated clock (``tests/simulate``) hands its own
timer, which runs the callback when its simulated time reaches the instant.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

log = logging.getLogger("labgang.coordinator")


class Timer(Protocol):
    """Runs a callback at an instant of the coordinator's clock."""

    def call_at(self, when: float, callback: Callable[[], None]) -> bool:
        """Run ``callback`` once at ``when`` (seconds on the coordinator's clock; at once when past).

        Returns:
            False when nothing was scheduled (the callback will not run).
        """
        ...


class LoopTimer:
    """:class:`Timer` on the running asyncio loop: ``callback`` runs ``when - clock()`` seconds from now.

    Without a running event loop (a test driving the lifecycle model directly) nothing is scheduled.

    Args:
        clock: the coordinator's unix-seconds clock.
    """

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock

    def call_at(self, when: float, callback: Callable[[], None]) -> bool:
        """Schedule ``callback`` on the running loop at ``when`` (unix seconds on the clock);
        False without a running loop."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return False
        loop.call_later(max(0.0, when - self._clock()), callback)
        return True


class Kicks:
    """The scheduling loop's wake-up: every :meth:`kick` since the loop last took them is one
    asyncio event, so kicks coalesce into one cycle (``scheduling.scheduling_loop``)."""

    def __init__(self) -> None:
        self._event: asyncio.Event | None = None

    @property
    def event(self) -> asyncio.Event:
        """Set while a kick waits for the scheduling loop (made on first use, inside the event loop)."""
        if self._event is None:
            self._event = asyncio.Event()
        return self._event

    def kick(self) -> None:
        """Ask the scheduling loop for a cycle (coalesced with other kicks)."""
        self.event.set()

    async def kicked(self) -> None:
        """Return once a kick has come (at once if one came since :meth:`take_kicks`)."""
        await self.event.wait()

    def take_kicks(self) -> None:
        """The scheduling loop starts a cycle that covers every kick so far: forget them."""
        self.event.clear()


class Wakes:
    """The scheduler's wakes at instants (``WakeAt`` effects): each instant once, through ``timer``;
    at the instant, ``on_wake`` runs (the node timers: a fence may expire then), then a kick.

    Args:
        timer: runs the wakes (:class:`LoopTimer`, or a test's simulated one).
        kicks: kicked at each wake.
        on_wake: called first at each wake (``NodeEvents.check_timers``); an exception it raises is
            logged and the kick still comes.
    """

    def __init__(self, timer: Timer, kicks: Kicks, on_wake: Callable[[], None]) -> None:
        self._timer = timer
        self._kicks = kicks
        self._on_wake = on_wake
        self._instants: set[float] = set()  # instants a wake is already set for

    def at(self, when: float) -> None:
        """Kick the scheduler at ``when`` (seconds on the timer's clock), once per instant."""
        if when in self._instants:
            return
        self._instants.add(when)

        def wake() -> None:
            self._instants.discard(when)
            try:
                self._on_wake()  # a fence may expire now; its effects are committed with the cycle
            except Exception:  # the timer loop checks again; the cycle must still run
                log.exception("timer check at a wake failed")
            self._kicks.kick()

        if not self._timer.call_at(when, wake):
            self._instants.discard(when)
