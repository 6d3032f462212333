"""Peer-style scenarios (tests/scenarios/cases/peers-like/*.toml): single behaviours from
QUEUE-SEMANTICS.md and DESIGN.md, in the shape of the hidden Kueue / Volcano translations,
each with its expected outcome derived by hand in its ``description``."""

from __future__ import annotations

from pathlib import Path

import pytest

from labgang.launcher.simulate import load_scenario, run_scenario

HERE = Path(__file__).resolve().parent
FILES = sorted(HERE.glob("*.toml"))


def test_enough_cases():
    assert len(FILES) >= 25


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_scenario(path: Path):
    report = run_scenario(load_scenario(path))
    assert report.ok, "\n".join(report.failures)
    assert report.checked == len(report.scenario.file.expect) > 0
