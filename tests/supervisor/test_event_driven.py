"""What lets the agent tick exactly when something changes: fresh NVML readings for "gone",
the processes to watch, the next deadline, and the pidfd exit watcher."""

from __future__ import annotations

import asyncio
import json
import subprocess

import pytest
from labgang.agent.supervisor import DeviceReading, ExitWatcher, RankState, Supervisor
from labgang.agent.supervisor.hostos import HostOS


class Readings:
    """What NVML showed and when the read began: a reading the test replaces by hand."""

    def __init__(self) -> None:
        self.current: DeviceReading | None = None

    def __call__(self) -> DeviceReading | None:
        return self.current


def _shim_pid(state_dir, job="job1", rank=0) -> int:
    return json.loads((state_dir / "ranks" / job / str(rank) / "shim.json").read_text())["pid"]


def test_a_reading_begun_before_the_rank_was_seen_released_never_declares_it_gone(state_dir, make_spec, cleanup, h):
    readings = Readings()
    sup = Supervisor(state_dir, allow_root=True, device_pids=readings)
    cleanup.append(sup)
    readings.current = DeviceReading(pids={}, read_at=0.0)  # empty, but taken long ago
    sup.launch(make_spec(["true"]))
    shim = _shim_pid(state_dir)
    h.run_until(sup, lambda: sup.awaiting_devices() is not None)
    assert sup.ranks()[0].state is RankState.RELEASING and not h.pid_alive(shim)
    since = sup.awaiting_devices()
    assert since > 0.0
    for _ in range(3):
        assert [e.kind for e in sup.tick()] == []
    assert sup.ranks()[0].state is RankState.RELEASING
    # A read begun after the release, showing nothing of the rank, settles it.
    readings.current = DeviceReading(pids={"GPU-test-0": frozenset({999999})}, read_at=since)
    assert [e.kind for e in sup.tick()] == ["gone"]
    assert sup.awaiting_devices() is None


def test_a_fresh_reading_that_still_shows_the_rank_keeps_it_releasing(state_dir, make_spec, cleanup, h):
    readings = Readings()
    sup = Supervisor(state_dir, allow_root=True, device_pids=readings)
    cleanup.append(sup)
    sup.launch(make_spec(["true"]))
    h.run_until(sup, lambda: sup.ranks()[0].pid is not None)
    pid = sup.ranks()[0].pid
    h.run_until(sup, lambda: sup.awaiting_devices() is not None)
    since = sup.awaiting_devices()
    readings.current = DeviceReading(pids={"GPU-test-0": frozenset({pid})}, read_at=since + 1.0)
    assert sup.tick() == []
    assert sup.awaiting_devices() == since
    readings.current = DeviceReading(pids={}, read_at=since + 2.0)
    assert [e.kind for e in sup.tick()] == ["gone"]


def test_no_reading_yet_keeps_a_rank_releasing(state_dir, make_spec, cleanup, h):
    readings = Readings()
    sup = Supervisor(state_dir, allow_root=True, device_pids=readings)
    cleanup.append(sup)
    sup.launch(make_spec(["true"]))
    h.run_until(sup, lambda: sup.awaiting_devices() is not None)
    assert sup.ranks()[0].state is RankState.RELEASING
    assert sup.tick() == []
    readings.current = DeviceReading(pids={}, read_at=sup.awaiting_devices())
    assert [e.kind for e in sup.tick()] == ["gone"]


def test_watched_processes_are_the_small_parent_and_the_running_main_process(state_dir, make_spec, cleanup, h):
    sup = Supervisor(state_dir, allow_root=True)
    cleanup.append(sup)
    sup.launch(make_spec(["sleep", "60"]))
    shim = _shim_pid(state_dir)
    assert [pid for pid, _ in sup.watched_processes()] == [shim]
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    main = sup.ranks()[0].pid
    assert sorted(pid for pid, _ in sup.watched_processes()) == sorted([shim, main])
    sup.stop_job("job1", grace=0)
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    assert sup.watched_processes() == []


def test_next_deadline_is_the_end_of_the_grace_period(state_dir, make_spec, cleanup, clock, h):
    sup = Supervisor(state_dir, allow_root=True, clock=clock)
    cleanup.append(sup)
    assert sup.next_deadline() is None
    sup.launch(make_spec(["sleep", "60"], grace=7.0))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    assert sup.next_deadline() is None
    sup.stop_job("job1")
    assert sup.next_deadline() == clock.now + 7.0
    sup.stop_job("job1", grace=2.0)  # a shorter grace moves the deadline forward
    assert sup.next_deadline() == clock.now + 2.0


def test_next_deadline_of_a_warned_rank_is_its_sigterm(state_dir, make_spec, cleanup, clock, h):
    import signal

    sup = Supervisor(state_dir, allow_root=True, clock=clock)
    cleanup.append(sup)
    sup.launch(make_spec(["sleep", "60"], warn_signal=int(signal.SIGUSR1), warn_before=3.0))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    sup.stop_job("job1")
    assert sup.ranks()[0].state is RankState.WARNED
    assert sup.next_deadline() == clock.now + 3.0


# ----- ExitWatcher ---------------------------------------------------------------------------


def _start(argv: list[str]) -> tuple[subprocess.Popen, tuple[int, int | None]]:
    proc = subprocess.Popen(argv)
    return proc, (proc.pid, HostOS().start_ticks(proc.pid))


async def test_exit_watcher_calls_back_when_a_watched_process_ends():
    loop = asyncio.get_running_loop()
    ended = asyncio.Event()
    watcher = ExitWatcher(loop, ended.set)
    if not watcher.available:
        pytest.skip("pidfd_open(2) is not available on this kernel")
    proc, key = _start(["sleep", "30"])
    try:
        watcher.update([key])
        assert watcher.watched == {key}
        await asyncio.sleep(0.05)
        assert not ended.is_set()
        proc.kill()  # not reaped yet: a pidfd turns readable when the process ends, zombie or not
        await asyncio.wait_for(ended.wait(), 10)
        assert watcher.watched == frozenset()
    finally:
        proc.kill()
        proc.wait()
        watcher.close()


async def test_exit_watcher_reports_a_process_that_already_ended_or_whose_pid_was_reused():
    loop = asyncio.get_running_loop()
    calls: list[int] = []
    watcher = ExitWatcher(loop, lambda: calls.append(1))
    if not watcher.available:
        pytest.skip("pidfd_open(2) is not available on this kernel")
    proc, (pid, ticks) = _start(["true"])
    proc.wait()  # reaped: the pid no longer exists
    live, live_key = _start(["sleep", "30"])
    try:
        watcher.update([(pid, ticks), (live_key[0], live_key[1] + 1)])  # second: same pid, other start time
        await asyncio.sleep(0.05)
        assert len(calls) == 2
        assert watcher.watched == frozenset()
        watcher.update([(pid, ticks), (live_key[0], live_key[1] + 1)])  # reported once, not again
        await asyncio.sleep(0.05)
        assert len(calls) == 2
    finally:
        live.kill()
        live.wait()
        watcher.close()


async def test_exit_watcher_forgets_processes_no_longer_listed():
    loop = asyncio.get_running_loop()
    calls: list[int] = []
    watcher = ExitWatcher(loop, lambda: calls.append(1))
    if not watcher.available:
        pytest.skip("pidfd_open(2) is not available on this kernel")
    proc, key = _start(["sleep", "30"])
    try:
        watcher.update([key])
        watcher.update([])
        assert watcher.watched == frozenset()
        proc.kill()
        proc.wait()
        await asyncio.sleep(0.05)
        assert calls == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        watcher.close()


# ----- spare small parents ----------------------------------------------------------------------


def test_a_launch_takes_a_spare_small_parent_and_runs_the_rank_as_usual(state_dir, make_spec, cleanup, h):
    sup = Supervisor(state_dir, allow_root=True, spare_shims=2)
    cleanup.append(sup)
    try:
        assert sup.refill_spares() == 2 and sup.spares_missing == 0
        spare_pids = {p.pid for p, _ in sup._spares.waiting}
        sup.launch(make_spec(["/bin/sh", "-c", "echo hello from a spare; exit 3"]))
        assert _shim_pid(state_dir) in spare_pids
        assert sup.spares_missing == 1
        events = h.run_until(sup, h.all_in(sup, RankState.GONE))
        assert [(e.kind, e.exit_status) for e in events] == [("started", None), ("exited", 3), ("gone", 3)]
        assert "hello from a spare" in sup.log_path("job1", 0).read_text()
        assert sup.refill_spares() == 1
    finally:
        sup.close_spares()
    assert not any(h.pid_alive(pid) for pid in spare_pids)


def test_a_dead_spare_is_skipped_for_a_new_small_parent(state_dir, make_spec, cleanup, h):
    sup = Supervisor(state_dir, allow_root=True, spare_shims=1)
    cleanup.append(sup)
    try:
        sup.refill_spares()
        spare, _ = sup._spares.waiting[0]
        spare.kill()
        spare.wait()
        sup.launch(make_spec(["true"]))
        assert _shim_pid(state_dir) != spare.pid
        events = h.run_until(sup, h.all_in(sup, RankState.GONE))
        assert [e.kind for e in events] == ["started", "exited", "gone"]
    finally:
        sup.close_spares()


def test_spare_shims_setting_is_checked():
    from labgang.agent.supervisor import SupervisorConfig

    assert SupervisorConfig.from_dict({"spare_shims": 0}).spare_shims == 0
    with pytest.raises(ValueError, match=r"spare_shims: .*allowed: integer 0..64"):
        SupervisorConfig.from_dict({"spare_shims": -1})


def test_a_spare_waits_at_low_priority_and_its_rank_runs_at_the_agents(state_dir, make_spec, cleanup, h):
    import os

    if os.geteuid() != 0:
        pytest.skip("only a root agent lowers a spare's priority (it must be able to raise it back)")
    sup = Supervisor(state_dir, allow_root=True, spare_shims=1)
    cleanup.append(sup)
    try:
        sup.refill_spares()
        spare, _ = sup._spares.waiting[0]
        assert os.getpriority(os.PRIO_PROCESS, spare.pid) == 19
        out = state_dir / "nice"
        sup.launch(make_spec(["/bin/sh", "-c", f"cut -d' ' -f19 /proc/self/stat > {out}"]))
        h.run_until(sup, h.all_in(sup, RankState.GONE))
        assert int(out.read_text()) == os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        sup.close_spares()


def test_stop_jobs_stops_several_jobs_at_one_instant(state_dir, make_spec, cleanup, clock, h):
    sup = Supervisor(state_dir, allow_root=True, clock=clock)
    cleanup.append(sup)
    for job in ("a.0", "b.0"):
        sup.launch(make_spec(["sleep", "60"], job_id=job, grace=5.0))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    out = sup.stop_jobs([("a.0", None, False), ("b.0", 3.0, False), ("nope.0", None, False)])
    assert out["nope.0"] == []
    assert [s.state for s in out["a.0"] + out["b.0"]] == [RankState.STOPPING, RankState.STOPPING]
    assert sup.next_deadline() == clock.now + 3.0  # b's grace; a's ends at +5 from the same instant
    clock.advance(5.0)
    h.run_until(sup, h.all_in(sup, RankState.GONE))
    with pytest.raises(ValueError, match=r"grace: -1 of job 'a.0' is negative"):
        sup.stop_jobs([("a.0", -1, False)])
