"""The agent's side of fencing: its node lease, saved for its successors and the ranks' small parents,
and which ranks were stopped because that lease ran out (docs/queue-semantics.md §A5).

:class:`NodeFence` is what :class:`~labgang.agent.service.AgentService` holds: the
:class:`~labgang.agent.lease.NodeLease` the link renews, :meth:`NodeFence.check` run on every
tick (save a renewed lease; stop every rank once it ran out), and the marks that tell the
coordinator a rank's exit was the fence's doing, so that it requeues the job instead of failing
it. A rank can be fenced two ways: by this agent (:meth:`NodeFence.check`), or by its own small
parent while no agent was alive (``agent/supervisor/shim.py``, ``LeaseWatch``), which the
supervisor reads back from the rank's ``exit.json`` (``RankStatus.fenced``).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

from labgang.agent.lease import LEASE_FILE, NodeLease, load_lease, save_lease, suspend_lease
from labgang.agent.supervisor import RankState, RankStatus, Supervisor

log = logging.getLogger("labgang.agent")


class NodeFence:
    """The node's lease and the ranks stopped on it.

    Args:
        agent_dir: the agent's state directory (``<state_dir>/agent``), where ``lease.json`` lives.

    Attributes:
        lease: the lease the link renews (replaced by :meth:`load` before the link is made).
        fenced: ``(run id, rank)`` of every rank stopped because the lease ran out.
    """

    def __init__(self, agent_dir: Path) -> None:
        self.agent_dir = agent_dir
        self.lease = NodeLease()
        self.fenced: set[tuple[str, int]] = set()
        # When the fence stopped each of them (unix s): the agent's own fence, or the rank's end as its
        # small parent wrote it; sent as ``fenced_at`` so the job's history is dated then, not when
        # the report reaches the coordinator (after a `kill -9` of `labgang up`, at the next start).
        self.fenced_at: dict[tuple[str, int], float] = {}
        self._saved: float | None = None  # the confirmed_at last written to lease.json

    @property
    def lease_file(self) -> Path:
        """``lease.json``: read by the next agent and by every rank's small parent."""
        return self.agent_dir / LEASE_FILE

    def load(self) -> None:
        """Take over the lease the previous agent held, and save it at once under this agent's
        pid: the ranks' small parents leave the fence to a live holder (``shim.LeaseWatch``)."""
        mono, wall = time.monotonic(), time.time()
        self.lease = load_lease(self.agent_dir, mono_now=mono, wall_now=wall)
        self._saved = self.lease.confirmed_at
        self._save(mono, wall)

    def _save(self, mono: float, wall: float) -> None:
        try:
            save_lease(self.agent_dir, self.lease, mono_now=mono, wall_now=wall)
        except OSError as exc:
            log.warning("cannot save the node lease: %s", exc)

    def suspend(self, reason: str) -> None:
        """Leave the ranks running with no deadline (:func:`labgang.agent.lease.suspend_lease`): only
        when the coordinator stops with this agent (``labgang up --keep-jobs``)."""
        try:
            suspend_lease(self.agent_dir, wall_now=time.time(), reason=reason)
        except OSError as exc:
            log.warning("cannot suspend the node lease (the ranks left running will be fenced): %s", exc)

    def check(self, sup: Supervisor | None) -> None:
        """Save the lease when it was renewed since the last call; once it ran out, stop every
        rank here the way a ``stop_jobs`` command would (SIGTERM now, each job's grace, SIGKILL):
        the coordinator will soon count them as stopped and may start the jobs elsewhere. Their
        exits are reported when the link is back."""
        lease = self.lease
        now = time.monotonic()
        if lease.confirmed_at != self._saved:  # renewed since the last tick: keep it for a successor
            self._saved = lease.confirmed_at
            self._save(now, time.time())
        if sup is None or not lease.due(now):
            return
        lease.fenced = True
        live = [s for s in sup.ranks() if s.state is not RankState.GONE]
        jobs = sorted({s.job_id for s in live})
        if not jobs:
            return
        # Ranks still running now: their exits are reported as the fence's doing, not the job's.
        wall = time.time()
        for s in live:
            if s.exit_status is None:
                self.fenced.add((s.job_id, s.rank))
                self.fenced_at.setdefault((s.job_id, s.rank), wall)
        silent = now - (lease.confirmed_at or now)
        log.warning(
            "no answer from the coordinator for %.1f s (node_timeout_s %g): stopping %d job(s) on this node: %s",
            silent,
            lease.node_timeout_s or 0.0,
            len(jobs),
            ", ".join(jobs),
        )
        sup.stop_jobs([(job_id, None, False) for job_id in jobs])

    def next_expiry(self) -> float | None:
        """The monotonic time the lease runs out, unless it did already and the ranks were stopped."""
        return None if self.lease.fenced else self.lease.expires_at

    def adopt(self, statuses: list[RankStatus]) -> None:
        """Note the ranks whose small parent fenced them (``RankStatus.fenced``)."""
        for s in statuses:
            if s.fenced:
                self.fenced.add((s.job_id, s.rank))
                if s.ended_at is not None:
                    self.fenced_at.setdefault((s.job_id, s.rank), s.ended_at)

    def mark(self, message: dict[str, Any]) -> dict[str, Any]:
        """Add ``fenced: true`` (and ``fenced_at``, unix s, when known) to a rank event or status dict
        of a fenced rank; return it."""
        key = (message.get("job_id"), message.get("rank"))
        if key in self.fenced:
            message["fenced"] = True
            at = self.fenced_at.get(key)
            if at is not None:
                message["fenced_at"] = at
        return message

    def forget(self, job_id: str) -> None:
        """The run ``job_id`` is forgotten here: drop its marks."""
        self.fenced = {key for key in self.fenced if key[0] != job_id}
        self.fenced_at = {key: at for key, at in self.fenced_at.items() if key[0] != job_id}
