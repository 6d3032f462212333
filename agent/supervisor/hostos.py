"""The one seam between the supervisor and the operating system.

Everything the supervisor does to processes goes through ``HostOS``: one consistent
``/proc`` snapshot per tick, identity checks against pid reuse, signals with ``ESRCH``
counted as "already gone", and spawning a rank's small parent (``shim.py``).

Descendants are found in our own ``/proc`` snapshot rather than with psutil's
``Process.children(recursive=True)``: psutil rescans all of ``/proc`` on every call, once
per rank per tick, and exposes the start time only as a float; one scan per tick serves
every rank and gives the process group and the exact start time in ticks. (psutil is used
where it is the better tool: user names and command lines of foreign processes.)

A process is identified by ``(pid, start_ticks)``: its pid and its start time in clock
ticks since boot (``/proc/PID/stat`` field 22, proc(5)). A pid whose start time differs
from the recorded one is another process that reused the number and is never signalled.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

SHIM_PATH = Path(__file__).with_name("shim.py")
SPARE_NICE = 19  # niceness of a spare small parent while it starts up and waits


@dataclass(frozen=True)
class ProcEntry:
    """One process in a ``/proc`` snapshot.

    Attributes:
        pid: process id.
        ppid: parent's pid.
        pgrp: process group id.
        state: one-letter state from proc(5) (``R``, ``S``, ``Z`` zombie, …).
        start_ticks: start time in clock ticks since boot.
    """

    pid: int
    ppid: int
    pgrp: int
    state: str
    start_ticks: int

    @property
    def is_zombie(self) -> bool:
        """True for an exited process its parent has not reaped yet (``Z``/``X``)."""
        return self.state in ("Z", "X")


def _parse_stat(raw: bytes) -> ProcEntry:
    pid = int(raw[: raw.index(b" ")])
    fields = raw[raw.rindex(b")") + 2 :].split()
    # fields[0] is stat field 3 (state); field N is fields[N - 3].
    return ProcEntry(
        pid=pid, ppid=int(fields[1]), pgrp=int(fields[2]), state=fields[0].decode(), start_ticks=int(fields[19])
    )


class ProcSnapshot:
    """All processes of the host at one moment, with a parent → children index."""

    def __init__(self, entries: Iterable[ProcEntry]) -> None:
        self.by_pid: dict[int, ProcEntry] = {e.pid: e for e in entries}
        self.children: dict[int, list[int]] = {}
        for entry in self.by_pid.values():
            self.children.setdefault(entry.ppid, []).append(entry.pid)

    def matches(self, pid: int | None, start_ticks: int | None) -> bool:
        """True when ``pid`` exists, is not a zombie and started at ``start_ticks``."""
        if pid is None or start_ticks is None:
            return False
        entry = self.by_pid.get(pid)
        return entry is not None and not entry.is_zombie and entry.start_ticks == start_ticks

    def descendants(self, pid: int) -> dict[int, ProcEntry]:
        """Every live (non-zombie) descendant of ``pid``, ``pid`` itself excluded."""
        found: dict[int, ProcEntry] = {}
        stack = list(self.children.get(pid, ()))
        while stack:
            child = stack.pop()
            if child in found:
                continue
            entry = self.by_pid.get(child)
            if entry is None:
                continue
            if not entry.is_zombie:
                found[child] = entry
            stack.extend(self.children.get(child, ()))
        return found


class ProcessHost(Protocol):
    """What the supervisor asks of the operating system: the seam :class:`HostOS` implements.

    ``Supervisor(host_os=...)`` and ``ExitWatcher(host_os=...)`` take any object with these
    methods (tests pass a ``HostOS`` subclass that fails or records on purpose).
    """

    def snapshot(self) -> ProcSnapshot:
        """One consistent read of ``/proc``."""
        ...

    def start_ticks(self, pid: int) -> int | None:
        """Start time of ``pid`` in clock ticks since boot; None when it does not exist."""
        ...

    def kill(self, pid: int, signum: int) -> bool:
        """Signal one process; False when it is already gone."""
        ...

    def killpg(self, pgid: int, signum: int) -> bool:
        """Signal a process group; False when it is already gone."""
        ...

    def spawn_shim(self, rank_dir: Path, stderr_path: Path) -> tuple[subprocess.Popen[bytes], int | None]:
        """Start a rank's small parent; return it and its start ticks."""
        ...

    def spawn_spare_shim(self) -> tuple[subprocess.Popen[bytes], int | None]:
        """Start a spare small parent waiting for its rank folder on stdin."""
        ...

    def assign_spare_shim(self, proc: subprocess.Popen[bytes], rank_dir: Path) -> bool:
        """Hand a spare small parent its rank folder at the agent's priority; False when it cannot take it."""
        ...

    def hand_spare_shim(self, proc: subprocess.Popen[bytes], rank_dir: Path) -> bool:
        """Hand a spare small parent its rank folder at its spare priority; False when it cannot take it."""
        ...

    def restore_spare_priority(self, proc: subprocess.Popen[bytes]) -> bool:
        """Put a spare small parent's priority back to the agent's; False when that failed."""
        ...

    def ensure_dir(self, path: Path, mode: int, uid: int | None = None, gid: int | None = None) -> None:
        """Create ``path`` with ``mode`` (and owner)."""
        ...


class HostOS:
    """The real operating system, Linux ``/proc`` and signals. Injected into ``Supervisor``."""

    def snapshot(self) -> ProcSnapshot:
        """Read ``/proc/*/stat`` once. Processes that exit while it is read are skipped."""
        entries = []
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as fh:
                    entries.append(_parse_stat(fh.read()))
            except (OSError, ValueError, IndexError):
                continue
        return ProcSnapshot(entries)

    def start_ticks(self, pid: int) -> int | None:
        """Start time of ``pid`` in clock ticks since boot, or ``None`` when it does not exist."""
        try:
            with open(f"/proc/{pid}/stat", "rb") as fh:
                return _parse_stat(fh.read()).start_ticks
        except (OSError, ValueError, IndexError):
            return None

    def kill(self, pid: int, signum: int) -> bool:
        """Send ``signum`` to ``pid``. Returns False when it is already gone (``ESRCH``).

        Raises:
            PermissionError: the agent may not signal that process (``EPERM``).
        """
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            return False
        return True

    def killpg(self, pgid: int, signum: int) -> bool:
        """Send ``signum`` to process group ``pgid``; False when no member is left (``ESRCH``)."""
        try:
            os.killpg(pgid, signum)
        except ProcessLookupError:
            return False
        except PermissionError as exc:  # a group whose members all exited can answer EPERM on some kernels
            if exc.errno == errno.EPERM:
                return False
            raise
        return True

    def spawn_shim(self, rank_dir: Path, stderr_path: Path) -> tuple[subprocess.Popen[bytes], int | None]:
        """Start a rank's small parent in its own session; return it and its start ticks.

        Args:
            rank_dir: the rank's journal folder holding ``launch.json``.
            stderr_path: where the shim's own errors go (never the rank's output).

        Raises:
            OSError: the Python interpreter could not be started.
        """
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"}
        with open(stderr_path, "ab") as err:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(SHIM_PATH), str(rank_dir)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                cwd="/",
                env=env,
                start_new_session=True,
                close_fds=True,
            )
        return proc, self.start_ticks(proc.pid)

    def spawn_spare_shim(self) -> tuple[subprocess.Popen[bytes], int | None]:
        """Start a spare small parent (``shim.py --spare``) that waits for its rank folder on stdin.

        Raises:
            OSError: the Python interpreter could not be started.
        """
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL": "C.UTF-8"}
        proc = subprocess.Popen(
            # the agent's own priority: the spare takes it back itself once it has its rank folder
            [sys.executable, "-I", "-S", str(SHIM_PATH), "--spare", str(os.getpriority(os.PRIO_PROCESS, 0))],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
            env=env,
            start_new_session=True,
            close_fds=True,
        )
        if os.geteuid() == 0:
            # Its start-up is not urgent: at nice 19 it yields the CPU to ranks starting and
            # stopping now. Only root can lower it back (assign_spare_shim), so only root does it.
            try:
                os.setpriority(os.PRIO_PROCESS, proc.pid, SPARE_NICE)
            except OSError:
                pass
        return proc, self.start_ticks(proc.pid)

    def assign_spare_shim(self, proc: subprocess.Popen[bytes], rank_dir: Path) -> bool:
        """Give a spare small parent its rank folder; False when it is no longer there to take it.

        Its scheduling priority is first put back to the agent's own, which the rank inherits;
        a spare whose priority cannot be put back is not used.
        """
        if proc.poll() is not None or proc.stdin is None:
            return False
        return self.restore_spare_priority(proc) and self.hand_spare_shim(proc, rank_dir)

    def hand_spare_shim(self, proc: subprocess.Popen[bytes], rank_dir: Path) -> bool:
        """Give a spare small parent its rank folder without touching its priority; False when it is
        no longer there to take it.

        For one node's ranks handed out together (``SpareShims.start_shims``): a spare still at
        ``SPARE_NICE`` that wakes on its line does not take the CPU from the agent, which hands out
        the next rank's folder at once instead of after this rank's start-up; the caller then puts
        every priority back with :meth:`restore_spare_priority`.
        """
        if proc.poll() is not None or proc.stdin is None:
            return False
        try:
            proc.stdin.write(f"{rank_dir}\n".encode())
            proc.stdin.close()
        except (BrokenPipeError, OSError):
            return False
        return True

    def restore_spare_priority(self, proc: subprocess.Popen[bytes]) -> bool:
        """Put a small parent's scheduling priority back to the agent's own (the rank inherits it);
        False when it could not be (the process is gone, or the agent may not lower its nice)."""
        try:
            if os.getpriority(os.PRIO_PROCESS, proc.pid) != os.getpriority(os.PRIO_PROCESS, 0):
                os.setpriority(os.PRIO_PROCESS, proc.pid, os.getpriority(os.PRIO_PROCESS, 0))
        except OSError:
            return False
        return True

    @staticmethod
    def ensure_dir(path: Path, mode: int, uid: int | None = None, gid: int | None = None) -> None:
        """Create ``path`` (parents as needed) and set its mode and, when given, its owner."""
        path.mkdir(parents=True, exist_ok=True)
        os.chmod(path, mode)
        if uid is not None:
            os.chown(path, uid, gid if gid is not None else -1)


def visible_pids(device_map: Mapping[str, Iterable[int]], devices: Iterable[str]) -> set[int]:
    """Union of the pids NVML shows on ``devices`` (UUIDs) in a ``device_pids()`` mapping."""
    shown: set[int] = set()
    for uuid in devices:
        shown.update(device_map.get(uuid, ()))
    return shown
