"""A scenario's ``[[events]]``: nodes going down and coming back (docs/scenarios.md, "Node loss").

A ``lost = true`` event is a node whose host goes down at ``at``: its agent's link drops (its
devices are no longer offered, as the coordinator withholds a disconnected node's), its ranks
die with it and nothing more is heard of them. The coordinator's timer, which checks node
leases every ``timer_interval_s``, marks the node lost at its first check more than
``[scenario] node_timeout`` seconds after that last word (any other timer check, such as a
wake the lifecycle asked for, counts too); from then on the lifecycle model's fencing rules
(``launcher/lifecycle/fencing.py``) decide the node's gangs. A ``back = true`` event is the
node joining again, empty (as after a reboot): its agent reports no ranks.

This module parses and checks the table; :class:`~labgang.launcher.simulate.engine.Simulation`
drives the events through the same lifecycle events the coordinator feeds
(``NodeLost``, ``Tick``, ``NodeJoined``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Annotated

from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.durations import DURATION_HELP, parse_duration
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

TIMER_INTERVAL_S = float(ClusterConfig.model_fields["timer_interval_s"].default)
"""The coordinator's timer period (``timer_interval_s``'s default): how often it checks node leases."""

NODE_TIMEOUT_S = float(ClusterConfig.model_fields["node_timeout_s"].default)
"""``[scenario] node_timeout``'s default: the coordinator's ``node_timeout_s`` default."""


AT_HELP = f"seconds from the scenario's start, a number >= 0 or a duration ({DURATION_HELP})"


def _at(value: object) -> object:
    """``at``: seconds as a number or a duration string (``"2m"``); a bool is refused (one line naming the key)."""
    if isinstance(value, str):
        try:
            return parse_duration(value)
        except ValueError:
            raise ValueError(f"{value!r} is not allowed; allowed: {AT_HELP}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{value!r} is not allowed; allowed: {AT_HELP}")
    return value


class NodeEventModel(BaseModel):
    """``[[events]]``: at ``at`` seconds, ``node`` goes down (``lost = true``) or joins again
    (``back = true``); exactly one of the two."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    at: Annotated[float, BeforeValidator(_at), Field(ge=0, le=315_360_000)]
    node: str = Field(min_length=1)
    lost: bool = False
    back: bool = False


def event_problems(events: Sequence[NodeEventModel], nodes: Sequence[str]) -> list[str]:
    """One line per problem in ``[[events]]``, naming the key and what is allowed.

    Args:
        events: the file's ``[[events]]`` in file order.
        nodes: the ``[[nodes]]`` names.

    Returns:
        An empty list when every event names a node of the file, says exactly one of ``lost``
        and ``back``, and each node's events alternate (down, back, down, ...) in time order,
        starting with a loss, with at most one event per node at one instant.
    """
    problems: list[str] = []
    down: dict[str, float] = {}
    last: dict[str, float] = {}
    for i, e in sorted(enumerate(events), key=lambda ie: (ie[1].at, ie[0])):
        where = f"events[{i}]"
        if e.node not in nodes:
            problems.append(f"{where}.node: unknown node {e.node!r}; allowed: {', '.join(nodes)}")
            continue
        if e.lost == e.back:
            problems.append(f"{where}: give exactly one of lost = true or back = true")
            continue
        if last.get(e.node) == e.at:
            problems.append(f"{where}.at: a second event of node {e.node!r} at {e.at:g}; allowed: one per instant")
            continue
        last[e.node] = e.at
        if e.lost and e.node in down:
            problems.append(
                f"{where}.lost: node {e.node!r} is already down since {down[e.node]:g}; allowed: back = true first"
            )
        elif e.back and e.node not in down:
            problems.append(f"{where}.back: node {e.node!r} is not down at {e.at:g}; allowed: lost = true first")
        elif e.lost:
            down[e.node] = e.at
        else:
            del down[e.node]
    return problems


def lease_check_after(down_at: float, node_timeout: float, interval: float = TIMER_INTERVAL_S) -> float:
    """The coordinator's first periodic timer check that finds a node silent since ``down_at``
    for more than ``node_timeout`` seconds (its checks fall on the multiples of ``interval``
    from the start, the simulated clock's t=0).

    Returns:
        The smallest ``k * interval`` with ``k * interval - down_at > node_timeout`` (seconds).
    """
    k = math.floor((down_at + node_timeout) / interval) + 1
    t = k * interval
    while t - down_at <= node_timeout:  # rounding at the boundary
        k += 1
        t = k * interval
    return t
