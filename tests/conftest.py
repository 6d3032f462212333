"""Shared pytest fixtures for labgang's tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fixture_files import FIXTURES, REPO  # noqa: E402


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    """``tests/fixtures``: the data files the tests read (real captures, scenario files)."""
    return FIXTURES


@pytest.fixture(scope="session")
def scenario_dir() -> Path:
    """``tests/fixtures/scenarios``: the project's scenario files (``peers/`` below it)."""
    return FIXTURES / "scenarios"
