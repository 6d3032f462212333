"""The agent registry's public ways to change a node's record (``launcher/coordinator/agents.py``):
what tests and stand-in agents use instead of writing ``AgentConn`` fields."""

from __future__ import annotations

import pytest
from labgang.agent.inventory import NodeInventory
from labgang.launcher.coordinator.agents import AgentCallError, AgentRegistry


def _inventory(node: str) -> NodeInventory:
    return NodeInventory(node, 1000.0, "565.57.01", "12.565.57.01", 12070, ())


def test_join_connects_a_node_without_a_websocket_with_its_inventory() -> None:
    agents = AgentRegistry()
    inv = _inventory("n1")
    conn = agents.join("n1", 1000.0, inv)
    assert agents.connected("n1")
    assert (conn.last_seen, conn.inventory, conn.inventory_dict) == (1000.0, inv, inv.to_dict())
    assert agents.get("n1") is conn


def test_a_node_that_joined_loses_its_link_is_lost_and_joins_again() -> None:
    agents = AgentRegistry()
    conn = agents.join("n1", 1000.0)
    conn.detach_link("its link closed")
    assert not agents.connected("n1") and not conn.lost
    assert conn.mark_lost()
    assert not conn.mark_lost()  # already lost
    again = agents.join("n1", 1030.0)
    assert again is conn and conn.connected and conn.last_seen == 1030.0
    assert conn.mark_back() and agents.connected("n1")


async def test_a_reply_reaches_the_command_waiting_for_it_and_an_error_fails_it() -> None:
    conn = AgentRegistry().join("n1", 1000.0)
    ok, bad = conn.expect_reply(1), conn.expect_reply(2)
    conn.take_reply({"type": "reply", "id": 7, "ok": True, "result": "nobody waits"})  # dropped
    conn.take_reply({"type": "reply", "id": 1, "ok": True, "result": {"pid": 42}})
    conn.take_reply({"type": "reply", "id": 2, "ok": False, "error": "no such job"})
    assert await ok == {"pid": 42}
    with pytest.raises(AgentCallError, match="node n1: no such job"):
        await bad
    conn.drop_reply(1)
    conn.drop_reply(2)
    later = conn.expect_reply(3)
    conn.detach_link("disconnected")  # a command still waiting fails with the reason
    with pytest.raises(AgentCallError, match="node n1: disconnected"):
        await later
