"""``labgang run``'s standard input, streamed to rank 0 with backpressure (docs/slurm.md, "stdin").

The way in: the CLI posts chunks to the coordinator (``POST /v1/jobs/{id}/stdin``), which hands
each to the agent of rank 0's node (command ``stdin_input``); the agent writes it as frames into
the FIFO ``stdin.in`` of the rank's folder (:func:`feed`), and the rank's small parent copies the
frames' bytes into the pipe that is the rank's standard input (:class:`StdinPump`).

Backpressure: the FIFO is never written blocking. :func:`feed` writes whole frames of at most
``PIPE_BUF`` bytes (each written entirely or not at all) until the FIFO is full and answers how
many bytes it took; the caller sends the rest again later. The small parent reads the FIFO only
while it holds less than :data:`PUMP_HIGH_BYTES` not yet written to the rank, so a rank that
reads slowly fills its pipe, then the parent's buffer, then the FIFO, and the CLI stops reading
its own standard input (``yes | labgang run -- slow`` blocks ``yes``).

End of input: an ``E`` frame, written once every byte before it was taken; the parent closes the
rank's pipe once it has written everything before it, so the rank reads end-of-file. A rank that
closes its standard input early (``head -c 10``) makes the parent drop what is left and every later
byte (as a closed pipe would), so the sender never waits for it.

A frame is one type byte (``D`` data, ``E`` end of input), a 2-byte big-endian length and that
many bytes (the ``pty.in`` frames' form, ``shim.pty_frames``). Standard library only: the small
parent imports this file from beside itself (it runs outside the package, ``python -I -S``).
"""

from __future__ import annotations

import errno
import fcntl
import os

STDIN_IN = "stdin.in"
"""The FIFO in a streamed rank's folder that carries its standard input frames."""

FRAME_DATA_MAX = 4096 - 3
"""Data bytes in one frame: a frame (3 header bytes + data) is at most ``PIPE_BUF``, so a write of
it to the FIFO is atomic: all of it or, when the FIFO is full, none (``EAGAIN``)."""

FIFO_BYTES = 1 << 20
"""The size the small parent asks for the FIFO (``F_SETPIPE_SZ``; the kernel's default is 64 KiB)."""

PUMP_HIGH_BYTES = 1 << 20
"""The most bytes the small parent holds for the rank before it stops reading the FIFO."""

_F_SETPIPE_SZ = getattr(fcntl, "F_SETPIPE_SZ", 1031)
_READ_CHUNK = 65536


def feed(fifo: str | os.PathLike[str], data: bytes, eof: bool) -> tuple[int, bool, bool]:
    """Write ``data`` (then, with ``eof``, the end of input) into a rank's ``stdin.in`` FIFO,
    without blocking.

    Args:
        fifo: the FIFO's path. data: bytes for the rank's standard input. eof: end the input after them.

    Returns:
        ``(taken, eof_taken, open)``: how many leading bytes of ``data`` were taken (the rest must
        be sent again); whether the end of input was (only once all of ``data`` was); False for
        ``open`` when no small parent reads the FIFO any more (the rank is gone: nothing is taken).
    """
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
    except OSError:  # ENXIO: no reader, the small parent is gone; ENOENT: the folder is gone
        return 0, False, False
    taken = 0
    try:
        while taken < len(data):
            chunk = data[taken : taken + FRAME_DATA_MAX]
            try:
                os.write(fd, b"D" + len(chunk).to_bytes(2, "big") + chunk)
            except BlockingIOError:
                return taken, False, True
            taken += len(chunk)
        if not eof:
            return taken, False, True
        try:
            os.write(fd, b"E\x00\x00")
        except BlockingIOError:
            return taken, False, True
        return taken, True, True
    except OSError as exc:  # EPIPE: the reader went away between open and write
        if exc.errno != errno.EPIPE:
            raise
        return taken, False, False
    finally:
        os.close(fd)


class StdinPump:
    """The small parent's side: the FIFO's frames into the pipe that is the rank's standard input.

    ``child_end`` is the pipe's read end, for ``Popen(stdin=...)`` (close it here once the rank
    has started: :meth:`started`). Each turn of the small parent's loop selects
    :meth:`read_fds` for reading and :meth:`write_fds` for writing and passes what was ready to
    :meth:`step`. Never blocks; never raises for the rank's doing (a closed pipe drops the input).

    Args:
        fifo: the ``stdin.in`` FIFO's path (opened read-write, so that it never reads end-of-file
            between the agent's writes).
    """

    def __init__(self, fifo: str) -> None:
        self.fifo: int | None = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
        try:
            fcntl.fcntl(self.fifo, _F_SETPIPE_SZ, FIFO_BYTES)
        except OSError:  # above /proc/sys/fs/pipe-max-size for this user: the default size still works
            pass
        self.child_end, pipe = os.pipe()
        os.set_blocking(pipe, False)
        self.pipe: int | None = pipe
        self.buffer = bytearray()
        self.partial = b""  # an incomplete frame read from the FIFO
        self.ended = False  # the end-of-input frame was read
        self.dropped = 0  # bytes thrown away once the rank closed its standard input

    def started(self) -> None:
        """The rank has started with ``child_end`` as its standard input: close this copy of it."""
        os.close(self.child_end)

    def read_fds(self) -> list[int]:
        """The FIFO, while the input has not ended and less than :data:`PUMP_HIGH_BYTES` wait."""
        if self.fifo is None or self.ended or len(self.buffer) >= PUMP_HIGH_BYTES:
            return []
        return [self.fifo]

    def write_fds(self) -> list[int]:
        """The rank's pipe, while bytes wait for it."""
        return [self.pipe] if self.pipe is not None and self.buffer else []

    def step(self, readable: list[int], writable: list[int]) -> None:
        """Take what the FIFO holds (when ``readable`` has it) and write to the rank what its pipe
        takes (when ``writable`` has it); close the pipe after the end of input."""
        if self.fifo is not None and self.fifo in readable:
            try:
                self._frames(os.read(self.fifo, _READ_CHUNK))
            except BlockingIOError:
                pass
        if self.pipe is not None and self.pipe in writable and self.buffer:
            try:
                written = os.write(self.pipe, self.buffer)
                del self.buffer[:written]
            except BlockingIOError:
                pass
            except OSError:  # EPIPE: the rank closed its standard input; later bytes go nowhere
                self._close_pipe()
        if self.ended and not self.buffer:
            self._close_pipe()
            if self.fifo is not None:
                os.close(self.fifo)
                self.fifo = None

    def _frames(self, data: bytes) -> None:
        buf = self.partial + data
        while len(buf) >= 3:
            size = int.from_bytes(buf[1:3], "big")
            if len(buf) < 3 + size:
                break
            kind, body, buf = buf[:1], buf[3 : 3 + size], buf[3 + size :]
            if kind == b"E":
                self.ended = True
            elif self.pipe is None:
                self.dropped += len(body)
            else:
                self.buffer += body
        self.partial = buf

    def _close_pipe(self) -> None:
        if self.pipe is not None:
            os.close(self.pipe)
            self.pipe = None
        self.dropped += len(self.buffer)
        self.buffer.clear()
