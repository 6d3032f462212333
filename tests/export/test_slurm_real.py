"""The Slurm export is accepted by a real slurmctld 22.05+ with slurmdbd (see ``slurm_harness``).

For every cluster config in ``config/`` (each once, every ``--slurm-mode`` at least once; all
pairs with ``LABGANG_SLURM_ALL_CASES=1``): run the exported
``sacctmgr.sh`` against slurmdbd, start slurmctld with the exported ``slurm.conf``
(included into a harness config that sets ports, paths and auth) and ``gres.conf``,
then read back ``scontrol show partition``, ``scontrol show node`` and ``sacctmgr show
qos`` and compare them with what the export wrote.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import slurm_harness
from labgang.agent.tomlfile import read_toml
from labgang.launcher.config.cluster import load_config, parse_config
from labgang.launcher.export import slurm
from labgang.launcher.export.inventory import from_files
from labgang.launcher.export.slurm_users import Directory

REPO = Path(__file__).resolve().parents[2]
SIM = REPO / "config" / "sim"
INVENTORY = [SIM / "a100x8-mig.toml", SIM / "h100x8.toml"]


def _cluster_configs() -> list[Path]:
    return sorted(p for p in (REPO / "config").glob("*.toml") if "[[queues]]" in p.read_text())


def _words(line: str) -> dict[str, str]:
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Iterator[slurm_harness.Database]:
    missing = slurm_harness.missing_binaries()
    if missing:
        # CI installs Slurm (.ci/run) and must run these; a newcomer's machine need not have it.
        why = (
            f"{', '.join(missing)} not found: these tests start a real Slurm; on Debian/Ubuntu run "
            f"`apt-get install {slurm_harness.PACKAGES}`"
        )
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    db = slurm_harness.start_database(tmp_path_factory.mktemp("slurmdb"))
    yield db
    db.stop()


def _cases() -> list[tuple[Path, str]]:
    """Every config once and every mode at least once (a real Slurm costs seconds per case);
    ``LABGANG_SLURM_ALL_CASES=1`` runs every config in every mode."""
    configs = _cluster_configs()
    if os.environ.get("LABGANG_SLURM_ALL_CASES") == "1":
        return [(c, m) for c in configs for m in slurm.MODES]
    cases = [(c, slurm.MODES[i % len(slurm.MODES)]) for i, c in enumerate(configs)]
    cases += [(configs[0], m) for m in slurm.MODES if all(mode != m for _, mode in cases)]
    return cases


@pytest.mark.slow
@pytest.mark.parametrize(("config", "mode"), _cases(), ids=lambda v: v.name if isinstance(v, Path) else v)
def test_slurmctld_accepts_export(database: slurm_harness.Database, tmp_path: Path, config: Path, mode: str) -> None:
    cfg = load_config(config)
    result = slurm.export(cfg, from_files(INVENTORY), str(config), mode)
    out = tmp_path / "export"
    out.mkdir()
    for name, text in result.files.items():
        (out / name).write_text(text)
    cluster = slurm_harness.start(
        database,
        tmp_path / "slurm",
        f"Include {out / slurm.SLURM_CONF}\n",
        result.files[slurm.GRES_CONF],
        out / slurm.SACCTMGR,
        [
            _words(line)["NodeName"]
            for line in result.files[slurm.SLURM_CONF].splitlines()
            if line.startswith("NodeName=")
        ],
    )
    try:
        parts = cluster.run("scontrol", "-o", "show", "partition").stdout
        nodes = cluster.run("scontrol", "-o", "show", "node").stdout
        qos = cluster.run(
            "sacctmgr", "-n", "-P", "show", "qos", "format=name,grptres,priority,preempt,preemptmode,gracetime"
        ).stdout
        log = (cluster.root / "log" / "slurmctld.log").read_text(errors="replace")
    finally:
        cluster.stop()

    exported = [
        _words(line) for line in result.files[slurm.SLURM_CONF].splitlines() if line.startswith("PartitionName=")
    ]
    shown = {w["PartitionName"]: w for w in map(_words, parts.splitlines())}
    assert sorted(shown) == sorted(p["PartitionName"] for p in exported), parts
    for p in exported:
        got = shown[p["PartitionName"]]
        assert got["PriorityTier"] == p["PriorityTier"]
        assert got["GraceTime"] == p["GraceTime"]
        assert got["QoS"] == p.get("QOS", "N/A")
        assert got["PreemptMode"] == p.get("PreemptMode", "REQUEUE")
        if "AllowGroups" in p:
            assert got["AllowGroups"] == p["AllowGroups"]
        if "AllowAccounts" in p:
            assert got["AllowAccounts"] == p["AllowAccounts"]
        assert got["Default"] == ("YES" if p.get("Default") == "YES" else "NO")

    node_gres = {w["NodeName"]: w.get("Gres") for w in map(_words, nodes.splitlines())}
    for line in result.files[slurm.SLURM_CONF].splitlines():
        if line.startswith("NodeName="):
            w = _words(line)
            assert node_gres[w["NodeName"]] == w["Gres"], nodes

    rows = {r.split("|")[0]: r.split("|") for r in qos.splitlines()}
    script = result.files[slurm.SACCTMGR]
    for name, settings in re.findall(r"(?:add qos|modify qos where name=) ?(\S+) (?:set )?(.*)", script):
        assert name in rows, qos
        _, grptres, priority, preempt, preemptmode, gracetime = rows[name]
        want = _words(settings)
        if "GrpTRES" in want:
            assert sorted(grptres.split(",")) == sorted(want["GrpTRES"].split(","))
        if "Priority" in want:
            assert priority == want["Priority"]
        if "Preempt" in want:
            assert sorted(preempt.split(",")) == sorted(want["Preempt"].split(","))
        if "PreemptMode" in want:
            assert preemptmode == want["PreemptMode"]
        if "GraceTime" in want:
            assert gracetime == f"00:00:{int(want['GraceTime']):02d}"
    assert "error: Invalid" not in log and "fatal" not in log, log[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize("mode", slurm.MODES)
def test_slurmdbd_keeps_the_user_policy(database: slurm_harness.Database, tmp_path: Path, mode: str) -> None:
    """Per-user limits (QOS and association), every queue user in its account, per-queue class QOS
    (launcher/export/slurm_users.py), read back from slurmdbd."""

    data = read_toml(REPO / "config" / "workstation.toml")
    vision, nlp = data["queues"][0], data["queues"][1]
    vision.update(  # (the file's own class list, spelled out: what this test reads back)
        priority_classes=["low", "normal", "high"],
        default_priority_class="normal",
        max_gpus_per_user=4,
        max_running_jobs_per_user=2,
        max_submitted_jobs_per_user=9,
    )
    nlp.update(groups=["nlp"])
    directory = Directory(group_members=lambda g: ["carol"], login_users=lambda: ["lab1"])
    result = slurm.export(parse_config(data), from_files(INVENTORY), "test", mode, directory)
    out = tmp_path / "export"
    out.mkdir()
    for name, text in result.files.items():
        (out / name).write_text(text)
    nodes = [_words(line)["NodeName"] for line in result.files[slurm.SLURM_CONF].splitlines() if "NodeName=" in line]
    cluster = slurm_harness.start(
        database,
        tmp_path / "slurm",
        f"Include {out / slurm.SLURM_CONF}\n",
        result.files[slurm.GRES_CONF],
        out / slurm.SACCTMGR,
        nodes,
    )
    try:
        qos = cluster.run("sacctmgr", "-n", "-P", "show", "qos", "format=name,maxtrespu,maxjobspu,maxsubmitpu").stdout
        assoc = cluster.run(
            "sacctmgr", "-n", "-P", "show", "assoc", "format=account,user,grptres,maxjobs,maxsubmit,qos,defaultqos"
        ).stdout
    finally:
        cluster.stop()
    rows = {r.split("|")[0]: r.split("|")[1:] for r in qos.splitlines()}
    for name in ("vision", "vision-borrow"):
        assert rows[name] == ["gres/gpu=4", "2", "9"], qos
    users = {(r.split("|")[0], r.split("|")[1]): r.split("|")[2:] for r in assoc.splitlines() if r.split("|")[1]}
    assert ("nlp", "carol") in users and ("serving", "lab1") in users, assoc
    grptres, maxjobs, maxsubmit, qos_list, default_qos = users[("vision", "lab1")]
    assert (grptres, maxjobs, maxsubmit) == ("gres/gpu=4", "2", "9"), assoc
    if mode == "partitions":
        assert sorted(qos_list.split(",")) == ["prio-high", "prio-low", "prio-normal"], assoc
        assert default_qos == "prio-normal", assoc
