"""A second ``labgang up`` on a state directory a running one serves is refused in one line that says
what to do (use that one, stop it, or pass ``--state-dir``), and leaves the first one undisturbed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from up_harness import H100X8, REPO, Up


def test_a_second_up_on_a_served_state_dir_says_what_to_do_and_disturbs_nothing() -> None:
    with tempfile.TemporaryDirectory(prefix="lgsecond", dir="/tmp") as d:
        up = Up(Path(d))
        try:
            assert up.proc is not None
            second = subprocess.run(
                [sys.executable, "-m", "labgang.launcher", "up", "--simulate", str(H100X8)],
                cwd=REPO,
                env=up.env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            assert second.returncode == 1, (second.stdout, second.stderr)
            (line,) = second.stderr.strip().splitlines()
            assert line.startswith(f"labgang up: a labgang already serves {d} (pid {up.proc.pid}); use it"), line
            assert f"kill -INT {up.proc.pid}" in line and "--state-dir DIR" in line, line
            # the stop it names works from any shell: LABGANG_STATE_DIR=... labgang down
            assert f"stop it (LABGANG_STATE_DIR={d} labgang down, Ctrl-C in its terminal" in line, line
            assert up.proc.poll() is None and up.cli("queues").returncode == 0  # the first one serves on
            assert not (Path(d) / "up.starting").exists()  # nor was its start marker touched
        finally:
            if up.proc is not None and up.proc.poll() is None:
                up.stop()
            if up.proc is not None and up.proc.poll() is None:
                os.killpg(up.proc.pid, signal.SIGKILL)
