"""MPS ranks on the real supervisor: the environment of a shared rank, and the control daemon per
card and user (``agent/mps.py``) started before the first MPS rank and stopped, reaped, once the
last one is gone. The simulated control daemon is a real small process (``agent/mps_sim.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from labgang.agent.mps import MpsDaemons, SimulatedMpsControl, mps_dirs
from labgang.agent.supervisor import InvalidSpec, RankState, ShareGrant, Supervisor

GIB = 1024**3
CARD = "GPU-test-0"


def _env_of(sup: Supervisor, job_id: str) -> dict[str, str]:
    text = sup.log_path(job_id, 0).read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("[labgang]"))


@pytest.fixture
def mps_sup(state_dir: Path, cleanup):
    control = SimulatedMpsControl()
    daemons = MpsDaemons(control, state_dir / "mps")
    sup = Supervisor(state_dir, allow_root=True, mps=daemons)
    cleanup.append(sup)
    yield sup, daemons, control
    daemons.close()  # a failed test still reaps its daemons


def test_an_mps_rank_gets_its_limits_and_its_daemons_folders(mps_sup, make_spec, h, state_dir):
    sup, daemons, control = mps_sup
    grant = ShareGrant("mps", sm_percent=50, gpu_mem=20 * GIB)
    submitted = {"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "100", "CUDA_MPS_PIPE_DIRECTORY": "/tmp/elsewhere"}
    sup.launch(make_spec(["env"], devices=(CARD,), share=grant, env=submitted))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    env = _env_of(sup, "job1")
    dirs = mps_dirs(state_dir / "mps", CARD, 0)
    assert env["CUDA_VISIBLE_DEVICES"] == CARD
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20480M"
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == dirs.pipe and env["CUDA_MPS_LOG_DIRECTORY"] == dirs.log
    # The rank is gone: its daemon was told to quit and reaped, its FIFO removed.
    assert daemons.running() == {} and control.daemons() == {}
    assert not (Path(dirs.pipe) / "control").exists()
    log = (Path(dirs.log) / "control.log").read_text()
    assert "Starting control daemon" in log and "Accepting command: quit" in log


def test_one_daemon_serves_a_users_ranks_on_a_card_until_the_last_is_gone(mps_sup, make_spec, h, tmp_path):
    sup, daemons, control = mps_sup
    gates = [tmp_path / "gate0", tmp_path / "gate1"]
    for gate in gates:
        gate.write_text("")
    for i, gate in enumerate(gates):
        script = f'while [ -e "{gate}" ]; do sleep 0.02; done'
        grant = ShareGrant("mps", sm_percent=25)
        sup.launch(make_spec(["/bin/bash", "-c", script], job_id=f"job{i}", devices=(CARD,), share=grant))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    (key, pid), *more = control.daemons().items()
    assert key == (CARD, 0) and more == [] and daemons.running() == {CARD: [0]}
    assert h.pid_alive(pid)
    env = (Path(f"/proc/{sup.status('job1', 0).pid}/environ").read_bytes()).split(b"\0")
    assert b"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=25" in env and not any(
        v.startswith(b"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT=") for v in env
    )
    gates[0].unlink()
    h.run_until(sup, lambda: sup.status("job0", 0).state is RankState.GONE)
    assert control.daemons() == {(CARD, 0): pid}  # job1 still uses it
    gates[1].unlink()
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert control.daemons() == {} and not h.pid_alive(pid)
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped by the agent, not left a zombie


def test_a_shard_rank_has_its_card_and_no_mps_variables(mps_sup, make_spec, h):
    sup, daemons, control = mps_sup
    sup.launch(make_spec(["env"], devices=(CARD,), share=ShareGrant("shard", shards=2, gpu_mem=GIB)))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    env = _env_of(sup, "job1")
    assert env["CUDA_VISIBLE_DEVICES"] == CARD
    assert not [k for k in env if k.startswith("CUDA_MPS_")]
    assert control.daemons() == {} and daemons.running() == {}


def test_an_mps_rank_on_a_node_without_mps_is_refused_and_nothing_starts(sup, make_spec, state_dir):
    with pytest.raises(InvalidSpec, match=r"^share.kind: is mps but this node runs no MPS control daemon"):
        sup.launch(make_spec(["true"], devices=(CARD,), share=ShareGrant("mps", sm_percent=50)))
    assert sup.ranks() == []
    assert not any(p.name == "job1" for p in (state_dir / "ranks").iterdir())
