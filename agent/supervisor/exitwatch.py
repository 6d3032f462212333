"""Wake the agent the moment a watched process exits, instead of waiting for the next poll.

A *pidfd* (``pidfd_open(2)``, Linux ≥ 5.3) is a file descriptor that refers to one process
and becomes readable when that process terminates, whether or not it is our child: the
ranks' small parents are the agent's children, but a re-adopted one (after an agent
restart) and a rank's main process are not. Each pidfd is registered with the asyncio
loop (``loop.add_reader``); its callback only calls ``on_exit`` (the agent sets its tick
event), so all the work still happens in ``Supervisor.tick()``.

Pid reuse: a pidfd is opened by number, so after opening it the process's start time
(``/proc/PID/stat`` field 22) is compared with the recorded one; a mismatch means the
process we meant already ended, which is reported like an exit. Where ``pidfd_open`` is
missing (old kernel) the watcher does nothing and the caller's periodic tick is the
fallback.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from collections.abc import Callable, Iterable

from .hostos import HostOS, ProcessHost

log = logging.getLogger(__name__)

Process = tuple[int, "int | None"]  # (pid, start ticks since boot; None = unknown)


class ExitWatcher:
    """Call ``on_exit`` (on the loop's thread) whenever one of the watched processes ends.

    Args:
        loop: the running asyncio loop whose selector watches the pidfds.
        on_exit: called with no argument after a watched process ended (at most once per process).
        host_os: the OS seam, for start times.

    Call :meth:`update` with the processes to watch after every tick (new ones get a pidfd,
    ones no longer listed are dropped) and :meth:`close` at the end.
    """

    def __init__(
        self, loop: asyncio.AbstractEventLoop, on_exit: Callable[[], None], host_os: ProcessHost | None = None
    ) -> None:
        self._loop = loop
        self._on_exit = on_exit
        self._os: ProcessHost = host_os or HostOS()
        self._fds: dict[Process, int] = {}
        self._ended: set[Process] = set()
        self.available = hasattr(os, "pidfd_open")

    @property
    def watched(self) -> frozenset[Process]:
        """The processes that have a live pidfd registered now."""
        return frozenset(self._fds)

    def update(self, processes: Iterable[Process]) -> None:
        """Watch exactly ``processes`` from now on (their exit calls ``on_exit``).

        A process that has already ended (or whose pid now names another process) counts as
        ended at once: ``on_exit`` is scheduled with ``loop.call_soon``.
        """
        wanted = set(processes)
        for proc in [p for p in self._fds if p not in wanted]:
            self._drop(proc)
        self._ended &= wanted
        if not self.available:
            return
        for proc in sorted(wanted - set(self._fds) - self._ended, key=lambda p: p[0]):
            self._watch(proc)

    def _watch(self, proc: Process) -> None:
        pid, ticks = proc
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._ended_now(proc)
            return
        except OSError as exc:
            if exc.errno in (errno.ENOSYS, errno.EPERM, errno.EINVAL):
                log.info("pidfd_open unavailable (%s): process exits are noticed by the periodic tick", exc)
                self.available = False
                return
            raise
        if ticks is not None and self._os.start_ticks(pid) != ticks:
            os.close(fd)  # the pid was reused: the process we meant has ended
            self._ended_now(proc)
            return
        self._fds[proc] = fd
        self._loop.add_reader(fd, self._readable, proc)

    def _ended_now(self, proc: Process) -> None:
        self._ended.add(proc)
        self._loop.call_soon(self._on_exit)

    def _readable(self, proc: Process) -> None:
        self._drop(proc)
        self._ended.add(proc)
        self._on_exit()

    def _drop(self, proc: Process) -> None:
        fd = self._fds.pop(proc, None)
        if fd is not None:
            self._loop.remove_reader(fd)
            os.close(fd)

    def close(self) -> None:
        """Stop watching everything and close every pidfd."""
        for proc in list(self._fds):
            self._drop(proc)
        self._ended.clear()
