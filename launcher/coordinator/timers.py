"""When the coordinator's scheduler wakes at an instant it asked for (``WakeAt`` effects): the
:class:`Timer` seam handed to :class:`~labgang.launcher.coordinator.core.Coordinator` at
construction, and :class:`LoopTimer`, the event loop's timer on the coordinator's clock.

A test that drives a coordinator on a simulated clock (``tests/simulate``) hands its own
timer, which runs the callback when its simulated time reaches the instant.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol


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
