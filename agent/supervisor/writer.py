"""Who writes the supervisor's journal files (``state.json``, ``shim.json``) and when: now, or in order
on a thread of its own, so that the agent's event loop never waits on the disk.

Replacing a small file costs about 0.3 ms on a quiet ext4 disk and 10–20 ms while another process
writes and syncs on it; a tick that starts or stops 64 ranks replaces 64 or more. The agent
therefore gives its supervisor a :class:`ThreadWriter`, and everything else (tests, tools) gets the
default :class:`InlineWriter`, which does each step at once.

The recovery code (``Supervisor.recover``) relies on three orderings, and both writers keep them:

* **Write before signal.** A rank's ``stopping`` (or ``killing``) state is on disk before its
  SIGTERM (SIGKILL) is sent, so an agent restarted in between resumes the stop. The supervisor
  hands the signal to :meth:`then`, which runs it after every write queued before it, and
  writes the rank's ``term_sent`` behind it, so a restarted agent knows the SIGTERM went and
  sends no second one.
* **Write before report.** The agent sends a tick's events, and answers a command, only once
  :meth:`written` says every write queued so far is on disk.
* **One order per file.** Writes run first in, first out, so an older state never lands after a
  newer one; a rank folder deleted by ``forget`` goes through :meth:`then` too, after its writes.

A write that fails (disk full) is logged and the steps behind it still run: a stop must not wait
on the disk. An agent that dies with writes queued loses them, as it would lose a write it was
about to make; what was signalled or reported was written first.
"""

from __future__ import annotations

import concurrent.futures
import json
import logging
import queue
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from . import journal as J

log = logging.getLogger(__name__)

Step = Callable[[], object]


def _done() -> concurrent.futures.Future[None]:
    fut: concurrent.futures.Future[None] = concurrent.futures.Future()
    fut.set_result(None)
    return fut


class JournalWriter(Protocol):
    """The seam: :class:`InlineWriter` or :class:`ThreadWriter` (the methods are described there)."""

    def write(self, path: Path, data: Any) -> None: ...
    def then(self, step: Step) -> None: ...
    def written(self) -> concurrent.futures.Future[None]: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...


class InlineWriter:
    """Every write and step at once, on the caller's thread (the supervisor's default)."""

    def write(self, path: Path, data: Any) -> None:
        """Write ``data`` as JSON to ``path`` atomically (``journal.write_json``).

        Raises:
            OSError: the file cannot be written.
        """
        J.write_json(path, data)

    def then(self, step: Step) -> None:
        """Run ``step`` (after every write asked for before it: here, now)."""
        step()

    def written(self) -> concurrent.futures.Future[None]:
        """A future done once every write and step asked for so far is done (here: at once)."""
        return _done()

    def flush(self) -> None:
        """Wait until every write and step asked for so far is done (here: nothing to wait for)."""

    def close(self) -> None:
        """Flush; nothing is written after this."""


class ThreadWriter:
    """Writes and steps run in order on one daemon thread; the caller never waits on the disk.

    Each write's JSON text is made on the caller's thread (a snapshot of ``data`` as it was then);
    only the file replacement runs on the thread.
    """

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Path, str] | Step | concurrent.futures.Future[None] | None] = (
            queue.SimpleQueue()
        )
        self._thread = threading.Thread(target=self._run, name="journal-writer", daemon=True)
        self._closed = False
        self._thread.start()

    def write(self, path: Path, data: Any) -> None:
        """Queue an atomic replacement of ``path`` by ``data`` as JSON (``journal.write_json``)."""
        if self._closed:
            J.write_json(path, data)
        else:
            self._queue.put((path, json.dumps(data, sort_keys=True)))

    def then(self, step: Step) -> None:
        """Queue ``step``: it runs on the writer's thread after every write queued before it
        (its exceptions are logged)."""
        if self._closed:
            step()
        else:
            self._queue.put(step)

    def written(self) -> concurrent.futures.Future[None]:
        """A future done once every write and step queued so far is done (``asyncio.wrap_future``
        awaits it on an event loop)."""
        if self._closed:
            return _done()
        fut: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._queue.put(fut)
        return fut

    def flush(self) -> None:
        """Block until every write and step queued so far is done."""
        self.written().result()

    def close(self) -> None:
        """Flush and stop the thread; later writes and steps run at once on the caller's thread."""
        if self._closed:
            return
        self.flush()
        self._closed = True
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            if isinstance(item, concurrent.futures.Future):
                # A waiter that gave up (an awaiting task cancelled at shutdown cancels the future
                # asyncio.wrap_future wraps) must not end this thread: every later flush would hang.
                if item.set_running_or_notify_cancel():
                    item.set_result(None)
            elif isinstance(item, tuple):
                path, text = item
                try:
                    J.write_text(path, text)
                except OSError as exc:
                    log.error("journal: cannot write %s: %s", path, exc)
            else:
                try:
                    item()
                except Exception:  # a failed step must not stop the writer
                    log.exception("journal: a step after the writes failed")
