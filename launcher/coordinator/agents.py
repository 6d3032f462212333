"""The coordinator's view of node agents: one :class:`AgentConn` per node, kept across reconnects.

The wire is JSON text frames on a websocket the agent dials (``GET /v1/agent/link`` with
``Authorization: Bearer <cluster token>``). Agent → coordinator: ``hello`` (node, version,
address, inventory, ranks, policy, confinement, violations), ``inventory`` (inventory, ranks,
violations), ``rank_events`` (seq, events, and optionally the inventory read when the events'
ranks were released, applied first, with its violations), ``reply`` (id, ok, result | error),
``api`` (a user request forwarded with the caller's uid), ``lease`` (id: a lease renewal).
Coordinator → agent: ``welcome`` (version, ``node_timeout_s``), ``command`` (id, op, args),
``ack`` (seq: rank events up to it are durable), ``api_reply``, ``lease`` (id: the renewal was
heard; never sent to a node marked lost, which must reconcile first). See
docs/queue-semantics.md §A5 for the lease.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from labgang.agent.inventory import NodeInventory
    from labgang.launcher.coordinator.frames import Hello

log = logging.getLogger("labgang.coordinator.agents")


class AgentCallError(Exception):
    """A command to an agent failed: the agent answered with an error, timed out or is not connected."""


@dataclass
class AgentConn:
    """One node's agent as the coordinator knows it.

    Attributes:
        node: the node name the agent announced.
        address: the address ranks on other nodes use to reach this node (MASTER_ADDR).
        version: the agent's labgang version.
        inventory: the last ``NodeInventory`` it sent (None before the first).
        ranks: the last rank list it sent: ``{(run_id, rank): RankStatus dict}``.
        last_seen: unix seconds of the last message.
        connected: True while its websocket is open.
        lost: True once it was silent longer than ``node_timeout_s``.
        policy: whose ranks the agent may start, from its hello (``AgentService.run_as_policy``:
            agent_uid, allow_root, allowed_uids), or None from an agent that does not say.
        confinement: how its agent fences ranks to their devices, from its hello (``{"mode",
            "reason"}``, ``agent/confine/``), or None from an agent that does not say.
        violations: its ranks' processes on devices they were not given, as of its last
            inventory (``DeviceViolationSeen`` events; ``coordinator/violations.py``).
        host_limits: whether its agent holds ranks to their CPUs and memory, from its hello
            (``{"enforced", "reason"}``, ``agent/confine/hostlimits.py``), or None.
        sharing: how its agent serves shared cards, from its hello: ``{"mps": "nvidia" |
            "simulated" | None, "gpu_mem": {"mode": "enforced" | "watched", "reason"}}``
            (``agent/mps.py``, ``agent/confine/devmem.py``), or None from an agent that does not say.
    """

    node: str
    address: str = ""
    version: str = ""
    inventory: NodeInventory | None = None
    inventory_dict: dict[str, Any] | None = None
    ranks: dict[tuple[str, int], dict[str, Any]] = field(default_factory=dict)
    last_seen: float = 0.0
    connected: bool = False
    lost: bool = False
    ws: web.WebSocketResponse | None = None
    pending: dict[int, asyncio.Future[Any]] = field(default_factory=dict)
    policy: dict[str, Any] | None = None
    confinement: dict[str, Any] | None = None
    violations: list[Any] = field(default_factory=list)
    host_limits: dict[str, Any] | None = None  # whether its agent enforces ranks' CPUs/memory, from its hello
    sharing: dict[str, Any] | None = None  # its MPS daemons and how --gpu-mem is held, from its hello

    def attach_link(self, ws: web.WebSocketResponse, hello: Hello, remote: str | None) -> None:
        """The agent's link is ``ws`` from now on: connected, with what its hello says of it.

        Args:
            ws: the agent's websocket.
            hello: its parsed hello frame (address, version, policy, confinement, host limits, sharing).
            remote: the peer address, the node's address when the hello names none.
        """
        self.ws = ws
        self.connected = True
        self.address = hello.address or remote or self.node
        self.version = hello.version
        self.policy = hello.policy
        self.confinement = hello.confinement
        self.host_limits = hello.host_limits
        sharing = hello.message.get("sharing")
        self.sharing = sharing if isinstance(sharing, dict) else None

    def link_up(self, now: float) -> None:
        """Its agent is reachable without a websocket from ``now`` (unix seconds): connected and
        heard. For an agent the registry reaches through its own ``call`` (a stand-in: the
        simulated agents of the differential test, tests that drive the coordinator directly)."""
        self.connected = True
        self.last_seen = now

    def heard(self, now: float) -> None:
        """The agent spoke at ``now`` (unix seconds): its lease runs from here (``last_seen``)."""
        self.last_seen = now

    def take_ranks(self, ranks: list[dict[str, Any]]) -> None:
        """Its rank list is ``ranks`` now (``RankStatus`` dicts with ``job_id`` and ``rank``)."""
        self.ranks = {(r["job_id"], int(r["rank"])): r for r in ranks}

    def take_inventory(self, inventory: dict[str, Any], parsed: NodeInventory) -> NodeInventory | None:
        """Its inventory is ``parsed`` now (read from ``inventory``, the ``NodeInventory.to_dict()``
        schema, kept as sent for the views); return the previous one (None before the first)."""
        before = self.inventory
        self.inventory_dict = inventory
        self.inventory = parsed
        return before

    def mark_lost(self) -> bool:
        """Its lease ran out: it is lost until it speaks again. False when it already was."""
        if self.lost:
            return False
        self.lost = True
        return True

    def mark_back(self) -> bool:
        """It speaks again: not lost any more. True when it had been lost (it must be reconciled)."""
        was_lost, self.lost = self.lost, False
        return was_lost

    def detach_link(self, reason: str) -> None:
        """Its websocket closed: not connected; every command waiting for a reply fails with ``reason``."""
        self.connected = False
        self.ws = None
        self.fail_pending(reason)

    def replace_violations(self, seen: list[Any]) -> list[Any]:
        """Its ranks' device violations are ``seen`` now (from its latest inventory); return the previous list."""
        before, self.violations = self.violations, seen
        return before

    def refuses_uid(self, uid: int) -> str | None:
        """Why this node's agent would never start a rank as ``uid`` (None: it might, or unknown)."""
        p = self.policy
        if not p:
            return None
        agent_uid = p.get("agent_uid")
        if agent_uid != 0:
            return None if uid == agent_uid else f"its agent runs as uid {agent_uid} and starts only that user's jobs"
        if uid == 0:
            return None if p.get("allow_root") else "root jobs are off (allow_root = false in its agent config)"
        allowed = p.get("allowed_uids")
        if allowed is not None and uid not in allowed:
            return f"uid {uid} is not in its agent's allowed_uids {allowed}"
        return None

    async def send(self, message: dict[str, Any]) -> None:
        """Send one JSON message.

        Raises:
            AgentCallError: the agent is not connected or the socket closed.
        """
        ws = self.ws
        if ws is None or ws.closed or not self.connected:
            raise AgentCallError(f"node {self.node} is not connected")
        try:
            await ws.send_json(message)
        except (ConnectionError, RuntimeError) as exc:
            raise AgentCallError(f"node {self.node}: send failed: {exc}") from exc

    def expect_reply(self, cmd_id: int) -> asyncio.Future[Any]:
        """A future for the reply to command ``cmd_id`` (resolved by :meth:`take_reply`, failed on
        disconnect); :meth:`drop_reply` once it is no longer awaited."""
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.pending[cmd_id] = fut
        return fut

    def drop_reply(self, cmd_id: int) -> None:
        """Command ``cmd_id``'s reply is no longer awaited (answered, failed or timed out)."""
        self.pending.pop(cmd_id, None)

    def take_reply(self, message: dict[str, Any]) -> None:
        """Deliver a ``reply`` message (``id``, ``ok``, ``result`` | ``error``) to the command waiting
        for it; one nobody waits for is dropped."""
        request_id = message.get("id")
        fut = self.pending.get(request_id) if isinstance(request_id, int) else None
        if fut is None or fut.done():
            return
        if message.get("ok"):
            fut.set_result(message.get("result"))
        else:
            fut.set_exception(AgentCallError(f"node {self.node}: {message.get('error', 'command failed')}"))

    def fail_pending(self, reason: str) -> None:
        """Fail every command still waiting for a reply (on disconnect)."""
        for fut in self.pending.values():
            if not fut.done():
                fut.set_exception(AgentCallError(f"node {self.node}: {reason}"))
        self.pending.clear()


class AgentRegistry:
    """Every node the coordinator has heard from, and command round-trips to them."""

    def __init__(self) -> None:
        self.nodes: dict[str, AgentConn] = {}
        self._ids = itertools.count(1)

    def get(self, node: str) -> AgentConn | None:
        """The node's connection record, or None if it never said hello."""
        return self.nodes.get(node)

    def connected(self, node: str) -> bool:
        """True when the node's agent is connected and not lost."""
        conn = self.nodes.get(node)
        return conn is not None and conn.connected and not conn.lost

    def attach(self, node: str) -> AgentConn:
        """The record for ``node``, created on first hello."""
        conn = self.nodes.get(node)
        if conn is None:
            conn = self.nodes[node] = AgentConn(node=node)
        return conn

    def join(self, node: str, now: float, inventory: NodeInventory | None = None) -> AgentConn:
        """``node`` is connected from ``now`` (unix seconds) without a websocket (:meth:`AgentConn.link_up`),
        with ``inventory`` when given (kept as its ``to_dict()`` too, as a hello's would be).

        Returns:
            Its record (created when it is new).
        """
        conn = self.attach(node)
        conn.link_up(now)
        if inventory is not None:
            conn.take_inventory(inventory.to_dict(), inventory)
        return conn

    async def call(self, node: str, op: str, args: dict[str, Any], *, timeout: float = 15.0) -> Any:
        """Send a command with a fresh id and wait for its reply.

        Args:
            node: the target node.
            op: "launch", "stop_job", "signal_job", "pick_port" or "read_log".
            args: the command's arguments (JSON-ready).
            timeout: seconds to wait for the reply.

        Returns:
            The ``result`` of the agent's reply.

        Raises:
            AgentCallError: not connected, the agent reported an error, or no reply in time.
        """
        conn = self.nodes.get(node)
        if conn is None:
            raise AgentCallError(f"node {node} has never connected")
        cmd_id = next(self._ids)
        fut = conn.expect_reply(cmd_id)
        try:
            await conn.send({"type": "command", "id": cmd_id, "op": op, "args": args})
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise AgentCallError(f"node {node}: no reply to {op} within {timeout:g} s") from None
        finally:
            conn.drop_reply(cmd_id)

    def resolve(self, conn: AgentConn, message: dict[str, Any]) -> None:
        """Deliver a ``reply`` message to the command waiting for it (:meth:`AgentConn.take_reply`)."""
        conn.take_reply(message)
