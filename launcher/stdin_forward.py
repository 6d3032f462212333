"""What ``labgang run`` gives rank 0 as standard input: its own, when that is a pipe, a socket or
a file, streamed as the rank reads it (``yes | head -c 10M | labgang run -- wc -c``), whatever its
size; a terminal or ``/dev/null`` is not forwarded (rank 0 reads ``/dev/null``).

:class:`StdinStreamer` is a thread that reads standard input in chunks and posts each to the
coordinator (``POST /v1/jobs/{id}/stdin``) until rank 0 has taken all of it, then the end of input,
which rank 0 reads as end-of-file. Backpressure: a chunk is read only once the previous one was
taken, and the coordinator takes only what the rank's input FIFO holds
(``agent/supervisor/stdinrelay.py``), so a slow reader blocks the producer (``yes``) and nothing
piles up in memory anywhere. Input sent before rank 0 runs is kept and sent once it does. A rank
that closes its standard input early, or ends, stops the stream (the producer then sees its pipe
closed, as with a local ``yes | head``). Only the first attempt's rank 0 gets the stream: a
restarted job's rank 0 reads ``/dev/null``.

Standard library only: ``run`` takes the CLI's fast path (docs/cli-startup.md).
"""

from __future__ import annotations

import os
import select
import stat
import sys
import threading

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from labgang.launcher.api.client import Client

MAX_STDIN_BYTES = 256 * 1024
"""The most standard input the API's ``stdin`` field carries whole in a submission (the agent's
``agent/supervisor/spec.py`` checks the same number; the agent imports nothing of the launcher).
``labgang run`` streams instead (:class:`StdinStreamer`), without a limit."""

CHUNK_BYTES = 128 * 1024
"""Bytes of standard input one ``POST /v1/jobs/{id}/stdin`` carries at most."""

_RETRY_S = (0.002, 0.1)
"""The first and the longest wait before sending again what rank 0 did not take yet."""

_NOT_RUNNING_S = (0.05, 1.0)
"""The first and the longest wait before asking again while rank 0 does not run yet."""


def streams_stdin(fd: int = 0) -> bool:
    """True when ``fd`` is a pipe, a socket or a regular file (``labgang run`` streams it to rank 0);
    False for a terminal, ``/dev/null`` or a closed descriptor."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)


class StdinStreamer:
    """A thread that streams ``fd`` to rank 0 of ``job_id`` (a job submitted with ``stdin_stream``).

    Use as a context manager around following the job: entering starts the thread, leaving stops
    it (what was not sent by then is dropped: the job has ended).

    Args:
        state_dir: the labgang instance (None: the default one). job_id: the job. fd: the input.
        chunk: bytes read and sent at a time.
    """

    def __init__(self, state_dir: str | Path | None, job_id: str, fd: int = 0, chunk: int = CHUNK_BYTES) -> None:
        self.state_dir = state_dir
        self.job_id = job_id
        self.fd = fd
        self.chunk = chunk
        self.sent = 0
        self.ended = False  # the end of input was taken
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="labgang-stdin", daemon=True)

    def __enter__(self) -> StdinStreamer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        from labgang.launcher.api.client import ApiError, Client, ClientError, CoordinatorUnavailable

        try:
            with Client.for_state_dir(self.state_dir) as client:
                self._stream(client)
        except ApiError as err:
            print(f"labgang run: standard input not sent: {err.message}", file=sys.stderr)
        except CoordinatorUnavailable as err:
            if not self._stop.is_set():  # labgang went away while a chunk was sent: rank 0 may or may not have it
                print(f"labgang run: standard input stopped after {self.sent} bytes: {err}", file=sys.stderr)
        except ClientError:
            pass  # labgang stopped: the follower says so

    def _read(self) -> bytes | None:
        """The next chunk of input (b"" at its end), or None once asked to stop."""
        while not self._stop.is_set():
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    return os.read(self.fd, self.chunk)
                except OSError:
                    return b""
        return None

    def _stream(self, client: Client) -> None:
        while True:
            data = self._read()
            if data is None:
                return
            eof = not data
            if not self._send(client, data, eof) or eof:
                return

    def _send(self, client: Client, data: bytes, eof: bool) -> bool:
        """Send ``data`` (and with ``eof`` the end) until all is taken; False once nothing reads it
        or the stream is stopped."""
        from labgang.launcher.api.client import ApiError, CoordinatorUnavailable, never_delivered

        wait = _RETRY_S[0]
        not_yet = _NOT_RUNNING_S[0]
        view = memoryview(data)
        while not self._stop.is_set():
            try:
                taken, eof_taken, is_open = client.stdin_input(self.job_id, bytes(view), eof)
            except CoordinatorUnavailable as err:
                if not never_delivered(err):
                    raise  # cut after it was sent: sending it again could give rank 0 those bytes twice
                # labgang went away: the follower waits for it to come back (a `labgang up` started again
                # re-adopts rank 0, whose shim still reads its input) or says it stopped, which stops this
                client.close()
                self._stop.wait(_NOT_RUNNING_S[0] * 4)
                continue
            except ApiError as err:
                if err.status == 409 and err.field == "state":  # rank 0 does not run yet: keep it for later
                    self._stop.wait(not_yet)
                    not_yet = min(not_yet * 2, _NOT_RUNNING_S[1])  # a job pending for hours: 1 request/s
                    continue
                raise
            if not is_open:
                return False
            self.sent += taken
            view = view[taken:]
            if not view and (eof_taken or not eof):
                self.ended = eof_taken
                return True
            wait = _RETRY_S[0] if taken else min(wait * 2, _RETRY_S[1])
            self._stop.wait(wait)
        return False
