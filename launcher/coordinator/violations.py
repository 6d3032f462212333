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
from typing import Any

from labgang.launcher.lifecycle.events import DeviceViolationSeen

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


def take_violations(coord: Any, conn: Any, items: Any) -> None:
    """Keep ``conn``'s current violations and apply the new ones to the coordinator's model.

    Args:
        coord: the :class:`~labgang.launcher.coordinator.core.Coordinator`.
        conn: the node's ``AgentConn``.
        items: the message's ``violations`` list; None (an agent that sends none) changes nothing.
    """
    if not isinstance(items, list):
        return
    now = coord.clock()
    seen = [v for item in items if (v := _parse(conn.node, item, now)) is not None]
    before = {(v.run_id, v.rank, v.device, v.pid, v.budget is None) for v in conn.violations}
    conn.violations = seen
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
            coord.apply(violation)
        elif key not in before:
            log.warning(
                "node %s: rank %s of job %s (pid %s) on device %s, which it was not given",
                conn.node,
                violation.rank,
                violation.run_id,
                violation.pid,
                violation.device,
            )
            coord.apply(violation)


def violation_views(coord: Any, conn: Any) -> list[dict[str, Any]]:
    """The node's current violations for ``GET /v1/nodes``: job, rank, pid, device, allowed devices, user;
    a budget violation also ``kind = "gpu-mem"``, ``used`` and ``budget`` (bytes)."""
    out = []
    for v in conn.violations:
        job = coord.job_for_run(v.run_id)
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
