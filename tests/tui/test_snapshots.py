"""Snapshot tests (pytest-textual-snapshot): fixed terminal size, frozen clock, fake coordinator,
simulated machine without process scanning. Update with ``pytest --snapshot-update`` after
looking at the SVGs in ``__snapshots__``."""

from __future__ import annotations

import pytest
from labgang.agent.nvml.simulated import SimulatedNvml
from labgang.tui.app import make_app
from labgang.tui.sources import LocalSource
from tui_fakes import NOW

SIZE = (160, 50)


async def _loaded(pilot) -> None:
    """Wait for the first fetch (and any log fetch) to land and be painted."""
    app = pilot.app
    await app.workers.wait_for_complete()
    await pilot.pause()
    await app.screen.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.parametrize(
    "keys",
    [(), ("2",), ("3",), ("2", "enter"), ("question_mark",)],
    ids=["devices", "jobs", "queues", "job-detail", "help"],
)
def test_coordinator_views(snap_compare, app, keys):
    async def run_before(pilot) -> None:
        await _loaded(pilot)
        await pilot.press(*keys)
        await _loaded(pilot)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_local_simulated_a100_mig(snap_compare, repo_root):
    backend = SimulatedNvml.from_file(repo_root / "config/sim/a100x8-mig.toml", scan_processes=False, virtual_time=True)
    backend.nvmlInit()
    source = LocalSource(backend, description="simulated a100x8-mig.toml", clock=lambda: NOW)
    app = make_app(source, refresh_s=3600, user="alice")
    assert snap_compare(app, terminal_size=SIZE, run_before=_loaded)
