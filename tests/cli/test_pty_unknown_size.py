"""`labgang run --pty` on a terminal of size 0x0 (under `script`): the size is unknown, not an
error; input still flows, and the rank's terminal is never 0x0."""

from __future__ import annotations

import asyncio
import base64
import fcntl
import os
import struct
import termios
from types import SimpleNamespace

from labgang.agent.supervisor.shim import DEFAULT_TERMINAL_SIZE, open_terminal
from labgang.launcher.cli.pty_session import terminal_size
from labgang.launcher.coordinator import terminal
from labgang.launcher.lifecycle.states import RankPhase


def _pty_of(rows: int, cols: int) -> tuple[int, int]:
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    return master, slave


def test_a_0x0_terminal_has_no_size_and_a_real_one_has_its_own():
    for (rows, cols), want in (((0, 0), None), ((40, 100), (40, 100))):
        master, slave = _pty_of(rows, cols)
        try:
            assert terminal_size(slave) == want
        finally:
            os.close(master)
            os.close(slave)


def test_the_ranks_terminal_starts_at_24x80_not_0x0():
    master, slave = open_terminal()
    try:
        assert os.get_terminal_size(slave) == os.terminal_size(DEFAULT_TERMINAL_SIZE[::-1])
    finally:
        os.close(master)
        os.close(slave)


class _Agents:
    def __init__(self) -> None:
        self.calls: list[dict] = []

    async def call(self, node: str, op: str, args: dict) -> bool:
        self.calls.append(args)
        return True


def test_a_0x0_size_still_sends_the_input_without_a_size(monkeypatch):
    rank = SimpleNamespace(node="n1", state=RankPhase.RUNNING)
    job = SimpleNamespace(
        id="7",
        run_id="7.1",
        spec=SimpleNamespace(pty=True),
        status=SimpleNamespace(state=SimpleNamespace(holds_devices=True, value="running")),
    )
    monkeypatch.setattr(terminal, "ranks_in_order", lambda job: [rank])
    caller = SimpleNamespace(check_may_act=lambda job, what: None)
    agents = _Agents()
    body = {"data": base64.b64encode(b"ls\r").decode(), "rows": 0, "cols": 0}
    out = asyncio.run(terminal.pty_input(agents, lambda _: job, caller, "7", body))
    assert out == {"taken": True}
    assert agents.calls == [{"job_id": "7.1", "rank": 0, "data": body["data"], "rows": None, "cols": None}]
