"""Refusals of a real coordinator, through both CLI paths (the fast path and the click group)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

CLICK_MAIN = "import sys; from labgang.launcher.cli.main import main; sys.argv = ['labgang', *sys.argv[1:]]; main()"


@pytest.fixture
def coordinator(tmp_path: Path) -> Iterator[str]:
    """A real coordinator (no agent: jobs stay pending) on a temporary state directory."""
    cfg = tmp_path / "cluster.toml"
    cfg.write_text('[[queues]]\nname = "default"\nnominal = { gpu = 8 }\n')
    state = tmp_path / "state"
    command = [sys.executable, "-m", "labgang.launcher", "coordinator", "--config", str(cfg), "--state-dir", str(state)]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not (state / "labgang.sock").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the coordinator did not start"
            time.sleep(0.05)
        yield str(state)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def both(state_dir: str, *args: str) -> list[subprocess.CompletedProcess[str]]:
    """``labgang ARGS`` through the fast path, then through the click group only."""
    env = {**os.environ, "LABGANG_STATE_DIR": state_dir}
    return [
        subprocess.run([sys.executable, *pre, *args], capture_output=True, text=True, env=env)
        for pre in (["-m", "labgang.launcher"], ["-c", CLICK_MAIN])
    ]


def listing(state_dir: str) -> list[dict[str, object]]:
    jobs: list[dict[str, object]] = json.loads(both(state_dir, "queue", "--json")[0].stdout)["jobs"]
    return jobs


def test_an_empty_command_is_refused_at_submission_on_both_paths(coordinator: str) -> None:
    for result in both(coordinator, "submit", "--", "", "x"):
        assert (result.returncode, result.stdout) == (2, "")
        assert result.stderr == (
            "labgang submit: argv: the command (argv[0]) is an empty string; it must name a program\n"
        )
    assert listing(coordinator) == []
