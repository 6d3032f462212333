"""A real ``labgang coordinator`` subprocess on a temporary state directory, for the CLI tests that
run commands against one (no agent joins: every job stays pending)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path


def running_coordinator(
    tmp_path: Path, limits: str, entry: tuple[str, ...] = ("-m", "labgang.launcher")
) -> Iterator[str]:
    """Start ``labgang coordinator`` with one queue and ``limits`` (TOML); yield its state dir.
    ``entry``: how the interpreter runs ``labgang`` (another ``-c`` program: a patched coordinator)."""
    yield from coordinator_process(tmp_path, limits + '[[queues]]\nname = "default"\nnominal = { gpu = 8 }\n', entry)


def coordinator_process(
    tmp_path: Path, config: str, entry: tuple[str, ...] = ("-m", "labgang.launcher")
) -> Iterator[str]:
    """Start ``labgang coordinator`` (no agent: jobs stay pending) with ``config`` as cluster.toml on
    ``tmp_path/state`` (kept across calls: a second one is a restart); yield the state dir once it listens."""
    cfg = tmp_path / "cluster.toml"
    cfg.write_text(config)
    state = tmp_path / "state"
    (state / "labgang.sock").unlink(missing_ok=True)
    proc = subprocess.Popen(
        [sys.executable, *entry, "coordinator", "--config", str(cfg), "--state-dir", str(state)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not (state / "labgang.sock").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the coordinator did not start"
            time.sleep(0.05)
        yield str(state)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
