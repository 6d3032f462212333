"""The supervisor's record of each rank and the journalled state machine every change goes through.

:class:`RankRecord` is the private, mutable record of one rank; :class:`RankTable` (a part of
:class:`~labgang.agent.supervisor.supervisor.Supervisor`, shared with its spare pool's and its
stopper's callers) holds them, finds a rank's live processes in a ``/proc`` snapshot, and
changes a rank's state only through :meth:`RankTable.transition`, which checks
``states.TRANSITIONS``, journals the new state and returns the event.
:class:`DeviceReading` is what NVML showed on the node's devices, and when the read began.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from . import journal as J
from .errors import InvalidTransition, UnknownJob
from .hostos import ProcSnapshot
from .spec import LaunchSpec
from .states import RankState, can_transition
from .status import EventKind, RankEvent, RankStatus
from .writer import JournalWriter

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceReading:
    """What NVML showed on the node's devices, and when the read began.

    Attributes:
        pids: device UUID → pids NVML shows on it (``NodeInventory.device_pids()``, from
            ``nvmlDeviceGetComputeRunningProcesses``).
        read_at: the supervisor's ``clock()`` (monotonic seconds) just before the NVML read began.
    """

    pids: Mapping[str, frozenset[int]]
    read_at: float


DevicePids = Callable[[], "Mapping[str, frozenset[int]] | DeviceReading | None"]

KNOWN_PIDS_LIMIT = 4096
"""Pids remembered per rank (live ones always; the oldest dead ones are forgotten past this).
Dead pids are kept because NVML may still show them on the rank's devices."""


@dataclass
class RankRecord:
    """The supervisor's private, mutable record of one rank."""

    spec: LaunchSpec
    dir: Path
    state: RankState = RankState.STARTING
    shim_pid: int | None = None
    shim_ticks: int | None = None
    shim_proc: subprocess.Popen[bytes] | None = None
    pid: int | None = None
    pgid: int | None = None
    ticks: int | None = None
    started_at: float | None = None
    started_reported: bool = False
    exit_known: bool = False
    exit_status: int | None = None
    ended_at: float | None = None
    exit_reported: bool = False
    known: dict[int, int] = field(default_factory=dict)  # pid -> start ticks, every process ever seen
    stop_grace: float | None = None
    term_at: float | None = None
    kill_at: float | None = None
    kill_by: float | None = None  # unix seconds of kill_at, journalled: a restarted agent keeps the deadline
    term_sent: bool = False  # its stop's SIGTERM went; journalled after it, so a restarted agent sends no second
    shim_alive: bool = True  # as of the last snapshot
    released_at: float | None = None  # clock() after the snapshot that saw no process and no shim left
    fenced: bool = False  # its small parent stopped it because the node's lease ran out (exit.json)

    @property
    def key(self) -> tuple[str, int]:
        return (self.spec.job_id, self.spec.rank)

    @property
    def grace(self) -> float:
        """Seconds from its stop's SIGTERM to SIGKILL: the stop's own (``stop_grace``), else its spec's."""
        return self.stop_grace if self.stop_grace is not None else self.spec.grace

    def status(self) -> RankStatus:
        return RankStatus(
            job_id=self.spec.job_id,
            rank=self.spec.rank,
            state=self.state,
            pid=self.pid,
            pgid=self.pgid,
            exit_status=self.exit_status,
            started_at=self.started_at,
            ended_at=self.ended_at,
            fenced=self.fenced,
        )


class RankTable:
    """The ranks of one node and their journalled state machine.

    Args:
        journal: the state dir's layout (``journal.py``).
        writer: who writes ``state.json`` (now, or in order on a thread; ``writer.py``).
        wall_clock: unix seconds for event times.

    Attributes:
        ranks: ``(job id, rank)`` → its record; the supervisor adds records at launch and
            recovery and forgets them, every state change goes through :meth:`transition`.
    """

    def __init__(self, journal: J.Journal, writer: JournalWriter, wall_clock: Callable[[], float]) -> None:
        self._journal = journal
        self._writer = writer
        self._wall = wall_clock
        self.ranks: dict[tuple[str, int], RankRecord] = {}

    def job_ranks(self, job_id: str) -> list[RankRecord]:
        """The records of a job's ranks on this node, by rank.

        Raises:
            UnknownJob: no rank of this job is supervised here.
        """
        found = [r for k, r in sorted(self.ranks.items()) if k[0] == job_id]
        if not found:
            raise UnknownJob(f"job_id: no rank of job {job_id!r} on this node")
        return found

    @staticmethod
    def prune_known(rec: RankRecord, live: Mapping[int, int]) -> None:
        """Forget the oldest dead pids beyond ``KNOWN_PIDS_LIMIT`` (a job forking workers every epoch)."""
        dead = [pid for pid in rec.known if pid not in live and pid != rec.pid]
        for pid in dead[: len(rec.known) - KNOWN_PIDS_LIMIT]:
            del rec.known[pid]

    def read_rank_file(self, rec: RankRecord) -> None:
        """Take the rank's pid, group, start ticks and start time from its ``rank.json``, if written."""
        info = J.read_json(rec.dir / J.RANK)
        if info is not None:
            rec.pid, rec.pgid = info["pid"], info["pgid"]
            rec.ticks, rec.started_at = info["start_ticks"], info["started_at"]
            if rec.ticks is not None:
                rec.known[rec.pid] = rec.ticks

    def read_exit_file(self, rec: RankRecord) -> None:
        """Take the rank's exit status, end time and fencing from its ``exit.json``, if written."""
        info = J.read_json(rec.dir / J.EXIT)
        if info is not None:
            rec.exit_known = True
            rec.exit_status = info["exit_status"]
            rec.ended_at = info["ended_at"]
            rec.fenced = info.get("fenced") is True

    def live(self, rec: RankRecord, snap: ProcSnapshot, shim_alive: bool) -> dict[int, int]:
        """pid → start ticks of every live process of the rank (the shim itself excluded)."""
        live: dict[int, int] = {}
        if shim_alive and rec.shim_pid is not None:
            live.update({pid: e.start_ticks for pid, e in snap.descendants(rec.shim_pid).items()})
        for pid, ticks in rec.known.items():
            if pid not in live and snap.matches(pid, ticks):
                live[pid] = ticks
                live.update({p: e.start_ticks for p, e in snap.descendants(pid).items()})
        return live

    # ------------------------------------------------------------------ state machine

    @overload
    def transition(self, rec: RankRecord, new: RankState, kind: EventKind) -> RankEvent: ...
    @overload
    def transition(self, rec: RankRecord, new: RankState, kind: None = None) -> None: ...
    def transition(self, rec: RankRecord, new: RankState, kind: EventKind | None = None) -> RankEvent | None:
        """The one place a rank changes state: guard, journal, and the event (if ``kind``).

        Raises:
            InvalidTransition: ``states.TRANSITIONS`` does not allow it (a supervisor bug).
        """
        old = rec.state
        if not can_transition(old, new):
            raise InvalidTransition(f"rank {rec.spec.rank} of job {rec.spec.job_id!r}: {old.value} -> {new.value}")
        rec.state = new
        log.debug("rank %s/%s: %s -> %s", *rec.key, old.value, new.value)
        self.save(rec)
        return self.event(rec, kind) if kind is not None else None

    def event(self, rec: RankRecord, kind: EventKind) -> RankEvent:
        """The event ``kind`` of the rank now (``exit_status`` unless ``started``; wall-clock time),
        with the rank's start and end instants as its small parent wrote them."""
        status = None if kind == "started" else rec.exit_status
        return RankEvent(
            job_id=rec.spec.job_id,
            rank=rec.spec.rank,
            kind=kind,
            exit_status=status,
            time=self._wall(),
            pid=rec.pid,
            started_at=rec.started_at,
            ended_at=None if kind == "started" else rec.ended_at,
        )

    def save(self, rec: RankRecord) -> None:
        """Journal the rank's record (``state.json``) through the writer: now, or queued in order."""
        self._writer.write(
            rec.dir / J.STATE,
            {
                "state": rec.state.value,
                "started_reported": rec.started_reported,
                "exit_reported": rec.exit_reported,
                "exit_known": rec.exit_known,
                "exit_status": rec.exit_status,
                "ended_at": rec.ended_at,
                "known": {str(pid): ticks for pid, ticks in sorted(rec.known.items())},
                "stop_grace": rec.stop_grace,
                "kill_by": rec.kill_by,
                "term_sent": rec.term_sent,
            },
        )
