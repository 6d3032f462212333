"""What ``labgang run`` gives rank 0 as its standard input: its own, when that is a pipe or a
file, read to its end before the job is submitted (``echo hello | labgang run -- cat``), at most
:data:`MAX_STDIN_BYTES`. Standard library only: ``run`` takes the CLI's fast path
(docs/cli-startup.md).
"""

from __future__ import annotations

import os
import stat

MAX_STDIN_BYTES = 256 * 1024
"""The most standard input ``labgang run`` forwards to rank 0; the agent's
``agent/supervisor/spec.py`` checks the same number (the agent imports nothing of the launcher)."""


class StdinTooLarge(ValueError):
    """More than :data:`MAX_STDIN_BYTES` bytes on standard input; the message says what to do instead."""


def forwarded_stdin(fd: int = 0) -> bytes | None:
    """All of ``fd`` when it is a pipe or a regular file; None for a terminal, ``/dev/null`` or
    anything else (rank 0 then reads ``/dev/null``). Not streamed: an input that never ends keeps
    ``run`` waiting (give it ``< /dev/null``).

    Raises:
        StdinTooLarge: more than :data:`MAX_STDIN_BYTES` bytes.
    """
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode)):
        return None
    chunks, size = [], 0
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
        size += len(chunk)
        if size > MAX_STDIN_BYTES:
            raise StdinTooLarge(
                f"standard input: more than {MAX_STDIN_BYTES} bytes; `labgang run` forwards at most that much to "
                "rank 0 (give the job a file to read instead, or run it with < /dev/null)"
            )
    return b"".join(chunks)
