"""The node's lease on its ranks: how long this agent may keep them running without the coordinator.

The coordinator marks a node lost after ``node_timeout_s`` without a word from it, and lets the
ranks there count as stopped ``node_timeout_s`` + their grace after that last word
(docs/queue-semantics.md §A5). So that the job's next attempt never runs beside the old one,
the agent stops its own ranks first: when the coordinator has not answered a lease renewal
for :data:`LEASE_SHARE` of ``node_timeout_s``, every rank here gets the usual stop (SIGTERM,
the job's grace, SIGKILL), and their exits are reported when the link is back.

A renewal counts from the moment it was *sent*, and only once the coordinator answered it: the
coordinator heard the agent at or after that moment, so the agent's lease always ends before the
coordinator's view of it (with :data:`LEASE_SHARE` leaving the rest of ``node_timeout_s`` as a
margin for the agent's own delays). Times are ``time.monotonic()`` seconds; the lease assumes
the two machines' clocks run at the same rate, not that they agree.

The lease outlives an agent restart: :func:`save_lease` writes it to the agent's state
directory, and :func:`load_lease` gives a new agent the lease its predecessor held, so ranks it
re-adopts while the coordinator is out of reach are still stopped in time. The file also holds
the deadline on ``CLOCK_MONOTONIC`` (shared by every process of one boot, named by the kernel's
``boot_id``) and who holds the lease (the agent's pid and start time): each rank's small parent
reads it, and stops its rank itself at that deadline when no agent is alive to do it
(``agent/supervisor/shim.py``, ``LeaseWatch``). :class:`NodeLease` itself is pure (no I/O, no clock).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

LEASE_SHARE = 0.8
"""The agent stops its ranks after this share of ``node_timeout_s`` without an answered renewal."""
RENEW_SHARE = 0.2
"""A renewal is sent every this share of ``node_timeout_s`` (at most :data:`RENEW_MAX_S`)."""
RENEW_MAX_S = 5.0


class NodeLease:
    """This node's lease, as the agent holds it.

    Unarmed (no ``node_timeout_s`` known yet: before the first ``welcome``, or from a
    coordinator that does not announce one) it never expires.

    Attributes:
        node_timeout_s: the coordinator's ``node_timeout_s`` (seconds), from its ``welcome``.
        confirmed_at: the send time of the newest renewal the coordinator answered (monotonic s).
        fenced: True once the agent stopped its ranks for this lease; cleared by the next renewal.
    """

    def __init__(self) -> None:
        self.node_timeout_s: float | None = None
        self.confirmed_at: float | None = None
        self.fenced = False

    def arm(self, node_timeout_s: float, sent_at: float) -> None:
        """A ``welcome`` answered the ``hello`` sent at ``sent_at``: the lease runs from then.

        Raises:
            ValueError: ``node_timeout_s`` is not a positive number of seconds.
        """
        if not node_timeout_s > 0:
            raise ValueError(f"node_timeout_s: {node_timeout_s!r} (allowed: seconds > 0)")
        self.node_timeout_s = float(node_timeout_s)
        self.confirm(sent_at)

    def confirm(self, sent_at: float) -> None:
        """The coordinator answered the renewal sent at ``sent_at`` (an older answer changes nothing)."""
        if self.confirmed_at is None or sent_at > self.confirmed_at:
            self.confirmed_at = sent_at
            self.fenced = False

    @property
    def renew_every(self) -> float | None:
        """Seconds between renewals, or None while unarmed."""
        if self.node_timeout_s is None:
            return None
        return min(self.node_timeout_s * RENEW_SHARE, RENEW_MAX_S)

    @property
    def expires_at(self) -> float | None:
        """When the agent must stop its ranks unless a renewal is answered first (None: unarmed)."""
        if self.node_timeout_s is None or self.confirmed_at is None:
            return None
        return self.confirmed_at + self.node_timeout_s * LEASE_SHARE

    def due(self, now: float) -> bool:
        """True when the lease ran out at ``now`` and the ranks were not stopped for it yet."""
        expires = self.expires_at
        return not self.fenced and expires is not None and now >= expires


LEASE_FILE = "lease.json"
"""The lease's file in the agent's state directory (``<state_dir>/agent``)."""


BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"


def boot_id() -> str:
    """This boot's id (``/proc/sys/kernel/random/boot_id``): ``CLOCK_MONOTONIC`` readings compare only
    within one boot. Empty when it cannot be read (the lease then falls back to unix seconds)."""
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def process_start_ticks(pid: int) -> int | None:
    """``pid``'s start time in clock ticks since boot (``/proc/PID/stat`` field 22), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            raw = fh.read()
        return int(raw[raw.rindex(b")") + 2 :].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def save_lease(agent_dir: Path, lease: NodeLease, *, mono_now: float, wall_now: float) -> None:
    """Write an armed lease to ``agent_dir/lease.json`` atomically (nothing for an unarmed one).

    The file is one flat JSON object of numbers and one string, which the ranks' small parents
    read without a JSON parser: ``node_timeout_s``; ``confirmed_at`` (unix s); ``confirmed_mono``
    and ``expires_mono`` (``CLOCK_MONOTONIC`` s, valid on the boot ``boot_id``); ``agent_pid`` and
    ``agent_start_ticks``, the agent that holds the lease and fences while it lives.

    Args:
        mono_now, wall_now: one reading of ``time.monotonic()`` and ``time.time()``, to turn the
            monotonic ``confirmed_at`` into unix seconds.

    Raises:
        OSError: the file cannot be written.
    """
    if lease.node_timeout_s is None or lease.confirmed_at is None or lease.expires_at is None:
        return
    data = {
        "node_timeout_s": lease.node_timeout_s,
        "confirmed_at": wall_now - (mono_now - lease.confirmed_at),
        "confirmed_mono": lease.confirmed_at,
        "expires_mono": lease.expires_at,
        "boot_id": boot_id(),
        "agent_pid": os.getpid(),
        "agent_start_ticks": process_start_ticks(os.getpid()) or 0,
    }
    tmp = agent_dir / f"{LEASE_FILE}.tmp.{os.getpid()}"
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, agent_dir / LEASE_FILE)


def suspend_lease(agent_dir: Path, *, wall_now: float, reason: str) -> None:
    """Write a lease with no deadline to ``agent_dir/lease.json`` atomically: nothing fences the
    ranks left running (neither the small parents' watchdog nor the next agent, which starts
    with an unarmed lease and arms it at its first renewal).

    Only for an agent whose coordinator stops with it (``labgang up --keep-jobs``): no
    coordinator is left to count this node's ranks as stopped and start their jobs elsewhere, so
    nothing needs them fenced, and they wait for the next ``labgang up`` to re-adopt them. The
    file holds ``suspended_at`` (unix s) and ``reason`` (plain text, no comma or quote).

    Raises:
        OSError: the file cannot be written.
    """
    data = {"suspended_at": wall_now, "reason": reason.replace(",", ";").replace('"', "'")}
    tmp = agent_dir / f"{LEASE_FILE}.tmp.{os.getpid()}"
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, agent_dir / LEASE_FILE)


def load_lease(agent_dir: Path, *, mono_now: float, wall_now: float) -> NodeLease:
    """The lease a previous agent saved, on this agent's monotonic clock; unarmed when there is
    no file, it cannot be read, or it was suspended (:func:`suspend_lease`). Saved on this boot,
    its ``CLOCK_MONOTONIC`` time is taken as it is (unless it is ahead of ``mono_now``: then it is
    not this clock); otherwise its unix time is (a clock set back since counts as no time passed).

    Args:
        mono_now, wall_now: one reading of ``time.monotonic()`` and ``time.time()``.
    """
    lease = NodeLease()
    try:
        data = json.loads((agent_dir / LEASE_FILE).read_text(encoding="utf-8"))
        timeout, confirmed = float(data["node_timeout_s"]), float(data["confirmed_at"])
        mono = data.get("confirmed_mono") if data.get("boot_id") and data.get("boot_id") == boot_id() else None
        mono = None if mono is None else float(mono)
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return lease
    if not (math.isfinite(timeout) and timeout > 0):
        return lease
    if mono is not None and math.isfinite(mono) and mono <= mono_now:  # ahead of now: not this clock
        lease.arm(timeout, mono)
    elif math.isfinite(confirmed):
        lease.arm(timeout, mono_now - max(0.0, wall_now - confirmed))
    return lease
