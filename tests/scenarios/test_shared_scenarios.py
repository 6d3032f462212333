"""Every scenario in the shared folder and its peers/ subfolder passes, in-process and via the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from labgang.launcher.simulate import load_scenario, run_scenario

# collection-time listing of the same folder the shared_dir fixture resolves
_SHARED = Path(os.environ.get("LABGANG_SHARED", Path(__file__).resolve().parents[2].parent / "shared"))
_NAMES = sorted(
    str(p.relative_to(_SHARED / "scenarios"))
    for p in [*(_SHARED / "scenarios").glob("*.toml"), *(_SHARED / "scenarios" / "peers").glob("*.toml")]
)


def test_shared_scenarios_are_present(shared_dir: Path):
    found = list((shared_dir / "scenarios").glob("*.toml")) + list((shared_dir / "scenarios" / "peers").glob("*.toml"))
    assert len(found) == len(_NAMES) and found, "scenario files listed at collection differ from the fixture's"


@pytest.mark.parametrize("name", _NAMES)
def test_shared_scenario(shared_dir: Path, name: str):
    report = run_scenario(load_scenario(shared_dir / "scenarios" / name))
    assert report.ok, "\n".join(report.failures)
    assert report.checked == len(report.scenario.file.expect)


def test_shared_scenarios_through_the_cli(shared_dir: Path):
    files = [str(shared_dir / "scenarios" / n) for n in _NAMES]
    proc = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "simulate", *files], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASS ") == len(files)
