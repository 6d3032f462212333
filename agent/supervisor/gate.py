"""The start gate: one node's ranks of a gang prepared up to their ``exec``, then released at once.

Why: started one after another, a gang's ranks start as far apart as the work each small parent
does before its ``exec`` (its rank folder's files, the log, the pipes, the fork, dropping
privileges), scheduled among whatever else runs. With the gate that work is done first, by every
rank, and the gang's start spread is one ``close`` plus the ranks' ``exec`` calls.

A gate is a folder ``gates/<job_id>/<id>/`` under the state dir holding two FIFOs and, once
aborted, one marker file:

* ``release``: the agent holds it open (read-write, so it is a writer too); each rank's child
  (forked by its small parent, privileges dropped, ``cwd`` entered: everything but the ``exec``)
  blocks reading it. The release is the agent's ``close``: with no writer left every reader sees
  end of file at the same instant (the kernel wakes all of them), then ``exec``-s.
* ``ready``: each rank's child writes ``R<rank>`` when it is parked, and its small parent
  ``F<rank>`` when it failed before the gate (its cgroup, its ``cwd``, the fork); ``abort()``
  writes ``A``, so a launch awaiting the gate wakes.
* ``aborted``: written before the ``release`` FIFO is closed when the gate is aborted (a rank
  failed to prepare, the launch timed out, or the job was stopped during the gate); a child that
  wakes to end of file and finds it does not ``exec`` (its small parent writes ``exit.json`` with
  :data:`NOT_RELEASED` and the reason). A ``release`` FIFO that no longer exists reads the same.

A crash of the agent between prepare and release closes its descriptor like a release does: the
ranks start, and the next agent re-adopts them from the journal (``spec.json``, ``rank.json``) as
after any crash that follows a launch; no job is lost. A gate's folder is removed when its job is
forgotten (every small parent is gone by then, so none can still read the marker).
"""

from __future__ import annotations

import errno
import os
import select
import shutil
import time
import uuid
from collections.abc import Callable, Collection
from pathlib import Path

GATES_DIR = "gates"
"""The folder under the state dir holding one folder per job with gates (``gates/<job_id>/<id>``)."""
RELEASE = "release"
READY = "ready"
ABORTED = "aborted"
NOT_RELEASED = 125
"""The exit status of a rank whose gate was aborted (its command never ran)."""
DEFAULT_TIMEOUT_S = 10.0
"""How long a launch waits for every rank of a gate to be parked before it aborts the gate: far
beyond a small parent's start on a busy node (tens of ms), and below the coordinator's 15 s wait
for the ``launch`` command's answer (``coordinator/agents.py`` ``call``)."""

CHECK_EVERY_S = 0.1
"""While a launch waits on a gate, how often it looks for small parents that died unreported."""


class StartGate:
    """The start gate of one job's ranks on this node (see the module docstring).

    Args:
        folder: the gate's folder ``gates/<job_id>/<id>`` (created, mode 0711, with its two
            parents as needed, 0700; it must not exist).
        job_id: the job whose ranks wait here.
        ranks: the ranks that must all be parked before :meth:`release`.

    Raises:
        OSError: the folder or its FIFOs could not be made.
    """

    def __init__(self, folder: Path, job_id: str, ranks: Collection[int]) -> None:
        self.folder = folder
        self.job_id = job_id
        self.ranks = frozenset(ranks)
        self.waiting: set[int] = set(ranks)
        self.failed: set[int] = set()
        self.reason: str | None = None
        self.state = "open"  # open → released | aborted
        # The folder is 0711: a rank's child, already its user, looks the marker up through the
        # folder's descriptor its small parent opened (nothing above it needs to let the user
        # through); the FIFOs are 0600, their descriptors inherited from the small parent.
        for part in (folder.parent.parent, folder.parent):
            part.mkdir(mode=0o700, exist_ok=True)
        folder.mkdir()
        os.chmod(folder, 0o711)  # noqa: S103 - search only: the marker is looked up as the rank's user
        os.mkfifo(folder / RELEASE, 0o600)
        os.mkfifo(folder / READY, 0o600)
        # read-write: the agent is the FIFO's one writer (its close is the release) and opening
        # never blocks; close-on-exec, so no small parent spawned later holds it open
        self._release_fd: int | None = os.open(folder / RELEASE, os.O_RDWR | os.O_CLOEXEC)
        self._ready_fd: int | None = os.open(folder / READY, os.O_RDWR | os.O_NONBLOCK | os.O_CLOEXEC)
        self._pending = b""

    def expect(self, ranks: Collection[int]) -> None:
        """Wait for exactly ``ranks`` (those of the gang that were prepared and handed out)."""
        self.ranks = frozenset(ranks)
        self.waiting = set(ranks)

    def fail(self, rank: int) -> None:
        """Count ``rank`` as failed before the gate (its small parent could not be started)."""
        self.waiting.discard(rank)
        self.failed.add(rank)

    @classmethod
    def create(cls, gates_dir: Path, job_id: str, ranks: Collection[int]) -> StartGate:
        """A new gate for ``job_id``'s ``ranks`` in a fresh folder under ``gates_dir/<job_id>/``."""
        return cls(gates_dir / job_id / uuid.uuid4().hex[:12], job_id, ranks)

    def shim_config(self, rank: int) -> dict[str, object]:
        """What rank ``rank``'s small parent needs (its ``launch.bin`` ``gate`` entry): the paths
        of the two FIFOs and the marker, and its rank number (plain values, for ``marshal``)."""
        return {
            "release": str(self.folder / RELEASE),
            "ready": str(self.folder / READY),
            "aborted": str(self.folder / ABORTED),
            "rank": rank,
        }

    def fileno(self) -> int:
        """The ``ready`` FIFO's descriptor: readable when a rank reported (for an event loop).

        Raises:
            ValueError: the gate was closed (:meth:`close`).
        """
        if self._ready_fd is None:
            raise ValueError("gate: closed")
        return self._ready_fd

    @property
    def settled(self) -> bool:
        """True once every rank is parked, one failed, or the gate is no longer open."""
        return self.state != "open" or not self.waiting or bool(self.failed)

    def poll(self) -> bool:
        """Read what the ranks reported so far (never blocks); return :attr:`settled`."""
        while self._ready_fd is not None:
            try:
                data = os.read(self._ready_fd, 4096)
            except BlockingIOError:
                break
            if not data:
                break
            self._pending += data
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            kind, number = line[:1], line[1:]
            if kind == b"A" or not number.isdigit():
                continue
            rank = int(number)
            self.waiting.discard(rank)
            if kind == b"F":
                self.failed.add(rank)
        return self.settled

    def wait(
        self, timeout: float, clock: Callable[[], float] = time.monotonic, check: Callable[[], None] | None = None
    ) -> bool:
        """Block until :attr:`settled` or ``timeout`` seconds passed; return :attr:`settled`.

        Args:
            check: called every :data:`CHECK_EVERY_S` while waiting (the supervisor marks ranks
                whose small parent died before it could report as failed, :meth:`fail`).
        """
        deadline = clock() + timeout
        while not self.poll():
            left = deadline - clock()
            if left <= 0 or self._ready_fd is None:
                return False
            select.select([self._ready_fd], [], [], min(left, CHECK_EVERY_S))
            if check is not None:
                check()
        return True

    def release(self) -> bool:
        """Release every parked rank at once (close the agent's end of ``release``).

        Returns:
            False when the gate was aborted before (nothing is released then).
        """
        if self.state == "aborted":
            return False
        if self._release_fd is not None:
            os.close(self._release_fd)
            self._release_fd = None
        self.state = "released"
        return True

    def abort(self, reason: str) -> bool:
        """Close the gate for good: no rank waiting here (or arriving later) ``exec``-s.

        The marker (holding ``reason``) is written before the agent's end of ``release`` is
        closed, so a child woken by that close finds it.

        Returns:
            False when the gate was released before (the ranks run; a stop is needed instead).
        """
        if self.state == "released":
            return False
        if self.state == "open":
            self.reason = reason
            tmp = self.folder / f"{ABORTED}.tmp"
            tmp.write_text(reason, encoding="utf-8")
            os.chmod(tmp, 0o644)
            os.replace(tmp, self.folder / ABORTED)
            if self._release_fd is not None:
                os.close(self._release_fd)
                self._release_fd = None
            self.state = "aborted"
            if self._ready_fd is not None:
                try:
                    os.write(self._ready_fd, b"A\n")  # wakes a launch awaiting this gate
                except OSError as exc:
                    if exc.errno != errno.EAGAIN:
                        raise
        return True

    def close(self) -> None:
        """Let go of the ``ready`` FIFO (after :meth:`release` or :meth:`abort`; the folder stays
        until the job is forgotten, :func:`remove_job_gates`)."""
        if self._ready_fd is not None:
            os.close(self._ready_fd)
            self._ready_fd = None


def remove_job_gates(gates_dir: Path, job_id: str) -> None:
    """Delete the gate folders of ``job_id`` (when its ranks are forgotten: no small parent is left)."""
    shutil.rmtree(gates_dir / job_id, ignore_errors=True)
