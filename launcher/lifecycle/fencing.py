"""Fencing a lost node: when its ranks may count as stopped (docs/queue-semantics.md §A5).

A node's link is a lease. Its agent stops its own ranks (SIGTERM, the job's grace period,
SIGKILL) once it has heard nothing from the coordinator for a little less than
``node_timeout_s`` (``agent/lease.py``). The coordinator marks the node lost after
``node_timeout_s`` of silence, but its ranks there count as stopped only at::

    last contact + node_timeout_s + the job's grace

By then the agent has certainly killed them, so the job's next attempt (a requeue) never runs
beside the old one. An agent that comes back earlier reports the ranks' real exits, and those
end the wait at once.

:class:`FenceRules`, a part of :class:`~labgang.launcher.lifecycle.machine.Lifecycle`, applies
this: it keeps the lost nodes, stops a lost node's jobs elsewhere, and counts its ranks as lost
at their deadline. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from labgang.launcher.lifecycle import effects as fx
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.context import RuleContext
from labgang.launcher.lifecycle.gang import GangRules, LifecyclePolicy
from labgang.launcher.lifecycle.records import JobRecord, RankRecord
from labgang.launcher.lifecycle.rules import ranks_in_order
from labgang.launcher.lifecycle.states import EndIntent, JobState, RankPhase


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


def lease_expired(connected: bool, silent: float, node_timeout_s: float) -> str:
    """Why a node is lost (``NodeLost.why``): its lease ran out while its link was up or down.

    Args:
        connected: whether the node's link is still open (a silent agent) or closed.
        silent: seconds since the last word from the node. node_timeout_s: the node lease.
    """
    how = "disconnected" if not connected else "silent"
    return f"{how} for {silent:.1f} s > node_timeout_s {node_timeout_s:g}"


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


class FenceRules:
    """The lost nodes and the fences on their ranks (see the module docstring).

    Args:
        policy: the configured limits (``node_timeout_s``, the node lease).
        ctx: the event under way (its instant, the effects out).
        gang: the gang rules, which stop a lost node's jobs and decide once its ranks count as lost.
    """

    def __init__(self, policy: LifecyclePolicy, ctx: RuleContext, gang: GangRules) -> None:
        self.policy = policy
        self._ctx = ctx
        self._gang = gang
        self.lost_nodes: dict[str, float] = {}
        """Node → its last contact (the driver's clock), for every node now lost."""

    def node_lost(self, e: ev.NodeLost, active: Iterable[JobRecord]) -> None:
        """The node's ranks are fenced: each of the ``active`` jobs with a rank there is stopped
        elsewhere now, and its ranks there count as lost only at its fence deadline, or end
        earlier on reported exits."""
        contact = e.now if e.last_contact is None else e.last_contact
        last = min(self.lost_nodes.get(e.node, contact), contact)
        self.lost_nodes[e.node] = last
        timeout = self.policy.node_timeout_s
        for job in active:
            if not any(r.node == e.node and not r.ended for r in job.ranks.values()):
                continue
            if job.status.state != JobState.TERMINATING:
                self._gang.begin_termination(job, EndIntent.LOST, f"node {e.node} lost ({e.why})")
            waiting = fenced_ranks(job, {e.node: last})
            if not waiting:  # never launched there: nothing to wait for
                continue
            until = fence_deadline(job, last, timeout)
            self._ctx.history(job, "fenced", fence_message(job, waiting, e.node, until, self._ctx.now, timeout))
            self._ctx.emit(fx.WakeAt(until))
            self.expire(job)
        self._ctx.emit(fx.WakeScheduler())

    def node_back(self, node: str) -> None:
        """``node`` joined again: its fenced ranks now end on what its agent reports."""
        self.lost_nodes.pop(node, None)

    def expire_all(self, active: Callable[[], Iterable[JobRecord]]) -> None:
        """:meth:`expire` for each job ``active()`` lists, while any node is lost.

        Args:
            active: lists the jobs that hold devices (the model's ``active``); called only while
                a node is lost, since listing them sorts every job and most ticks have no node lost.
        """
        if self.lost_nodes:
            for job in active():
                self.expire(job)

    def expire(self, job: JobRecord) -> None:
        """Ranks on lost nodes whose fence deadline has come count as lost (then the gang rules decide)."""
        timeout = self.policy.node_timeout_s
        due = [
            r
            for r in fenced_ranks(job, self.lost_nodes)
            if self._ctx.now >= fence_deadline(job, self.lost_nodes[r.node], timeout)
        ]
        if not due:
            return
        for node in sorted({r.node for r in due}):
            ranks = [r for r in due if r.node == node]
            for rank in ranks:
                self._gang.set_rank(job, rank, RankPhase.LOST)
            which = ", ".join(str(r.rank) for r in ranks)
            self._ctx.history(
                job,
                "fence-expired",
                f"rank{'s' if len(ranks) != 1 else ''} {which} on {node} counted as stopped: "
                f"node_timeout_s {timeout:g} + grace {job.spec.grace_s:g} s passed since the last word from {node}",
            )
        self._gang.evaluate(job)

    def fence_time(self, job: JobRecord, e: ev.RankObserved) -> float | None:
        """When a fenced rank was stopped, to date its history lines, or None (not fenced, not known,
        or not between the job's last history line and now: another clock's time never reorders
        the history)."""
        if not e.fenced or e.fenced_at is None:
            return None
        last = job.history[-1].time if job.history else float("-inf")
        return e.fenced_at if last <= e.fenced_at <= self._ctx.now else None
