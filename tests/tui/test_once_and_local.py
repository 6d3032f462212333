"""``labgang top --once`` as a real command, and local mode over the simulated NVML with real processes."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid

import pytest
from labgang.agent.nvml.simulated import SimulatedNvml
from labgang.launcher.pitfalls import PitfallKind
from labgang.tui.sources import LocalSource
from labgang.tui.state import StateBuilder
from tui_fakes import NOW
from unanswered_hint import agent_hint

GiB = 1024**3
# The machine file's UUIDs with a prefix of this test run's own, so processes that other tests
# start with CUDA_VISIBLE_DEVICES naming config/sim/h100x8.toml devices never show up here.
_RUN = uuid.uuid4().hex[:8]
H100_0 = f"GPU-{_RUN}-6d05-a067-1fa6-7e2d5c342108"
H100_1 = f"GPU-{_RUN}-9dcc-a652-18a4-00330c4ae695"
H100_2 = f"GPU-{_RUN}-2665-a4fc-1ee9-fd7bc829be97"


def labgang(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "labgang.launcher", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_once_local_simulated_prints_one_frame(repo_root, tmp_path):
    # its own state dir: the simulated node's scope, so ranks of a `labgang up --simulate` elsewhere on
    # the host (tagged with that instance's state dir) never show up here (docs/testing.md)
    out = labgang(
        "top",
        "--local",
        "--simulate",
        str(repo_root / "config/sim/h100x8.toml"),
        "--once",
        "--width",
        "150",
        env={"LABGANG_STATE_DIR": str(tmp_path)},
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("local: simulated h100x8.toml | 1 node(s) | 8 devices:")
    assert "DEVICES (8)" in lines and any(ln.startswith("PITFALLS (") for ln in lines)
    rows = [ln for ln in lines if ln.startswith("sim-h100x8 ")]
    assert len(rows) == 8 and all("H100" in r and "/80G" in r for r in rows)
    assert "JOBS" not in out.stdout  # local mode has no jobs or queues
    assert all(len(ln) <= 150 for ln in lines)
    assert "\x1b[" not in out.stdout  # plain text: no terminal control codes


def test_once_simulate_implies_local_and_mig_shows_na(repo_root):
    out = labgang("top", "--simulate", str(repo_root / "config/sim/a100x8-mig.toml"), "--once")
    assert out.returncode == 0, out.stderr
    assert "DEVICES (20)" in out.stdout
    mig_rows = [ln for ln in out.stdout.splitlines() if " 1g.10gb " in ln]
    assert mig_rows and all("n/a (mig)" in r and "n/a (unsupported)" in r for r in mig_rows)


def test_without_a_terminal_it_prints_the_once_frame_and_exits(repo_root, tmp_path):
    """A new user's finding: ``labgang top > file`` (or in a pipe) started the full-screen app with no
    one to see it. As nvitop, standard output that is no terminal gets one plain frame, --once's."""
    machine, scope = str(repo_root / "config/sim/a100x8-mig.toml"), {"LABGANG_STATE_DIR": str(tmp_path)}
    piped = labgang("top", "--simulate", machine, "--width", "150", env=scope)  # stdout: a pipe
    once = labgang("top", "--simulate", machine, "--width", "150", "--once", env=scope)
    assert (piped.returncode, piped.stderr) == (0, ""), piped.stderr
    assert piped.stdout.splitlines()[1:] == once.stdout.splitlines()[1:]  # the first line has the clock
    assert piped.stdout.startswith("local: simulated a100x8-mig.toml") and "DEVICES (20)" in piped.stdout
    assert "\x1b[" not in piped.stdout


@pytest.mark.parametrize("once", [True, False], ids=["once", "interactive"])
def test_without_coordinator_it_fails_with_one_line(tmp_path, once):
    """A new user's finding: the interactive app showed "waiting for the first snapshot" for ever
    (about 50 % of a core while its output was piped) where --once said there is no coordinator."""
    out = labgang("top", *(["--once"] if once else []), "--state-dir", str(tmp_path))
    assert out.returncode == 1
    assert out.stderr.strip() == (
        f"labgang top: no labgang coordinator at {tmp_path}/labgang.sock; start one with `labgang up`" + agent_hint()
    )
    assert out.stdout == ""  # no screen drawn


def test_bad_flags_are_usage_errors(tmp_path):
    bad = tmp_path / "t.toml"
    bad.write_text("[pitfalls]\nbusy_util = 3\n")
    out = labgang("top", "--local", "--simulate", "/nonexistent.toml", "--once")
    assert out.returncode == 2 and "/nonexistent.toml" in out.stderr
    out = labgang("top", "--simulate", __file__, "--once", "--thresholds", str(bad))
    assert out.returncode == 2 and "busy_util: unknown threshold; allowed: busy_util_pct" in out.stderr


@pytest.fixture
def sim(repo_root, tmp_path, sim_scope):
    text = (repo_root / "config/sim/h100x8.toml").read_text()
    for original, mine in (("GPU-8faa1f27", H100_0[:12]), ("GPU-da00dcfe", H100_1[:12]), ("GPU-c5763193", H100_2[:12])):
        assert original in text
        text = text.replace(original, mine)
    machine = tmp_path / "h100x8-own-uuids.toml"
    machine.write_text(text)
    backend = SimulatedNvml.from_file(machine, scope=sim_scope)
    backend.nvmlInit()
    yield backend
    backend.nvmlShutdown()


@pytest.fixture
def sleepers():
    """Processes of this run (they inherit its LABGANG_SIM_SCOPE), killed at teardown."""
    procs = []

    def start(**env: str) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env={**os.environ, **env})
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.kill()
        p.wait()


def _wait_visible(source: LocalSource, pids: set[int]) -> object:
    """The simulated NVML sees a process once its environment is readable: poll briefly."""
    deadline = time.monotonic() + 5
    while True:
        snap = source.read()
        seen = {pid for node in snap.nodes for pids_ in node.inventory.device_pids().values() for pid in pids_}
        if pids <= seen or time.monotonic() > deadline:
            return snap
        time.sleep(0.05)


def test_local_source_attributes_real_processes(sim, sleepers):
    mine = sleepers(CUDA_VISIBLE_DEVICES=H100_0, LABGANG_JOB_ID="j-7")
    other = sleepers(CUDA_VISIBLE_DEVICES=H100_1)
    sim.hold_memory(H100_2, 4_000_000, 6 * GiB)  # a context whose process is gone (no such pid)
    sim.set_utilization(H100_0, gpu_pct=97, sm_active_pct=6)
    source = LocalSource(sim, description="sim", clock=lambda: NOW)
    snap = _wait_visible(source, {mine.pid, other.pid})
    holders = {d.uuid: d for d in snap.nodes[0].devices}
    assert (holders[H100_0].state, holders[H100_0].job) == ("allocated", "j-7")
    assert holders[H100_0].user == snap.processes[("sim-h100x8", mine.pid)].user
    assert holders[H100_1].state == "foreign"
    assert snap.processes[("sim-h100x8", 4_000_000)].alive is False

    state = StateBuilder(mode="local", user="me").build(snap)
    by_kind = {f.kind: f for f in state.findings}
    assert by_kind[PitfallKind.MEMORY_HELD_AFTER_JOB].uuid == H100_2
    assert {f.uuid for f in state.findings if f.kind is PitfallKind.FOREIGN_PROCESS} == {H100_1, H100_2}
    [busy] = [f for f in state.findings if f.kind is PitfallKind.KERNEL_BUSY_SM_IDLE]
    assert busy.uuid == H100_0 and busy.numbers == {"utilization_gpu_pct": 97.0, "sm_active_pct": 6.0}


def test_once_reports_mig_pending_from_the_simulated_machine(repo_root):
    out = labgang("top", "--simulate", str(repo_root / "config/sim/h100-mig-pending.toml"), "--once", "--width", "200")
    assert out.returncode == 0, out.stderr
    [row] = [ln for ln in out.stdout.splitlines() if ln.startswith("warning  mig-pending-reset")]
    assert "MIG mode is off but on is pending a GPU reset" in row
    assert "mig-pending" in next(ln for ln in out.stdout.splitlines() if ln.startswith("sim-h100-mig-pending"))


def test_no_gpm_means_no_sm_guess(repo_root, tmp_path):
    out = labgang("top", "--simulate", str(repo_root / "config/sim/rtx4090x2.toml"), "--once")
    assert out.returncode == 0, out.stderr
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith("sim-rtx4090x2")]
    assert len(rows) == 2 and all("n/a (unsupported)" in r for r in rows)
    assert "kernel-busy-sm-idle" not in out.stdout


def test_a_narrow_once_frame_keeps_the_holder_and_says_what_it_left_out(repo_root):
    out = labgang("top", "--simulate", str(repo_root / "config/sim/h100x8.toml"), "--once", "--width", "40")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert all(len(line) <= 40 for line in lines), [line for line in lines if len(line) > 40]
    header = next(line for line in lines if "HOLDER" in line)
    assert header.split()[-1] == "HOLDER", lines
    rows = lines[lines.index(header) + 1 : lines.index(header) + 9]
    at = header.index("HOLDER")
    assert all(row[at:].strip() for row in rows), rows  # every device says who holds it (free, a job...)
    note = " ".join(lines[lines.index(header) + 9 : lines.index("PITFALLS (0)") - 1])
    assert note.startswith("(40 columns: left out power, temp, flags, model"), lines
    assert note.endswith("shows them)"), lines


def test_simulate_views_count_only_their_own_instances_ranks(repo_root, tmp_path):
    """`nodes --local --simulate` and `top --simulate` are scoped like `labgang up` of the same
    state dir: ranks of another simulated instance on this host are not this machine's."""
    import json as _json

    from labgang.agent.nvml.simulated import SCOPE_VARIABLE
    from labgang.agent.service import simulation_scope

    mine_dir, other_dir = tmp_path / "mine", tmp_path / "other"
    gpu0 = "GPU-8faa1f27-6d05-a067-1fa6-7e2d5c342108"  # config/sim/h100x8.toml, index 0
    procs = []
    try:
        for scope in (simulation_scope(mine_dir), simulation_scope(other_dir)):
            env = {**os.environ, "CUDA_VISIBLE_DEVICES": gpu0, SCOPE_VARIABLE: scope}
            procs.append(subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=env))
        machine = str(repo_root / "config/sim/h100x8.toml")
        deadline = time.monotonic() + 30
        while True:
            out = labgang("nodes", "--local", "--simulate", machine, "--state-dir", str(mine_dir), "--json")
            assert out.returncode == 0, out.stderr
            pids = {p["pid"] for p in _json.loads(out.stdout)["gpus"][0]["processes"]}
            if procs[0].pid in pids or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert procs[0].pid in pids and procs[1].pid not in pids, pids
        third = str(tmp_path / "third")  # an instance with no ranks: both processes belong to others
        once = labgang("top", "--simulate", machine, "--state-dir", third, "--once", "--width", "200")
        assert once.returncode == 0, once.stderr
        [row] = [line for line in once.stdout.splitlines() if line.split()[:2] == ["sim-h100x8", "0"]]
        assert row.split()[-1] == "free", once.stdout
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()
