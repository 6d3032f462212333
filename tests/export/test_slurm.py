"""``labgang export slurm`` without a Slurm: every config in ``config/`` round-trips to partitions,
QOS and GRES that carry its quotas; the borrow caps follow borrowing and lending limits; the
script is valid sh; names Slurm cannot take fail with a named field. (``test_slurm_real``
starts a real slurmctld and slurmdbd with the same files.)
"""

from __future__ import annotations

import math
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from labgang.launcher.config.cluster import ClusterConfig, ConfigError, load_config, parse_config
from labgang.launcher.export import slurm
from labgang.launcher.export.common import ExportError, Inventory, borrow_cap, resource_names
from labgang.launcher.export.inventory import from_files

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "config" / "sim"
CONFIGS = sorted(p for p in (REPO / "config").glob("*.toml") if "[[queues]]" in p.read_text())
INVENTORIES = {
    "none": [],
    "mig+h100": [SIM / "a100x8-mig.toml", SIM / "h100x8.toml"],
    "two-nodes": [SIM / "n1-4gpu.toml", SIM / "n2-4gpu.toml"],
}


def _inv(key: str) -> Inventory:
    return from_files(INVENTORIES[key]) if INVENTORIES[key] else Inventory()


def _words(line: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


def _lines(text: str, prefix: str) -> list[dict[str, str]]:
    return [_words(line) for line in text.splitlines() if line.startswith(prefix)]


def _qos(script: str) -> dict[str, dict[str, str]]:
    """QOS name -> settings, from the script's ``add qos`` and ``modify qos`` lines."""
    out: dict[str, dict[str, str]] = {}
    for line in script.splitlines():
        m = re.match(r"\s*sacctmgr -i (?:add qos (\S+)|modify qos where name=(\S+) set)(.*)", line)
        if m:
            out.setdefault(m.group(1) or m.group(2), {}).update(_words(m.group(3)))
    return out


def _gpu_total(tres: str) -> int:
    return int(_words(tres.replace(",", " "))["gres/gpu"])


def assert_round_trip(cfg: ClusterConfig, files: dict[str, str], mode: str) -> None:
    conf, script = files[slurm.SLURM_CONF], files[slurm.SACCTMGR]
    parts = {p["PartitionName"]: p for p in _lines(conf, "PartitionName=")}
    qos = _qos(script)
    grace = str(math.ceil(cfg.default_grace_s))
    for q in cfg.queues:
        name = q.name.lower()
        assert _gpu_total(qos[name]["GrpTRES"]) == sum(q.nominal.values())
        assert qos[name]["GraceTime"] == grace
        caps = {r: borrow_cap(cfg, q, r) for r in resource_names(cfg, Inventory())}
        borrows = sum(caps.values()) > 0
        assert (name + "-borrow" in qos) == borrows
        if borrows:
            assert _gpu_total(qos[name + "-borrow"]["GrpTRES"]) == sum(caps.values())
            assert qos[name + "-borrow"]["PreemptMode"] == "requeue"
        if mode == "partitions":
            own = parts[name]
            assert own["QOS"] == name and own["PriorityTier"] == str(slurm.OWNER_TIER) and own["GraceTime"] == grace
            assert (own.get("Default") == "YES") == (q.name == cfg.default_queue)
            if q.users is not None:
                assert own["AllowAccounts"] == name
            elif q.groups is not None:
                assert own["AllowGroups"] == ",".join(sorted(q.groups))
            assert (name + "-borrow" in parts) == borrows
            if borrows:
                assert parts[name + "-borrow"]["PriorityTier"] == str(slurm.BORROW_TIER)
        else:
            assert qos[name]["Priority"] == str(slurm.OWNER_TIER)
    if mode == "qos":
        assert list(parts) == [slurm.SHARED_PARTITION]
    else:
        shift = max(0, -min(cfg.priority_classes.values(), default=0))
        for cls, value in cfg.priority_classes.items():
            assert qos["prio-" + cls.lower()]["Priority"] == str(value + shift)
    settings = {k: v for line in conf.splitlines() if not line.startswith("#") for k, v in [line.split("=", 1)]}
    assert settings["PreemptType"] == {"partitions": "preempt/partition_prio", "qos": "preempt/qos"}[mode]
    assert settings["PreemptMode"] == "REQUEUE"
    assert settings["AccountingStorageTRES"].split(",")[0] == "gres/gpu"


@pytest.mark.parametrize("mode", slurm.MODES)
@pytest.mark.parametrize("inventory", sorted(INVENTORIES))
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.name)
def test_every_config_round_trips(config: Path, inventory: str, mode: str) -> None:
    cfg = load_config(config)
    result = slurm.export(cfg, _inv(inventory), str(config), mode)
    assert list(result.files) == [slurm.SLURM_CONF, slurm.GRES_CONF, slurm.SACCTMGR]
    assert_round_trip(cfg, result.files, mode)
    for gap in result.gaps:
        assert f"# - {gap.line()}" in result.files[slurm.SLURM_CONF]
    assert slurm.export(cfg, _inv(inventory), str(config), mode).files == result.files


@pytest.mark.skipif(shutil.which("sh") is None, reason="no sh")
@pytest.mark.parametrize("mode", slurm.MODES)
def test_script_is_valid_sh(tmp_path: Path, mode: str) -> None:
    cfg = load_config(REPO / "config" / "cluster.toml")
    script = tmp_path / "sacctmgr.sh"
    script.write_text(slurm.export(cfg, _inv("mig+h100"), "x", mode).files[slurm.SACCTMGR])
    subprocess.run(["sh", "-n", str(script)], check=True)


def test_nodes_and_gres_follow_the_inventory() -> None:
    cfg = load_config(REPO / "config" / "cluster.toml")
    files = slurm.export(cfg, _inv("mig+h100"), "x").files
    nodes = {n["NodeName"]: n["Gres"] for n in _lines(files[slurm.SLURM_CONF], "NodeName=")}
    assert nodes["sim-h100x8"] == "gpu:nvidia_h100_80gb_hbm3:8"
    a100 = dict(g.rsplit(":", 1) for g in nodes["sim-a100x8-mig"].split(","))
    assert a100["gpu:nvidia_a100-sxm4-80gb"] == "3"  # GPUs 5-7 whole
    assert a100["gpu:nvidia_a100_1g.10gb"] == "9"
    assert a100["gpu:nvidia_a100_3g.40gb"] == "3"
    gres = _lines(files[slurm.GRES_CONF], "NodeName=")
    assert sum(int(g["Count"]) for g in gres if g["NodeName"] == "sim-a100x8-mig") == 3 + 17
    assert files[slurm.GRES_CONF].splitlines()[1] == "AutoDetect=nvml"
    # the inference queue's MIG quota is a typed limit, and it also counts in gres/gpu
    assert _qos(files[slurm.SACCTMGR])["inference"]["GrpTRES"] == "gres/gpu=14,gres/gpu:nvidia_a100_1g.10gb=14"


def test_gres_types_are_spelled_as_autodetect_nvml_does() -> None:
    assert slurm.gres_type("NVIDIA H100 80GB HBM3") == "nvidia_h100_80gb_hbm3"
    assert slurm.mig_gres_type("NVIDIA A100-SXM4-80GB", "1g.10gb") == "nvidia_a100_1g.10gb"
    assert slurm.mig_gres_type(None, "1g.10gb") == "1g.10gb"


def test_no_inventory_writes_no_nodes() -> None:
    cfg = load_config(REPO / "config" / "cluster.toml")
    files = slurm.export(cfg, Inventory(), "x").files
    assert _lines(files[slurm.SLURM_CONF], "NodeName=") == []
    assert "# no inventory: add NodeName=" in files[slurm.SLURM_CONF]
    assert _qos(files[slurm.SACCTMGR])["inference"]["GrpTRES"] == "gres/gpu=14,gres/gpu:1g.10gb=14"


@pytest.mark.parametrize(
    ("queues", "expect"),
    [
        # lender lends 2 of 8; the borrower's own limit of 5 does not matter
        (
            [
                {"name": "lender", "cohort": "c", "nominal": {"gpu": 8}, "lending_limit": {"gpu": 2}},
                {"name": "taker", "cohort": "c", "nominal": {"gpu": 1}, "borrowing_limit": {"gpu": 5}},
            ],
            {"lender": 1, "taker": 2},
        ),
        # two lenders: the pool is their sum, capped by the borrowing limit
        (
            [
                {"name": "l1", "cohort": "c", "nominal": {"gpu": 4}},
                {"name": "l2", "cohort": "c", "nominal": {"gpu": 4}, "lending_limit": {"gpu": 1}},
                {"name": "taker", "cohort": "c", "borrowing_limit": {"gpu": 3}},
            ],
            {"l1": 1, "l2": 4, "taker": 3},
        ),
        # without a cohort nothing is borrowed
        ([{"name": "solo", "nominal": {"gpu": 4}}], {"solo": 0}),
    ],
    ids=["lending-limit", "two-lenders", "no-cohort"],
)
def test_borrow_caps(queues: list[dict[str, Any]], expect: dict[str, int]) -> None:
    cfg = parse_config({"default_queue": queues[0]["name"], "queues": queues})
    assert {q.name: borrow_cap(cfg, q, "gpu") for q in cfg.queues} == expect
    qos = _qos(slurm.export(cfg, Inventory(), "x", "qos").files[slurm.SACCTMGR])
    for name, cap in expect.items():
        if cap:
            assert qos[name + "-borrow"]["GrpTRES"] == f"gres/gpu={cap}"
        else:
            assert name + "-borrow" not in qos


def test_qos_mode_owners_preempt_borrowers_when_they_reclaim() -> None:
    cfg = parse_config(
        {
            "default_queue": "a",
            "queues": [
                {"name": "a", "cohort": "c", "nominal": {"gpu": 4}, "reclaim_within_cohort": "any"},
                {"name": "b", "cohort": "c", "nominal": {"gpu": 4}},
            ],
        }
    )
    qos = _qos(slurm.export(cfg, Inventory(), "x", "qos").files[slurm.SACCTMGR])
    assert qos["a"]["Preempt"] == "b-borrow"
    assert "Preempt" not in qos["b"]  # b never reclaims
    parts = {p["PartitionName"]: p for p in _lines(slurm.export(cfg, Inventory(), "x").files[slurm.SLURM_CONF], "Part")}
    assert parts["b-borrow"]["PreemptMode"] == "REQUEUE"  # a reclaims from b's borrowing
    assert parts["a-borrow"]["PreemptMode"] == "OFF"  # b does not reclaim


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"queues": [{"name": "default"}, {"name": "DEFAULT"}]}, "queues[1].name"),
        ({"queues": [{"name": "default"}, {"name": "q" * 65}]}, "queues[1].name"),
        ({"priority_classes": {"high prio": 1}, "queues": [{"name": "default"}]}, "priority_classes.high prio"),
        ({"priority_classes": {"hi": 1}, "queues": [{"name": "default"}, {"name": "prio-hi"}]}, "priority_classes.hi"),
    ],
    ids=["names-collide", "too-long", "class-name", "class-vs-queue"],
)
def test_unexportable_configs_name_the_field(data: dict[str, Any], field: str) -> None:
    cfg = parse_config(data)
    with pytest.raises(ExportError) as err:
        slurm.export(cfg, Inventory(), "x", "partitions")
    assert err.value.field == field


def test_tree_borrow_caps_follow_cohort_quota_and_limits() -> None:
    """Cohort X (parent R) owns 4 GPUs and lends at most 1; queue y sits in R with nothing: y can
    borrow 1; x (in X, nothing of its own) can use X's 4 and R's nothing else (y lends 0)."""
    cfg = parse_config(
        {
            "default_queue": "x",
            "cohorts": [
                {"name": "R"},
                {"name": "X", "parent": "R", "nominal": {"gpu": 4}, "lending_limit": {"gpu": 1}},
            ],
            "queues": [{"name": "x", "cohort": "X"}, {"name": "y", "cohort": "R"}],
        }
    )
    assert {q.name: borrow_cap(cfg, q, "gpu") for q in cfg.queues} == {"x": 4, "y": 1}
    limited = parse_config(
        {
            "default_queue": "a",
            "cohorts": [
                {"name": "R", "nominal": {"gpu": 10}},
                {"name": "A", "parent": "R", "borrowing_limit": {"gpu": 3}},
            ],
            "queues": [{"name": "a", "cohort": "A"}, {"name": "b", "cohort": "R"}],
        }
    )
    assert {q.name: borrow_cap(limited, q, "gpu") for q in limited.queues} == {"a": 3, "b": 10}


def test_cohort_tree_becomes_an_account_tree() -> None:
    cfg = load_config(REPO / "config" / "cluster-tree.toml")
    files = slurm.export(cfg, Inventory(), "x").files
    accounts = {m.group(1): _words(m.group(2)) for m in re.finditer(r"add account (\S+) (.*)", files[slurm.SACCTMGR])}
    assert "parent" not in accounts["cohort-dept"]
    assert accounts["cohort-vision"]["parent"] == "cohort-dept"
    assert accounts["cohort-vision"]["Fairshare"] == "200"
    assert accounts["vision-dev"] == {"Description": "'labgang", "parent": "cohort-vision", "Fairshare": "50"}
    assert accounts["nlp"]["parent"] == "cohort-nlp"  # a queue may share its cohort's name
    conf = files[slurm.SLURM_CONF]
    assert "PriorityDecayHalfLife=1-00:00:00" in conf.splitlines()
    assert "PriorityCalcPeriod=5" in conf.splitlines()
    assert "PriorityWeightFairshare=10000" in conf.splitlines()


def test_gaps_in_both_modes() -> None:
    cfg = load_config(REPO / "config" / "cluster.toml")
    part = {g.field for g in slurm.export(cfg, Inventory(), "x", "partitions").gaps}
    qos = {g.field for g in slurm.export(cfg, Inventory(), "x", "qos").gaps}
    assert {"queues[0].cohort", "queues[0].within_queue", "queues[0].starvation_after", "default_grace_s"} <= part
    assert "priority_classes" in qos and "queues[0].groups" in qos
    assert "queues[0].groups" not in part  # AllowGroups expresses it


def test_a_priority_beyond_int32_never_reaches_the_export() -> None:
    """A class beyond a job's 32-bit priority (above Slurm's QOS priority range) is refused where the config is
    read, naming the class, so no export sees it (the export's own range check stays as a guard)."""
    with pytest.raises(ConfigError) as err:
        parse_config({"priority_classes": {"x": 2**32, "y": -1}, "queues": [{"name": "default"}]})
    problems = err.value.problems
    assert any(p.startswith("priority_classes.x: ") and "out of range" in p for p in problems), problems
