"""Fencing a lost node: when its ranks may count as stopped (docs/queue-semantics.md §A5).

A node's link is a lease. Its agent stops its own ranks (SIGTERM, the job's grace period,
SIGKILL) once it has heard nothing from the coordinator for a little less than
``node_timeout_s`` (``agent/lease.py``). The coordinator marks the node lost after
``node_timeout_s`` of silence, but its ranks there count as stopped only at::

    last contact + node_timeout_s + the job's grace

By then the agent has certainly killed them, so the job's next attempt (a requeue) never runs
beside the old one. An agent that comes back earlier reports the ranks' real exits, and those
end the wait at once.

Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping

from labgang.launcher.lifecycle.records import JobRecord, RankRecord
from labgang.launcher.lifecycle.rules import ranks_in_order


def fence_deadline(job: JobRecord, last_contact: float, node_timeout_s: float) -> float:
    """The instant the job's ranks on a node last heard from at ``last_contact`` count as stopped.

    Args:
        job: the job (its ``spec.grace_s`` is the time its ranks get between SIGTERM and SIGKILL).
        last_contact: when the driver last heard from the node (the driver's clock, seconds).
        node_timeout_s: the node lease (seconds).

    Returns:
        ``last_contact + node_timeout_s + job.spec.grace_s`` (same clock as ``last_contact``).
    """
    return last_contact + node_timeout_s + job.spec.grace_s


def fenced_ranks(job: JobRecord, lost: Mapping[str, float]) -> list[RankRecord]:
    """The job's ranks, rank 0 first, that are not over yet on a node now lost.

    Args:
        lost: node name → its last contact, for every node now lost.
    """
    return [r for r in ranks_in_order(job) if r.node in lost and not r.ended]


def fence_message(job: JobRecord, ranks: list[RankRecord], node: str, until: float, now: float, timeout: float) -> str:
    """The ``fenced`` history line: which ranks wait, until when, and what ends the wait sooner.

    Args:
        ranks: the job's fenced ranks on ``node``. until: their fence deadline. now: the
            loss's time. timeout: ``node_timeout_s``.
    """
    which = ", ".join(str(r.rank) for r in ranks)
    many = len(ranks) != 1
    left = max(0.0, until - now)
    them, their_exits = ("them", "their exits") if many else ("it", "its exit")
    return (
        f"rank{'s' if many else ''} {which} on {node} count{'' if many else 's'} as stopped in {left:.1f} s "
        f"(node_timeout_s {timeout:g} + grace {job.spec.grace_s:g} s after the last word from {node}: by then "
        f"its agent has stopped {them}), unless {node} reports {their_exits} sooner"
    )
