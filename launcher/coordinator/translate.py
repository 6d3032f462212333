"""Agent messages → lifecycle events: the one place the coordinator reads the supervisor's
``RankEvent`` and ``RankStatus`` dicts (``agent/supervisor/status.py``).
"""

from __future__ import annotations

import logging
from typing import Any

from labgang.launcher.lifecycle.events import LaunchAnswered, RankObserved
from labgang.launcher.lifecycle.states import RankPhase

log = logging.getLogger("labgang.coordinator.translate")

_EVENT_PHASE = {"started": RankPhase.RUNNING, "exited": RankPhase.EXITED, "gone": RankPhase.GONE}


def _int_or_none(value: Any) -> int | None:
    return None if value is None else int(value)


def _fenced_at(message: dict[str, Any]) -> float | None:
    """When the agent's fence stopped the rank (``fenced_at``, unix s), if the message says."""
    value = message.get("fenced_at")
    return float(value) if message.get("fenced") is True and isinstance(value, (int, float)) else None


def _instant(message: dict[str, Any], key: str) -> float | None:
    """A rank's ``started_at`` or ``ended_at`` (unix s, the agent's clock), None when absent (an
    older agent's message) or not a number."""
    value = message.get(key)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def rank_event(node: str, event: dict[str, Any], now: float) -> RankObserved | None:
    """A ``RankEvent`` dict (kind ``started`` | ``exited`` | ``gone``, with the rank's ``pid`` when the
    agent knew it, and ``fenced: true`` when the agent stopped the rank because its lease ran out, with
    ``fenced_at`` when)
    from ``node``; None (logged) for a kind this coordinator does not know."""
    phase = _EVENT_PHASE.get(str(event.get("kind")))
    if phase is None:
        log.warning("node %s sent a rank event of unknown kind %r: ignored", node, event.get("kind"))
        return None
    return RankObserved(
        now,
        node,
        str(event["job_id"]),
        int(event["rank"]),
        phase,
        pid=_int_or_none(event.get("pid")),  # absent from an older agent's events
        exit_status=_int_or_none(event.get("exit_status")),
        fenced=event.get("fenced") is True,
        fenced_at=_fenced_at(event),
        started_at=_instant(event, "started_at"),
        ended_at=_instant(event, "ended_at"),
    )


def rank_status(node: str, status: dict[str, Any], now: float) -> RankObserved | None:
    """A ``RankStatus`` dict (a supervisor ``RankState`` with pid and exit status, ``fenced: true`` as
    for :func:`rank_event`) from ``node``; None (logged) for a state this coordinator does not know."""
    exit_status = _int_or_none(status.get("exit_status"))
    try:
        phase = RankPhase.from_agent(str(status.get("state")), exit_status)
    except ValueError as exc:
        log.warning("node %s: %s: ignored", node, exc)
        return None
    return RankObserved(
        now,
        node,
        str(status["job_id"]),
        int(status["rank"]),
        phase,
        pid=_int_or_none(status.get("pid")),
        exit_status=exit_status,
        fenced=status.get("fenced") is True,
        fenced_at=_fenced_at(status),
        started_at=_instant(status, "started_at"),
        ended_at=_instant(status, "ended_at"),
    )


def rank_statuses(node: str, statuses: list[dict[str, Any]], now: float) -> tuple[RankObserved, ...]:
    """Every known ``RankStatus`` of a list (unknown states are left out, logged)."""
    return tuple(obs for s in statuses if (obs := rank_status(node, s, now)) is not None)


def launch_answer(node: str, run_id: str, statuses: list[dict[str, Any]], now: float) -> LaunchAnswered:
    """The agent's answer to ``launch``: one dict per rank, a ``RankStatus`` or ``{"rank", "error",
    "permanent"}`` for a refused rank; rank 0's node adds ``master_port``."""
    port = next((s["master_port"] for s in statuses if s.get("master_port")), None)
    refused = tuple((int(s["rank"]), str(s["error"])) for s in statuses if "error" in s)
    return LaunchAnswered(
        now,
        node,
        run_id,
        master_port=None if port is None else int(port),
        refused=refused,
        permanent=any(s.get("permanent") for s in statuses if "error" in s),
        observed=rank_statuses(node, [s for s in statuses if "error" not in s], now),
    )
