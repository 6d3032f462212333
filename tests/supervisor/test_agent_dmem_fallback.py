"""A real agent (simulated NVML, real supervisor and rank processes) whose rank cgroups carry a
``dmem.max`` writer: a shard rank whose budget cannot be written (its card has no ``dmem`` region)
still starts, and the node's facts turn to "watched" with the reason, sent to the coordinator with
the next inventory (``agent/confine/devmem.py``). A plain folder stands in for the ranks' cgroup v2
folder (no kernel cgroup here)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from coordinator_end import MACHINE, CoordinatorEnd
from labgang.agent import service as service_mod
from labgang.agent.config import AgentConfig
from labgang.agent.confine import RankCgroups
from labgang.agent.confine.devmem import DmemWriter
from labgang.agent.nvml import open_backend
from labgang.agent.service import AgentService

GIB = 1024**3


@pytest.fixture
async def agent_and_link(tmp_path, monkeypatch, sim_scope):
    monkeypatch.setattr(service_mod, "TICK_S", 0.2)
    end = CoordinatorEnd()
    await end.start()
    config = AgentConfig(
        node="t1",
        coordinator=end.url,
        state_dir=str(tmp_path / "agent"),
        user_socket=False,
        sample_s=0.2,
        interval_s=300.0,
        supervisor={"allow_root": True},
    )
    agent = AgentService(config, backend=open_backend(MACHINE, scope=sim_scope), token="t0ken", stop_jobs_on_exit=True)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    await end.wait(lambda: end.ws is not None and agent.link is not None and agent.link.is_up)
    yield agent, end
    stop.set()
    await asyncio.wait_for(task, 30)
    await end.stop()


async def test_a_failed_dmem_write_starts_the_rank_and_the_node_says_budgets_are_watched(
    agent_and_link, tmp_path: Path
):
    agent, end = agent_and_link
    card = agent.inventory.allocatable()[0].uuid
    ranks = tmp_path / "labgang.ranks"
    ranks.mkdir()
    cgroups = RankCgroups(str(ranks), None)
    cgroups.dmem = DmemWriter({}, on_fallback=agent.note_gpu_mem_fallback)  # no region for any card
    agent.supervisor.cgroups = cgroups
    ran = tmp_path / "ran"
    spec = {
        "job_id": "40.0",
        "rank": 0,
        "local_rank": 0,
        "world_size": 1,
        "local_world_size": 1,
        "node_rank": 0,
        "master_addr": "127.0.0.1",
        "master_port": 29500,
        "devices": [card],
        "argv": [sys.executable, "-c", f"open({str(ran)!r}, 'w').write('ok')"],
        "env": {"PATH": "/usr/bin:/bin"},
        "cwd": str(tmp_path),
        "uid": 0,
        "grace": 0.5,
        "share": {"kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem": 2 * GIB},
    }
    await end.command("launch", {"specs": [spec]})
    await end.wait(lambda: end.events("gone"), timeout=30)
    assert ran.read_text() == "ok"  # the budget is no reason not to start
    assert not (ranks / "40.0.0" / "dmem.max").exists()
    want = {
        "mode": "watched",
        "reason": f"dmem write failed: card {card} of rank 0 of job 40.0 has no dmem region; budgets are watched "
        "through NVML from then on",
    }
    assert agent.sharing == {"mps": "simulated", "gpu_mem": want}

    def sent() -> dict | None:
        # the inventory travels alone or with rank events (the rank's exit may carry it)
        return next((m["sharing"] for m in reversed(end.messages) if "inventory" in m and "sharing" in m), None)

    assert await end.wait(lambda: (sent() or {}).get("gpu_mem") == want, timeout=30)
