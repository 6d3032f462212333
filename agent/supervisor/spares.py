"""Spare small parents: interpreters started ahead of time so a launch skips their start-up.

:class:`SpareShims` (a part of :class:`~labgang.agent.supervisor.supervisor.Supervisor`) keeps
``count`` of them waiting for a rank folder (``shim.py``), hands one to each launch, and lets
them go at close.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Sequence
from pathlib import Path

from . import journal as J
from .hostos import ProcessHost

log = logging.getLogger(__name__)


class SpareShims:
    """A pool of ``count`` waiting small parents started through the process host.

    Args:
        host: the OS seam that spawns small parents and hands them a rank folder.
        count: how many to keep waiting (0 = none: each launch starts its own).
    """

    def __init__(self, host: ProcessHost, count: int) -> None:
        self._os = host
        self.spare_shims = count
        self._spares: list[tuple[subprocess.Popen[bytes], int | None]] = []

    def refill_spares(self) -> int:
        """Start spare small parents until ``spare_shims`` are waiting; return how many were started.

        Each is an interpreter that has done its start-up and waits for a rank folder, so that
        ``Supervisor.launch`` skips that cost. Call it when nothing is starting (it costs CPU).

        Raises:
            OSError: an interpreter could not be started.
        """
        self._spares = [(p, t) for p, t in self._spares if p.poll() is None]
        started = 0
        while len(self._spares) < self.spare_shims:
            self._spares.append(self._os.spawn_spare_shim())
            started += 1
        return started

    @property
    def waiting(self) -> list[tuple[subprocess.Popen[bytes], int | None]]:
        """The spare small parents started and not yet handed out, with their start ticks (a copy)."""
        return list(self._spares)

    @property
    def spares_missing(self) -> int:
        """How many spare small parents :meth:`refill_spares` would start now."""
        return max(0, self.spare_shims - sum(1 for p, _ in self._spares if p.poll() is None))

    def close_spares(self) -> None:
        """Let every spare small parent exit (end of its input) and reap it."""
        spares, self._spares = self._spares, []
        for proc, _ in spares:
            if proc.stdin is not None:
                try:
                    proc.stdin.close()
                except OSError:
                    pass
        for proc, _ in spares:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def start_shim(self, rank_dir: Path) -> tuple[subprocess.Popen[bytes], int | None]:
        """A small parent for ``rank_dir`` and its start ticks: a spare when one is waiting, else a new one.

        Raises:
            OSError: a new interpreter could not be started.
        """
        while self._spares:
            proc, ticks = self._spares.pop(0)
            if self._os.assign_spare_shim(proc, rank_dir):
                return proc, ticks
            proc.kill()  # died, or its priority could not be restored: let it go, try the next
            proc.wait()
        return self._os.spawn_shim(rank_dir, rank_dir / J.SHIM_ERR)

    def start_shims(self, rank_dirs: Sequence[Path]) -> list[tuple[subprocess.Popen[bytes], int | None] | OSError]:
        """Small parents for one node's ranks of a gang, handed out so that they start together.

        Every spare gets its rank folder while it still waits at its low priority, so none takes
        the CPU from the agent before the last folder is out (handed out one by one at the agent's
        priority, a woken spare could run its start before the agent handed out the next folder,
        which on a busy machine spreads the ranks' starts by up to one shim start per rank); then
        every priority is put back. A spare that runs before that takes the priority back itself
        (``shim.take_priority``), so no rank starts at the spare's priority. Ranks with no spare left
        get a new small parent, after the spares.

        Returns:
            Per folder, in order: the small parent and its start ticks, or the OSError of starting
            a new one.
        """
        handed: list[tuple[subprocess.Popen[bytes], int | None] | None] = []
        for rank_dir in rank_dirs:
            got = None
            while self._spares and got is None:
                proc, ticks = self._spares.pop(0)
                if self._os.hand_spare_shim(proc, rank_dir):
                    got = proc, ticks
                else:
                    proc.kill()  # died: let it go, try the next
                    proc.wait()
            handed.append(got)
        for got, rank_dir in zip(handed, rank_dirs, strict=True):
            if got is not None and not self._os.restore_spare_priority(got[0]):
                log.warning("%s: the spare small parent's priority was not put back by the agent", rank_dir)
        out: list[tuple[subprocess.Popen[bytes], int | None] | OSError] = []
        for got, rank_dir in zip(handed, rank_dirs, strict=True):
            if got is None:
                try:
                    got = self._os.spawn_shim(rank_dir, rank_dir / J.SHIM_ERR)
                except OSError as exc:
                    out.append(exc)
                    continue
            out.append(got)
        return out
