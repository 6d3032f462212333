"""Fixtures for the NVML inventory tests: simulated backends on a virtual clock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from labgang.agent.nvml.formats import machine_from_text
from labgang.agent.nvml.recorder import ReplayNvml
from labgang.agent.nvml.simulated import SCOPE_VARIABLE, SimulatedNvml

REPO = Path(__file__).resolve().parents[2]
SIM_DIR = REPO / "config" / "sim"
NVML_FIXTURES = REPO / "tests" / "fixtures" / "nvml"


@pytest.fixture
def sim_dir() -> Path:
    """``config/sim`` with the shipped machine files."""
    return SIM_DIR


@pytest.fixture
def real_gpus(shared_dir: Path) -> Path:
    """The real nvidia-smi captures in ``shared/fixtures/real-gpus``."""
    return shared_dir / "fixtures" / "real-gpus"


@pytest.fixture
def make_sim() -> Iterator[Callable[..., SimulatedNvml | ReplayNvml]]:
    """Build an initialised SimulatedNvml (virtual clock) from a file path or from TOML/capture text.

    Usage: ``make_sim(path)`` or ``make_sim(text=..., scan_processes=False)``.
    Every backend made is shut down at teardown.
    """
    made: list[SimulatedNvml | ReplayNvml] = []  # a recorder JSON file gives a replay

    def make(
        path: str | Path | None = None, *, text: str | None = None, scan_processes: bool = False
    ) -> SimulatedNvml | ReplayNvml:
        if path is not None:
            backend = SimulatedNvml.from_file(path, virtual_time=True, scan_processes=scan_processes)
        else:
            assert text is not None
            backend = SimulatedNvml(
                machine_from_text(text, "test.toml"), virtual_time=True, scan_processes=scan_processes
            )
        backend.nvmlInit()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        while backend._init_count > 0:
            backend.nvmlShutdown()


@pytest.fixture
def sleeper() -> Iterator[Callable[..., int]]:
    """Start sleeping processes with a given ``CUDA_VISIBLE_DEVICES`` and, optionally, a
    ``LABGANG_SIM_SCOPE`` (never the one this test run may have inherited); all are killed at
    teardown. ``sleeper(cvd, scope=None) -> pid``."""
    procs: list[subprocess.Popen] = []

    def start(cvd: str, scope: str | None = None) -> int:
        env = {k: v for k, v in os.environ.items() if k != SCOPE_VARIABLE}
        env["CUDA_VISIBLE_DEVICES"] = cvd
        if scope is not None:
            env[SCOPE_VARIABLE] = scope
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
        procs.append(proc)
        return proc.pid

    yield start
    for proc in procs:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
