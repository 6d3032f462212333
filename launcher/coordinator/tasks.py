"""The coordinator's background tasks (agent commands sent after a commit, forwarded requests):
tracked so that a failure is logged and shutdown cancels them."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterator
from typing import Any

log = logging.getLogger("labgang.coordinator")


class BackgroundTasks:
    """Tasks run beside the request that started them, cancelled together at shutdown."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run ``coro`` as a tracked task (on the running loop); its exception, if any, is logged."""
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def __len__(self) -> int:
        """How many tasks are still running."""
        return len(self._tasks)

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        """The tasks still running (a test waits for them to settle an instant)."""
        return iter(list(self._tasks))

    def _done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("background task failed", exc_info=task.exception())

    async def close(self) -> None:
        """Cancel every task still running and wait for them."""
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
