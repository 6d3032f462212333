"""Every project scenario (tests/fixtures/scenarios and its peers/ subfolder) passes, in-process and via the CLI.

The files are the repository's copies (origins in tests/fixtures/SOURCES.md); a design folder
beside the checkout may add extra ones (see tests/fixture_files.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fixture_files import FIXTURES, fixture_files, repository_files
from labgang.launcher.simulate import load_scenario, run_scenario

# The project's own scenario files: 10 at the top level and 14 translated peers' tests.
TOP_LEVEL, PEERS = 10, 14
_FILES = fixture_files("scenarios", "*.toml") + fixture_files("scenarios", "peers/*.toml")


def _case_id(path: Path) -> str:
    """``peers/01-….toml`` for a repository file; ``extra:…`` for one a design folder adds."""
    root = FIXTURES / "scenarios"
    return str(path.relative_to(root)) if path.is_relative_to(root) else f"extra:{path.parent.name}/{path.name}"


def test_every_project_scenario_is_in_the_set():
    top, peers = repository_files("scenarios", "*.toml"), repository_files("scenarios", "peers/*.toml")
    assert (len(top), len(peers)) == (TOP_LEVEL, PEERS)
    assert set(top) | set(peers) <= set(_FILES)


@pytest.mark.parametrize("path", _FILES, ids=_case_id)
def test_shared_scenario(path: Path):
    report = run_scenario(load_scenario(path))
    assert report.ok, "\n".join(report.failures)
    assert report.checked == len(report.scenario.file.expect)


def test_shared_scenarios_through_the_cli():
    files = [str(p) for p in _FILES]
    proc = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "simulate", *files], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.count("PASS ") == len(files)
