"""What the node agents report, as lifecycle events: hello, inventories, rank events, a
disconnect, reconciliation, a node lost, and the timers (node leases, the model's timed arrows).

:class:`NodeEvents` is a coordinator part: it is handed the agent registry, the lifecycle model
(read), the submission check it invalidates, the clock, and the ``Commits`` part that applies
events and commits them (``commits.py``). The link (``link.py``) hands it each
agent's frames; the timer loop and the scheduler's wakes call :meth:`NodeEvents.check_timers`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from labgang.agent.inventory import NodeInventory
from labgang.launcher.coordinator.scheduling import busy_unheld
from labgang.launcher.coordinator.translate import rank_event, rank_status, rank_statuses
from labgang.launcher.coordinator.violations import take_violations
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.fencing import lease_expired
from labgang.launcher.lifecycle.view import scheduling_state

if TYPE_CHECKING:
    from labgang.launcher.coordinator.agents import AgentConn, AgentRegistry
    from labgang.launcher.coordinator.commits import Commits
    from labgang.launcher.coordinator.scheduling import SubmissionCheck
    from labgang.launcher.lifecycle.machine import Lifecycle
    from labgang.launcher.lifecycle.records import JobRecord

log = logging.getLogger("labgang.coordinator")


def held_devices(active: Iterable[JobRecord]) -> dict[str, JobRecord]:
    """Device UUID → the job that holds it, over ``active`` (the admitted, running and terminating jobs)."""
    held: dict[str, JobRecord] = {}
    for job in active:
        for rank in job.ranks.values():
            for uuid in rank.devices:
                held[uuid] = job
    return held


class NodeEvents:
    """The agents' messages and the node timers, turned into lifecycle events.

    Args:
        agents: the agent registry (each ``AgentConn`` changes through its own methods).
        model: the lifecycle model, read here (changed only through ``shell.apply``).
        shell: applies events and commits them (the coordinator's ``Commits``).
        submission_check: forgotten when a node's allocatable devices or host resources change.
        clock: unix seconds.
        node_timeout_s: a node silent this long is lost (``config.node_timeout_s``).
        started_at: unix seconds the coordinator started (a node that held ranks before a restart
            and has not come back by ``started_at + node_timeout_s`` is lost).
    """

    def __init__(
        self,
        agents: AgentRegistry,
        model: Lifecycle,
        shell: Commits,
        submission_check: SubmissionCheck,
        clock: Callable[[], float],
        *,
        node_timeout_s: float,
        started_at: float,
    ) -> None:
        self._agents = agents
        self._model = model
        self._shell = shell
        self._submission_check = submission_check
        self._clock = clock
        self._node_timeout_s = node_timeout_s
        self._started_at = started_at
        self._closing = False  # see begin_closing: agents disconnecting then is expected

    def begin_closing(self) -> None:
        """An orderly stop has begun (``serve()``): the agents' disconnects from now on are no warning."""
        self._closing = True

    def take_violations(self, conn: AgentConn, items: object) -> None:
        """A message's ``violations`` list: keep ``conn``'s current ones, apply the new ones (``violations.py``)."""
        take_violations(conn, items, self._clock(), self._shell.apply)

    def heard(self, conn: AgentConn) -> None:
        """``conn``'s agent spoke (a ping, a lease renewal): its lease runs from now."""
        conn.heard(self._clock())

    async def on_hello(self, conn: AgentConn, message: dict[str, Any]) -> None:
        """A node (re)connected: take its inventory and reconcile its ranks with the store."""
        self._take_inventory(conn, message)
        if conn.mark_back():
            log.warning("node %s is back", conn.node)
        self.reconcile(conn, message.get("ranks") or [])
        await self._shell.flush()
        self._shell.kick()

    async def on_inventory(self, conn: AgentConn, message: dict[str, Any]) -> None:
        """Periodic or changed inventory; a node that was lost and speaks again is reconciled."""
        changed = self._take_inventory(conn, message)
        if conn.mark_back():
            log.warning("node %s answers again after being lost", conn.node)
            self.reconcile(conn, message.get("ranks") or [])
            await self._shell.flush()
            changed = True
        else:
            ranks = message.get("ranks") or []
            model = self._model
            touched = {job.id: job for r in ranks if (job := model.job_for_run(str(r.get("job_id")))) is not None}
            before = {job_id: scheduling_state(job) for job_id, job in touched.items()}
            # What a periodic rank list says (pids, states); an absence is not a loss.
            for obs in rank_statuses(conn.node, ranks, self._clock()):
                self._shell.apply(obs)
            changed = changed or any(scheduling_state(job) != before[job_id] for job_id, job in touched.items())
            if self._shell.pending:
                await self._shell.flush()  # a rank list can end or stop a gang too (a missed event)
        if changed:
            self._shell.kick()

    def _take_inventory(self, conn: AgentConn, message: dict[str, Any]) -> bool:
        """Keep the node's inventory and rank list; True when scheduling could decide differently:
        its allocatable devices or the host CPUs and memory it offers changed, or devices no job
        holds started or stopped showing processes (foreign processes, a context NVML still shows)."""
        conn.heard(self._clock())
        ranks = message.get("ranks")
        if ranks is not None:
            conn.take_ranks(ranks)
        sharing = message.get("sharing")
        if isinstance(sharing, dict):  # e.g. a node that fell back to watching --gpu-mem budgets (devmem.py)
            conn.take_sharing(sharing)
        inv = message.get("inventory")
        if inv is None:
            return False
        new = NodeInventory.from_dict(inv)
        old = conn.take_inventory(inv, new)
        if (
            old is None
            or old.allocatable() != new.allocatable()
            or (old.host_cpus, old.host_memory) != (new.host_cpus, new.host_memory)
        ):
            self._submission_check.forget()
            return True
        old_pids, new_pids = old.device_pids(), new.device_pids()
        if old_pids == new_pids:
            return False
        held = held_devices(self._model.active())
        return busy_unheld(old_pids, held) != busy_unheld(new_pids, held)

    async def on_rank_events(
        self,
        conn: AgentConn,
        events: list[dict[str, Any]],
        inventory: dict[str, Any] | None = None,
        sharing: dict[str, Any] | None = None,
    ) -> None:
        """Apply rank events (at least once; applying one twice changes nothing) and commit.

        Args:
            inventory: the node's inventory read right after the ranks were released (the
                ``NodeInventory.to_dict()`` schema), taken before the events so that a device a
                ``gone`` rank frees is not still shown busy with its pids.
            sharing: how the node serves shares, sent with that inventory (a node that fell back to
                watching ``--gpu-mem`` budgets says so in it), or None.
        """
        changed = inventory is not None and self._take_inventory(conn, {"inventory": inventory, "sharing": sharing})
        conn.heard(self._clock())
        log.debug(
            "rank events from %s: %s",
            conn.node,
            ", ".join(f"{e.get('job_id')}/{e.get('rank')} {e.get('kind')}" for e in events),
        )
        model = self._model
        touched = {job.id: job for e in events if (job := model.job_for_run(str(e.get("job_id")))) is not None}
        before = {job_id: scheduling_state(job) for job_id, job in touched.items()}
        for event in events:
            self.apply_rank_event(conn.node, event)
        # Only what the scheduler sees matters: a job starting to stop or leaving its devices
        # (lifecycle kicks for the latter too). A rank starting or exiting alone changes nothing.
        if changed or any(
            scheduling_state(job) != before[job_id] and not model.awaited_by_waiting_preemptor(job)
            for job_id, job in touched.items()
        ):
            self._shell.kick()
            # One turn of the loop first: a scheduling loop outside its coalescing window runs
            # the cycle now, so its admissions share this commit (one commit, not two, between
            # a gang leaving its devices and the next one launching). The acknowledgement still
            # waits for a commit that covers these events.
            await asyncio.sleep(0)
        await self._shell.flush()

    def on_disconnect(self, conn: AgentConn) -> None:
        """The node's websocket closed; it becomes lost after ``node_timeout_s`` unless it returns."""
        conn.detach_link("disconnected")
        (log.info if self._closing else log.warning)("node %s disconnected", conn.node)
        self._shell.kick()

    def apply_rank_event(self, node: str, event: dict[str, Any]) -> None:
        """Apply one supervisor ``RankEvent`` dict (``started`` | ``exited`` | ``gone``) from ``node``."""
        obs = rank_event(node, event, self._clock())
        if obs is not None:
            self._shell.apply(obs)

    def apply_rank_status(self, node: str, status: dict[str, Any]) -> None:
        """Apply one supervisor ``RankStatus`` dict from ``node``."""
        obs = rank_status(node, status, self._clock())
        if obs is not None:
            self._shell.apply(obs)

    def _connected(self) -> frozenset[str]:
        agents = self._agents
        return frozenset(n for n in agents.nodes if agents.connected(n))

    def reconcile(self, conn: AgentConn, reported: list[dict[str, Any]]) -> None:
        """Compare what the agent runs with what the model says should run on its node
        (the model's ``NodeJoined`` rule: update, relaunch, count as gone, or stop strays)."""
        now = self._clock()
        self._shell.apply(ev.NodeJoined(now, conn.node, rank_statuses(conn.node, reported, now), self._connected()))

    def mark_node_lost(self, conn: AgentConn, why: str) -> None:
        """The node's lease ran out: its devices are not offered; its jobs are stopped elsewhere, and
        requeued once its ranks are fenced (``node_timeout_s`` + grace after ``conn.last_seen``)."""
        if not conn.mark_lost():
            return
        log.warning("node %s lost: %s", conn.node, why)
        self._shell.apply(ev.NodeLost(self._clock(), conn.node, why, conn.last_seen))

    def check_timers(self) -> None:
        """Node leases (``node_timeout_s``), then the model's timed arrows (startup timeouts,
        time limits and their warning signals)."""
        timeout = self._node_timeout_s
        now = self._clock()
        for conn in list(self._agents.nodes.values()):
            silent = now - conn.last_seen
            if not conn.lost and silent > timeout:
                self.mark_node_lost(conn, lease_expired(conn.connected, silent, timeout))
        holders = self._model.active()  # one walk of every job serves both checks (ev.Tick.holders)
        if now - self._started_at > timeout:
            # Nodes that held ranks before a coordinator restart and never came back.
            for job in holders:
                for rank in list(job.ranks.values()):
                    if rank.node not in self._agents.nodes and not rank.ended:
                        conn = self._agents.attach(rank.node)
                        conn.heard(self._started_at)  # its lease runs from the restart
                        self.mark_node_lost(conn, f"did not reconnect within {timeout:g} s of a restart")
        self._shell.apply(ev.Tick(now, self._started_at, self._connected(), holders))
