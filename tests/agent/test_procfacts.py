"""ProcessFacts: the host facts of device processes, read from real processes with psutil."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
import time

import pytest
from labgang.agent.inventory import GpuInfo, MigDeviceInfo, NodeInventory, ProcessInfo, Unavailable
from labgang.agent.procfacts import COMMAND_CHARS, ProcessFacts

GiB = 1024**3


def inventory(*pids: int, mig_pid: int | None = None) -> NodeInventory:
    mig = (
        MigDeviceInfo(
            uuid="MIG-1",
            index=0,
            profile="1g.10gb",
            gi_id=1,
            ci_id=0,
            memory_total_bytes=10 * GiB,
            memory_used_bytes=GiB,
            sm_count=14,
            parent_uuid="GPU-1",
            processes=(ProcessInfo(mig_pid, GiB, 1, 0),),
        )
        if mig_pid is not None
        else None
    )
    gpu = GpuInfo(
        index=0,
        uuid="GPU-1",
        name="NVIDIA H100",
        pci_bus_id="0",
        memory_total_bytes=80 * GiB,
        memory_used_bytes=GiB,
        memory_free_bytes=79 * GiB,
        utilization_gpu_pct=1.0,
        utilization_memory_pct=1.0,
        sm_active_pct=1.0,
        sm_occupancy_pct=1.0,
        temperature_c=30.0,
        power_w=70.0,
        power_limit_w=700.0,
        clock_event_reasons=(),
        ecc_volatile_uncorrected=0,
        mig_mode_current=mig is not None,
        mig_mode_pending=mig is not None,
        processes=tuple(ProcessInfo(p, 2 * GiB) for p in pids),
        mig_devices=(mig,) if mig is not None else (),
    )
    return NodeInventory("n1", 0.0, "565", "12", 12070, (gpu,))


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)", "marker-arg"],
        env=dict(os.environ, LABGANG_JOB_ID="j-7", RANK="3"),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"  # the interpreter is up, not mid-exec
    yield proc
    proc.kill()
    proc.wait()


def procs(inv: NodeInventory, mig: bool = False) -> tuple[ProcessInfo, ...]:
    """The processes of GPU 0 (or of its first MIG device), which these inventories always list."""
    found = inv.gpus[0].mig_devices[0].processes if mig else inv.gpus[0].processes
    assert isinstance(found, tuple)
    return found


def gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_live_process_gets_user_command_memory_start_and_its_rank(sleeper) -> None:
    facts = ProcessFacts()
    inv = facts.annotate(inventory(sleeper.pid), {sleeper.pid: ("j-1", 2, ("GPU-1",))})
    (p,) = procs(inv)
    assert p.pid == sleeper.pid and p.used_memory_bytes == 2 * GiB  # NVML's fields kept
    assert p.user == getpass.getuser()
    assert p.command is not None and "marker-arg" in p.command and p.command.startswith(sys.executable)
    assert p.rss_bytes is not None and p.rss_bytes > 1 << 20  # an interpreter holds megabytes
    assert p.started_at is not None and abs(p.started_at - time.time()) < 120
    assert (p.job, p.rank, p.alive) == ("j-1", 2, True)
    assert p.cpu_pct is None  # first sight: no interval to measure over yet


def test_cpu_is_measured_from_the_second_look_on() -> None:
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        facts = ProcessFacts()
        facts.annotate(inventory(busy.pid))
        time.sleep(0.3)  # the interval CPU use is measured over, not a wait for a condition
        (p,) = procs(facts.annotate(inventory(busy.pid)))
        assert p.cpu_pct is not None and p.cpu_pct > 5.0
    finally:
        busy.kill()
        busy.wait()


def test_without_owners_the_job_and_rank_come_from_the_environment(sleeper) -> None:
    (p,) = procs(ProcessFacts(from_environment=True).annotate(inventory(sleeper.pid)))
    assert (p.job, p.rank) == ("j-7", 3)
    (q,) = procs(ProcessFacts().annotate(inventory(sleeper.pid), {}))
    assert (q.job, q.rank) == (None, None)  # the supervisor's word wins: not one of its ranks


def test_a_pid_the_os_does_not_know_is_marked_gone() -> None:
    pid = gone_pid()
    (p,) = procs(ProcessFacts().annotate(inventory(pid)))
    assert p.alive is False and p.user is None and p.command is None and p.rss_bytes is None


def test_mig_device_processes_are_filled_and_long_commands_cut(sleeper) -> None:
    long = subprocess.Popen(
        [sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)", "y" * (2 * COMMAND_CHARS)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        # Popen returns once the exec began; /proc/PID/cmdline is empty until the kernel has set up
        # the new program's arguments, so the test waits for the interpreter's word, as ``sleeper`` does.
        assert long.stdout is not None and long.stdout.readline() == "ready\n"
        inv = ProcessFacts().annotate(inventory(long.pid, mig_pid=sleeper.pid))
        (mp,) = procs(inv, mig=True)
        assert mp.user == getpass.getuser() and mp.alive
        (gp,) = procs(inv)
        assert gp.command is not None and len(gp.command) == COMMAND_CHARS and gp.command.endswith("…")
    finally:
        long.kill()
        long.wait()


def test_the_facts_survive_the_wire_format(sleeper) -> None:
    inv = ProcessFacts().annotate(inventory(sleeper.pid), {sleeper.pid: ("j-1", 0)})
    again = NodeInventory.from_dict(inv.to_dict())
    assert again == inv
    old = NodeInventory.from_dict(inventory(sleeper.pid).to_dict())  # an agent without facts
    (p,) = procs(old)
    assert p.alive is None and p.user is None and isinstance(p.sm_pct, Unavailable)
