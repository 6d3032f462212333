"""The journal writer (``agent/supervisor/writer.py``): writes off the caller's thread, in order, and
never behind a signal or a report that depends on them."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path

import pytest
from labgang.agent.supervisor import RankState, Supervisor
from labgang.agent.supervisor.hostos import HostOS
from labgang.agent.supervisor.writer import InlineWriter, ThreadWriter


def test_writes_and_steps_run_in_the_order_asked(tmp_path: Path) -> None:
    writer = ThreadWriter()
    path = tmp_path / "state.json"
    seen: list[int] = []
    gate = threading.Event()
    try:
        writer.then(gate.wait)  # hold the thread: everything below is queued behind it
        for n in range(50):
            writer.write(path, {"n": n})
            writer.then(lambda: seen.append(json.loads(path.read_text())["n"]))
        written = writer.written()
        assert not written.done() and not path.exists()  # the caller did not wait on the disk
        gate.set()
        written.result(timeout=10)
        assert seen == list(range(50))  # each step saw the write queued just before it, never an older one
        assert json.loads(path.read_text()) == {"n": 49}
    finally:
        gate.set()
        writer.close()


def test_a_waiter_that_gave_up_does_not_stop_the_writer(tmp_path: Path) -> None:
    """The agent awaits ``written()`` through ``asyncio.wrap_future``; a task cancelled there (at
    shutdown) cancels the future. The writer thread then died on InvalidStateError, and every later
    ``flush()`` (``labgang up`` stopping) waited forever."""
    writer = ThreadWriter()
    path = tmp_path / "state.json"
    gate = threading.Event()
    try:
        writer.then(gate.wait)
        abandoned = writer.written()
        assert abandoned.cancel()
        writer.write(path, {"after": True})
        gate.set()
        writer.written().result(timeout=10)  # raised TimeoutError: the thread had died
        assert json.loads(path.read_text()) == {"after": True}
    finally:
        gate.set()
        writer.close()


def test_the_data_is_taken_as_it_was_when_the_write_was_asked(tmp_path: Path) -> None:
    writer = ThreadWriter()
    gate = threading.Event()
    data = {"known": {"1": 10}}
    try:
        writer.then(gate.wait)
        writer.write(tmp_path / "state.json", data)
        data["known"]["2"] = 20  # the record changes on the loop after the write was asked
        gate.set()
        writer.flush()
        assert json.loads((tmp_path / "state.json").read_text()) == {"known": {"1": 10}}
    finally:
        gate.set()
        writer.close()


def test_a_failed_write_is_logged_and_the_steps_behind_it_still_run(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer = ThreadWriter()
    ran: list[str] = []
    try:
        with caplog.at_level(logging.ERROR, logger="labgang.agent.supervisor.writer"):
            writer.write(tmp_path / "gone" / "state.json", {"state": "stopping"})  # its folder does not exist
            writer.then(lambda: ran.append("signal"))
            writer.flush()
        assert ran == ["signal"]  # a stop never waits on a full or broken disk
        assert "cannot write" in caplog.text and "state.json" in caplog.text
    finally:
        writer.close()


def test_after_close_writes_happen_at_once(tmp_path: Path) -> None:
    writer = ThreadWriter()
    writer.close()
    writer.write(tmp_path / "late.json", {"a": 1})
    assert json.loads((tmp_path / "late.json").read_text()) == {"a": 1}
    assert writer.written().done()
    inline = InlineWriter()
    inline.write(tmp_path / "now.json", [1])
    assert json.loads((tmp_path / "now.json").read_text()) == [1]


class RecordingHost(HostOS):
    """The real OS seam, noting what ``state.json`` said on disk when each signal went out."""

    def __init__(self, state_file: Path) -> None:
        super().__init__()
        self.state_file = state_file
        self.sent: list[tuple[int, str]] = []

    def killpg(self, pgid: int, signum: int) -> bool:
        self.sent.append((signum, json.loads(self.state_file.read_text())["state"]))
        return super().killpg(pgid, signum)


def test_sigterm_and_sigkill_go_only_once_their_state_is_on_disk(state_dir: Path, make_spec, cleanup, h) -> None:
    """An agent restarted between the signal and the write would not resume the stop: the state goes first."""
    import signal

    state_file = state_dir / "ranks" / "job1" / "0" / "state.json"
    host = RecordingHost(state_file)
    writer = ThreadWriter()
    sup = Supervisor(state_dir, allow_root=True, host_os=host, journal_writer=writer)
    cleanup.append(sup)
    # Ignores SIGTERM, so the stop ends with SIGKILL after the grace.
    sup.launch(make_spec(["sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"], grace=0.3))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    writer.flush()
    gate = threading.Event()
    writer.then(gate.wait)  # a slow disk: the writes below wait behind this
    sup.stop_job("job1")
    assert host.sent == []  # SIGTERM waits for "stopping" to be written
    gate.set()
    sup.journal_written().result(timeout=10)
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    writer.flush()
    assert (signal.SIGTERM, "stopping") in host.sent
    assert (signal.SIGKILL, "killing") in host.sent
    assert all(state in ("stopping", "killing") for _, state in host.sent), host.sent
