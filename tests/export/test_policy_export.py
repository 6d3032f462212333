"""``labgang export`` maps who may use what (launcher/coordinator/policy.py): per-user limits as Slurm QOS and
association limits, every user of a queue as a user of its account, per-queue priority classes as
the class QOS each association may use; Kueue says what it cannot express. The users come from a
given directory (groups' members, login users), so the output does not depend on this machine."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from labgang.agent.tomlfile import read_toml
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.export import kueue, slurm
from labgang.launcher.export.common import Inventory
from labgang.launcher.export.slurm_users import Directory

REPO = Path(__file__).resolve().parents[2]
DIRECTORY = Directory(
    group_members=lambda g: {"nlp": ["carol", "dave"]}.get(g, []), login_users=lambda: ["alice", "lab1", "lab2"]
)


def _config(**queues: dict[str, Any]) -> Any:
    data = read_toml(REPO / "config" / "workstation.toml")
    data["admins"] = ["root", "alice"]
    for q in data["queues"]:  # the file's own class lists left out: each test sets what it checks
        q.pop("priority_classes", None)
        q.pop("default_priority_class", None)
        q.update(queues.get(q["name"], {}))
    return parse_config(data)


def _script(cfg: Any, mode: str = "partitions") -> tuple[list[str], list[str], list[str]]:
    """(the first step's sacctmgr commands, the limits step's, every gap line)."""
    result = slurm.export(cfg, Inventory(), "test", mode, DIRECTORY)
    text = result.files[slurm.SACCTMGR]
    first, _, limits = text.partition("\nelse\n")
    strip = [re.sub(r"^\s*sacctmgr -i ", "", line) for line in first.splitlines() if "sacctmgr -i" in line]
    limit = [re.sub(r"^\s*sacctmgr -i ", "", line) for line in limits.splitlines() if "sacctmgr -i" in line]
    return strip, limit, [g.line() for g in result.gaps]


def test_per_user_limits_become_qos_and_association_limits() -> None:
    cfg = _config(vision={"max_gpus_per_user": 4, "max_running_jobs_per_user": 2, "max_submitted_jobs_per_user": 9})
    first, limits, gaps = _script(cfg)
    per_user = "MaxTRESPerUser=gres/gpu=4 MaxJobsPerUser=2 MaxSubmitJobsPerUser=9"
    assert f"modify qos where name=vision set GrpTRES=gres/gpu=3 {per_user}" in limits
    assert f"modify qos where name=vision-borrow set GrpTRES=gres/gpu=3 {per_user}" in limits
    for user in ("alice", "lab1", "lab2"):
        assert f"modify user where name={user} account=vision set MaxJobs=2 MaxSubmitJobs=9" in first
        assert f"modify user where name={user} account=vision set GrpTRES=gres/gpu=4" in limits
    assert not any("account=nlp set" in line for line in first + limits)  # nlp sets no limit
    assert any(g.startswith("queues[0].max_gpus_per_user, queues[0].max_running_jobs_per_user") for g in gaps)


def test_every_user_of_a_queue_gets_an_association() -> None:
    cfg = _config(nlp={"groups": ["nlp"]}, serving={"users": ["svc"]})
    first, _, gaps = _script(cfg)
    adds = [line for line in first if line.startswith("add user")]
    assert adds == [
        "add user carol account=nlp",
        "add user dave account=nlp",
        "add user svc account=serving",
        "add user alice account=vision AdminLevel=Administrator",  # the admin once, on the default queue
        "add user lab1 account=vision",
        "add user lab2 account=vision",
    ]
    assert any(g.startswith("queues[0] (no users or groups)") and "(3)" in g for g in gaps)


def test_queue_priority_classes_become_the_associations_qos() -> None:
    cfg = _config(
        vision={"priority_classes": ["low", "normal", "high"], "default_priority_class": "normal"},
        serving={"priority_classes": ["serving"]},
    )
    first, _, _ = _script(cfg)
    assert (
        "modify user where name=lab1 account=vision set QOS=prio-high,prio-low,prio-normal DefaultQOS=prio-normal"
        in first
    )
    # serving has no default class: a job without -p gets priority 0, the class of value 0 (normal)
    assert (
        "modify user where name=lab1 account=serving set QOS=prio-normal,prio-serving DefaultQOS=prio-normal" in first
    )
    _, _, gaps = _script(cfg, "qos")
    assert any(g.startswith("queues[0].priority_classes, queues[0].default_priority_class") for g in gaps)


def test_the_notes_name_only_partitions_the_export_writes() -> None:
    cfg = _config()
    result = slurm.export(cfg, Inventory(), "test", "partitions", DIRECTORY)
    written = set(re.findall(r"^PartitionName=(\S+)", result.files[slurm.SLURM_CONF], re.M))
    named = set(re.findall(r"partition (\S+-borrow)", " ".join(g.line() for g in result.gaps)))
    assert named and named <= written, (named, written)
    assert "serving-borrow" not in result.files[slurm.SLURM_CONF] + " ".join(g.line() for g in result.gaps)


def test_kueue_says_what_does_not_translate() -> None:
    cfg = _config(vision={"priority_classes": ["normal"], "max_gpus_per_user": 4})
    fields = {g.field for g in kueue.export(cfg, Inventory(), "x").gaps}
    assert {
        "queues[0].priority_classes, queues[0].default_priority_class",
        "queues[0].max_gpus_per_user",
        "priority_classes (who may use a raw number)",
    } <= fields
    assert not any(f.startswith("queues[1].max") for f in fields)


def test_host_cpu_and_memory_quotas_are_gaps_and_never_counted_as_gpus() -> None:
    cfg = _config(vision={"nominal": {"gpu": 3, "cpu": 16, "memory": "64G"}})
    _, limits, gaps = _script(cfg)
    assert "modify qos where name=vision set GrpTRES=gres/gpu=3" in limits  # not 3 + 16 + 64G "GPUs"
    assert (
        "queues[0].nominal.cpu: the cpu quota is not exported; nearest: add cpu=N,mem=M to the QOS GrpTRES by hand"
        in gaps
    )
    assert any(g.startswith("queues[0].nominal.memory: the memory quota is not exported") for g in gaps)
    yaml_text = kueue.export(cfg, Inventory(), "test").files[kueue.FILE_NAME]
    assert "nvidia.com/cpu" not in yaml_text and "nvidia.com/memory" not in yaml_text
    assert any(
        g.line().startswith("queues[0].nominal.cpu: the cpu quota is not exported")
        for g in kueue.export(cfg, Inventory(), "test").gaps
    )
