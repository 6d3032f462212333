"""Helpers shared by the ops tests."""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from unix_users import UserShell, point_system_instance
from up_harness import Up


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


@pytest.fixture(scope="module")
def system(lab_users: list[UserShell]) -> Iterator[Up]:
    """Root's ``labgang up --simulate h100x8`` in a state directory every user may reach, and the users'
    interpreter pointed at it (as ``/etc/labgang/system.toml`` would): the machine's system instance,
    for the tests with real Unix users (``lab_users``)."""
    base = Path(tempfile.mkdtemp(prefix="lgsys", dir="/tmp"))
    base.chmod(0o755)
    state = base / "state"
    state.mkdir()
    up = Up(state)
    config = point_system_instance(lab_users[0].python, state)
    try:
        yield up
    finally:
        config.unlink(missing_ok=True)
        if up.proc is not None and up.proc.poll() is None:
            up.stop()
        if up.proc is not None and up.proc.poll() is None:
            os.killpg(up.proc.pid, signal.SIGKILL)
        subprocess.run(["rm", "-rf", str(base)], check=False)
