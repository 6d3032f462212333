"""The simulated backend reports what the processes bound to a device do: CPU activity becomes
``utilization.gpu``, and a process may declare its SM activity and memory in its environment."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pynvml
import pytest
from labgang.agent.nvml.simulated import SCOPE_VARIABLE, SimulatedNvml

REPO = Path(__file__).resolve().parents[2]
H100 = REPO / "config" / "sim" / "h100x8.toml"
BUSY = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"
IDLE = "import time; time.sleep(60)"


@pytest.fixture
def rank() -> Iterator[Callable[..., int]]:
    """Start a process bound to a device (killed at teardown): ``rank(code, uuid, scope, **env) -> pid``."""
    procs: list[subprocess.Popen] = []

    def start(code: str, device: str, scope: str, **extra: str) -> int:
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": device, SCOPE_VARIABLE: scope, **extra}
        procs.append(subprocess.Popen([sys.executable, "-c", code], env=env))
        return procs[-1].pid

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _reading(nvml: SimulatedNvml, index: int) -> tuple[float, float, int]:
    """(utilization.gpu %, SM activity %, memory used by processes in MiB) after a fresh scan."""
    nvml.nvmlDeviceGetCount()  # a new process scan, as every inventory read starts one
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    util = nvml.nvmlDeviceGetUtilizationRates(handle).gpu
    activity = nvml.labgang_activity(nvml.nvmlDeviceGetUUID(handle))
    used = sum(p.usedGpuMemory for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)) // (1024 * 1024)
    assert activity is not None and util == int(activity.util_pct)  # NVML's reading is the activity's
    return activity.util_pct, activity.sm_active_pct, used


def test_a_busy_rank_keeps_its_gpu_busy_and_an_idle_one_leaves_it_idle(rank) -> None:
    scope = f"test-{uuid.uuid4()}"
    nvml = SimulatedNvml.from_file(H100, scope=scope)
    assert isinstance(nvml, SimulatedNvml)  # a machine file, not a replayed record
    nvml.nvmlInit()
    try:
        uuids = [nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(i)) for i in range(3)]
        rank(BUSY, uuids[0], scope)
        rank(BUSY, uuids[1], scope, SIM_GPU_SM_ACTIVE_PCT="5", SIM_GPU_MEMORY_MIB="30000")
        rank(IDLE, uuids[2], scope, SIM_GPU_MEMORY_MIB="2048")
        # A busy loop gets a full core on an idle host and a share of one on a loaded one: wait
        # until both have been seen computing (CPU activity well above the idle threshold of 5 %).
        deadline = time.monotonic() + 60
        while True:
            busy, kernels, idle = (_reading(nvml, i) for i in range(3))
            if (busy[0] >= 10 and kernels[0] >= 10) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert busy[0] >= 10 and busy[1] == busy[0], busy  # SM activity follows utilization
        assert kernels[0] >= 10 and kernels[1] == 5.0 and kernels[2] == 30000, kernels  # busy kernels, idle SMs
        assert idle[0] < 5 and idle[1] < 5 and idle[2] == 2048, idle  # allocated but idle
        # a GPU nobody uses keeps the machine file's reading
        assert nvml.labgang_activity(nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(5))) is None
        assert nvml.nvmlDeviceGetUtilizationRates(nvml.nvmlDeviceGetHandleByIndex(5)).gpu == 0
    finally:
        nvml.nvmlShutdown()


def test_a_declared_value_out_of_range_is_ignored(rank) -> None:
    scope = f"test-{uuid.uuid4()}"
    nvml = SimulatedNvml.from_file(H100, scope=scope)
    nvml.nvmlInit()
    try:
        device = nvml.nvmlDeviceGetUUID(nvml.nvmlDeviceGetHandleByIndex(0))
        rank(IDLE, device, scope, SIM_GPU_UTIL_PCT="250", SIM_GPU_SM_ACTIVE_PCT="nan")
        deadline = time.monotonic() + 30
        while nvml.nvmlDeviceGetCount() and nvml.labgang_activity(device) is None:
            assert time.monotonic() < deadline, "the rank never showed up on its device"
            time.sleep(0.2)
        activity = nvml.labgang_activity(device)
        assert activity is not None and activity.util_pct < 5 and activity.sm_active_pct == activity.util_pct
        assert pynvml.NVML_SUCCESS == 0  # pynvml is the real module the backend mirrors
    finally:
        nvml.nvmlShutdown()
