"""The supervisor's record of each rank and the journalled state machine every change goes through.

:class:`RankRecord` is the private, mutable record of one rank; :class:`RankTable` (the base of
:class:`~labgang.agent.supervisor.supervisor.Supervisor`) holds them, finds a rank's live
processes in a ``/proc`` snapshot, and changes a rank's state only through ``_transition``,
which checks ``states.TRANSITIONS``, journals the new state and returns the event.
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
from .hostos import ProcessHost, ProcSnapshot
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
    shim_alive: bool = True  # as of the last snapshot
    released_at: float | None = None  # clock() after the snapshot that saw no process and no shim left
    fenced: bool = False  # its small parent stopped it because the node's lease ran out (exit.json)

    @property
    def key(self) -> tuple[str, int]:
        return (self.spec.job_id, self.spec.rank)

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
    """The ranks of one node and their state machine; :class:`~labgang.agent.supervisor.supervisor.Supervisor`
    sets the attributes below in its ``__init__``."""

    _journal: J.Journal
    _writer: JournalWriter  # state.json and shim.json: now, or in order on a thread (writer.py)
    _ranks: dict[tuple[str, int], RankRecord]
    _clock: Callable[[], float]
    _wall: Callable[[], float]
    _os: ProcessHost

    def _job_ranks(self, job_id: str) -> list[RankRecord]:
        found = [r for k, r in sorted(self._ranks.items()) if k[0] == job_id]
        if not found:
            raise UnknownJob(f"job_id: no rank of job {job_id!r} on this node")
        return found

    @staticmethod
    def _prune_known(rec: RankRecord, live: Mapping[int, int]) -> None:
        """Forget the oldest dead pids beyond ``KNOWN_PIDS_LIMIT`` (a job forking workers every epoch)."""
        dead = [pid for pid in rec.known if pid not in live and pid != rec.pid]
        for pid in dead[: len(rec.known) - KNOWN_PIDS_LIMIT]:
            del rec.known[pid]

    def _read_rank_file(self, rec: RankRecord) -> None:
        info = J.read_json(rec.dir / J.RANK)
        if info is not None:
            rec.pid, rec.pgid = info["pid"], info["pgid"]
            rec.ticks, rec.started_at = info["start_ticks"], info["started_at"]
            if rec.ticks is not None:
                rec.known[rec.pid] = rec.ticks

    def _read_exit_file(self, rec: RankRecord) -> None:
        info = J.read_json(rec.dir / J.EXIT)
        if info is not None:
            rec.exit_known = True
            rec.exit_status = info["exit_status"]
            rec.ended_at = info["ended_at"]
            rec.fenced = info.get("fenced") is True

    def _live(self, rec: RankRecord, snap: ProcSnapshot, shim_alive: bool) -> dict[int, int]:
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
    def _transition(self, rec: RankRecord, new: RankState, kind: EventKind) -> RankEvent: ...
    @overload
    def _transition(self, rec: RankRecord, new: RankState, kind: None = None) -> None: ...
    def _transition(self, rec: RankRecord, new: RankState, kind: EventKind | None = None) -> RankEvent | None:
        """The one place a rank changes state: guard, journal, and the event (if ``kind``).

        Raises:
            InvalidTransition: ``states.TRANSITIONS`` does not allow it (a supervisor bug).
        """
        old = rec.state
        if not can_transition(old, new):
            raise InvalidTransition(f"rank {rec.spec.rank} of job {rec.spec.job_id!r}: {old.value} -> {new.value}")
        rec.state = new
        log.debug("rank %s/%s: %s -> %s", *rec.key, old.value, new.value)
        self._save(rec)
        return self._event(rec, kind) if kind is not None else None

    def _event(self, rec: RankRecord, kind: EventKind) -> RankEvent:
        status = None if kind == "started" else rec.exit_status
        return RankEvent(
            job_id=rec.spec.job_id,
            rank=rec.spec.rank,
            kind=kind,
            exit_status=status,
            time=self._wall(),
            pid=rec.pid,
        )

    def _save(self, rec: RankRecord) -> None:
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
            },
        )
