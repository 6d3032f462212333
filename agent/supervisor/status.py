"""What the supervisor reports about ranks: ``RankStatus`` snapshots and ``RankEvent`` happenings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .states import RankState

EventKind = Literal["started", "exited", "gone"]
EVENT_KINDS: tuple[str, ...] = ("started", "exited", "gone")


@dataclass(frozen=True)
class RankStatus:
    """One rank as the supervisor sees it now.

    Attributes:
        job_id: the job's id.
        rank: the global rank.
        state: where the rank is in its life (``RankState``).
        pid: the rank's main process id; ``None`` while ``STARTING``.
        pgid: its process group (= its session, = ``pid``); ``None`` while ``STARTING``.
        exit_status: the code, or 128+N for signal N; ``None`` until the main process exited,
            and also ``None`` when its status could not be known (its small parent was killed).
        started_at: unix seconds when the main process was spawned; ``None`` while ``STARTING``.
        ended_at: unix seconds when the main process exited; ``None`` until then.
        fenced: its small parent stopped it because the node's lease ran out while no agent was
            alive to do it (``shim.LeaseWatch``); ``to_dict`` writes ``"fenced": true`` only then.
    """

    job_id: str
    rank: int
    state: RankState
    pid: int | None
    pgid: int | None
    exit_status: int | None
    started_at: float | None
    ended_at: float | None
    fenced: bool = False

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict; ``state`` as its lower-case name."""
        out: dict[str, Any] = {
            "job_id": self.job_id,
            "rank": self.rank,
            "state": self.state.value,
            "pid": self.pid,
            "pgid": self.pgid,
            "exit_status": self.exit_status,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }
        if self.fenced:
            out["fenced"] = True
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankStatus:
        """Inverse of ``to_dict``.

        Raises:
            ValueError: ``state`` is not one of ``RankState``'s values; KeyError: a field is missing.
        """
        return cls(
            job_id=data["job_id"],
            rank=data["rank"],
            state=RankState(data["state"]),
            pid=data["pid"],
            pgid=data["pgid"],
            exit_status=data["exit_status"],
            started_at=data["started_at"],
            ended_at=data["ended_at"],
            fenced=data.get("fenced") is True,
        )


@dataclass(frozen=True)
class RankEvent:
    """Something that happened to a rank, returned by ``Supervisor.tick()`` / ``recover()``.

    Attributes:
        job_id: the job's id.
        rank: the global rank.
        kind: ``"started"`` (main process runs), ``"exited"`` (main process ended; ``exit_status`` set,
            or ``None`` if unknowable), ``"gone"`` (no process left and its devices no longer show it).
        exit_status: for ``"exited"`` and ``"gone"``: code or 128+N; ``None`` for ``"started"``.
        time: unix seconds when the supervisor noticed it.
        pid: the rank's main process id once known (None before the shim reported it), so that
            the coordinator records it even for a rank that ends before any status reaches it.
        started_at: unix seconds when the main process started (its exec, after the start gate
            released it; None when it never started): the coordinator records each rank's start
            instant from it (``labgang show``'s per-rank START), not from when it was noticed.
        ended_at: unix seconds when the main process exited (None until then, or unknowable).

    Events are delivered at least once: after an agent crash the same ``exited`` may be reported again.
    """

    job_id: str
    rank: int
    kind: EventKind
    exit_status: int | None
    time: float
    pid: int | None = None
    started_at: float | None = None
    ended_at: float | None = None

    def __post_init__(self) -> None:
        if self.kind not in EVENT_KINDS:
            raise ValueError(f"kind: {self.kind!r} is not an event kind (allowed: {', '.join(EVENT_KINDS)})")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return {
            "job_id": self.job_id,
            "rank": self.rank,
            "kind": self.kind,
            "exit_status": self.exit_status,
            "time": self.time,
            "pid": self.pid,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RankEvent:
        """Inverse of ``to_dict``.

        Raises:
            ValueError: ``kind`` is not an event kind; KeyError: a field is missing.
        """
        return cls(
            job_id=data["job_id"],
            rank=data["rank"],
            kind=data["kind"],
            exit_status=data["exit_status"],
            time=data["time"],
            pid=data.get("pid"),
            started_at=data.get("started_at"),
            ended_at=data.get("ended_at"),
        )
