"""labgang's own scenarios (tests/scenarios/cases/**/*.toml): one behaviour each, named for it.

``cases/peers-like/`` holds single behaviours from docs/queue-semantics.md in the
shape of the peers' (Kueue, Volcano) test translations, each with its expected outcome
derived by hand in its ``description``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.simulate import load_scenario, run_scenario

CASES = Path(__file__).resolve().parent / "cases"
FILES = sorted(CASES.rglob("*.toml"))


def test_cases_exist():
    assert len([f for f in FILES if f.parent == CASES]) >= 10
    assert len([f for f in FILES if f.parent.name == "peers-like"]) >= 25


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CASES).with_suffix("")) for p in FILES])
def test_scenario(path: Path):
    report = run_scenario(load_scenario(path))
    assert report.ok, "\n".join(report.failures)
    assert report.checked == len(report.scenario.file.expect) > 0
