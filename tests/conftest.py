"""Shared pytest fixtures for labgang's tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("LABGANG_SHARED", REPO.parent / "shared"))


@pytest.fixture(scope="session")
def repo_root() -> Path:
    """The repository root."""
    return REPO


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The project's shared folder (scenarios, real GPU captures) beside the checkout."""
    if not SHARED.is_dir():
        pytest.fail(f"shared folder not found at {SHARED}; set LABGANG_SHARED")
    return SHARED
