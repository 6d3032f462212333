"""The MPS control seam (``agent/mps.py``): which control the agent's ``mps`` setting gives, and the
real ``nvidia-cuda-mps-control`` driven as the daemon is (``-d`` with the card and its folders in
the environment, ``quit`` on standard input), here a stand-in program of that name on PATH."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import pytest
from labgang.agent.config import AgentConfigError, parse_agent_config
from labgang.agent.mps import (
    MpsDaemons,
    MpsUnavailable,
    NvidiaMpsControl,
    SimulatedMpsControl,
    mps_dirs,
    open_mps_control,
)

CARD = "GPU-11111111-2222-3333-4444-555555555555"


def _fake_control(folder: Path, exit_status: int = 0) -> Path:
    """A ``nvidia-cuda-mps-control`` that appends its arguments, MPS environment and stdin to ``calls``."""
    folder.mkdir(exist_ok=True)
    program = folder / "nvidia-cuda-mps-control"
    calls = folder / "calls"
    program.write_text(
        "#!/bin/sh\n"
        'echo "args=$* cvd=$CUDA_VISIBLE_DEVICES pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY"'
        f' >> "{calls}"\n'
        f'if [ -z "$1" ]; then echo "stdin=$(cat)" >> "{calls}"; fi\n'
        f'[ {exit_status} -eq 0 ] || echo "An instance of this daemon is already running" >&2\n'
        f"exit {exit_status}\n"
    )
    program.chmod(0o755)
    return program


def test_the_setting_chooses_the_control(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-cuda-mps-control here
    assert open_mps_control("off", simulated=True) is None
    assert isinstance(open_mps_control("auto", simulated=True), SimulatedMpsControl)
    assert isinstance(open_mps_control("simulated", simulated=False), SimulatedMpsControl)
    assert open_mps_control("auto", simulated=False) is None
    with pytest.raises(ValueError, match=r"^mps: nvidia, but nvidia-cuda-mps-control is not on the agent's PATH$"):
        open_mps_control("nvidia", simulated=False)
    allowed = r"\(allowed: auto, nvidia, simulated, off\)"
    with pytest.raises(ValueError, match=rf"^mps: 'sometimes' is not a setting {allowed}"):
        open_mps_control("sometimes", simulated=False)
    program = _fake_control(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(program.parent))
    control = open_mps_control("auto", simulated=False)
    assert isinstance(control, NvidiaMpsControl) and control.program == str(program)


def test_a_bad_mps_setting_in_agent_toml_names_the_key_and_the_values():
    with pytest.raises(AgentConfigError) as err:
        parse_agent_config({"mps": "sometimes"})
    (line,) = err.value.problems
    assert line.startswith("mps: ") and "'auto'" in line and "'off'" in line
    with pytest.raises(AgentConfigError, match=r"mps_dir: 'run/mps' is not an absolute path"):
        parse_agent_config({"mps_dir": "run/mps"})


def test_the_real_daemon_is_started_with_its_card_and_folders_and_told_to_quit(tmp_path: Path):
    program = _fake_control(tmp_path / "bin")
    daemons = MpsDaemons(NvidiaMpsControl(str(program)), tmp_path / "mps")
    dirs = daemons.acquire(("5.0", 0), CARD, os.getuid(), os.getgid())
    assert dirs == mps_dirs(tmp_path / "mps", CARD, os.getuid())
    assert Path(dirs.pipe).is_dir() and oct(Path(dirs.pipe).stat().st_mode & 0o777) == "0o700"
    assert daemons.acquire(("6.0", 0), CARD, os.getuid(), os.getgid()) == dirs  # one daemon per card and user
    daemons.release(("5.0", 0))
    calls = (tmp_path / "bin" / "calls").read_text().splitlines()
    assert calls == [f"args=-d cvd={CARD} pipe={dirs.pipe} log={dirs.log}"]  # 6.0 still uses it
    daemons.release(("6.0", 0))
    calls = (tmp_path / "bin" / "calls").read_text().splitlines()
    assert calls[1:] == [f"args= cvd={CARD} pipe={dirs.pipe} log={dirs.log}", "stdin=quit"]
    assert daemons.running() == {}


def test_a_daemon_that_does_not_start_refuses_the_rank_with_what_it_said(tmp_path: Path):
    program = _fake_control(tmp_path / "bin", exit_status=1)
    daemons = MpsDaemons(NvidiaMpsControl(str(program)), tmp_path / "mps")
    with pytest.raises(MpsUnavailable, match=r"-d for card GPU-1111.* exited 1: An instance of this daemon"):
        daemons.acquire(("5.0", 0), CARD, os.getuid(), os.getgid())
    assert daemons.running() == {}


def test_each_daemon_on_a_card_is_marked_as_labgangs_mps_server_of_its_user_and_jobs(tmp_path: Path):
    # two users' simulated daemons on one card both run as the agent: each is told apart by its pid
    from labgang.agent.inventory import GpuInfo, NodeInventory, ProcessInfo, Unavailable

    me = os.getuid()
    other = next((u for u in (1001, 1002, 65534) if u != me and _login_of(u)), None)
    if other is None:
        pytest.skip("needs a second uid with a passwd entry")
    daemons = MpsDaemons(SimulatedMpsControl(), tmp_path / "mps")
    try:
        daemons.acquire(("12.0", 0), CARD, me, os.getgid())
        daemons.acquire(("9.1", 1), CARD, me, os.getgid())
        daemons.acquire(("30.0", 0), CARD, other, other)
        by_uid = {uid: pid for (_card, uid), pid in daemons.control.daemons().items()}  # type: ignore[attr-defined]
        stranger = ProcessInfo(4242, 1024, user="carol")  # not labgang's: left alone
        rows = (*(ProcessInfo(pid, Unavailable("unknown"), user=_login_of(me)) for pid in by_uid.values()), stranger)
        unread: dict[str, Any] = {f.name: None for f in dataclasses.fields(GpuInfo) if f.default is dataclasses.MISSING}
        gpu = GpuInfo(**{**unread, "index": 0, "uuid": CARD, "processes": rows})
        marked = daemons.mark_servers(NodeInventory("n1", 0.0, "0", "0", 0, gpus=(gpu,)))
        got = {p.pid: (p.mps_server, p.mps_jobs) for p in marked.gpus[0].processes}  # type: ignore[union-attr]
        assert got == {
            by_uid[me]: (_login_of(me), ("9", "12")),
            by_uid[other]: (_login_of(other), ("30",)),
            4242: (None, ()),
        }
        assert marked.device_pids()[CARD] == frozenset({4242})  # the servers are no one's foreign process
    finally:
        daemons.close()


def _login_of(uid: int) -> str | None:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return None
