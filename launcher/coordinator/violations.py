"""Device violations and confinement as the agents report them: kept per node, new ones applied.

An agent sends, with every inventory, the rank processes NVML shows on devices their rank was
not given (``agent/supervisor/violations.py``), and in its hello how it fences ranks
(``agent/confine/``). :func:`take_violations` keeps the node's current list (``GET /v1/nodes``,
the ``device-violation`` pitfall) and turns each new one into the lifecycle event
:class:`~labgang.launcher.lifecycle.events.DeviceViolationSeen` (the job's history, and the
cluster's ``violation`` policy).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from labgang.launcher.lifecycle.events import DeviceViolationSeen

if TYPE_CHECKING:
    from labgang.launcher.coordinator.agents import AgentConn
    from labgang.launcher.lifecycle.records import JobRecord

log = logging.getLogger("labgang.coordinator.violations")


def _parse(node: str, item: Any, now: float) -> DeviceViolationSeen | None:
    try:
        over_budget = item.get("kind") == "gpu-mem"  # a sharing rank over its --gpu-mem budget
        return DeviceViolationSeen(
            now,
            node,
            str(item["job_id"]),
            int(item["rank"]),
            str(item["device"]),
            int(item["pid"]),
            tuple(str(d) for d in item.get("allowed") or ()),
            int(item["used"]) if over_budget else None,
            int(item["budget"]) if over_budget else None,
        )
    except (KeyError, TypeError, ValueError, AttributeError):
        log.warning("node %s sent a malformed device violation %r: ignored", node, item)
        return None


def take_violations(conn: AgentConn, items: object, now: float, apply: Callable[[DeviceViolationSeen], object]) -> None:
    """Keep ``conn``'s current violations and apply the new ones to the coordinator's model.

    Args:
        conn: the node's ``AgentConn``.
        items: the message's ``violations`` list; None (an agent that sends none) changes nothing.
        now: the coordinator's clock (unix seconds), the time of the events.
        apply: applies one new violation to the lifecycle model (``Commits.apply``).
    """
    if not isinstance(items, list):
        return
    seen = [v for item in items if (v := _parse(conn.node, item, now)) is not None]
    before = {(v.run_id, v.rank, v.device, v.pid, v.budget is None) for v in conn.replace_violations(seen)}
    for violation in seen:
        key = (violation.run_id, violation.rank, violation.device, violation.pid, violation.budget is None)
        if key not in before and violation.budget is not None:
            log.warning(
                "node %s: rank %s of job %s (pid %s) uses %s bytes of device %s, over its budget of %s",
                conn.node,
                violation.rank,
                violation.run_id,
                violation.pid,
                violation.used,
                violation.device,
                violation.budget,
            )
            apply(violation)
        elif key not in before:
            log.warning(
                "node %s: rank %s of job %s (pid %s) on device %s, which it was not given",
                conn.node,
                violation.rank,
                violation.run_id,
                violation.pid,
                violation.device,
            )
            apply(violation)


def violation_views(conn: AgentConn, job_for_run: Callable[[str], JobRecord | None]) -> list[dict[str, Any]]:
    """The node's current violations for ``GET /v1/nodes``: job, rank, pid, device, allowed devices, user;
    a budget violation also ``kind = "gpu-mem"``, ``used`` and ``budget`` (bytes).

    Args:
        conn: the node's ``AgentConn``.
        job_for_run: the job of a run id (``"<job id>.<attempt>"``), or None (``Coordinator.job_for_run``).
    """
    out = []
    for v in conn.violations:
        job = job_for_run(v.run_id)
        out.append(
            {
                "job": job.id if job is not None else v.run_id,
                "user": job.spec.user if job is not None else None,
                "rank": v.rank,
                "pid": v.pid,
                "device": v.device,
                "allowed": list(v.allowed),
                **({"kind": "gpu-mem", "used": v.used, "budget": v.budget} if v.budget is not None else {}),
            }
        )
    return out
