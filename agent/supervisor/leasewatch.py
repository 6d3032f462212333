"""The lease watchdog of a rank's small parent (``shim.py``): stop the rank when the node's lease ran
out and no agent is alive to do it. Standard library only, like the shim, which loads it by path
(it runs as ``python -I -S shim.py``, outside the package).

The agent stops every rank when the coordinator has not answered a lease renewal for
0.8 × ``node_timeout_s`` (``agent/lease.py``, ``agent/fence.py``), and the coordinator counts a lost
node's ranks as stopped at its last contact + ``node_timeout_s`` + grace (docs/queue-semantics.md
§A5). A dead agent (SIGKILL, OOM) stops nothing; without this watchdog its ranks would run on,
unwatched, beside the job's next attempt elsewhere. docs/security.md describes the fence.
"""

from __future__ import annotations

import os
import signal
import time

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs each launch ~3 ms
if TYPE_CHECKING:
    from collections.abc import Callable


def proc_stat(pid: int) -> tuple[str, int, int, int] | None:
    """``(state, ppid, pgrp, start ticks)`` of ``pid`` from ``/proc/PID/stat``, or None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
        fields = raw[raw.rindex(b")") + 2 :].split()
        return fields[0].decode(), int(fields[1]), int(fields[2]), int(fields[19])
    except (OSError, ValueError, IndexError):
        return None


def descendants(root: int) -> dict[int, int]:
    """pid → process group of every live (not zombie) descendant of ``root``, from one ``/proc`` walk."""
    children: dict[int, list[tuple[int, int]]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            stat = proc_stat(int(name))
            if stat is not None and stat[0] not in "ZX":
                children.setdefault(stat[1], []).append((int(name), stat[2]))
    found: dict[int, int] = {}
    todo = [root]
    while todo:
        for pid, pgrp in children.get(todo.pop(), ()):
            if pid not in found:
                found[pid] = pgrp
                todo.append(pid)
    return found


def read_lease(path: str) -> dict[str, str] | None:
    """The agent's ``lease.json`` (``agent/lease.py``: one flat JSON object of numbers and plain
    strings) as key → text, without importing ``json``; None when missing or not of that shape."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read().strip()
    except OSError:
        return None
    if not (text.startswith("{") and text.endswith("}")) or "\\" in text:
        return None
    out = {}
    for item in text[1:-1].split(","):
        key, sep, value = item.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or len(key) < 2 or key[0] != '"' or key[-1] != '"':
            return None
        out[key[1:-1]] = value[1:-1] if value[:1] == '"' else value
    return out


LEASE_CHECK_S = 1.0  # how often the small parent looks at the lease file (one stat)
BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


class LeaseWatch:
    """The small parent's watchdog on the node's lease: when no agent is alive to stop the rank
    once the lease ran out, this process stops it itself, as the agent would.

    The agent stops every rank when the coordinator has not answered a lease renewal for
    0.8 × ``node_timeout_s`` (``agent/lease.py``), and the coordinator counts a lost node's ranks
    as stopped at its last contact + ``node_timeout_s`` + grace. A dead agent (SIGKILL, OOM)
    stops nothing, so the small parent of each rank reads the lease the agent saves
    (``lease.json``: the deadline on ``CLOCK_MONOTONIC``, shared by every process of one boot,
    and the holding agent's pid and start time) at most every :data:`LEASE_CHECK_S` seconds, one
    ``stat`` each time and a read only when the file changed. At the deadline, if the holder is
    gone (or a zombie, or stopped), it sends SIGTERM to the rank's process group and to every
    descendant outside it, and SIGKILL to all that are left at the deadline + ``grace``. A live
    holder fences on its own (no second SIGTERM); an agent restarted in time takes the lease
    over (it saves it under its own pid) and renews it, and the rank runs on. Once begun, the
    fence is not called off, as the agent's own is not. No lease file, one from another boot or
    from an agent that never armed one: no fence.

    Args:
        path: the agent's ``lease.json``.
        grace: the job's grace period (seconds between SIGTERM and SIGKILL).
        pgid: the rank's process group.
        clock: ``time.monotonic`` (``CLOCK_MONOTONIC``); injectable for tests.
        hangup: the rank runs on a pseudo-terminal (``labgang run --pty``): SIGHUP goes just
            before SIGTERM, as in the agent's own stop (an interactive shell ignores SIGTERM).
    """

    def __init__(
        self,
        path: str,
        grace: float,
        pgid: int,
        clock: Callable[[], float] = time.monotonic,
        *,
        hangup: bool = False,
    ) -> None:
        self.path = path
        self.hangup = hangup
        self.grace = max(float(grace), 0.0)
        self.pgid = pgid
        self.clock = clock
        self.file_key: tuple[int, int, int] | None = None  # (inode, mtime ns, size) of the last read
        self.expires: float | None = None  # CLOCK_MONOTONIC deadline of the lease last read
        self.holder: tuple[int, int] | None = None  # (pid, start ticks) of the agent that saved it
        self.next_check = 0.0
        self.term_at: float | None = None  # when this watchdog sent SIGTERM (None: no fence)
        self.kill_at: float | None = None
        self.boot: str | None = None

    @property
    def fenced(self) -> bool:
        """True once this watchdog began stopping the rank."""
        return self.term_at is not None

    def wait_s(self) -> float:
        """Seconds until :meth:`poll` has something to do (at most :data:`LEASE_CHECK_S`)."""
        return min(LEASE_CHECK_S, max(self.next_check - self.clock(), 0.0))

    def poll(self) -> None:
        """Look at the lease when a check is due; begin or carry on the fence. Never raises for
        a missing or odd lease file (that is no lease)."""
        now = self.clock()
        if now < self.next_check:
            return
        if self.kill_at is not None:
            left = self.signal_all(signal.SIGKILL) if now >= self.kill_at else 0
            self.next_check = now + 0.1 if left else max(self.kill_at, now + LEASE_CHECK_S)
            return
        self.refresh()
        expires = self.expires
        if expires is None or not now >= expires:
            self.next_check = min(now + LEASE_CHECK_S, expires) if expires is not None else now + LEASE_CHECK_S
            return
        self.next_check = now + LEASE_CHECK_S
        if self.holder_alive():
            return  # the agent fences its ranks itself
        self.term_at = now
        self.kill_at = expires + self.grace  # the coordinator's bound: counted from the deadline
        if self.hangup:
            self.signal_all(signal.SIGHUP)
        self.signal_all(signal.SIGTERM)
        self.next_check = now if now >= self.kill_at else self.kill_at

    def refresh(self) -> None:
        """Re-read the lease file when it changed since the last read (one ``stat`` otherwise)."""
        try:
            st = os.stat(self.path)
        except OSError:
            self.file_key, self.expires, self.holder = None, None, None
            return
        key = (st.st_ino, st.st_mtime_ns, st.st_size)
        if key == self.file_key:
            return
        data = read_lease(self.path)
        if data is None:
            return  # keep what was read before: a torn or odd file is no news
        self.file_key = key
        if self.boot is None:
            try:
                with open(BOOT_ID_FILE, encoding="ascii") as fh:
                    self.boot = fh.read().strip()
            except OSError:
                self.boot = ""
        try:
            expires = float(data["expires_mono"])
            holder = (int(data["agent_pid"]), int(data["agent_start_ticks"]))
        except (KeyError, ValueError):
            expires, holder = None, None  # an older agent's file: no monotonic deadline in it
        if not self.boot or data.get("boot_id") != self.boot or expires != expires:  # NaN
            expires = None
        self.expires, self.holder = expires, holder

    def holder_alive(self) -> bool:
        """Whether the agent that saved the lease still runs (same pid and start time, not a
        zombie, not stopped): then it fences, and this watchdog must not signal twice."""
        if self.holder is None:
            return False
        stat = proc_stat(self.holder[0])
        return stat is not None and stat[3] == self.holder[1] and stat[0] not in "ZXTt"

    def signal_all(self, signum: int) -> int:
        """Send ``signum`` to the rank's process group and to each descendant of this process
        outside it (``ESRCH``: already gone). Returns how many processes were left to signal."""
        found = descendants(os.getpid())
        if any(pgrp == self.pgid for pgrp in found.values()):
            try:
                os.killpg(self.pgid, signum)
            except OSError:
                pass
        for pid, pgrp in found.items():
            if pgrp != self.pgid:
                try:
                    os.kill(pid, signum)
                except OSError:
                    pass
        return len(found)
