"""``labgang up --tcp-host`` that this machine cannot listen on: one line naming the flag and what is
allowed, exit 2, before anything is made in the state directory (it gave a raw errno, exit 1, and
left the store and a stale socket behind)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from up_harness import REPO

ALLOWED = "allowed: an address or host name of this machine, such as 127.0.0.1, 0.0.0.0 or its own IP"


def up(state_dir: Path, host: str) -> subprocess.CompletedProcess[str]:
    machine = str(REPO / "config" / "sim" / "h100x8.toml")
    return subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "up", "--simulate", machine, "--tcp-host", host],
        cwd=REPO,
        env={**os.environ, "LABGANG_STATE_DIR": str(state_dir)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.parametrize("host", ["999.1.1.1"])  # a new user's typo: not an IPv4 address, so a name to look up
def test_a_tcp_host_that_does_not_resolve_is_one_line_and_makes_nothing(tmp_path: Path, host: str) -> None:
    state_dir = tmp_path / "state"
    state_dir.mkdir()  # as `mktemp -d` leaves it: what was there must stay as it was
    done = up(state_dir, host)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith(f"labgang up: --tcp-host: {host!r} does not resolve ("), done.stderr
    assert done.stderr.endswith(f"); {ALLOWED}\n") and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == "" and list(state_dir.iterdir()) == []


def test_an_address_of_another_machine_is_one_line_and_makes_nothing(tmp_path: Path) -> None:
    host = "192.0.2.1"  # TEST-NET-1 (RFC 5737): no machine has it
    state_dir = tmp_path / "state"
    state_dir.mkdir()
    done = up(state_dir, host)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.startswith(f"labgang up: --tcp-host: {host!r}: this machine cannot listen on {host} ("), done
    assert done.stderr.endswith(f"); {ALLOWED}\n") and done.stderr.count("\n") == 1, done.stderr
    assert done.stdout == "" and list(state_dir.iterdir()) == []
