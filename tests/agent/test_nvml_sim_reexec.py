"""A process that re-executes itself with another ``CUDA_VISIBLE_DEVICES`` moves to that device on
the simulated NVML, as a real process holds its context where its new image opened one (the
device-violation check depends on it: docs/security.md, docs/simulated-activity.md)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from labgang.agent.nvml.simulated import SCOPE_VARIABLE, SimulatedNvml

H100 = Path(__file__).resolve().parents[2] / "config" / "sim" / "h100x8.toml"

MOVE = (
    "import os, sys, time\n"
    "go = sys.argv[1]\n"
    "while not os.path.exists(go):\n"
    "    time.sleep(0.02)\n"
    "os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)'],"
    " dict(os.environ, CUDA_VISIBLE_DEVICES=os.environ['MOVE_TO']))\n"
)


@pytest.fixture
def scoped() -> Iterator[tuple[SimulatedNvml, str]]:
    """An initialised simulated 8×H100 that sees only processes of its own scope: ``(nvml, scope)``."""
    scope = f"test-{uuid.uuid4()}"
    nvml = SimulatedNvml.from_file(H100, scope=scope)
    assert isinstance(nvml, SimulatedNvml)
    nvml.nvmlInit()
    try:
        yield nvml, scope
    finally:
        nvml.nvmlShutdown()


def _pids_on(nvml: SimulatedNvml, index: int) -> set[int]:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    return {p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)}


def _wait_for_exec(pid: int, gpu: str, deadline: float) -> None:
    """Return once process ``pid``'s environment (``/proc/PID/environ``) says
    ``CUDA_VISIBLE_DEVICES=gpu``: its new image is in place. AssertionError past ``deadline``
    (``time.monotonic()`` seconds)."""
    environ = Path(f"/proc/{pid}/environ")
    while f"CUDA_VISIBLE_DEVICES={gpu}".encode() not in environ.read_bytes().split(b"\0"):
        assert time.monotonic() < deadline, f"process {pid} did not exec onto {gpu}"
        time.sleep(0.02)


def test_a_process_that_re_executes_itself_on_another_gpu_shows_there(tmp_path: Path, scoped) -> None:
    nvml, scope = scoped
    go = tmp_path / "go"
    first, second = (nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i)) for i in (0, 3))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": first, "MOVE_TO": second, SCOPE_VARIABLE: scope}
    proc = subprocess.Popen([sys.executable, "-c", MOVE, str(go)], env=env)
    try:
        deadline = time.monotonic() + 30
        while True:  # seen on its first GPU (its environment is read, and cached, now)
            nvml.nvmlDeviceGetCount()
            if proc.pid in _pids_on(nvml, 0) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert proc.pid in _pids_on(nvml, 0) and proc.pid not in _pids_on(nvml, 3)
        go.write_text("")
        _wait_for_exec(proc.pid, second, deadline)
        nvml.nvmlDeviceGetCount()  # a new scan
        assert proc.pid in _pids_on(nvml, 3)
        assert proc.pid not in _pids_on(nvml, 0)
    finally:
        proc.kill()
        proc.wait()


PARK = (
    "import os, sys, time\n"
    "go = sys.argv[1]\n"
    "pid = os.fork()\n"
    "if pid == 0:\n"
    "    while not os.path.exists(go):\n"
    "        time.sleep(0.02)\n"
    "    os.execve(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)'],"
    " dict(os.environ, CUDA_VISIBLE_DEVICES=os.environ['RANK_GPU']))\n"
    "os.waitpid(pid, 0)\n"
)
"""A parent on no device forks a child that waits (as the shim's start gate parks a rank's child,
everything but the ``exec`` done, agent/supervisor/gate.py) and then execs a process on a GPU."""


def test_a_child_scanned_before_its_exec_shows_on_its_gpu_after_it(tmp_path: Path, scoped) -> None:
    # A forked child shows its parent's environment until it execs, under the same pid and start
    # time: an answer cached from that image hid the rank from every later scan (a gang's parked
    # ranks on a loaded machine, then never in the inventory).
    nvml, scope = scoped
    go = tmp_path / "go"
    gpu = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(2))
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    env.update({"RANK_GPU": gpu, SCOPE_VARIABLE: scope})
    parent = subprocess.Popen([sys.executable, "-c", PARK, str(go)], env=env)
    try:
        deadline = time.monotonic() + 30
        children: list[psutil.Process] = []
        while not children:  # the child is parked, its environment the parent's
            assert time.monotonic() < deadline, "the parent did not fork"
            children = psutil.Process(parent.pid).children()
            time.sleep(0.02)
        [child] = children
        nvml.nvmlDeviceGetCount()  # a scan sees the parked child: on no device
        assert child.pid not in _pids_on(nvml, 2)
        go.write_text("")
        _wait_for_exec(child.pid, gpu, deadline)
        nvml.nvmlDeviceGetCount()  # a new scan
        assert child.pid in _pids_on(nvml, 2)
    finally:
        for proc in psutil.Process(parent.pid).children():
            proc.kill()
        parent.kill()
        parent.wait()
