"""``labgang run --pty``: this terminal drives rank 0's pseudo-terminal, as ``srun --pty``.

While the job runs, the terminal is in raw mode (output processing kept, so ``labgang``'s own
lines stay readable): every keystroke, Ctrl-C and Ctrl-Z included, goes to the rank (its
terminal turns them into signals there), in ``POST /v1/jobs/{id}/pty`` requests sent by a thread
of their own; a resized window sends the new size (the rank gets SIGWINCH). The rank's output
comes back as every rank's does: its log, which ``run`` follows. Input typed before rank 0 runs is
kept and sent once it does. The terminal is restored on the way out, whatever happens.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import termios
import threading
import time
import tty
from pathlib import Path
from types import TracebackType
from typing import Any

from labgang.launcher.api.client import ApiError, Client, ClientError, CoordinatorUnavailable, never_delivered


def terminal_size(fd: int) -> tuple[int, int] | None:
    """(rows, cols) of the terminal ``fd``, or None when it is not one or its size is unknown
    (0x0, as under ``script`` or a serial console)."""
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return None
    if size.lines <= 0 or size.columns <= 0:
        return None
    return size.lines, size.columns


class PtySession:
    """Raw mode on this terminal and a thread that sends its input to rank 0 of ``job_id``.

    Args:
        state_dir: the labgang instance (None: the default one). job_id: the ``--pty`` job.
        fd: the terminal (standard input).
    """

    def __init__(self, state_dir: Path | None, job_id: str, fd: int = 0) -> None:
        self.state_dir = state_dir
        self.job_id = job_id
        self.fd = fd
        self._saved: list[Any] | None = None
        self._stop = threading.Event()
        self._resized = threading.Event()
        self._thread = threading.Thread(target=self._pump, name="labgang-pty", daemon=True)
        self._old_winch: Any = None

    def __enter__(self) -> PtySession:
        self._saved = termios.tcgetattr(self.fd)
        tty.setraw(self.fd, termios.TCSANOW)  # not TCSAFLUSH: keep what was typed ahead
        attrs = termios.tcgetattr(self.fd)
        attrs[1] |= termios.OPOST | termios.ONLCR  # our own lines still end in \r\n
        termios.tcsetattr(self.fd, termios.TCSANOW, attrs)
        self._old_winch = signal.signal(signal.SIGWINCH, lambda *_: self._resized.set())
        self._resized.set()  # the first request carries the size
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        if self._old_winch is not None:
            signal.signal(signal.SIGWINCH, self._old_winch)
        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def _pump(self) -> None:
        pending = b""
        with Client.for_state_dir(self.state_dir) as client:
            while not self._stop.is_set():
                ready, _, _ = select.select([self.fd], [], [], 0.05)
                if ready:
                    data = os.read(self.fd, 4096)
                    if not data:
                        break  # the terminal closed
                    pending += data
                if not pending and not self._resized.is_set():
                    continue
                size = terminal_size(self.fd) if self._resized.is_set() else None
                try:
                    taken = client.pty_input(self.job_id, pending, size)
                except ApiError as err:
                    if err.status == 409 and err.field == "state":
                        time.sleep(0.1)  # rank 0 does not run yet (or any more): keep it for later
                        continue
                    print(f"\r\nlabgang run: terminal input not sent: {err.message}\r", file=sys.stderr)
                    return
                except CoordinatorUnavailable as err:
                    if not never_delivered(err):
                        return  # cut after it was sent: typing it again could give rank 0 those keys twice
                    # labgang went away: the follower waits for it to come back (a `labgang up` started
                    # again re-adopts rank 0, whose shim still reads its terminal input) or says it stopped
                    client.close()
                    self._stop.wait(0.2)
                    continue
                except ClientError:
                    return
                if not taken:
                    time.sleep(0.1)  # rank 0's shim does not read (yet): keep input and size for later
                    continue
                pending = b""
                if size is not None:
                    self._resized.clear()
