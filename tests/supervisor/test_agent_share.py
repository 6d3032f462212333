"""A real agent (simulated NVML, real supervisor, real rank and MPS daemon processes) given a
launch whose spec carries a share grant over its link: ``--mps 50 --gpu-mem 20G`` reaches the
rank's environment, served by that card's MPS control daemon while the rank runs; a shard rank
using more device memory than its ``--gpu-mem`` is reported in the agent's violations."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from coordinator_end import MACHINE, CoordinatorEnd
from labgang.agent import service as service_mod
from labgang.agent.config import AgentConfig
from labgang.agent.nvml import open_backend
from labgang.agent.service import AgentService

GIB = 1024**3
MIB = 1024**2


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


def _spec(tmp_path: Path, job_id: str, card: str, argv: list[str], share: dict, **env: str) -> dict:
    return {
        "job_id": job_id,
        "rank": 0,
        "local_rank": 0,
        "world_size": 1,
        "local_world_size": 1,
        "node_rank": 0,
        "master_addr": "127.0.0.1",
        "master_port": 29500,
        "devices": [card],
        "argv": argv,
        "env": {"PATH": "/usr/bin:/bin", **env},
        "cwd": str(tmp_path),
        "uid": 0,
        "grace": 0.5,
        "share": share,
    }


async def test_an_mps_50_gpu_mem_20g_rank_gets_those_limits(agent_and_link, tmp_path: Path):
    agent, end = agent_and_link
    assert agent.mps is not None and agent.mps.control.name == "simulated"
    card = agent.inventory.allocatable()[0].uuid
    out, gate = tmp_path / "env", tmp_path / "gate"
    gate.write_text("")
    script = f'env > "{out}.tmp" && mv "{out}.tmp" "{out}"; while [ -e "{gate}" ]; do sleep 0.05; done'
    share = {"kind": "mps", "shards": 0, "sm_percent": 50, "gpu_mem": 20 * GIB}
    await end.command("launch", {"specs": [_spec(tmp_path, "25.0", card, ["/bin/bash", "-c", script], share)]})
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


def _budget_violations(end: CoordinatorEnd) -> list[dict]:
    return [v for m in end.messages for v in (m.get("violations") or []) if v.get("kind") == "gpu-mem"]


async def test_a_shard_rank_over_its_gpu_mem_budget_is_reported_naming_its_process(agent_and_link, tmp_path: Path):
    agent, end = agent_and_link
    card = agent.inventory.allocatable()[1].uuid
    sleep = [sys.executable, "-c", "import time; time.sleep(60)"]
    within = {"kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem": 2 * GIB}
    over = {"kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem": 1 * GIB}
    await end.command(
        "launch",
        {
            "specs": [
                _spec(tmp_path, "30.0", card, sleep, within, SIM_GPU_MEMORY_MIB="1024"),
                _spec(tmp_path, "31.0", card, sleep, over, SIM_GPU_MEMORY_MIB="1536"),
            ]
        },
    )
    (found, *_) = await end.wait(lambda: _budget_violations(end))
    pid = agent.supervisor.status("31.0", 0).pid
    assert found == {
        "kind": "gpu-mem",
        "job_id": "31.0",
        "rank": 0,
        "device": card,
        "pid": pid,
        "used": 1536 * MIB,
        "budget": 1 * GIB,
        "allowed": [card],
    }
    assert {v["job_id"] for v in _budget_violations(end)} == {"31.0"}  # 1 GiB of a 2 GiB budget is fine

    # The inventory carries the card's sharers, each with its grant and its usage (labgang nodes, top, /metrics).
    def sharers_using_memory() -> list[dict] | None:
        for m in reversed(end.messages):
            for g in (m.get("inventory") or {}).get("gpus", []):
                if g["uuid"] == card and len(g.get("sharers", [])) == 2:
                    return g["sharers"] if all(s["used_memory_bytes"] for s in g["sharers"]) else None
        return None

    assert await end.wait(sharers_using_memory) == [
        {"job": "30", "rank": 0, "kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem_bytes": 2 * GIB,
         "used_memory_bytes": 1024 * MIB},
        {"job": "31", "rank": 0, "kind": "shard", "shards": 1, "sm_percent": None, "gpu_mem_bytes": 1 * GIB,
         "used_memory_bytes": 1536 * MIB},
    ]  # fmt: skip
    assert agent.sharing == {
        "mps": "simulated",
        "gpu_mem": {"mode": "watched", "reason": "simulated GPUs: budgets are watched through NVML"},
    }
    assert end.messages[0]["type"] == "hello" and end.messages[0]["sharing"] == agent.sharing
    await end.command("stop_job", {"job_id": "31.0", "grace": 0.3, "warn": False})
    await end.command("stop_job", {"job_id": "30.0", "grace": 0.3, "warn": False})
    await end.wait(lambda: len(end.events("gone")) == 2)
