"""Helpers shared by the ops tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest


def service_section(unit: Path) -> dict[str, list[str]]:
    """The ``[Service]`` section of a systemd unit file: key → values (a key may repeat)."""
    section: str | None = None
    keys: dict[str, list[str]] = {}
    for raw in unit.read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            section = line
            continue
        if section == "[Service]":
            key, _, value = line.partition("=")
            keys.setdefault(key, []).append(value)
    return keys


@pytest.fixture(scope="session")
def unit_service() -> Callable[[Path], dict[str, list[str]]]:
    """:func:`service_section`, for tests that read the units."""
    return service_section
