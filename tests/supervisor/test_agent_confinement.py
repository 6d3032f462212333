"""The agent's start-up decision on confinement: ``confine = "required"`` on a host that cannot
confine refuses to start, naming why; ``"auto"`` starts and says so once."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from labgang.agent.config import AgentConfig, AgentConfigError
from labgang.agent.nvml import open_backend
from labgang.agent.service import AgentService

MACHINE = Path(__file__).resolve().parents[2] / "config" / "sim" / "h100x8.toml"


def _agent(tmp_path: Path, confine: str, sim_scope: str) -> AgentService:
    config = AgentConfig(
        node="t1",
        coordinator="http://127.0.0.1:9",  # never reached: the agent stops or fails before
        state_dir=str(tmp_path / "agent"),
        user_socket=False,
        supervisor={"allow_root": True, "confine": confine, "spare_shims": 0},
    )
    return AgentService(config, backend=open_backend(MACHINE, scope=sim_scope), token="t0ken")


async def test_required_confinement_on_a_host_without_it_refuses_to_start(tmp_path: Path, sim_scope: str) -> None:
    agent = _agent(tmp_path, "required", sim_scope)
    with pytest.raises(AgentConfigError, match=r"confine: required, but ranks cannot be confined here: simulated GPUs"):
        await agent.run(asyncio.Event())
    assert agent.supervisor is None  # no rank could have been started


async def test_auto_confinement_says_once_why_ranks_are_not_confined(
    tmp_path: Path, sim_scope: str, caplog: pytest.LogCaptureFixture
) -> None:
    agent = _agent(tmp_path, "auto", sim_scope)
    stop = asyncio.Event()
    stop.set()  # start, decide, stop
    with caplog.at_level(logging.INFO, logger="labgang.agent"):
        await agent.run(stop)
    lines = [r.getMessage() for r in caplog.records if "confined to their devices" in r.getMessage()]
    assert lines == [
        "ranks NOT confined to their devices (simulated GPUs have no device nodes to fence); "
        "device violations are detected through NVML instead"
    ]
    assert agent.hello()["confinement"] == {"mode": "none", "reason": "simulated GPUs have no device nodes to fence"}
    assert agent.hello()["violations"] == []


async def test_agent_says_once_whether_host_limits_are_enforced(
    tmp_path: Path, sim_scope: str, caplog: pytest.LogCaptureFixture
) -> None:
    agent = _agent(tmp_path, "auto", sim_scope)
    stop = asyncio.Event()
    stop.set()  # start, decide, stop
    with caplog.at_level(logging.INFO, logger="labgang.agent"):
        await agent.run(stop)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("host limits")]
    assert lines == ["host limits not enforced: simulated node: its ranks' cgroups are not probed"]
    assert agent.hello()["host_limits"] == {
        "enforced": False,
        "reason": "simulated node: its ranks' cgroups are not probed",
    }
