"""Card-enforced ``--gpu-mem`` budgets (``agent/confine/devmem.py``): the ``dmem.capacity`` parser and
the card ↔ region match by PCI bus id, the decision for every reason (pure, table-driven), the
probe over a folder tree laid out like cgroupfs (the root's ``cgroup.controllers`` and
``dmem.capacity``, the ranks' folder), and the ``dmem.max`` write by the rank cgroup writer, with
its fall back to watching where the kernel refuses it. The real write under a cgroup v2 ``dmem``
mount: tests/supervisor/test_devmem_cgroup2.py."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from labgang.agent.confine import NodeDevices, RankCgroups, setup_gpu_mem
from labgang.agent.confine.devmem import (
    DmemFacts,
    DmemWriter,
    GpuMemLimits,
    card_region,
    decide_gpu_mem,
    kernel_bus_id,
    parse_capacity,
    probe_dmem,
)

GIB = 1 << 30
CAPACITY = (
    "drm/0000:3b:00.0/vram0 85899345920\n"
    "drm/0000:3b:00.0/stolen 67108864\n"
    "drm/0000:5e:00.0/vram0 85899345920\n"
    "garbage line here\n"
)
CARDS = {"GPU-a": "00000000:3B:00.0", "GPU-b": "00000000:5E:00.0"}
ALL_OK = DmemFacts(
    simulated=False,
    cgroup2_mount="/sys/fs/cgroup",
    root_controllers=frozenset({"cpu", "memory", "dmem"}),
    capacity=parse_capacity(CAPACITY),
    cards=CARDS,
    ranks_dir="/sys/fs/cgroup/labgang.service/labgang.ranks",
    ranks_controllers=frozenset({"dmem"}),
)


def test_capacity_lines_and_bus_ids_as_the_kernel_writes_them() -> None:
    assert parse_capacity(CAPACITY) == {
        "drm/0000:3b:00.0/vram0": 85899345920,
        "drm/0000:3b:00.0/stolen": 67108864,
        "drm/0000:5e:00.0/vram0": 85899345920,
    }
    assert kernel_bus_id("00000000:3B:00.0") == "0000:3b:00.0"  # NVML's 8-digit domain, upper case
    assert kernel_bus_id("0000:3b:00.0") == "0000:3b:00.0"  # busIdLegacy
    assert kernel_bus_id("3B:00.0") == "0000:3b:00.0"
    assert kernel_bus_id("not a bus") is None
    assert kernel_bus_id("0000:zz:00.0") is None


def test_a_card_gets_its_largest_region_and_never_another_cards() -> None:
    capacity = parse_capacity(CAPACITY)
    assert card_region(capacity, "00000000:3B:00.0") == "drm/0000:3b:00.0/vram0"  # not the small stolen one
    assert card_region(capacity, "00000000:5E:00.0") == "drm/0000:5e:00.0/vram0"
    assert card_region(capacity, "00000000:3B:00.1") is None  # another function of the device
    assert card_region({"drm/0000:13b:00.0/vram0": 1}, "00000000:3B:00.0") is None  # a part, not a substring
    assert card_region(capacity, "??") is None


@pytest.mark.parametrize(
    ("changes", "mode", "reason_part"),
    [
        pytest.param(
            {},
            "enforced",
            "dmem: each shard rank's budget in its cgroup's dmem.max under "
            "/sys/fs/cgroup/labgang.service/labgang.ranks (2 card(s) in /sys/fs/cgroup/dmem.capacity)",
            id="ok",
        ),
        pytest.param({"simulated": True}, "watched", "simulated GPUs: budgets are watched through NVML", id="sim"),
        pytest.param({"cgroup2_mount": None}, "watched", "no cgroup v2 hierarchy is mounted", id="cgroup-v1"),
        pytest.param(
            {"root_controllers": frozenset({"cpu", "memory"})},
            "watched",
            "no cgroup v2 dmem controller in /sys/fs/cgroup/cgroup.controllers (Linux 6.14+, CONFIG_CGROUP_DMEM)",
            id="no-dmem",
        ),
        pytest.param({"cards": {}}, "watched", "no GPU whose memory a budget could hold", id="no-gpus"),
        pytest.param(
            {"cards": {**CARDS, "GPU-c": "00000000:AF:00.0"}},
            "watched",
            "no dmem region for card(s) GPU-c (bus 0000:af:00.0) in /sys/fs/cgroup/dmem.capacity "
            "(the driver registers none)",
            id="one-card-without-region",
        ),
        pytest.param(
            {"cards": {"GPU-a": None}}, "watched", "no dmem region for card(s) GPU-a (bus unknown)", id="bus-unknown"
        ),
        pytest.param(
            {"ranks_dir": None, "no_cgroup_reason": "not confined: simulated"},
            "watched",
            "ranks get no cgroup of their own (not confined: simulated)",
            id="no-rank-cgroups",
        ),
        pytest.param(
            {"ranks_controllers": frozenset({"cpu"})},
            "watched",
            "controller dmem not available in /sys/fs/cgroup/labgang.service/labgang.ranks (enable it in "
            "/sys/fs/cgroup/labgang.service/cgroup.subtree_control, or delegate it: Delegate=dmem)",
            id="not-delegated",
        ),
        pytest.param(
            {"enable_error": "Device or resource busy"},
            "watched",
            "cannot enable +dmem in /sys/fs/cgroup/labgang.service/labgang.ranks/cgroup.subtree_control: "
            "Device or resource busy",
            id="enable-refused",
        ),
    ],
)
def test_decision_names_every_reason(changes: dict[str, object], mode: str, reason_part: str) -> None:
    limits = decide_gpu_mem(dataclasses.replace(ALL_OK, **changes))  # type: ignore[arg-type]
    assert limits.mode == mode
    assert reason_part in limits.reason
    assert limits.to_dict() == {"mode": mode, "reason": limits.reason}
    if mode == "enforced":
        assert limits.reason.startswith("dmem")
        assert dict(limits.regions) == {"GPU-a": "drm/0000:3b:00.0/vram0", "GPU-b": "drm/0000:5e:00.0/vram0"}
    else:
        assert limits.reason.endswith("budgets are watched through NVML")
        assert not limits.regions


def _cgroupfs(root: Path, *, controllers: str, capacity: str, ranks_controllers: str) -> Path:
    """A folder tree laid out like a cgroup v2 mount with the agent's ranks folder in it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "cgroup.controllers").write_text(controllers)
    (root / "dmem.capacity").write_text(capacity)
    ranks = root / "labgang.service" / "labgang.ranks"
    ranks.mkdir(parents=True)
    (ranks / "cgroup.controllers").write_text(ranks_controllers)
    (ranks / "cgroup.subtree_control").write_text("")
    return ranks


def test_probe_reads_the_regions_and_enables_dmem_for_the_ranks(tmp_path: Path) -> None:
    ranks = _cgroupfs(tmp_path, controllers="cpu memory dmem\n", capacity=CAPACITY, ranks_controllers="dmem\n")
    facts = probe_dmem(simulated=False, cgroup2_mount=str(tmp_path), cards=CARDS, ranks_dir=str(ranks))
    assert (ranks / "cgroup.subtree_control").read_text() == "+dmem"
    assert facts.capacity == parse_capacity(CAPACITY)
    limits = decide_gpu_mem(facts)
    assert (limits.mode, dict(limits.regions)) == (
        "enforced",
        {"GPU-a": "drm/0000:3b:00.0/vram0", "GPU-b": "drm/0000:5e:00.0/vram0"},
    )


@pytest.mark.parametrize(
    ("controllers", "capacity", "cards", "why"),
    [
        ("cpu memory\n", CAPACITY, CARDS, "no cgroup v2 dmem controller"),
        ("dmem\n", "", CARDS, "no dmem region for card(s) GPU-a (bus 0000:3b:00.0), GPU-b (bus 0000:5e:00.0)"),
        ("dmem\n", CAPACITY, {**CARDS, "GPU-c": "00000000:AF:00.0"}, "no dmem region for card(s) GPU-c"),
    ],
)
def test_probe_touches_nothing_where_the_card_cannot_hold_budgets(
    tmp_path: Path, controllers: str, capacity: str, cards: dict[str, str | None], why: str
) -> None:
    ranks = _cgroupfs(tmp_path, controllers=controllers, capacity=capacity, ranks_controllers="dmem\n")
    limits = decide_gpu_mem(probe_dmem(simulated=False, cgroup2_mount=str(tmp_path), cards=cards, ranks_dir=str(ranks)))
    assert limits.mode == "watched" and why in limits.reason
    assert (ranks / "cgroup.subtree_control").read_text() == ""  # +dmem not enabled for nothing


def test_probe_on_a_ranks_folder_without_the_controller_says_how_to_delegate_it(tmp_path: Path) -> None:
    ranks = _cgroupfs(tmp_path, controllers="dmem\n", capacity=CAPACITY, ranks_controllers="cpu memory\n")
    limits = decide_gpu_mem(probe_dmem(simulated=False, cgroup2_mount=str(tmp_path), cards=CARDS, ranks_dir=str(ranks)))
    assert limits.mode == "watched" and "Delegate=dmem" in limits.reason
    assert (ranks / "cgroup.subtree_control").read_text() == ""


def test_setup_reads_the_cgroup2_mount_from_mountinfo(tmp_path: Path) -> None:
    cg = tmp_path / "cg"
    ranks = _cgroupfs(cg, controllers="dmem\n", capacity=CAPACITY, ranks_controllers="dmem\n")
    proc = tmp_path / "proc" / "self"
    proc.mkdir(parents=True)
    (proc / "mountinfo").write_text(f"30 23 0:26 / {cg} rw,nosuid - cgroup2 cgroup2 rw\n")
    limits = setup_gpu_mem(simulated=False, cards=CARDS, ranks_dir=str(ranks), proc=str(tmp_path / "proc"))
    assert limits.mode == "enforced", limits.reason
    sim = setup_gpu_mem(simulated=True, cards=CARDS, ranks_dir=str(ranks), proc=str(tmp_path / "proc"))
    assert sim == GpuMemLimits("watched", "simulated GPUs: budgets are watched through NVML")


NODE = NodeDevices({"nvidia-frontend": 195}, {"GPU-a": 0, "GPU-b": 1}, {}, {})
REGIONS = {"GPU-a": "drm/0000:3b:00.0/vram0", "GPU-b": "drm/0000:5e:00.0/vram0"}


def test_writer_puts_a_shard_ranks_budget_in_its_dmem_max(tmp_path: Path) -> None:
    cgroups = RankCgroups(str(tmp_path), NODE, install=lambda where, rules, majors: None)
    told: list[GpuMemLimits] = []
    cgroups.dmem = DmemWriter(REGIONS, on_fallback=told.append)
    cgroups.prepare("j", 0, ["GPU-b"], None, 20 * GIB)
    assert (tmp_path / "j.0" / "dmem.max").read_text() == f"drm/0000:5e:00.0/vram0 {20 * GIB}"
    cgroups.prepare("j", 1, ["GPU-a"])  # no budget: nothing written
    assert not (tmp_path / "j.1" / "dmem.max").exists()
    assert told == [] and cgroups.dmem.fallback is None


def test_a_refused_write_falls_back_to_watching_and_never_fails_the_launch(tmp_path: Path) -> None:
    told: list[GpuMemLimits] = []
    writer = DmemWriter(REGIONS, on_fallback=told.append)

    def refusing(where: str, rules: object, majors: object) -> None:
        Path(where, "dmem.max").mkdir()  # the kernel's EINVAL/EPERM stand-in: the write raises OSError

    refused = RankCgroups(str(tmp_path), NODE, install=refusing)
    refused.dmem = writer
    procs = refused.prepare("j", 0, ["GPU-a"], None, 8 * GIB)
    assert procs == str(tmp_path / "j.0" / "cgroup.procs")  # the rank still starts, fenced
    [fallback] = told
    assert fallback.mode == "watched"
    line = "'drm/0000:3b:00.0/vram0 8589934592'"
    assert fallback.reason.startswith(f"dmem write failed: the kernel refused dmem.max {line} of rank 0 of job j (")
    assert fallback.reason.endswith("budgets are watched through NVML from then on")
    later = RankCgroups(str(tmp_path), NODE, install=lambda where, rules, majors: None)
    later.dmem = writer
    later.prepare("j", 1, ["GPU-b"], None, 8 * GIB)
    assert not (tmp_path / "j.1" / "dmem.max").exists()  # the node watches from then on: no write
    assert len(told) == 1


def test_a_card_without_a_region_falls_back_too(tmp_path: Path) -> None:
    told: list[GpuMemLimits] = []
    writer = DmemWriter({"GPU-a": "drm/0000:3b:00.0/vram0"}, on_fallback=told.append)
    assert writer.write(str(tmp_path), "GPU-z", GIB, job_id="j", rank=3) is False
    assert [t.reason for t in told] == [
        "dmem write failed: card GPU-z of rank 3 of job j has no dmem region; budgets are watched through NVML "
        "from then on"
    ]
    assert not (tmp_path / "dmem.max").exists()
