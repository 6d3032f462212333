"""Drained nodes: taken out of scheduling by an admin (``labgang drain``, Slurm's
``scontrol update NodeName=X State=DRAIN Reason=...``) and given back (``labgang resume``).

A drained node's devices are offered to no new job (the scheduler counts them unavailable,
``scheduling.unavailable_devices``) while the jobs already on it run to their end: Slurm's
DRAINING, then DRAINED once they are gone. The drain outlives a restart of the coordinator and a
reconnect of the node's agent: it is kept in the store's ``meta`` table (key ``drains``, a JSON
object node -> ``{reason, by, since}``) until it is resumed.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from labgang.launcher.coordinator.errors import BadRequest, Conflict, NotFound

if TYPE_CHECKING:
    from labgang.launcher.coordinator.requests import Caller
    from labgang.launcher.coordinator.store import Store

log = logging.getLogger("labgang.drains")

META_KEY = "drains"
"""The store ``meta`` key the drains are kept under."""

MAX_REASON_CHARS = 256
"""The longest reason taken (Slurm's ``Reason=`` is free text; this keeps a node line readable)."""


@dataclass(frozen=True)
class Drain:
    """One drained node.

    Attributes:
        reason: why, as the admin gave it (printable text, 1 to :data:`MAX_REASON_CHARS` characters).
        by: the admin who drained it (a user name).
        since: when (unix seconds).
    """

    reason: str
    by: str
    since: float

    def to_dict(self) -> dict[str, Any]:
        """``{reason, by, since}``: the NodeView's ``drain`` and the stored form."""
        return {"reason": self.reason, "by": self.by, "since": self.since}


def reason_problem(reason: object) -> str | None:
    """Why ``reason`` is not a drain reason (one phrase ending in what is allowed), or None."""
    allowed = f"allowed: printable text of 1 to {MAX_REASON_CHARS} characters"
    if not isinstance(reason, str) or not reason.strip():
        return f"is missing or empty; {allowed}"
    if len(reason) > MAX_REASON_CHARS:
        return f"has {len(reason)} characters; {allowed}"
    if not reason.isprintable():
        return f"has a control character; {allowed}"
    return None


class NodeDrains:
    """The drained nodes, kept in ``store`` (read once at start).

    Args:
        store: the coordinator's store (its ``meta`` table).
        on_change: called after each drain or resume (the coordinator's kick: a resume may let
            jobs start, a drain changes what a cycle may place).
    """

    def __init__(self, store: Store, on_change: Callable[[], None]) -> None:
        self._store = store
        self._on_change = on_change
        self._writing = asyncio.Lock()  # two admins' changes at once: neither lost
        self._drains: dict[str, Drain] = {}
        raw = store.meta(META_KEY)
        if raw:
            try:
                for node, d in json.loads(raw).items():
                    self._drains[node] = Drain(str(d["reason"]), str(d["by"]), float(d["since"]))
            except (ValueError, TypeError, KeyError, AttributeError):
                log.error("store meta %r is not a drain table; no node is drained: %.200s", META_KEY, raw)
                self._drains = {}
        self._nodes = frozenset(self._drains)

    @property
    def drained(self) -> Mapping[str, Drain]:
        """Node name -> its drain, for every drained node."""
        return self._drains

    @property
    def nodes(self) -> frozenset[str]:
        """The drained nodes' names."""
        return self._nodes

    async def drain(self, node: str, reason: str, by: str, now: float) -> Drain:
        """Drain ``node`` (again: its reason, admin and time are replaced, as Slurm's), durably.

        Args:
            node: a node name (the caller checked the coordinator knows it).
            reason: why (:func:`reason_problem` passed). by: the admin. now: unix seconds.

        Raises:
            sqlite3.Error: the store could not commit it (nothing changed then).
        """
        drain = Drain(reason, by, now)
        async with self._writing:  # each change starts from the last one committed
            await self._write({**self._drains, node: drain})
        log.info("node %s drained by %s: %s", node, by, reason)
        return drain

    async def resume(self, node: str) -> Drain:
        """Give ``node`` back to scheduling, durably; returns the drain that ended.

        Raises:
            KeyError: ``node`` is not drained.
            sqlite3.Error: the store could not commit it (nothing changed then).
        """
        async with self._writing:
            drain = self._drains[node]
            await self._write({n: d for n, d in self._drains.items() if n != node})
        log.info("node %s resumed (drained by %s: %s)", node, drain.by, drain.reason)
        return drain

    async def _write(self, drains: dict[str, Drain]) -> None:
        self._store.save_meta(META_KEY, json.dumps({n: d.to_dict() for n, d in sorted(drains.items())}))
        await self._store.durable()
        self._drains = drains
        self._nodes = frozenset(drains)
        self._on_change()


async def drain_node(
    drains: NodeDrains, known: Collection[str], caller: Caller, node: str, reason: object, now: float
) -> Drain:
    """``POST /v1/nodes/{node}/drain``: take ``node`` out of scheduling; its running jobs run on.

    Raises:
        Forbidden: the caller is not an admin (:meth:`Caller.check_may_manage`).
        NotFound: ``node`` is not one the coordinator knows (``known``: its agents' nodes).
        BadRequest: ``reason`` is not printable text of 1 to :data:`MAX_REASON_CHARS` characters.
    """
    caller.check_may_manage("drain a node")
    _check_known(known, node)
    problem = reason_problem(reason)
    if problem is not None:
        raise BadRequest(f"reason {problem}", field="reason")
    assert isinstance(reason, str)
    return await drains.drain(node, reason, caller.user, now)


async def resume_node(drains: NodeDrains, known: Collection[str], caller: Caller, node: str) -> Drain:
    """``POST /v1/nodes/{node}/resume``: give a drained ``node`` back to scheduling.

    Raises:
        Forbidden: not an admin. NotFound: an unknown node that is not drained either.
        Conflict: ``node`` is not drained.
    """
    caller.check_may_manage("resume a node")
    if node not in drains.drained:
        _check_known(known, node)
        raise Conflict(f"node {node} is not drained", field="node")
    return await drains.resume(node)


def _check_known(known: Collection[str], node: str) -> None:
    if node not in known:
        names = sorted(known)
        listed = ", ".join(names) if names else "none has joined yet"
        raise NotFound(f"no node {node!r}; nodes: {listed}", field="node", allowed=names)
