"""The start gate (``supervisor/gate.py``): one node's ranks of a gang are prepared up to their
``exec`` and released at once. Real small parents, real ranks stamping their own start
(``$EPOCHREALTIME``), a real ``kill -9`` of the agent between prepare and release."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from labgang.agent.supervisor import RankState, Supervisor
from labgang.agent.supervisor.gate import NOT_RELEASED
from labgang.agent.supervisor.hostos import HostOS

CHILD = Path(__file__).with_name("gate_child.py")


def _stamping_specs(make_spec, out: Path, job: str, n: int):
    """``n`` ranks of one gang, each writing the wall time of its own start to ``out/RANK``."""
    return [
        make_spec(["/usr/bin/bash", "-c", f"echo $EPOCHREALTIME > {out}/{r}"], job_id=job, rank=r, world_size=n)
        for r in range(n)
    ]


def _children(pid: int) -> list[int]:
    """The pids of ``pid``'s children (``/proc/PID/task/PID/children``)."""
    with open(f"/proc/{pid}/task/{pid}/children", encoding="ascii") as fh:
        return [int(x) for x in fh.read().split()]


def test_no_rank_execs_before_every_rank_of_its_gang_is_parked(state_dir, make_spec, cleanup, h):
    """Every rank's child is forked, privileges dropped, and parked (still the small parent's
    interpreter, not the rank's command) until the release; every rank's own start stamp comes
    after the moment the last rank was reported parked, and after the release."""
    sup = Supervisor(state_dir, allow_root=True, spare_shims=2)
    cleanup.append(sup)
    try:
        sup.refill_spares()
        out = state_dir / "stamps"
        out.mkdir()
        pending = sup.begin_launch(_stamping_specs(make_spec, out, "g1", 4))  # 2 spares, 2 new small parents
        (gate,) = pending.gates
        assert gate.wait(30.0) and not gate.failed
        all_parked = time.time()
        interpreter = os.path.realpath(sys.executable)
        for r in range(4):
            shim = json.loads((state_dir / "ranks" / "g1" / str(r) / "shim.json").read_text())["pid"]
            (child,) = _children(shim)
            assert os.path.realpath(f"/proc/{child}/exe") == interpreter  # forked, not exec-ed
        assert list(out.iterdir()) == []
        assert {s.state for s in sup.ranks()} == {RankState.STARTING}
        released = time.time()
        results = sup.finish_launch(pending)
        assert [type(r).__name__ for r in results] == ["RankStatus"] * 4
        events = h.run_until(sup, h.all_in(sup, RankState.GONE))
        assert [e.exit_status for e in events if e.kind == "exited"] == [0] * 4
        stamps = [float((out / str(r)).read_text()) for r in range(4)]
        assert min(stamps) > released > all_parked
    finally:
        sup.close_spares()


def test_a_rank_that_fails_before_the_gate_starts_no_rank_of_its_gang(state_dir, make_spec, cleanup, h):
    """Rank 1's small parent fails before the gate (its cgroup cannot be joined, as when the
    node's fenced cgroup is gone): it reports the failure, the gate is aborted, and rank 0, parked
    already or arriving later, never runs its command."""
    sup = Supervisor(state_dir, allow_root=True)
    cleanup.append(sup)
    out = state_dir / "stamps"
    out.mkdir()
    specs = _stamping_specs(make_spec, out, "g2", 2)

    class NoCgroup:
        """A fence whose rank 1 cgroup is gone by the time its small parent joins it."""

        def prepare(self, job_id, rank, devices, limits, gpu_mem=None):
            return str(state_dir / "no-such-cgroup" / "cgroup.procs") if rank == 1 else None

        def release(self, job_id, rank):
            pass

    sup.cgroups = NoCgroup()
    results = sup.launch_all(specs)
    assert [type(r).__name__ for r in results] == ["RankStatus"] * 2
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert sorted((e.rank, e.exit_status) for e in events if e.kind == "exited") == [(0, NOT_RELEASED), (1, 126)]
    exit0 = json.loads((state_dir / "ranks" / "g2" / "0" / "exit.json").read_text())
    assert exit0["error"] == "not started: rank 1 of its gang on this node failed before the start"
    assert list(out.iterdir()) == []


def test_a_stop_during_the_gate_releases_nothing(state_dir, make_spec, cleanup, h):
    """Every rank parked, then the job is stopped before the launch finishes: the gate is
    aborted, no rank runs its command, each ends with ``NOT_RELEASED`` (not by the stop's SIGTERM),
    and finishing the launch afterwards releases nothing."""
    sup = Supervisor(state_dir, allow_root=True)
    cleanup.append(sup)
    out = state_dir / "stamps"
    out.mkdir()
    pending = sup.begin_launch(_stamping_specs(make_spec, out, "g3", 3))
    (gate,) = pending.gates
    assert gate.wait(30.0) and not gate.waiting
    sup.stop_job("g3", grace=5.0)
    results = sup.finish_launch(pending)
    assert gate.state == "aborted"
    assert [type(r).__name__ for r in results] == ["RankStatus"] * 3
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    # each rank's exit is reported as a tick sees it: in no promised order (failed once as 0, 2, 1)
    assert sorted((e.rank, e.exit_status) for e in events if e.kind == "exited") == [
        (r, NOT_RELEASED) for r in range(3)
    ]
    assert not [e for e in events if e.kind == "started"]
    for r in range(3):
        exit_file = json.loads((state_dir / "ranks" / "g3" / str(r) / "exit.json").read_text())
        assert exit_file["error"] == "not started: its job was stopped before the start"
    assert list(out.iterdir()) == []


def test_the_gate_folders_go_with_the_forgotten_job(state_dir, make_spec, cleanup, h):
    sup = Supervisor(state_dir, allow_root=True)
    cleanup.append(sup)
    out = state_dir / "stamps"
    out.mkdir()
    sup.launch_all(_stamping_specs(make_spec, out, "g4", 2))
    assert len(list((state_dir / "gates" / "g4").iterdir())) == 1
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    sup.forget("g4")
    sup.flush_journal()
    assert not (state_dir / "gates" / "g4").exists() and not (state_dir / "ranks" / "g4").exists()


def test_a_killed_agent_between_prepare_and_release_loses_no_rank(state_dir, make_spec, cleanup, h, tmp_path):
    """``kill -9`` of the agent while its ranks are parked: its end of the gate closes with it, so
    the ranks start (none is left parked or lost), and the next agent re-adopts them from the
    journal as running ranks it can stop."""
    out = state_dir / "stamps"
    out.mkdir()
    specs = [
        make_spec(
            ["/usr/bin/bash", "-c", f"echo $EPOCHREALTIME > {out}/{r}; exec sleep 60"],
            job_id="g5",
            rank=r,
            world_size=3,
        )
        for r in range(3)
    ]
    specs_file = tmp_path / "specs.json"
    specs_file.write_text(json.dumps([s.to_dict() for s in specs]))
    agent = subprocess.Popen(
        [sys.executable, str(CHILD), str(state_dir), str(specs_file)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        said = json.loads(agent.stdout.readline())
        assert said["parked"] == [0, 1, 2]
        assert list(out.iterdir()) == []
    finally:
        agent.send_signal(signal.SIGKILL)
        agent.wait()
        agent.stdin.close()
        agent.stdout.close()
    sup = Supervisor(state_dir, allow_root=True)
    cleanup.append(sup)
    events = sup.recover()
    h.run_until(sup, lambda: all(r.state is RankState.RUNNING for r in sup.ranks()), events=events)
    assert [r.rank for r in sup.ranks()] == [0, 1, 2]
    h.run_until(sup, lambda: all((out / str(r)).exists() and (out / str(r)).read_text().strip() for r in range(3)))
    # each rank reported started exactly once; in the order each was seen running (a rank still in its
    # exec at the re-adoption is seen at a later tick), which is not the ranks' order
    assert sorted(e.rank for e in events if e.kind == "started") == [0, 1, 2]
    sup.stop_job("g5", grace=0.0)
    h.run_until(sup, h.all_in(sup, RankState.GONE))


class DeadShimHost(HostOS):
    """The real host, except that rank 1's small parent is a process that exits at once, before it
    could open its gate or report anything."""

    def spawn_shim(self, rank_dir: Path, stderr_path: Path) -> tuple[subprocess.Popen[bytes], int | None]:
        if rank_dir.name != "1":
            return super().spawn_shim(rank_dir, stderr_path)
        proc = subprocess.Popen(["/bin/false"], start_new_session=True)
        return proc, self.start_ticks(proc.pid)


def test_a_small_parent_that_dies_unreported_settles_the_gate_as_failed(state_dir, make_spec, cleanup, h):
    """No report will ever come from rank 1: the wait notices its small parent is gone (not the
    timeout), the gate is aborted and rank 0 never runs its command."""
    sup = Supervisor(state_dir, allow_root=True, host_os=DeadShimHost())
    cleanup.append(sup)
    out = state_dir / "stamps"
    out.mkdir()
    pending = sup.begin_launch(_stamping_specs(make_spec, out, "g6", 2))
    (gate,) = pending.gates
    assert gate.wait(30.0, check=lambda: sup.check_gates(pending))  # settled, not timed out
    assert gate.failed == {1}
    sup.finish_launch(pending)
    assert gate.state == "aborted"
    events = h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert sorted((e.rank, e.exit_status) for e in events if e.kind == "exited") == [(0, NOT_RELEASED), (1, None)]
    assert list(out.iterdir()) == []


class StuckShimHost(HostOS):
    """The real host, except that rank 1's small parent is alive but never reaches its gate."""

    def __init__(self) -> None:
        self.stuck: list[subprocess.Popen[bytes]] = []

    def spawn_shim(self, rank_dir: Path, stderr_path: Path) -> tuple[subprocess.Popen[bytes], int | None]:
        if rank_dir.name != "1":
            return super().spawn_shim(rank_dir, stderr_path)
        proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
        self.stuck.append(proc)
        return proc, self.start_ticks(proc.pid)


def test_a_gate_not_settled_in_time_is_aborted(state_dir, make_spec, cleanup, h):
    host = StuckShimHost()
    sup = Supervisor(state_dir, allow_root=True, host_os=host)
    cleanup.append(sup)
    out = state_dir / "stamps"
    out.mkdir()
    try:
        results = sup.launch_all(_stamping_specs(make_spec, out, "g7", 2), gate_timeout=0.5)
        assert [type(r).__name__ for r in results] == ["RankStatus"] * 2
        h.run_until(sup, lambda: sup.status("g7", 0).state is RankState.GONE)
        exit0 = json.loads((state_dir / "ranks" / "g7" / "0" / "exit.json").read_text())
        assert (exit0["exit_status"], exit0["error"]) == (
            NOT_RELEASED,
            "not started: ranks [1] of its gang on this node were not ready in time",
        )
        assert list(out.iterdir()) == []
    finally:
        for proc in host.stuck:
            proc.kill()
            proc.wait()
    h.run_until(sup, h.all_in(sup, RankState.GONE))


@pytest.fixture
def throwaway_user():
    """One throwaway unprivileged user (``useradd -M``), removed after the test."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("creating a throwaway user needs root and useradd")
    name = f"lgtgate{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-M", "-s", "/bin/sh", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


def test_a_gated_rank_of_another_user_starts_and_aborts_under_a_state_dir_it_cannot_enter(
    state_dir, make_spec, cleanup, h, throwaway_user
):
    """A root agent's state dir may be 0700: the child, already the user when it looks for the
    abort marker, finds it through its gate folder's descriptor, never through the state dir.
    Released, the gang runs as the user; stopped during the gate, it ends as not started."""
    os.chmod(state_dir, 0o700)
    out = Path(tempfile.mkdtemp(prefix="lggate-out-"))
    os.chown(out, throwaway_user.pw_uid, throwaway_user.pw_gid)
    try:
        sup = Supervisor(state_dir, allow_root=True)
        cleanup.append(sup)

        def specs(job: str):
            return [
                make_spec(
                    ["/usr/bin/bash", "-c", f"id -u > {out}/{job}.{r}"],
                    job_id=job,
                    rank=r,
                    world_size=2,
                    uid=throwaway_user.pw_uid,
                    gid=throwaway_user.pw_gid,
                )
                for r in range(2)
            ]

        results = sup.launch_all(specs("ok"))
        assert [type(r).__name__ for r in results] == ["RankStatus"] * 2
        events = h.run_until(sup, h.all_in(sup, RankState.GONE))
        assert [e.exit_status for e in events if e.kind == "exited"] == [0, 0]
        assert [(out / f"ok.{r}").read_text().strip() for r in range(2)] == [str(throwaway_user.pw_uid)] * 2

        pending = sup.begin_launch(specs("stopped"))
        (gate,) = pending.gates
        assert gate.wait(30.0) and not gate.waiting and not gate.failed
        sup.stop_job("stopped", grace=5.0)
        sup.finish_launch(pending)
        events = h.run_until(sup, h.all_in(sup, RankState.GONE))
        assert [e.exit_status for e in events if e.kind == "exited"] == [NOT_RELEASED, NOT_RELEASED]
        exit0 = json.loads((state_dir / "ranks" / "stopped" / "0" / "exit.json").read_text())
        assert exit0["error"] == "not started: its job was stopped before the start"
        assert sorted(p.name for p in out.iterdir()) == ["ok.0", "ok.1"]
    finally:
        shutil.rmtree(out, ignore_errors=True)
