"""A rank is "gone" only when NVML no longer shows it on its devices; foreign processes are reported."""

from __future__ import annotations

import json
import os
import subprocess

from labgang.agent.supervisor import RankState, Supervisor, SupervisorConfig


class DeviceView:
    """What NVML shows on each device: a mapping the test edits (a stand-in for the inventory)."""

    def __init__(self) -> None:
        self.pids: dict[str, set[int]] = {}

    def hold(self, uuid: str, pid: int) -> None:
        self.pids.setdefault(uuid, set()).add(pid)

    def release(self, uuid: str, pid: int) -> None:
        self.pids.get(uuid, set()).discard(pid)

    def __call__(self) -> dict[str, frozenset[int]]:
        return {uuid: frozenset(pids) for uuid, pids in self.pids.items()}


def test_rank_whose_device_still_shows_its_memory_is_not_gone(state_dir, make_spec, cleanup, h):
    view = DeviceView()
    sup = Supervisor(state_dir, allow_root=True, device_pids=view)
    cleanup.append(sup)
    sup.launch(make_spec(["sleep", "60"], devices=("GPU-aaaa", "GPU-bbbb")))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    pid = sup.ranks()[0].pid
    view.hold("GPU-bbbb", pid)  # a context NVML still reports after the process is gone
    sup.stop_job("job1", grace=1.0)
    shim_pid = json.loads((state_dir / "ranks" / "job1" / "0" / "shim.json").read_text())["pid"]
    events = h.run_until(
        sup, lambda: not h.pid_alive(pid) and not h.pid_alive(shim_pid) and sup.ranks()[0].state is RankState.RELEASING
    )
    assert [e.kind for e in events] == ["exited"]
    for _ in range(5):
        assert sup.tick() == []
    assert sup.ranks()[0].state is RankState.RELEASING
    view.release("GPU-bbbb", pid)
    events = sup.tick()
    assert [(e.kind, e.exit_status) for e in events] == [("gone", 143)]


def test_pid_on_another_device_does_not_hold_the_rank(state_dir, make_spec, cleanup, h):
    view = DeviceView()
    sup = Supervisor(state_dir, allow_root=True, device_pids=view)
    cleanup.append(sup)
    sup.launch(make_spec(["true"], devices=("GPU-aaaa",)))
    h.run_until(sup, lambda: sup.ranks()[0].pid is not None)
    view.hold("GPU-other", sup.ranks()[0].pid)
    h.run_until(sup, h.all_in(sup, RankState.GONE))


def test_foreign_processes_are_reported_and_block_by_default(state_dir, make_spec, cleanup, h):
    view = DeviceView()
    sup = Supervisor(state_dir, allow_root=True, device_pids=view)
    cleanup.append(sup)
    sup.launch(make_spec(["sleep", "60"], devices=("GPU-aaaa",)))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    view.hold("GPU-aaaa", sup.ranks()[0].pid)
    stranger = subprocess.Popen(["sleep", "60"])
    try:
        view.hold("GPU-bbbb", stranger.pid)
        foreign = sup.foreign_processes(view())
        assert [(f.pid, f.device) for f in foreign] == [(stranger.pid, "GPU-bbbb")]
        assert foreign[0].uid == os.getuid() and foreign[0].user == "root"
        assert foreign[0].cmdline == ("sleep", "60") and foreign[0].used_memory_bytes is None
        assert SupervisorConfig().blocked_devices(foreign) == frozenset({"GPU-bbbb"})
        assert SupervisorConfig(foreign="report").blocked_devices(foreign) == frozenset()
    finally:
        stranger.kill()
        stranger.wait()
        view.pids.clear()  # NVML forgets them, so teardown sees the rank gone


def test_foreign_process_memory_comes_from_the_inventory(state_dir, cleanup):
    from labgang.agent.supervisor.foreign import find_foreign

    class Proc:
        def __init__(self, pid, used):
            self.pid, self.used_memory_bytes = pid, used

    class Mig:
        uuid = "MIG-1"
        processes = (Proc(os.getpid(), 512 * 2**20),)

    class Gpu:
        uuid = "GPU-1"
        processes = ()
        mig_devices = (Mig(),)

    class Inventory:
        gpus = (Gpu(),)

        def device_pids(self):
            return {"MIG-1": frozenset({os.getpid()})}

    found = find_foreign(Inventory(), supervised=set())
    assert [(f.pid, f.device, f.used_memory_bytes) for f in found] == [(os.getpid(), "MIG-1", 512 * 2**20)]
    assert find_foreign(Inventory(), supervised={os.getpid()}) == []


def test_descendants_of_a_rank_are_not_foreign(state_dir, make_spec, cleanup, h):
    pidfile = state_dir / "child.pid"
    sup = Supervisor(state_dir, allow_root=True)
    cleanup.append(sup)
    sup.launch(make_spec(["sh", "-c", f"sleep 60 & echo $! > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; wait"]))
    child = int(h.wait_for_file(pidfile))
    h.run_until(sup, h.all_in(sup, RankState.RUNNING))
    assert sup.foreign_processes({"GPU-test-0": frozenset({child, sup.ranks()[0].pid})}) == []


def test_a_failing_device_query_never_declares_a_rank_gone(state_dir, make_spec, cleanup, h):
    answers = {"fail": True}

    def device_pids():
        if answers["fail"]:
            raise RuntimeError("NVML error: GPU is lost")
        return {}

    sup = Supervisor(state_dir, allow_root=True, device_pids=device_pids)
    cleanup.append(sup)
    sup.launch(make_spec(["true"]))
    shim_pid = json.loads((state_dir / "ranks" / "job1" / "0" / "shim.json").read_text())["pid"]
    # Past the point where only the device check is left: the rank and its small parent are gone.
    h.run_until(sup, lambda: sup.ranks()[0].state is RankState.RELEASING and not h.pid_alive(shim_pid))
    for _ in range(5):
        assert [e.kind for e in sup.tick()] == []
    assert sup.ranks()[0].state is RankState.RELEASING
    answers["fail"] = False
    h.run_until(sup, h.all_in(sup, RankState.GONE))
