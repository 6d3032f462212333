"""``--state-dir`` (or ``LABGANG_STATE_DIR``) naming the coordinator's socket instead of the folder that
holds it: one line saying so for every client command, on the fast path and on click's, never the
``NotADirectoryError`` traceback a new user met."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

COMMANDS = (["queue"], ["queues"], ["logs", "1"], ["cancel", "1"], ["hold", "1"], ["nodes"], ["drain", "n1", "-r", "x"])
CLICK = "from labgang.launcher.cli.main import main; main()"


@pytest.mark.parametrize("entry", ["fast", "click"])
@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: args[0])
def test_a_state_dir_that_is_the_socket_is_one_line(entry: str, args: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="lgsock", dir="/tmp") as folder:
        path = Path(folder) / "labgang.sock"
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(str(path))
        try:
            argv = [sys.executable, "-m", "labgang.launcher"] if entry == "fast" else [sys.executable, "-c", CLICK]
            env = {**os.environ, "LABGANG_STATE_DIR": str(path)}
            done = subprocess.run([*argv, *args], capture_output=True, text=True, timeout=60, env=env, check=False)
        finally:
            listener.close()
    assert done.returncode == 1, done
    assert done.stderr == (
        f"labgang {args[0]}: cannot reach the labgang coordinator at {path}/labgang.sock: {path} is not a "
        "directory (--state-dir and LABGANG_STATE_DIR name the folder that holds labgang.sock)\n"
    ), done.stderr
