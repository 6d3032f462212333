"""The streamed standard input's two ends (agent/supervisor/stdinrelay.py) over a real FIFO and a
real pipe: the agent's non-blocking ``feed`` takes what fits and says so, the small parent's pump
copies frames into the rank's pipe, the end of input closes it, a closed pipe drops the rest."""

from __future__ import annotations

import os
import select

from labgang.agent.supervisor.spec import MAX_STDIN_BYTES as AGENT_MAX
from labgang.agent.supervisor.stdinrelay import PUMP_HIGH_BYTES, StdinPump, feed
from labgang.launcher.stdin_forward import MAX_STDIN_BYTES


def turn(pump: StdinPump) -> None:
    """One turn of the small parent's loop, waiting at most a moment."""
    readable, writable, _ = select.select(pump.read_fds(), pump.write_fds(), [], 0.05)
    pump.step(readable, writable)


def drain(fd: int) -> bytes:
    out = b""
    os.set_blocking(fd, False)
    try:
        while chunk := os.read(fd, 1 << 20):
            out += chunk
    except BlockingIOError:
        pass
    return out


def test_bytes_and_their_end_reach_the_rank_in_order(tmp_path):
    fifo = tmp_path / "stdin.in"
    os.mkfifo(fifo, 0o600)
    pump = StdinPump(str(fifo))
    rank_stdin = os.dup(pump.child_end)
    pump.started()
    data = bytes(range(256)) * 100  # several frames
    assert feed(fifo, data, eof=True) == (len(data), True, True)
    got = b""
    for _ in range(100):
        turn(pump)
        got += drain(rank_stdin)
        if pump.pipe is None:
            break
    got += drain(rank_stdin)
    assert got == data
    os.set_blocking(rank_stdin, True)
    assert os.read(rank_stdin, 1) == b""  # end-of-file: every writer is closed
    os.close(rank_stdin)


def test_a_full_fifo_takes_part_and_the_sender_sends_the_rest_later(tmp_path):
    fifo = tmp_path / "stdin.in"
    os.mkfifo(fifo, 0o600)
    pump = StdinPump(str(fifo))
    rank_stdin = os.dup(pump.child_end)
    pump.started()
    big = os.urandom(8 * PUMP_HIGH_BYTES)
    taken, eof, is_open = feed(fifo, big, eof=True)
    assert is_open and not eof and 0 < taken < len(big)  # the FIFO filled: the rest is the sender's
    sent = taken
    for _ in range(50):  # nobody reads the rank's pipe: the pump fills up, then stops reading the FIFO
        turn(pump)
        more, eof, is_open = feed(fifo, big[sent:], eof=True)
        sent += more
    assert len(pump.buffer) >= PUMP_HIGH_BYTES and pump.read_fds() == []
    assert feed(fifo, big[sent:], eof=True)[0] == 0 and sent < len(big)  # the pipe, buffer and FIFO are full
    got = b""
    for _ in range(10_000):
        got += drain(rank_stdin)
        turn(pump)
        if sent < len(big) or not pump.ended:
            more, eof, is_open = feed(fifo, big[sent:], eof=True)
            sent += more
        if pump.pipe is None:
            break
    got += drain(rank_stdin)
    assert got == big and sent == len(big)
    os.close(rank_stdin)


def test_a_rank_that_closes_its_input_drops_the_rest_and_a_gone_reader_is_said(tmp_path):
    fifo = tmp_path / "stdin.in"
    os.mkfifo(fifo, 0o600)
    pump = StdinPump(str(fifo))
    os.close(pump.child_end)  # the rank closed its standard input (head -c 5 has exited)
    assert feed(fifo, b"x" * 10_000, eof=False)[0] == 10_000
    for _ in range(5):
        turn(pump)
    assert pump.pipe is None and pump.buffer == b"" and pump.dropped == 10_000
    assert feed(fifo, b"y" * 100, eof=True) == (100, True, True)  # still read, and dropped
    for _ in range(5):
        turn(pump)
    assert pump.fifo is None and pump.dropped == 10_100
    assert feed(fifo, b"z", eof=False) == (0, False, False)  # no reader any more: the rank is gone


def test_the_launchers_whole_stdin_bound_is_the_agents():
    assert AGENT_MAX == MAX_STDIN_BYTES
