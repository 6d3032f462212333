"""The small parent's lease watchdog (``shim.LeaseWatch``): a rank whose agent is dead is still
stopped when the node's lease runs out, and a live agent's lease keeps it running.

The lease files here are written by the real ``save_lease`` in a short-lived process that stands
for the agent: once it has exited, the lease's holder is dead, as after an agent's SIGKILL. The
ranks are real processes under real small parents; each writes ``time.monotonic()`` readings
(``CLOCK_MONOTONIC``, the clock of the lease's deadline) when it gets SIGTERM (which it ignores,
as a rank busy with a checkpoint would) and, every few milliseconds, that it is still alive.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from coordinator_end import MACHINE, CoordinatorEnd
from labgang.agent.config import AgentConfig
from labgang.agent.inventory import read_inventory
from labgang.agent.lease import LEASE_FILE, LEASE_SHARE, NodeLease, save_lease
from labgang.agent.nvml import open_backend
from labgang.agent.paths import agent_state_dir
from labgang.agent.service import AgentService
from labgang.agent.supervisor import RankState, Supervisor
from labgang.agent.supervisor.leasewatch import LEASE_CHECK_S, LeaseWatch, read_lease

STUBBORN = """
import os, signal, sys, time
out = sys.argv[1]
def mark(name):
    with open(os.path.join(out, name), 'a') as f:
        f.write('%r\\n' % time.monotonic())
signal.signal(signal.SIGTERM, lambda signum, frame: mark('term'))
while True:
    mark('alive')
    time.sleep(0.02)
"""


def save_lease_and_exit(agent_dir: Path, node_timeout_s: float, confirmed_ago: float) -> float:
    """Save a lease the way the agent does, from a process that then exits (a dead holder).

    Returns:
        The lease's deadline on ``CLOCK_MONOTONIC`` (as written in the file).
    """
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from labgang.agent.lease import NodeLease, save_lease\n"
        "lease = NodeLease()\n"
        "now, wall = time.monotonic(), time.time()\n"
        f"lease.arm({node_timeout_s!r}, now - {confirmed_ago!r})\n"
        f"save_lease(Path({str(agent_dir)!r}), lease, mono_now=now, wall_now=wall)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    return float(json.loads((agent_dir / LEASE_FILE).read_text())["expires_mono"])


def save_lease_here(agent_dir: Path, node_timeout_s: float, confirmed_ago: float) -> float:
    """Save a lease held by this (live) process; return its monotonic deadline."""
    lease = NodeLease()
    now = time.monotonic()
    lease.arm(node_timeout_s, now - confirmed_ago)
    save_lease(agent_dir, lease, mono_now=now, wall_now=time.time())
    assert lease.expires_at is not None
    return lease.expires_at


def marks(path: Path) -> list[float]:
    return [float(x) for x in path.read_text().split()] if path.exists() else []


@pytest.fixture
def watched_sup(state_dir: Path, cleanup) -> Supervisor:
    """A supervisor whose ranks' small parents watch ``state_dir/lease.json``."""
    s = Supervisor(state_dir, allow_root=True, lease_file=state_dir / LEASE_FILE)
    cleanup.append(s)
    return s


def launch_stubborn(sup: Supervisor, make_spec, out: Path, h, grace: float = 0.5) -> int:
    """Start the stubborn rank; return its pid once it runs."""
    out.mkdir()
    sup.launch(make_spec([h.python, "-c", STUBBORN, str(out)], grace=grace))
    h.run_until(sup, lambda: sup.status("job1", 0).state is RankState.RUNNING)
    h.wait_for_file(out / "alive")
    pid = sup.status("job1", 0).pid
    assert pid is not None
    return pid


def wait_gone(pid: int, h, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while h.pid_alive(pid):
        if time.monotonic() > deadline:
            pytest.fail(f"rank {pid} still runs {timeout} s on")
        time.sleep(0.02)


def test_a_rank_whose_agent_died_is_stopped_by_its_small_parent_when_the_lease_runs_out(
    state_dir: Path, watched_sup: Supervisor, make_spec, h
) -> None:
    out = state_dir / "out"
    grace = 0.5
    # A lease confirmed just now by an agent that then died: it runs out in 0.8 x 2 s.
    expires = save_lease_and_exit(state_dir, node_timeout_s=2.0, confirmed_ago=0.0)
    pid = launch_stubborn(watched_sup, make_spec, out, h, grace=grace)
    # Nobody ticks the supervisor from here on: the agent is dead.
    wait_gone(pid, h)
    term, alive = marks(out / "term"), marks(out / "alive")
    assert len(term) == 1 and term[0] >= expires  # one SIGTERM, not before the deadline
    assert any(t > term[0] for t in alive)  # it ignored SIGTERM: SIGKILL after the grace ended it
    # Ended by the deadline + grace, with the margin the agent's own delays get (the rest of node_timeout_s).
    assert max(alive) < expires + grace + 2.0 * (1 - LEASE_SHARE)
    exit_file = watched_sup._journal.rank_dir("job1", 0) / "exit.json"
    deadline = time.monotonic() + 15.0
    while not exit_file.exists():  # the small parent writes it once it has reaped the rank
        assert time.monotonic() < deadline, "the small parent never wrote exit.json"
        time.sleep(0.02)
    exit_info = json.loads(exit_file.read_text())
    assert exit_info["exit_status"] == 137 and exit_info["fenced"] is True

    # An agent that comes back learns the exit was the fence's doing.
    watched_sup.close()
    again = Supervisor(state_dir, allow_root=True, lease_file=state_dir / LEASE_FILE)
    try:
        events = again.recover()
        events = h.run_until(again, h.all_in(again, RankState.GONE), events=events)
        status = again.status("job1", 0)
        assert (status.exit_status, status.fenced) == (137, True)
        assert status.to_dict()["fenced"] is True
        assert [e.exit_status for e in events if e.kind == "exited"] == [137]
    finally:
        again.close()


def read_chars(pid: int) -> int:
    """Bytes ``pid`` has read so far (``/proc/PID/io`` ``rchar``)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError(f"no rchar in /proc/{pid}/io")


def wait_for_looks(shim_pid: int, looks: int, timeout: float = 15.0) -> None:
    """Wait until the small parent has read something ``looks`` times more: past its lease's
    deadline, each look of the watchdog reads the holder's ``/proc/PID/stat`` (the rank here
    writes nothing to its output, so nothing else is read)."""
    seen, count, deadline = read_chars(shim_pid), 0, time.monotonic() + timeout
    while count < looks:
        if time.monotonic() > deadline:
            pytest.fail(f"the small parent {shim_pid} read nothing new for {timeout} s")
        now = read_chars(shim_pid)
        count, seen = count + (now > seen), now
        time.sleep(0.02)


def test_a_live_agent_holding_the_lease_is_left_to_fence(
    state_dir: Path, watched_sup: Supervisor, make_spec, h
) -> None:
    out = state_dir / "out"
    # Held by this live process and already run out: the holder fences (the agent's own
    # check), never the small parent as well, which would send a second SIGTERM.
    save_lease_here(state_dir, node_timeout_s=1.0, confirmed_ago=5.0)
    pid = launch_stubborn(watched_sup, make_spec, out, h)
    shim_pid = json.loads((watched_sup._journal.rank_dir("job1", 0) / "shim.json").read_text())["pid"]
    wait_for_looks(shim_pid, 3)  # it read the file and looked at the holder at least twice
    assert not (out / "term").exists() and h.pid_alive(pid)
    # The holder dies with a lease confirmed just now: the small parent fences once that runs out.
    expires = save_lease_and_exit(state_dir, node_timeout_s=1.0, confirmed_ago=0.0)
    wait_gone(pid, h)
    term = marks(out / "term")
    assert len(term) == 1 and term[0] >= expires, (term, expires)


def test_a_renewed_lease_moves_the_watchdogs_deadline(tmp_path: Path) -> None:
    clock = Clock(0.0)
    first = save_lease_here(tmp_path, node_timeout_s=10.0, confirmed_ago=0.0)
    watch = LeaseWatch(str(tmp_path / LEASE_FILE), grace=1.0, pgid=-1, clock=clock)
    clock.now = first - 0.1
    watch.poll()
    assert watch.expires == first and not watch.fenced
    renewed = save_lease_here(tmp_path, node_timeout_s=10.0, confirmed_ago=0.0)
    assert renewed > first
    clock.now = first + 0.5  # past the old deadline, so a look is due
    watch.poll()
    assert watch.expires == renewed and not watch.fenced
    assert watch.wait_s() == pytest.approx(LEASE_CHECK_S)


def test_a_rank_the_agent_stops_is_not_marked_fenced(state_dir: Path, watched_sup: Supervisor, make_spec, h) -> None:
    out = state_dir / "out"
    pid = launch_stubborn(watched_sup, make_spec, out, h)
    watched_sup.stop_job("job1")
    h.run_until(watched_sup, h.all_in(watched_sup, RankState.GONE))
    assert not h.pid_alive(pid)
    assert watched_sup.status("job1", 0).fenced is False  # stopped by the agent, not fenced


class Clock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_the_watchdog_reads_the_agents_file_and_ignores_another_boots_or_an_older_format(tmp_path: Path) -> None:
    expires = save_lease_here(tmp_path, node_timeout_s=10.0, confirmed_ago=1.0)
    path = tmp_path / LEASE_FILE
    data = read_lease(str(path))
    assert data is not None and float(data["expires_mono"]) == expires
    assert int(data["agent_pid"]) == os.getpid()

    watch = LeaseWatch(str(path), grace=1.0, pgid=-1, clock=Clock(expires - 0.5))
    watch.refresh()
    assert watch.expires == expires and watch.holder_alive()
    assert watch.wait_s() == 0.0  # a first check is due at once
    watch.poll()
    assert watch.wait_s() == pytest.approx(0.5)  # next look: at the deadline, not a second later

    other = json.loads(path.read_text())
    other["boot_id"] = "another-boot"
    path.write_text(json.dumps(other))
    watch.refresh()
    assert watch.expires is None  # monotonic readings of another boot mean nothing here

    older = {k: v for k, v in other.items() if k in ("node_timeout_s", "confirmed_at")}
    path.write_text(json.dumps(older))
    watch.refresh()
    assert watch.expires is None

    path.write_text("{not json")
    assert read_lease(str(path)) is None
    path.unlink()
    watch.refresh()
    assert (watch.expires, watch.holder) == (None, None)


async def test_an_agent_started_after_the_fence_reports_the_exit_as_fenced(
    tmp_path: Path, make_spec, h, sim_scope
) -> None:
    """The agent's successor tells the coordinator the exit was the fence's doing (``fenced: true``
    in its hello and in the ``exited`` event), as the agent's own fence does, so the job is
    requeued rather than failed."""
    backend = open_backend(MACHINE, scope=sim_scope)
    config = AgentConfig(node="t1", coordinator="http://127.0.0.1:9", state_dir=str(tmp_path / "state"))
    journal = agent_state_dir(config.resolved_state_dir())
    journal.mkdir(parents=True)
    out = tmp_path / "out"
    first = Supervisor(journal, allow_root=True, lease_file=journal / LEASE_FILE)
    try:
        save_lease_and_exit(journal, node_timeout_s=1.0, confirmed_ago=0.0)
        uuid = read_inventory(backend, hostname="t1").allocatable()[0].uuid
        pid = launch_stubborn(first, lambda argv, **kw: make_spec(argv, devices=(uuid,), **kw), out, h, grace=0.2)
        wait_gone(pid, h)  # fenced by its small parent: this "agent" ticks no more
    finally:
        first.close()

    end = CoordinatorEnd()
    await end.start()
    config = AgentConfig(
        node="t1",
        coordinator=end.url,
        state_dir=str(tmp_path / "state"),
        user_socket=False,
        supervisor={"allow_root": True},
    )
    agent = AgentService(config, backend=backend, token="t0ken", stop_jobs_on_exit=True)
    stop = asyncio.Event()
    task = asyncio.create_task(agent.run(stop))
    try:
        _, exited = (await end.wait(lambda: end.events("exited")))[0]
        assert (exited["exit_status"], exited.get("fenced")) == (137, True)
        hello = next(m for m in end.messages if m["type"] == "hello")
        (rank,) = hello["ranks"]
        assert rank.get("fenced") is True
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await end.stop()


def test_the_fence_hangs_up_a_pty_ranks_terminal_so_an_interactive_bash_ends_at_once(
    state_dir: Path, watched_sup: Supervisor, make_spec, h
) -> None:
    """An interactive bash on a terminal (``labgang run --pty -- bash``) ignores SIGTERM: the small
    parent's fence sends SIGHUP first, as the agent's own stop does, not SIGKILL after the grace."""
    grace = 10.0
    expires = save_lease_and_exit(state_dir, node_timeout_s=4.0, confirmed_ago=0.0)
    watched_sup.launch(make_spec(["bash", "--norc", "-i"], pty=True, grace=grace))
    h.run_until(watched_sup, lambda: watched_sup.status("job1", 0).state is RankState.RUNNING)
    deadline = time.monotonic() + 8.0
    while time.monotonic() < deadline and not watched_sup.log_path("job1", 0).read_bytes().strip():
        time.sleep(0.05)  # its prompt: bash is interactive now
    pid = watched_sup.status("job1", 0).pid
    assert pid is not None and time.monotonic() < expires, "bash took the whole lease to start"
    wait_gone(pid, h, timeout=expires - time.monotonic() + grace + 5.0)
    assert time.monotonic() < expires + grace / 2, "the fence waited for the grace period's SIGKILL"
    exit_file = watched_sup._journal.rank_dir("job1", 0) / "exit.json"
    deadline = time.monotonic() + 15.0
    while not exit_file.exists():
        assert time.monotonic() < deadline, "the small parent never wrote exit.json"
        time.sleep(0.02)
    exit_info = json.loads(exit_file.read_text())
    assert exit_info["exit_status"] != 137 and exit_info["fenced"] is True, exit_info
