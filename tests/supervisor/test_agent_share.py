"""A real agent (simulated NVML, real supervisor, real rank and MPS daemon processes) given a
launch whose spec carries a share grant over its link: ``--mps 50 --gpu-mem 20G`` reaches the
rank's environment, served by that card's MPS control daemon while the rank runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from coordinator_end import MACHINE, CoordinatorEnd
from labgang.agent import service as service_mod
from labgang.agent.config import AgentConfig
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


async def test_an_mps_50_gpu_mem_20g_rank_gets_those_limits(agent_and_link, tmp_path: Path):
    agent, end = agent_and_link
    assert agent.mps is not None and agent.mps.control.name == "simulated"
    card = agent.inventory.allocatable()[0].uuid
    out, gate = tmp_path / "env", tmp_path / "gate"
    gate.write_text("")
    script = f'env > "{out}.tmp" && mv "{out}.tmp" "{out}"; while [ -e "{gate}" ]; do sleep 0.05; done'
    spec = {
        "job_id": "25.0",
        "rank": 0,
        "local_rank": 0,
        "world_size": 1,
        "local_world_size": 1,
        "node_rank": 0,
        "master_addr": "127.0.0.1",
        "master_port": 29500,
        "devices": [card],
        "argv": ["/bin/bash", "-c", script],
        "env": {"PATH": "/usr/bin:/bin"},
        "cwd": str(tmp_path),
        "uid": 0,
        "grace": 0.5,
        "share": {"kind": "mps", "shards": 0, "sm_percent": 50, "gpu_mem": 20 * GIB},
    }
    await end.command("launch", {"specs": [spec]})
    await end.wait(lambda: out.exists())
    env = dict(line.split("=", 1) for line in out.read_text().splitlines() if "=" in line)
    assert env["CUDA_VISIBLE_DEVICES"] == card
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
    pipe = Path(env["CUDA_MPS_PIPE_DIRECTORY"])
    assert pipe.is_relative_to(agent.state_dir / "mps") and (pipe / "control").exists()
    assert Path(env["CUDA_MPS_LOG_DIRECTORY"], "control.log").exists()
    assert agent.mps.running() == {card: [0]}
    gate.unlink()
    await end.wait(lambda: end.events("gone"))
    assert agent.mps.running() == {} and not (pipe / "control").exists()
