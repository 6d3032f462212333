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
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from labgang.agent.inventory import NodeInventory
    from labgang.launcher.coordinator.frames import Hello

log = logging.getLogger("labgang.coordinator.agents")


class AgentCallError(Exception):
    """A command to an agent failed: the agent answered with an error, timed out or is not connected."""


class AgentConn:
    """One node's agent as the coordinator knows it. Its fields are read-only properties: it changes
    only through its own methods (``attach_link``, ``heard``, ``take_inventory``, ``mark_lost``...).

    Args:
        node: the node name the agent announced.

    Properties:
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
        sharing: how its agent serves shared cards, from its hello or a later inventory: ``{"mps": "nvidia" |
            "simulated" | None, "gpu_mem": {"mode": "enforced" | "watched", "reason"}}``
            (``agent/mps.py``, ``agent/confine/devmem.py``), or None from an agent that does not say.
    """

    def __init__(self, node: str) -> None:
        self._node = node
        self._address: str = ""
        self._version: str = ""
        self._inventory: NodeInventory | None = None
        self._inventory_dict: dict[str, Any] | None = None
        self._ranks: dict[tuple[str, int], dict[str, Any]] = {}
        self._last_seen: float = 0.0
        self._connected: bool = False
        self._lost: bool = False
        self._ws: web.WebSocketResponse | None = None
        self._policy: dict[str, Any] | None = None
        self._confinement: dict[str, Any] | None = None
        self._violations: list[Any] = []
        self._host_limits: dict[str, Any] | None = None
        self._sharing: dict[str, Any] | None = None
        self._pending: dict[int, asyncio.Future[Any]] = {}

    def __repr__(self) -> str:
        state = "lost" if self._lost else "connected" if self._connected else "disconnected"
        return f"AgentConn({self._node!r}, {state}, last_seen={self._last_seen})"

    @property
    def node(self) -> str:
        """The node name the agent announced."""
        return self._node

    @property
    def address(self) -> str:
        """The address ranks on other nodes use to reach this node (MASTER_ADDR)."""
        return self._address

    @property
    def version(self) -> str:
        """The agent's labgang version."""
        return self._version

    @property
    def inventory(self) -> NodeInventory | None:
        """The last ``NodeInventory`` it sent (None before the first)."""
        return self._inventory

    @property
    def inventory_dict(self) -> dict[str, Any] | None:
        """The last inventory as it was sent (``NodeInventory.to_dict()`` schema), for the views."""
        return self._inventory_dict

    @property
    def ranks(self) -> dict[tuple[str, int], dict[str, Any]]:
        """The last rank list it sent: ``{(run_id, rank): RankStatus dict}``."""
        return self._ranks

    @property
    def last_seen(self) -> float:
        """Unix seconds of the last message."""
        return self._last_seen

    @property
    def connected(self) -> bool:
        """True while its link is up."""
        return self._connected

    @property
    def lost(self) -> bool:
        """True once it was silent longer than ``node_timeout_s``."""
        return self._lost

    @property
    def ws(self) -> web.WebSocketResponse | None:
        """Its agent's websocket while connected over one."""
        return self._ws

    @property
    def policy(self) -> dict[str, Any] | None:
        """Whose ranks the agent may start, from its hello, or None."""
        return self._policy

    @property
    def confinement(self) -> dict[str, Any] | None:
        """How its agent fences ranks to their devices, from its hello, or None."""
        return self._confinement

    @property
    def violations(self) -> list[Any]:
        """Its ranks' processes on devices they were not given, as of its last inventory."""
        return self._violations

    @property
    def host_limits(self) -> dict[str, Any] | None:
        """Whether its agent holds ranks to their CPUs and memory, from its hello, or None."""
        return self._host_limits

    @property
    def sharing(self) -> dict[str, Any] | None:
        """How its agent serves shared cards, from its hello or a later inventory (:meth:`take_sharing`), or None."""
        return self._sharing

    def attach_link(self, ws: web.WebSocketResponse, hello: Hello, remote: str | None) -> None:
        """The agent's link is ``ws`` from now on: connected, with what its hello says of it.

        Args:
            ws: the agent's websocket.
            hello: its parsed hello frame (address, version, policy, confinement, host limits, sharing).
            remote: the peer address, the node's address when the hello names none.
        """
        self._ws = ws
        self._connected = True
        self._address = hello.address or remote or self.node
        self._version = hello.version
        self._policy = hello.policy
        self._confinement = hello.confinement
        self._host_limits = hello.host_limits
        sharing = hello.message.get("sharing")
        self._sharing = sharing if isinstance(sharing, dict) else None

    def link_up(self, now: float) -> None:
        """Its agent is reachable without a websocket from ``now`` (unix seconds): connected and
        heard. For an agent the registry reaches through its own ``call`` (a stand-in: the
        simulated agents of the differential test, tests that drive the coordinator directly)."""
        self._connected = True
        self._last_seen = now

    def heard(self, now: float) -> None:
        """The agent spoke at ``now`` (unix seconds): its lease runs from here (``last_seen``)."""
        self._last_seen = now

    def take_sharing(self, sharing: dict[str, Any]) -> None:
        """How its agent serves shared cards is ``sharing`` now (an ``inventory`` frame's, which
        follows the hello's when it changed: a node whose ``dmem.max`` write failed watches budgets)."""
        self._sharing = sharing

    def take_ranks(self, ranks: list[dict[str, Any]]) -> None:
        """Its rank list is ``ranks`` now (``RankStatus`` dicts with ``job_id`` and ``rank``)."""
        self._ranks = {(r["job_id"], int(r["rank"])): r for r in ranks}

    def take_inventory(self, inventory: dict[str, Any], parsed: NodeInventory) -> NodeInventory | None:
        """Its inventory is ``parsed`` now (read from ``inventory``, the ``NodeInventory.to_dict()``
        schema, kept as sent for the views); return the previous one (None before the first)."""
        before = self.inventory
        self._inventory_dict = inventory
        self._inventory = parsed
        return before

    def mark_lost(self) -> bool:
        """Its lease ran out: it is lost until it speaks again. False when it already was."""
        if self.lost:
            return False
        self._lost = True
        return True

    def mark_back(self) -> bool:
        """It speaks again: not lost any more. True when it had been lost (it must be reconciled)."""
        was_lost, self._lost = self.lost, False
        return was_lost

    def detach_link(self, reason: str) -> None:
        """Its websocket closed: not connected; every command waiting for a reply fails with ``reason``."""
        self._connected = False
        self._ws = None
        self.fail_pending(reason)

    def replace_violations(self, seen: list[Any]) -> list[Any]:
        """Its ranks' device violations are ``seen`` now (from its latest inventory); return the previous list."""
        before, self._violations = self.violations, seen
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
        self._pending[cmd_id] = fut
        return fut

    def drop_reply(self, cmd_id: int) -> None:
        """Command ``cmd_id``'s reply is no longer awaited (answered, failed or timed out)."""
        self._pending.pop(cmd_id, None)

    def take_reply(self, message: dict[str, Any]) -> None:
        """Deliver a ``reply`` message (``id``, ``ok``, ``result`` | ``error``) to the command waiting
        for it; one nobody waits for is dropped."""
        request_id = message.get("id")
        fut = self._pending.get(request_id) if isinstance(request_id, int) else None
        if fut is None or fut.done():
            return
        if message.get("ok"):
            fut.set_result(message.get("result"))
        else:
            fut.set_exception(AgentCallError(f"node {self.node}: {message.get('error', 'command failed')}"))

    def fail_pending(self, reason: str) -> None:
        """Fail every command still waiting for a reply (on disconnect)."""
        for fut in self._pending.values():
            if not fut.done():
                fut.set_exception(AgentCallError(f"node {self.node}: {reason}"))
        self._pending.clear()


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
            conn = self.nodes[node] = AgentConn(node)
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
