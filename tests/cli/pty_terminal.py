"""``labgang run --pty`` on a real pseudo-terminal against a real ``labgang up`` (:class:`Terminal`), for the
end-to-end tests under ``tests/cli/`` that type into a rank's terminal."""

from __future__ import annotations

import fcntl
import os
import select
import struct
import subprocess
import sys
import termios
import time
from typing import Any

from up_harness import REPO, Up


class Terminal:
    """`labgang run --pty ARGS` on a pseudo-terminal of ROWS x COLS; what it printed so far.

    By default run as this test's user with ``up``'s environment from the repository; ``python``,
    ``cwd``, ``env`` and Popen's ``user``/``group``/``extra_groups`` (``popen``) start it otherwise
    (as another Unix user: tests/cli/test_pty_real_user.py).
    """

    def __init__(
        self,
        up: Up,
        *args: str,
        rows: int = 33,
        cols: int = 101,
        python: str | os.PathLike[str] = sys.executable,
        cwd: str | os.PathLike[str] = REPO,
        env: dict[str, str] | None = None,
        **popen: Any,
    ) -> None:
        self.master, slave = os.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        self.proc = subprocess.Popen(
            [str(python), "-m", "labgang.launcher", "run", "--pty", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            cwd=cwd,
            env=up.env if env is None else env,
            start_new_session=True,
            **popen,
        )
        os.close(slave)
        self.seen = b""

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def read_until(self, wanted: bytes, timeout: float = 60.0) -> bytes:
        deadline = time.monotonic() + timeout
        while wanted not in self.seen:
            assert time.monotonic() < deadline, f"never saw {wanted!r}; saw {self.seen!r}"
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if ready:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:  # EIO: labgang run closed the terminal (it exited)
                    break
        return self.seen

    def finish(self, timeout: float = 60.0) -> int:
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None:
            assert time.monotonic() < deadline, f"labgang run --pty did not end; saw {self.seen!r}"
            time.sleep(0.05)
            ready, _, _ = select.select([self.master], [], [], 0)
            if ready:
                try:
                    self.seen += os.read(self.master, 65536)
                except OSError:
                    pass
        os.close(self.master)
        return self.proc.returncode
