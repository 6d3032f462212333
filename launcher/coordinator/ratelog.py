"""Rate-limited logging: the same error a thousand times a second is written a few times.

A client that opens connections in a loop, or sends garbage, makes aiohttp, asyncio and
the coordinator log the same line for every attempt (69 MB in 20 s was measured).
:class:`RepeatFilter` lets the first ``burst`` records of one kind through in each
``window_s`` and drops the rest; the first record of the next window says how many were
dropped. A record's kind is its logger, level and message template (``record.msg``
before ``%`` formatting), so ``"connection from %s refused"`` is one kind whatever the peer.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator


class RepeatFilter(logging.Filter):
    """Drop records of one kind past ``burst`` per ``window_s`` seconds.

    Args:
        burst: records of one kind let through per window.
        window_s: the window, seconds.
        clock: monotonic seconds (tests pass a fake one).
    """

    def __init__(self, burst: int = 5, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        self._seen: dict[tuple[str, int, str], tuple[float, int, int]] = {}  # kind -> (start, passed, dropped)

    def filter(self, record: logging.LogRecord) -> bool:
        """True to write ``record`` (possibly with a note of how many were dropped before it)."""
        kind = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        start, passed, dropped = self._seen.get(kind, (now, 0, 0))
        if now - start >= self.window_s:
            if dropped:
                record.msg = f"{record.msg} [{dropped} similar message(s) dropped in the last {self.window_s:g} s]"
            start, passed, dropped = now, 0, 0
        if passed >= self.burst:
            self._seen[kind] = (start, passed, dropped + 1)
            return False
        self._seen[kind] = (start, passed + 1, dropped)
        if len(self._seen) > 10_000:  # many kinds: forget the oldest windows rather than grow
            for old in sorted(self._seen, key=lambda k: self._seen[k][0])[:5_000]:
                del self._seen[old]
        return True


def install(logger: logging.Logger | None = None) -> RepeatFilter:
    """Put one :class:`RepeatFilter` on every handler of ``logger`` (default: the root logger).

    Idempotent: a handler that already has one keeps it. Returns the filter in use.
    """
    target = logger or logging.getLogger()
    existing = [f for h in target.handlers for f in h.filters if isinstance(f, RepeatFilter)]
    repeat = existing[0] if existing else RepeatFilter()
    for handler in target.handlers:
        if not any(isinstance(f, RepeatFilter) for f in handler.filters):
            handler.addFilter(repeat)
    return repeat


@contextlib.contextmanager
def installed(logger: logging.Logger | None = None) -> Iterator[RepeatFilter]:
    """:func:`install` for a while: on leaving, the filter comes off exactly the handlers this call
    put it on. For a coordinator embedded in a process that goes on (the tests' in-process
    coordinators): the root logger's handlers outlive it, and a filter left on them would drop
    other code's repeated lines (a test's ``caplog`` saw 2 of 4 lines of one kind after one ran).
    """
    target = logger or logging.getLogger()
    bare = [h for h in target.handlers if not any(isinstance(f, RepeatFilter) for f in h.filters)]
    repeat = install(target)
    try:
        yield repeat
    finally:
        for handler in bare:
            handler.removeFilter(repeat)
