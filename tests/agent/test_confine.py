"""The confinement decision, the device-node translation, the eBPF program and the writer's
bookkeeping, without root (the real cgroup v2 path: tests/supervisor/test_confine_cgroup2.py)."""

from __future__ import annotations

import dataclasses
import os
import struct
from pathlib import Path

import pytest
from labgang.agent.confine import (
    CGROUP_BPF,
    ConfineError,
    HostFacts,
    NodeDevices,
    RankCgroups,
    decide,
    node_devices,
    probe_host,
)
from labgang.agent.confine.bpfdev import DeviceRule, device_filter_program
from labgang.agent.confine.decide import cgroup2_mount_point, own_cgroup_path
from labgang.agent.confine.devices import DeviceNodeError, MigPlace, parse_mig_minors, parse_proc_devices
from labgang.agent.inventory import read_inventory
from labgang.agent.nvml import open_backend
from labgang.agent.supervisor.config import SupervisorConfig

REPO = Path(__file__).resolve().parents[2]

ABLE = HostFacts(
    simulated=False,
    cap_sys_admin=True,
    cgroup2_mount="/sys/fs/cgroup",
    own_cgroup="/system.slice/labgang-agent.service",
    ranks_dir="/sys/fs/cgroup/system.slice/labgang-agent.service/labgang.ranks",
    ranks_dir_error=None,
    has_nvidia_majors=True,
    bpf_error=None,
)


@pytest.mark.parametrize(
    ("setting", "change", "mode", "reason"),
    [
        pytest.param("auto", {}, CGROUP_BPF, "each rank in its own cgroup under /sys/fs/cgroup/", id="able"),
        pytest.param("required", {}, CGROUP_BPF, "each rank in its own cgroup", id="required-able"),
        pytest.param("off", {}, "none", "turned off (confine = off", id="off"),
        pytest.param("auto", {"simulated": True}, "none", "simulated GPUs have no device nodes", id="simulated"),
        pytest.param("auto", {"cap_sys_admin": False}, "none", "lacks CAP_SYS_ADMIN", id="not-root"),
        pytest.param("auto", {"cgroup2_mount": None}, "none", "no cgroup v2 hierarchy", id="cgroup-v1"),
        pytest.param(
            "auto",
            {"ranks_dir_error": "Read-only file system"},
            "none",
            "labgang.ranks is not writable (Read-only file system); delegate it (Delegate=yes)",
            id="read-only",
        ),
        pytest.param("auto", {"has_nvidia_majors": False}, "none", "no NVIDIA device nodes", id="no-driver"),
        pytest.param(
            "auto", {"bpf_error": "BPF_PROG_LOAD: Operation not permitted"}, "none", "refused an eBPF", id="no-bpf"
        ),
    ],
)
def test_decision_names_the_first_missing_condition(setting: str, change: dict, mode: str, reason: str) -> None:
    got = decide(setting, dataclasses.replace(ABLE, **change))
    assert got.mode == mode
    assert reason in got.reason
    assert got.confined is (mode == CGROUP_BPF)
    assert (got.ranks_dir is not None) is got.confined
    assert got.to_dict() == {"mode": mode, "reason": got.reason}


def test_decision_refuses_an_unknown_setting() -> None:
    with pytest.raises(ValueError, match=r"confine: 'maybe' is not a setting \(allowed: auto, off, required\)"):
        decide("maybe", ABLE)


def test_agent_config_names_the_bad_confine_setting() -> None:
    with pytest.raises(ValueError, match=r"confine: 'yes' is not a setting"):
        SupervisorConfig.from_dict({"confine": "yes"})
    with pytest.raises(ValueError, match=r"cgroup_root: 'relative/path' is not a folder"):
        SupervisorConfig.from_dict({"cgroup_root": "relative/path"})
    cfg = SupervisorConfig.from_dict({"confine": "required", "cgroup_root": "/sys/fs/cgroup/lab"})
    assert (cfg.confine, cfg.cgroup_root) == ("required", "/sys/fs/cgroup/lab")


def _fake_proc(tmp_path: Path, *, cap_eff: str, mountinfo: str, cgroup: str, devices: str) -> Path:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "status").write_text(f"Name:\tpython\nCapEff:\t{cap_eff}\n")
    (proc / "self" / "mountinfo").write_text(mountinfo)
    (proc / "self" / "cgroup").write_text(cgroup)
    (proc / "devices").write_text(devices)
    return proc


MOUNTINFO_V2 = "30 23 0:26 / /sys/fs/cgroup rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
MOUNTINFO_V1 = "31 23 0:27 / /sys/fs/cgroup/devices rw shared:5 - cgroup cgroup rw,devices\n"
DEVICES = (
    "Character devices:\n  1 mem\n195 nvidia-frontend\n234 nvidia-uvm\n237 nvidia-caps\n\nBlock devices:\n  8 sd\n"
)


def test_probe_reads_capabilities_mounts_cgroup_and_majors(tmp_path: Path) -> None:
    proc = _fake_proc(
        tmp_path,
        cap_eff="000001ffffffffff",
        mountinfo=MOUNTINFO_V1 + MOUNTINFO_V2,
        cgroup="0::/system.slice/labgang-agent.service\n",
        devices=DEVICES,
    )
    made: list[str] = []
    facts = probe_host(simulated=False, proc=str(proc), make_dir=made.append, try_bpf=lambda: None)
    assert facts.cap_sys_admin and facts.has_nvidia_majors
    assert facts.cgroup2_mount == "/sys/fs/cgroup"
    assert facts.ranks_dir == "/sys/fs/cgroup/system.slice/labgang-agent.service/labgang.ranks"
    assert made == [facts.ranks_dir]
    assert decide("auto", facts).confined


def test_probe_on_a_read_only_cgroup_v1_host_without_root(tmp_path: Path) -> None:
    """This machine's situation in the issue: cgroup v1 only, a read-only tree, no CAP_SYS_ADMIN."""

    def read_only(path: str) -> None:
        raise OSError(30, "Read-only file system")

    proc = _fake_proc(tmp_path, cap_eff="0000000000000000", mountinfo=MOUNTINFO_V1, cgroup="5:devices:/\n", devices="")
    facts = probe_host(simulated=False, proc=str(proc), make_dir=read_only, try_bpf=lambda: "never asked")
    assert facts.cgroup2_mount is None and facts.ranks_dir is None and facts.bpf_error is None
    assert decide("auto", facts).reason.startswith("the agent lacks CAP_SYS_ADMIN")
    as_root = dataclasses.replace(facts, cap_sys_admin=True)
    assert decide("auto", as_root).reason == "no cgroup v2 hierarchy is mounted (cgroup v1 only)"
    proc2 = _fake_proc(tmp_path / "b", cap_eff="1fffeffffff", mountinfo=MOUNTINFO_V2, cgroup="0::/\n", devices=DEVICES)
    facts2 = probe_host(simulated=False, proc=str(proc2), make_dir=read_only, try_bpf=lambda: None)
    assert facts2.ranks_dir_error == "Read-only file system"
    assert "is not writable (Read-only file system)" in decide("auto", facts2).reason


def test_mount_and_cgroup_parsers() -> None:
    assert cgroup2_mount_point(MOUNTINFO_V1) is None
    assert cgroup2_mount_point("40 1 0:30 / /mnt/my\\040cg rw - cgroup2 none rw\n") == "/mnt/my cg"
    assert own_cgroup_path("12:pids:/x\n0::/user.slice/u.scope\n") == "/user.slice/u.scope"
    assert own_cgroup_path("5:devices:/\n") is None
    assert parse_proc_devices(DEVICES) == {"mem": 1, "nvidia-frontend": 195, "nvidia-uvm": 234, "nvidia-caps": 237}
    assert parse_mig_minors("config 1\nmonitor 2\ngpu0/gi1/access 12\ngpu0/gi1/ci0/access 13\n") == {
        "config": 1,
        "monitor": 2,
        "gpu0/gi1/access": 12,
        "gpu0/gi1/ci0/access": 13,
    }


NODE = NodeDevices(
    majors=parse_proc_devices(DEVICES),
    gpu_minors={"GPU-a": 0, "GPU-b": 1, "GPU-m": 2},
    mig={"MIG-1": MigPlace("GPU-m", 1, 0), "MIG-2": MigPlace("GPU-m", 2, 0)},
    mig_minors=parse_mig_minors(
        "gpu2/gi1/access 21\ngpu2/gi1/ci0/access 22\ngpu2/gi2/access 30\ngpu2/gi2/ci0/access 31\n"
    ),
)


def test_a_gpu_rank_may_open_its_gpu_and_the_control_devices_only() -> None:
    rules = NODE.rules_for(["GPU-b"])
    assert set(rules) == {
        DeviceRule(195, 1),  # /dev/nvidia1
        DeviceRule(195, 255),  # /dev/nvidiactl
        DeviceRule(195, 254),  # /dev/nvidia-modeset
        DeviceRule(234, None),  # /dev/nvidia-uvm, /dev/nvidia-uvm-tools
    }
    assert NODE.guarded_majors() == (195, 237)


def test_a_mig_rank_gets_its_parent_gpu_and_its_two_capabilities() -> None:
    rules = set(NODE.rules_for(["MIG-1"]))
    assert {DeviceRule(195, 2), DeviceRule(237, 21), DeviceRule(237, 22)} <= rules
    assert DeviceRule(237, 30) not in rules and DeviceRule(237, 31) not in rules  # the sibling instance
    assert DeviceRule(195, 0) not in rules


def test_untranslatable_devices_are_refused_not_left_open() -> None:
    with pytest.raises(DeviceNodeError, match="no minor number known for GPU GPU-zzz"):
        NODE.rules_for(["GPU-zzz"])
    no_caps = dataclasses.replace(NODE, mig_minors={})
    with pytest.raises(DeviceNodeError, match="MIG device MIG-1: no nvidia-caps minors for gpu2/gi1/access"):
        no_caps.rules_for(["MIG-1"])
    with pytest.raises(DeviceNodeError, match="is the NVIDIA driver loaded"):
        dataclasses.replace(NODE, majors={}).rules_for(["GPU-a"])


def test_node_devices_reads_mig_places_from_the_inventory(tmp_path: Path) -> None:
    backend = open_backend(REPO / "config" / "sim" / "a100x8-mig.toml")
    try:
        inv = read_inventory(backend)
    finally:
        backend.nvmlShutdown()
    proc = _fake_proc(tmp_path, cap_eff="0", mountinfo="", cgroup="", devices=DEVICES)
    found = node_devices(inv, {}, proc=str(proc))
    migs = [(g, m) for g in inv.gpus for m in g.mig_devices]
    assert migs, "the machine file has MIG devices"
    gpu, mig = migs[0]
    assert isinstance(gpu.uuid, str) and isinstance(mig.uuid, str)
    assert isinstance(mig.gi_id, int) and isinstance(mig.ci_id, int)
    assert found.mig[mig.uuid] == MigPlace(gpu.uuid, mig.gi_id, mig.ci_id)
    assert len(found.mig) == len(migs)
    assert found.frontend_major == 195


def _decode(program: bytes) -> list[tuple[int, int, int, int, int]]:
    out = []
    for i in range(0, len(program), 8):
        code, regs, off, imm = struct.unpack("<BBhi", program[i : i + 8])
        out.append((code, regs & 0xF, regs >> 4, off, imm))
    return out


def _run(program: bytes, dev_type: int, major: int, minor: int) -> int:
    """Interpret the few opcodes the filter uses: a check of the program's logic without a kernel."""
    insns = _decode(program)
    regs = [0] * 11
    ctx = (dev_type | (2 << 16), major, minor)
    pc = 0
    while True:
        code, dst, src, off, imm = insns[pc]
        if code == 0x61:
            assert src == 1, "loads read the context (r1)"
            regs[dst] = ctx[off // 4]
        elif code == 0x57:
            regs[dst] &= imm
        elif code == 0xB7:
            regs[dst] = imm
        elif code == 0x55:
            if regs[dst] != imm:
                pc += off
        elif code == 0x95:
            return regs[0]
        else:
            raise AssertionError(f"unexpected opcode {code:#x}")
        pc += 1


def test_filter_program_allows_its_devices_denies_other_gpus_and_leaves_the_rest() -> None:
    rules = NODE.rules_for(["GPU-b"])
    program = device_filter_program(rules, NODE.guarded_majors())
    char, block = 2, 1
    assert _run(program, char, 195, 1) == 1  # its GPU
    assert _run(program, char, 195, 255) == 1  # nvidiactl
    assert _run(program, char, 234, 1) == 1  # nvidia-uvm-tools
    assert _run(program, char, 195, 0) == 0  # another GPU
    assert _run(program, char, 237, 21) == 0  # a MIG capability it was not given
    assert _run(program, char, 1, 3) == 1  # /dev/null: not an NVIDIA device
    assert _run(program, block, 195, 0) == 1  # a block device that happens to share the number


def test_writer_makes_one_fenced_folder_per_rank_and_fails_closed(tmp_path: Path) -> None:
    attached: list[tuple[str, tuple[DeviceRule, ...], tuple[int, ...]]] = []

    def install(where, rules, majors) -> None:
        attached.append((where, tuple(rules), tuple(majors)))

    cgroups = RankCgroups(str(tmp_path), NODE, install=install)
    procs = cgroups.prepare("job/7", 1, ["GPU-a"])
    assert procs == str(tmp_path / "job_7.1" / "cgroup.procs")
    assert attached == [(str(tmp_path / "job_7.1"), NODE.rules_for(["GPU-a"]), (195, 237))]
    cgroups.prepare("job/7", 1, ["GPU-a"])  # a second attempt: a fresh folder and filter
    assert len(attached) == 2
    cgroups.release("job/7", 1)
    assert not (tmp_path / "job_7.1").exists()
    with pytest.raises(ConfineError, match="cannot confine rank 0 of job j: device GPU-zzz"):
        cgroups.prepare("j", 0, ["GPU-zzz"])

    def refuse(where, rules, majors) -> None:
        raise OSError(1, "Operation not permitted")

    with pytest.raises(ConfineError, match=r"cannot confine rank 0 of job j in .*j\.0: .*Operation not permitted"):
        RankCgroups(str(tmp_path), NODE, install=refuse).prepare("j", 0, ["GPU-a"])
    assert os.listdir(tmp_path) == []  # nothing half-made is left


def test_probe_touches_nothing_on_a_host_already_ruled_out(tmp_path: Path) -> None:
    """No driver here: the cgroup folder is not made and bpf(2) is not asked (nothing left behind)."""

    def must_not(*args: object) -> None:
        raise AssertionError("probed further than needed")

    proc = _fake_proc(tmp_path, cap_eff="1fffeffffff", mountinfo=MOUNTINFO_V2, cgroup="0::/\n", devices="")
    facts = probe_host(simulated=False, proc=str(proc), make_dir=must_not, try_bpf=lambda: must_not())
    assert decide("auto", facts).reason == "no NVIDIA device nodes (/proc/devices lists no nvidia-frontend major)"
    assert probe_host(simulated=True, make_dir=must_not, try_bpf=lambda: must_not()).simulated


def test_writer_writes_host_limits_only_where_enforced_and_fails_closed(tmp_path: Path) -> None:
    from labgang.agent.confine.hostlimits import RankLimits

    limits = RankLimits(6, 16 * 1024**3)
    plain = RankCgroups(str(tmp_path), NODE, install=lambda where, rules, majors: None)
    plain.prepare("j", 0, ["GPU-a"], limits)
    assert sorted(os.listdir(tmp_path / "j.0")) == []  # not enforced: nothing written
    plain.release("j", 0)

    enforcing = RankCgroups(str(tmp_path), NODE, install=lambda where, rules, majors: None, enforce_limits=True)
    enforcing.prepare("j", 1, ["GPU-a"], limits)
    assert (tmp_path / "j.1" / "cpu.max").read_text() == "600000 100000"
    assert (tmp_path / "j.1" / "memory.max").read_text() == str(16 * 1024**3)
    for name in ("cpu.max", "memory.max"):  # a real cgroup's files go with it; these are plain files
        (tmp_path / "j.1" / name).unlink()
    enforcing.release("j", 1)

    def refusing_cpu_max(where: str, rules: object, majors: object) -> None:
        os.mkdir(os.path.join(where, "cpu.max"))  # writing cpu.max then fails, as on a host without +cpu

    refused = RankCgroups(str(tmp_path), NODE, install=refusing_cpu_max, enforce_limits=True)
    with pytest.raises(ConfineError, match=r"cannot confine rank 2 of job j in .*j\.2: .*cpu\.max"):
        refused.prepare("j", 2, ["GPU-a"], limits)
