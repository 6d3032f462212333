"""Host CPU/memory limits: the decision for every reason (pure, table-driven), the probe's order
over a plain folder standing in for the ranks' cgroup, and a rank's limits from its request
(the real write into cgroup v2: tests/supervisor/test_hostlimits_cgroup2.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from labgang.agent.confine import RankCgroups, setup_host_limits
from labgang.agent.confine.hostlimits import (
    HostLimits,
    LimitFacts,
    RankLimits,
    decide_limits,
    probe_limits,
    rank_limits,
    v1_controllers,
)

GIB = 1 << 30
ALL_OK = LimitFacts(
    simulated=False,
    cgroup2_mount="/sys/fs/cgroup",
    ranks_dir="/sys/fs/cgroup/labgang.service/labgang.ranks",
    ranks_dir_error=None,
    controllers=frozenset({"cpuset", "cpu", "io", "memory", "pids"}),
    enable_error=None,
)


@pytest.mark.parametrize(
    ("changes", "enforced", "reason_part"),
    [
        pytest.param({}, True, "cpu.max and memory.max per rank under /sys/fs/cgroup/labgang.service", id="ok"),
        pytest.param({"simulated": True}, False, "simulated node", id="simulated"),
        pytest.param({"cgroup2_mount": None, "ranks_dir": None}, False, "no cgroup v2 hierarchy", id="cgroup-v1"),
        pytest.param(
            {"ranks_dir": None}, False, "/sys/fs/cgroup (agent's cgroup unknown) is not writable", id="no-dir"
        ),
        pytest.param(
            {"ranks_dir_error": "Permission denied"},
            False,
            "labgang.ranks is not writable (Permission denied); delegate it",
            id="not-delegated",
        ),
        pytest.param(
            {"controllers": frozenset({"cpu", "pids"})},
            False,
            "controller(s) memory not available in /sys/fs/cgroup/labgang.service/labgang.ranks "
            "(enable them in /sys/fs/cgroup/labgang.service/cgroup.subtree_control",
            id="no-memory-controller",
        ),
        pytest.param(
            {"controllers": frozenset()}, False, "controller(s) cpu, memory not available", id="no-controllers"
        ),
        pytest.param(
            {"enable_error": "Device or resource busy"},
            False,
            "cannot enable +cpu +memory in /sys/fs/cgroup/labgang.service/labgang.ranks/cgroup.subtree_control: "
            "Device or resource busy",
            id="enable-refused",
        ),
    ],
)
def test_decide_limits_names_every_reason(changes: dict[str, object], enforced: bool, reason_part: str) -> None:
    limits = decide_limits(dataclasses.replace(ALL_OK, **changes))  # type: ignore[arg-type]
    assert limits.enforced is enforced
    assert reason_part in limits.reason
    assert limits.to_dict() == {"enforced": enforced, "reason": limits.reason}
    assert limits.message().startswith("host limits enforced: " if enforced else "host limits not enforced: ")
    assert (limits.ranks_dir is not None) is enforced


def test_first_missing_condition_wins() -> None:
    facts = dataclasses.replace(ALL_OK, ranks_dir_error="Read-only file system", controllers=frozenset())
    assert "not writable (Read-only file system)" in decide_limits(facts).reason


def test_probe_touches_nothing_without_a_cgroup2_ranks_folder(tmp_path: Path) -> None:
    made: list[str] = []
    for kwargs in (
        {"simulated": True, "cgroup2_mount": "/sys/fs/cgroup", "ranks_dir": str(tmp_path / "r")},
        {"simulated": False, "cgroup2_mount": None, "ranks_dir": None},
        {"simulated": False, "cgroup2_mount": "/sys/fs/cgroup", "ranks_dir": None},
    ):
        facts = probe_limits(make_dir=made.append, **kwargs)
        assert facts.controllers == frozenset() and facts.ranks_dir_error is None
    assert made == []


def test_probe_reports_a_folder_it_cannot_make(tmp_path: Path) -> None:
    def refuse(path: str) -> None:
        raise PermissionError(13, "Permission denied", path)

    facts = probe_limits(simulated=False, cgroup2_mount=str(tmp_path), ranks_dir=str(tmp_path / "r"), make_dir=refuse)
    assert facts.ranks_dir_error == "Permission denied"
    assert "not writable (Permission denied)" in decide_limits(facts).reason


def test_probe_enables_the_controllers_only_when_available(tmp_path: Path) -> None:
    ranks = tmp_path / "labgang.ranks"
    ranks.mkdir()
    (ranks / "cgroup.controllers").write_text("cpuset pids\n")
    facts = probe_limits(simulated=False, cgroup2_mount=str(tmp_path), ranks_dir=str(ranks))
    assert facts.controllers == {"cpuset", "pids"} and not (ranks / "cgroup.subtree_control").exists()
    assert not decide_limits(facts).enforced

    (ranks / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    facts = probe_limits(simulated=False, cgroup2_mount=str(tmp_path), ranks_dir=str(ranks))
    assert (ranks / "cgroup.subtree_control").read_text() == "+cpu +memory"
    assert decide_limits(facts) == HostLimits(True, f"cpu.max and memory.max per rank under {ranks}", str(ranks))


def test_probe_reports_a_refused_subtree_control_write(tmp_path: Path) -> None:
    ranks = tmp_path / "labgang.ranks"
    ranks.mkdir()
    (ranks / "cgroup.controllers").write_text("cpu memory\n")
    (ranks / "cgroup.subtree_control").mkdir()  # writing it fails (IsADirectoryError)
    facts = probe_limits(simulated=False, cgroup2_mount=str(tmp_path), ranks_dir=str(ranks))
    assert facts.enable_error is not None
    assert "cannot enable +cpu +memory" in decide_limits(facts).reason


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        pytest.param(dict(cpus_per_task=6), RankLimits(6, None), id="cpus-only"),
        pytest.param(dict(mem_per_node_bytes=64 * GIB, ranks_on_node=4), RankLimits(None, 16 * GIB), id="mem-split"),
        pytest.param(dict(mem_per_node_bytes=10, ranks_on_node=3), RankLimits(None, 3), id="mem-split-rounds-down"),
        pytest.param(dict(mem_per_gpu_bytes=20 * GIB, rank_gpus=2), RankLimits(None, 40 * GIB), id="mem-per-gpu"),
        pytest.param(dict(mem_per_gpu_bytes=20 * GIB, rank_gpus=0), RankLimits(None, None), id="mem-per-gpu-no-gpu"),
        pytest.param({}, RankLimits(None, None), id="nothing-asked"),
    ],
)
def test_rank_limits_split_as_slurm_does(request_: dict[str, int], expected: RankLimits) -> None:
    args: dict[str, int | None] = {
        "cpus_per_task": None,
        "mem_per_node_bytes": None,
        "mem_per_gpu_bytes": None,
        "ranks_on_node": 1,
        "rank_gpus": 1,
    }
    args.update(request_)
    assert rank_limits(**args) == expected  # type: ignore[arg-type]


def test_cgroup_file_values() -> None:
    assert RankLimits(6, 16 * GIB).cpu_max() == "600000 100000"
    assert RankLimits(6, 16 * GIB).memory_max() == str(16 * GIB)
    assert RankLimits(None, None).cpu_max() == "max 100000"
    assert RankLimits(None, None).memory_max() == "max"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param(dict(mem_per_node_bytes=GIB, mem_per_gpu_bytes=GIB), "mem:", id="both-memory-forms"),
        pytest.param(dict(ranks_on_node=0), "ranks_on_node:", id="no-ranks"),
        pytest.param(dict(rank_gpus=-1), "rank_gpus:", id="negative-gpus"),
        pytest.param(dict(cpus_per_task=0), "cpus_per_task:", id="zero-cpus"),
        pytest.param(dict(mem_per_node_bytes=-5), "mem_per_node_bytes:", id="negative-mem"),
    ],
)
def test_rank_limits_refuses_bad_input_naming_the_field(kwargs: dict[str, int], field: str) -> None:
    args: dict[str, int | None] = {
        "cpus_per_task": None,
        "mem_per_node_bytes": None,
        "mem_per_gpu_bytes": None,
        "ranks_on_node": 1,
        "rank_gpus": 1,
    }
    args.update(kwargs)
    with pytest.raises(ValueError, match=f"^{field}"):
        rank_limits(**args)  # type: ignore[arg-type]


MOUNTINFO_V2 = "30 23 0:26 / {mount} rw,nosuid shared:4 - cgroup2 cgroup2 rw,nsdelegate\n"
MOUNTINFO_V1 = "31 23 0:27 / /sys/fs/cgroup/memory rw shared:5 - cgroup cgroup rw,memory\n"


def _proc(tmp_path: Path, mountinfo: str, cgroup: str) -> str:
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "mountinfo").write_text(mountinfo)
    (proc / "self" / "cgroup").write_text(cgroup)
    return str(proc)


def test_setup_host_limits_off_and_simulated(tmp_path: Path) -> None:
    assert setup_host_limits("off", simulated=False, cgroup_root=None).reason.startswith("turned off (confine = off")
    limits = setup_host_limits("auto", simulated=True, cgroup_root=None)
    assert not limits.enforced and limits.reason.startswith("simulated node")


def test_setup_host_limits_on_cgroup_v1(tmp_path: Path) -> None:
    proc = _proc(tmp_path, MOUNTINFO_V1, "4:memory:/user.slice\n")
    limits = setup_host_limits("auto", simulated=False, cgroup_root=None, proc=proc)
    assert limits == HostLimits(False, "no cgroup v2 hierarchy is mounted (cgroup v1 only)")


def test_setup_host_limits_finds_the_ranks_folder_in_the_agents_cgroup(tmp_path: Path) -> None:
    mount = tmp_path / "cg"
    agent_cg = mount / "system.slice" / "labgang-agent.service"
    agent_cg.mkdir(parents=True)
    proc = _proc(tmp_path, MOUNTINFO_V1 + MOUNTINFO_V2.format(mount=mount), "0::/system.slice/labgang-agent.service\n")
    limits = setup_host_limits("auto", simulated=False, cgroup_root=None, proc=proc)
    # The folder is made, but a plain folder lists no controllers: the reason names where to enable them.
    assert (agent_cg / "labgang.ranks").is_dir()
    assert not limits.enforced
    assert limits.reason.startswith(f"controller(s) cpu, memory not available in {agent_cg / 'labgang.ranks'}")


def test_a_hybrid_hosts_reason_says_its_cpu_and_memory_are_bound_to_cgroup_v1(tmp_path: Path) -> None:
    mount = tmp_path / "unified"
    agent_cg = mount / "system.slice" / "labgang-agent.service"
    agent_cg.mkdir(parents=True)
    v1 = MOUNTINFO_V1 + "32 23 0:28 / /sys/fs/cgroup/cpu rw shared:6 - cgroup cgroup rw,cpu\n"
    proc = _proc(tmp_path, v1 + MOUNTINFO_V2.format(mount=mount), "0::/system.slice/labgang-agent.service\n")
    limits = setup_host_limits("auto", simulated=False, cgroup_root=None, proc=proc)
    assert not limits.enforced
    assert limits.reason == (
        "cgroup v1 host: controller(s) cpu, memory are bound to cgroup v1 hierarchies (cpu at /sys/fs/cgroup/cpu, "
        f"memory at /sys/fs/cgroup/memory), so the cgroup v2 hierarchy at {mount} cannot have them; limits need a "
        "cgroup v2 host (boot with systemd.unified_cgroup_hierarchy=1)"
    )
    assert v1_controllers(v1) == (("cpu", "/sys/fs/cgroup/cpu"), ("memory", "/sys/fs/cgroup/memory"))


def test_without_device_confinement_a_rank_still_gets_a_cgroup_for_its_limits(tmp_path: Path) -> None:
    installed: list[str] = []
    cgroups = RankCgroups(
        str(tmp_path), None, install=lambda where, rules, majors: installed.append(where), enforce_limits=True
    )
    procs = cgroups.prepare("7.0", 0, ["GPU-unfenced"], RankLimits(3, 2 * GIB))
    assert procs == str(tmp_path / "7.0.0" / "cgroup.procs")
    assert (tmp_path / "7.0.0" / "cpu.max").read_text().split() == ["300000", "100000"]
    assert int((tmp_path / "7.0.0" / "memory.max").read_text()) == 2 * GIB
    assert installed == []  # no device filter: the rank is not confined to its devices, only limited
