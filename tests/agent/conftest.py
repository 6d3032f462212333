"""Fixtures for the NVML inventory tests: simulated backends on a virtual clock."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

import pytest

from labgang.agent.nvml.formats import machine_from_text
from labgang.agent.nvml.simulated import SimulatedNvml

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
def make_sim() -> Iterator[Callable[..., SimulatedNvml]]:
    """Build an initialised SimulatedNvml (virtual clock) from a file path or from TOML/capture text.

    Usage: ``make_sim(path)`` or ``make_sim(text=..., scan_processes=False)``.
    Every backend made is shut down at teardown.
    """
    made: list[SimulatedNvml] = []

    def make(path: str | Path | None = None, *, text: str | None = None, scan_processes: bool = False) -> SimulatedNvml:
        if path is not None:
            backend = SimulatedNvml.from_file(path, virtual_time=True, scan_processes=scan_processes)
        else:
            assert text is not None
            backend = SimulatedNvml(machine_from_text(text, "test.toml"), virtual_time=True,
                                    scan_processes=scan_processes)
        backend.nvmlInit()
        made.append(backend)
        return backend

    yield make
    for backend in made:
        while backend._init_count > 0:
            backend.nvmlShutdown()
