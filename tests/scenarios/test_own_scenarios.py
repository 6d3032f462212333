"""labgang's own scenarios (tests/scenarios/cases/*.toml): one behaviour each, named for it."""

from __future__ import annotations

from pathlib import Path

import pytest

from labgang.launcher.simulate import load_scenario, run_scenario

CASES = Path(__file__).resolve().parent / "cases"
FILES = sorted(CASES.glob("*.toml"))


def test_cases_exist():
    assert len(FILES) >= 10


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario(path: Path):
    report = run_scenario(load_scenario(path))
    assert report.ok, "\n".join(report.failures)
    assert report.checked == len(report.scenario.file.expect) > 0
