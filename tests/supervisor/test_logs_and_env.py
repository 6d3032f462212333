"""Rank logs (stdout+stderr, size cap with rotation) and the environment contract, on real processes."""

from __future__ import annotations

import signal

import pytest
from labgang.agent.supervisor import LaunchSpec, RankState, Supervisor
from labgang.agent.supervisor.environment import DROPPED_VARIABLES, contract_variables, rank_environment
from labgang.agent.supervisor.identity import RunAs
from labgang.agent.supervisor.log_generations import read_logical


def test_stdout_and_stderr_go_to_the_rank_log_and_stdin_is_dev_null(sup, make_spec, h):
    sup.launch(make_spec(["sh", "-c", "echo out; echo err >&2; cat; readlink /proc/self/fd/0"]))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    lines = sup.log_path("job1", 0).read_text().splitlines()
    # stdout and stderr reach the shim through two pipes: each stream's lines in its order, both in
    # the log, but which pipe the shim reads first when both have bytes is not promised (agent/supervisor/shim.py)
    assert sorted(lines) == ["/dev/null", "err", "out"], lines
    assert [line for line in lines if line != "err"] == ["out", "/dev/null"], lines


def test_log_rotates_at_its_cap_with_no_text_of_its_own_and_reads_on_across_it(state_dir, make_spec, cleanup, h):
    """The rotation writes nothing into the output (no ``[labgang] log rotated`` line that a follower
    would print as the rank's); the generations file says where each file starts, and reading by
    logical offset from 0 gives every line once, in order, ``.1`` first."""
    sup = Supervisor(state_dir, allow_root=True, log_max_bytes=4096)
    cleanup.append(sup)
    # 300 numbered lines of 20 bytes: 6000 bytes, more than one 4096-byte file holds
    sup.launch(make_spec(["sh", "-c", "i=0; while [ $i -lt 300 ]; do printf 'line %014d\\n' $i; i=$((i+1)); done"]))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    current = sup.log_path("job1", 0)
    previous = current.with_name(current.name + ".1")
    assert previous.stat().st_size == 4096 and current.stat().st_size == 6000 - 4096
    assert previous.read_text() + current.read_text() == "".join(f"line {i:014d}\n" for i in range(300))
    assert current.with_name(current.name + ".gen").read_text().split()[1:] == ["0", "4096"]
    offset, pieces = 0, []
    while True:
        piece = read_logical(current, offset, 1000)
        assert piece.lost == 0 and piece.size == 6000
        if not piece.data:
            break
        pieces.append(piece.data)
        offset = piece.next_offset
    assert b"".join(pieces).decode().splitlines() == [f"line {i:014d}" for i in range(300)]


def test_rank_sees_the_environment_contract(sup, make_spec, h):
    submitted = {
        "LD_PRELOAD": "/tmp/evil.so",
        "LABGANG_JOB_ID": "forged",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "NVIDIA_VISIBLE_DEVICES": "all",
        "LD_LIBRARY_PATH": "/opt/cuda/lib64",
        "MY_SETTING": "kept",
        "RANK": "99",
    }
    spec = make_spec(
        ["env"],
        rank=1,
        world_size=4,
        devices=("GPU-11111111", "MIG-22222222"),
        master_port=31337,
        node_rank=1,
        local_rank=0,
        local_world_size=2,
        restart_count=2,
        env=submitted,
    )
    sup.launch(spec)
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    text = sup.log_path("job1", 1).read_text()
    env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("[labgang]"))
    expected = {
        "CUDA_VISIBLE_DEVICES": "GPU-11111111,MIG-22222222",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": "31337",
        "WORLD_SIZE": "4",
        "RANK": "1",
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "1",
        "NODE_RANK": "1",
        "LABGANG_JOB_ID": "job1",
        "LABGANG_RESTART_COUNT": "2",
        "LD_LIBRARY_PATH": "/opt/cuda/lib64",
        "MY_SETTING": "kept",
        "USER": "root",
        "HOME": "/root",
    }
    assert {k: env.get(k) for k in expected} == expected
    assert "LD_PRELOAD" not in env and "NVIDIA_VISIBLE_DEVICES" not in env
    header = text.splitlines()[0]
    assert header.startswith("[labgang] job job1 rank 1 restart 2")
    assert "LD_PRELOAD" in header and "NVIDIA_VISIBLE_DEVICES" in header


def test_rank_environment_drops_exactly_the_documented_variables():
    run_as = RunAs(uid=1000, gid=1000, groups=(1000,), name="alice", home="/home/alice", drop_privileges=True)
    submitted = {name: "x" for name in DROPPED_VARIABLES} | {
        "LABGANG_ANYTHING": "x",
        "PYTHONPATH": "/src",
        "LD_LIBRARY_PATH": "/lib",
        "PATH": "/bin",
    }
    spec = LaunchSpec(
        job_id="j",
        rank=0,
        local_rank=0,
        world_size=1,
        local_world_size=1,
        node_rank=0,
        master_addr="h",
        master_port=1,
        devices=(),
        argv=("x",),
        env=submitted,
        cwd="/",
        uid=1000,
    )
    env = rank_environment(spec, run_as)
    assert not (set(DROPPED_VARIABLES) | {"LABGANG_ANYTHING"}) & set(env)
    assert env["PYTHONPATH"] == "/src" and env["LD_LIBRARY_PATH"] == "/lib" and env["PATH"] == "/bin"
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["USER"] == "alice" and env["HOME"] == "/home/alice"


def test_agent_provided_variables_reach_the_rank_and_cannot_be_forged(state_dir, make_spec, cleanup, h):
    sup = Supervisor(state_dir, allow_root=True, extra_env={"LABGANG_SIM_SCOPE": "/srv/state-a", "RANK": "no"})
    cleanup.append(sup)
    submitted = {"LABGANG_SIM_SCOPE": "/srv/state-b"}
    sup.launch(make_spec(["env"], env=submitted))
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    text = sup.log_path("job1", 0).read_text()
    env = dict(line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("[labgang]"))
    assert env["LABGANG_SIM_SCOPE"] == "/srv/state-a"  # the agent's, not the submitted one
    assert env["RANK"] == "0"  # agent variables never override the contract


def test_a_rank_never_inherits_ignored_signals_from_its_agent(state_dir, cleanup, make_spec, h):
    """An agent started with SIGINT ignored (a background job of a script) still starts ranks that
    `kill -INT` stops: the rank's small parent restores the default before starting it."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        sup = Supervisor(state_dir, allow_root=True)  # its small parents inherit the ignored SIGINT
        cleanup.append(sup)
        sup.launch(make_spec(["sh", "-c", "kill -INT $$; exit 5"]))
        events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    finally:
        signal.signal(signal.SIGINT, previous)
    assert [e.exit_status for e in events if e.kind == "exited"] == [130]


@pytest.mark.parametrize("signum, status", [(signal.SIGINT, 130), (signal.SIGKILL, 137), (signal.SIGSEGV, 139)])
def test_signal_n_maps_to_128_plus_n(sup, make_spec, h, signum, status):
    sup.launch(make_spec(["sh", "-c", f"kill -{int(signum)} $$"]))
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert [e.exit_status for e in events if e.kind == "exited"] == [status]


def test_labgang_job_id_is_the_user_visible_job_id_when_given():
    """The coordinator supervises each attempt under its own id ("7.1") but ranks see the job id."""
    base = dict(
        rank=0,
        local_rank=0,
        world_size=1,
        local_world_size=1,
        node_rank=0,
        master_addr="127.0.0.1",
        master_port=1234,
        devices=(),
        argv=("true",),
        env={},
        cwd="/",
        uid=0,
    )
    assert contract_variables(LaunchSpec(job_id="7.1", user_job_id="7", **base))["LABGANG_JOB_ID"] == "7"
    assert contract_variables(LaunchSpec(job_id="7.1", **base))["LABGANG_JOB_ID"] == "7.1"
    spec = LaunchSpec(job_id="7.1", user_job_id="7", **base)
    assert LaunchSpec.from_dict(spec.to_dict()) == spec
