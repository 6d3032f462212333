"""The node agent reports exits as they happen and declares a rank gone on a fresh NVML read.

A real ``AgentService`` (simulated NVML, real supervisor and rank processes) dials a real
aiohttp websocket on loopback that plays the coordinator's end of the link: it records
every message, acknowledges rank events and sends commands. The agent's fallback poll
(``TICK_S``) and periodic NVML read (``sample_s``) are set to a minute, so a rank's exit
can only be seen through its exit watcher and its release only through an on-demand read.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from coordinator_end import MACHINE, CoordinatorEnd
from labgang.agent import service as service_mod
from labgang.agent.config import AgentConfig
from labgang.agent.nvml import open_backend
from labgang.agent.service import AgentService
from labgang.agent.supervisor import RankState


@pytest.fixture
async def agent_and_link(tmp_path, monkeypatch, sim_scope):
    monkeypatch.setattr(service_mod, "TICK_S", 60.0)
    end = CoordinatorEnd()
    await end.start()
    config = AgentConfig(
        node="t1",
        coordinator=end.url,
        state_dir=str(tmp_path / "agent"),
        user_socket=False,
        sample_s=60.0,
        interval_s=300.0,
        supervisor={"allow_root": True},
    )
    backend = open_backend(MACHINE, scope=sim_scope)
    agent = AgentService(config, backend=backend, token="t0ken", stop_jobs_on_exit=True)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    await end.wait(lambda: end.ws is not None and agent.link is not None and agent.link.is_up)
    yield agent, end, backend
    stop.set()
    await asyncio.wait_for(task, 30)
    await end.stop()


def _spec(tmp_path: Path, argv: list[str], uuid: str, job_id: str = "7.0") -> dict[str, Any]:
    return {
        "job_id": job_id,
        "rank": 0,
        "local_rank": 0,
        "world_size": 1,
        "local_world_size": 1,
        "node_rank": 0,
        "master_addr": "127.0.0.1",
        "master_port": 29500,
        "devices": [uuid],
        "argv": argv,
        "env": {"PATH": "/usr/bin:/bin"},
        "cwd": str(tmp_path),
        "uid": 0,
        "gid": None,
        "grace": 0.5,
    }


async def test_exit_is_reported_without_waiting_for_a_poll_and_gone_carries_a_fresh_inventory(agent_and_link, tmp_path):
    agent, end, _backend = agent_and_link
    uuid = agent.inventory.allocatable()[0].uuid
    gate = tmp_path / "gate"
    gate.write_text("")
    # The rank runs until the gate file is removed (its pid shows on the device meanwhile).
    script = f'while [ -e "{gate}" ]; do sleep 0.05; done'
    await end.command("launch", {"specs": [_spec(tmp_path, ["/bin/bash", "-c", script], uuid)]})
    _, _started = (await end.wait(lambda: end.events("started")))[0]
    sup = agent.supervisor
    status = sup.status("7.0", 0)
    assert status.state is RankState.RUNNING
    gate.unlink()
    message, gone = (await end.wait(lambda: end.events("gone")))[0]
    kinds = [ev["kind"] for _, ev in end.events()]
    assert kinds == ["started", "exited", "gone"]
    assert gone["exit_status"] == 0
    # The inventory in the gone message was read after the rank ended: its pid is not on the device.
    assert "inventory" in message
    from labgang.agent.inventory import NodeInventory

    pids = NodeInventory.from_dict(message["inventory"]).device_pids()
    assert status.pid not in pids.get(uuid, frozenset())


async def test_a_context_nvml_still_shows_keeps_the_rank_until_a_read_no_longer_does(agent_and_link, tmp_path):
    agent, end, backend = agent_and_link
    agent.config.sample_s = 1.0  # caps the re-read backoff while the context is held
    uuid = agent.inventory.allocatable()[1].uuid
    await end.command("launch", {"specs": [_spec(tmp_path, ["sleep", "0.3"], uuid, job_id="8.0")]})
    await end.wait(lambda: end.events("started"))
    sup = agent.supervisor
    pid = sup.status("8.0", 0).pid
    backend.hold_memory(uuid, pid, 512 << 20)  # the context outlives the process
    await end.wait(lambda: end.events("exited"))

    def read_after_release() -> bool:
        since = sup.awaiting_devices()
        return since is not None and agent._reading is not None and agent._reading.read_at >= since

    await end.wait(read_after_release)  # NVML was read after the release, and still showed the pid
    assert sup.status("8.0", 0).state is RankState.RELEASING
    assert end.events("gone") == []
    backend.release_memory(uuid, pid)
    _, gone = (await end.wait(lambda: end.events("gone")))[0]
    assert gone["job_id"] == "8.0"


async def test_a_grace_period_ends_with_sigkill_without_a_poll(agent_and_link, tmp_path):
    agent, end, _backend = agent_and_link
    uuid = agent.inventory.allocatable()[2].uuid
    script = 'trap "" TERM; exec sleep 60'  # ignores SIGTERM: only the SIGKILL after grace ends it
    await end.command("launch", {"specs": [_spec(tmp_path, ["/bin/bash", "-c", script], uuid, job_id="9.0")]})
    await end.wait(lambda: end.events("started"))
    await end.command("stop_job", {"job_id": "9.0", "grace": 0.3, "warn": False})
    _, exited = (await end.wait(lambda: end.events("exited")))[0]
    assert exited["exit_status"] == 137
    await end.wait(lambda: end.events("gone"))


async def test_rank_zeros_agent_picks_master_port_at_launch_and_keeps_it_on_a_repeat(agent_and_link, tmp_path):
    agent, end, _backend = agent_and_link
    uuid = agent.inventory.allocatable()[3].uuid
    out = tmp_path / "port"
    spec = _spec(tmp_path, ["/bin/bash", "-c", f'echo "$MASTER_PORT" > "{out}"; sleep 30'], uuid, job_id="10.0")
    spec["master_port"] = 0  # not chosen yet: this agent picks it
    first = await end.command("launch", {"specs": [spec]})
    port = first[0]["master_port"]
    assert 1 <= port <= 65535
    again = await end.command("launch", {"specs": [spec]})  # a resent launch: same rank, same port
    assert again[0]["master_port"] == port and "error" not in again[0]
    await end.wait(lambda: out.exists() and out.read_text().strip())
    assert int(out.read_text()) == port
    await end.command("stop_job", {"job_id": "10.0", "grace": 0, "warn": False})
    await end.wait(lambda: end.events("gone"))


async def test_events_and_answers_leave_only_once_the_journal_says_so(agent_and_link, tmp_path):
    """The journal is written on a thread of its own; the agent still reports a rank's events, and
    answers a stop, only once its ``state.json`` on disk says what they say (an agent restarted in
    between would otherwise report or resume from an older state)."""
    agent, end, _backend = agent_and_link
    uuid = agent.inventory.allocatable()[4].uuid
    state_file = agent.supervisor._journal.rank_dir("11.0", 0) / "state.json"
    on_disk: list[tuple[str, dict[str, Any]]] = []
    record = end._record

    async def record_with_disk(message: dict[str, Any]) -> None:
        if message.get("type") == "rank_events":
            for ev in message["events"]:
                on_disk.append((ev["kind"], json.loads(state_file.read_text())))
        await record(message)

    end._record = record_with_disk
    await end.command("launch", {"specs": [_spec(tmp_path, ["sleep", "60"], uuid, job_id="11.0")]})
    # The launch's answer came after its write (the rank may have been seen running since).
    assert json.loads(state_file.read_text())["state"] in ("starting", "running")
    await end.wait(lambda: end.events("started"))
    (status,) = await end.command("stop_job", {"job_id": "11.0", "grace": 5.0, "warn": False})
    assert status["state"] == "stopping"
    assert json.loads(state_file.read_text())["state"] != "running"  # "stopping", or later already
    await end.wait(lambda: end.events("gone"))
    seen = {kind: saved for kind, saved in on_disk}
    assert seen["started"]["started_reported"] is True
    assert seen["exited"]["exit_reported"] is True and seen["exited"]["exit_status"] == 143
    assert seen["gone"]["state"] == "gone"
