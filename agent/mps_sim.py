"""A simulated MPS control daemon: ``python -m labgang.agent.mps_sim PIPE_DIR LOG_DIR [UID:GID]``.

Stands in for ``nvidia-cuda-mps-control -d`` where there is no GPU (``agent/mps.py``): it makes
``PIPE_DIR`` with a ``control`` FIFO (where the real daemon has its control socket), writes
``control.log`` in ``LOG_DIR``, prints ``serving`` on standard output once the FIFO exists, and
reads commands from the FIFO until ``quit`` (or SIGTERM); then it removes the FIFO, logs the stop
and exits 0. Other commands are logged and otherwise ignored.

With ``UID:GID`` (the agent runs it as root for another user, who may not be able to run the
agent's interpreter at all), the FIFO, ``control.log`` and both folders are handed to that user,
so only that user's clients reach it, as with the real daemon run as the user.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path


def _log(log_dir: Path, line: str) -> None:
    with open(log_dir / "control.log", "a", encoding="utf-8") as f:
        f.write(f"[{time.strftime('%Y-%m-%d %H:%M:%S')}] {line}\n")


def main(argv: list[str]) -> int:
    """Serve until ``quit``; returns the exit status (2 for a bad command line)."""
    owner: tuple[int, int] | None = None
    if len(argv) == 3:
        uid, sep, gid = argv[2].partition(":")
        if sep and uid.isdigit() and gid.isdigit():
            owner = int(uid), int(gid)
    if len(argv) not in (2, 3) or (len(argv) == 3 and owner is None):
        print("usage: python -m labgang.agent.mps_sim PIPE_DIR LOG_DIR [UID:GID]", file=sys.stderr)
        return 2
    pipe_dir, log_dir = Path(argv[0]), Path(argv[1])
    pipe_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    control = pipe_dir / "control"
    if control.exists():
        control.unlink()
    os.mkfifo(control, 0o600)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    _log(log_dir, f"Starting control daemon using socket {control} (pid {os.getpid()})")
    if owner is not None:
        for path in (pipe_dir, log_dir, control, log_dir / "control.log"):
            os.chown(path, *owner)
    print("serving", flush=True)
    try:
        while True:
            # O_RDWR keeps a writer open, so reads block instead of seeing end-of-file between clients.
            with open(os.open(control, os.O_RDWR), "rb", buffering=0) as fifo:
                for raw in iter(fifo.readline, b""):
                    command = raw.decode(errors="replace").strip()
                    _log(log_dir, f"Accepting command: {command}")
                    if command == "quit":
                        return 0
    finally:
        control.unlink(missing_ok=True)
        _log(log_dir, "Exit")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
