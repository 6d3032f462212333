"""The simulate engine's speed work changes no decision: every scenario kept under tests/ and
four seeded varied histories (gangs, arrays, priorities, preemption, dependencies, cohorts,
strict FIFO with a starvation reservation) give exactly the per-job admit and end times, waits,
preemptions, cycle count and whole trace recorded in tests/fixtures/engine-digest.json, which
was written by the engine before that work (commit 0fcf995, see tests/fixtures/SOURCES.md)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from engine_digest import digest, scenario_files, varied_history

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = json.loads((ROOT / "tests/fixtures/engine-digest.json").read_text())


def _compare(name: str, got: dict) -> None:
    want = GOLDEN[name]
    diff = [j for j in want["jobs"] if want["jobs"][j] != got["jobs"].get(j)]
    shown = [(j, want["jobs"][j], got["jobs"].get(j)) for j in diff[:3]]
    assert not diff, f"{name}: {len(diff)} jobs changed, first (id, before, now): {shown}"
    assert got["jobs"].keys() == want["jobs"].keys()
    assert (got["cycles"], got["events"]) == (want["cycles"], want["events"])
    assert got["trace_sha256"] == want["trace_sha256"], f"{name}: same outcomes but a different trace"


def test_golden_covers_every_kept_scenario() -> None:
    assert set(scenario_files()) | {f"varied-{s}" for s in (1, 2, 3, 4)} == set(GOLDEN)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_varied_history_unchanged(seed: int) -> None:
    _compare(f"varied-{seed}", digest(varied_history(seed)))


def test_kept_scenarios_unchanged() -> None:
    for path in scenario_files():
        _compare(path, digest(tomllib.loads((ROOT / path).read_text()), path))
