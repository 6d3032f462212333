"""``labgang export kueue|slurm`` on the command line: files, ``--check``, ``--json``, exit 2 with a
named field, and the live inventory from a real coordinator with simulated agents."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from labgang.launcher.cli.main import cli
from labgang.launcher.config.cluster import load_config
from labgang.launcher.export import kueue, slurm
from labgang.launcher.export.common import Inventory

REPO = Path(__file__).resolve().parents[2]
CLUSTER = REPO / "config" / "cluster.toml"
SIM = REPO / "config" / "sim"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["export", *args])
    return result.exit_code, result.stdout, result.stderr


def test_kueue_writes_one_stream(tmp_path: Path) -> None:
    code, out, _ = _run("kueue", "--config", str(CLUSTER), "--offline", "-o", str(tmp_path))
    assert code == 0
    assert out.splitlines() == [str(tmp_path / "kueue.yaml")]
    text = (tmp_path / "kueue.yaml").read_text()
    assert (
        text
        == kueue.export(load_config(CLUSTER), Inventory(source="none (--offline)"), str(CLUSTER)).files[kueue.FILE_NAME]
    )
    assert "# inventory: none (--offline)" in text


def test_slurm_writes_three_files(tmp_path: Path) -> None:
    args = ["slurm", "--config", str(CLUSTER), "--inventory", str(SIM / "h100x8.toml"), "-o", str(tmp_path)]
    code, _, _ = _run(*args, "--slurm-mode", "qos")
    assert code == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([slurm.SLURM_CONF, slurm.GRES_CONF, slurm.SACCTMGR])
    assert (tmp_path / slurm.SACCTMGR).stat().st_mode & 0o111
    assert "NodeName=sim-h100x8 Gres=gpu:nvidia_h100_80gb_hbm3:8" in (tmp_path / slurm.SLURM_CONF).read_text()


def test_stdout_is_deterministic() -> None:
    first = _run("slurm", "--config", str(CLUSTER), "--offline")
    assert first[0] == 0 and first == _run("slurm", "--config", str(CLUSTER), "--offline")


@pytest.mark.parametrize("target", ["kueue", "slurm"])
def test_check_prints_only_what_does_not_translate(tmp_path: Path, target: str) -> None:
    code, out, _ = _run(target, "--config", str(CLUSTER), "--offline", "--check", "-o", str(tmp_path / "out"))
    assert code == 0
    assert not (tmp_path / "out").exists()
    module = kueue if target == "kueue" else slurm
    gaps = module.export(load_config(CLUSTER), Inventory(), str(CLUSTER)).gaps
    assert out.splitlines() == [g.line() for g in gaps]
    code, out, _ = _run(target, "--config", str(CLUSTER), "--offline", "--check", "--json")
    listed = json.loads(out)["does_not_translate"]
    assert [g["field"] for g in listed] == [g.field for g in gaps]


def test_unexportable_config_exits_2_with_the_field(tmp_path: Path) -> None:
    bad = tmp_path / "cluster.toml"
    bad.write_text('[[queues]]\nname = "default"\n[[queues]]\nname = "DEFAULT"\n')
    code, out, err = _run("kueue", "--config", str(bad), "--offline")
    assert code == 2 and out == ""
    assert err.startswith("labgang export kueue: cannot export: queues[1].name: ")


def test_invalid_config_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "cluster.toml"
    bad.write_text('[[queues]]\nname = "default"\nqueueing = "lifo"\n')
    code, _, err = _run("slurm", "--config", str(bad), "--offline")
    assert code == 2
    assert "queues[0].queueing" in err
    # every problem on one line naming the flag and the file, as `labgang coordinator` says it
    bad.write_text('[[queues]]\nname = "default"\nqueueing = "lifo"\nweight = "x"\n')
    code, _, err = _run("kueue", "--config", str(bad), "--offline")
    assert code == 2 and len(err.splitlines()) == 1
    assert err.startswith(f"labgang export kueue: --config: {bad}: queues[0].")
    assert "queues[0].queueing" in err and "queues[0].weight" in err


def test_bad_inventory_file_exits_2(tmp_path: Path) -> None:
    junk = tmp_path / "machine.toml"
    junk.write_text("not a machine\n")
    code, _, err = _run("kueue", "--config", str(CLUSTER), "--inventory", str(junk))
    assert code == 2
    assert "--inventory" in err


def test_unreachable_coordinator_is_not_an_error(tmp_path: Path) -> None:
    code, out, _ = _run("kueue", "--config", str(CLUSTER), "--state-dir", str(tmp_path))
    assert code == 0
    assert "# inventory: none (coordinator not reachable)" in out


def test_nodes_json_is_an_inventory(tmp_path: Path) -> None:
    from labgang.agent.inventory import read_inventory
    from labgang.agent.nvml import open_backend

    backend = open_backend(simulate=SIM / "rtx4090x2.toml")
    try:
        inv = read_inventory(backend, now=0.0)
    finally:
        backend.nvmlShutdown()
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"nodes": [{"name": "ws1", "connected": True, "inventory": inv.to_dict()}]}))
    code, out, _ = _run("slurm", "--config", str(CLUSTER), "--inventory", str(nodes))
    assert code == 0
    assert "NodeName=ws1 Gres=gpu:nvidia_geforce_rtx_4090:2" in out


@pytest.mark.slow
def test_live_inventory_from_a_real_coordinator() -> None:
    from harness import Cluster  # the coordinator tests' real coordinator + simulated agents (pytest pythonpath)

    cluster = Cluster({"m1": "a100x8-mig.toml", "h1": "h100x8.toml"}, queue_extra='cohort = "lab"\n').start()
    try:
        code, out, err = _run("kueue", "--config", str(cluster.config_file), "--state-dir", str(cluster.coord_dir))
        scode, sout, _ = _run("slurm", "--config", str(cluster.config_file), "--state-dir", str(cluster.coord_dir))
    finally:
        cluster.stop()
    assert code == 0, err
    assert "# inventory: coordinator (GET /v1/nodes)" in out
    flavors = {o["metadata"]["name"] for o in yaml.safe_load_all(out) if o and o["kind"] == "ResourceFlavor"}
    assert {"nvidia-a100-sxm4-80gb", "nvidia-h100-80gb-hbm3", "mig-1g.10gb", "mig-7g.80gb"} <= flavors
    assert scode == 0
    assert "NodeName=h1 Gres=gpu:nvidia_h100_80gb_hbm3:8" in sout
    assert "NodeName=m1 Gres=gpu:nvidia_a100-sxm4-80gb:3," in sout


def test_a_missing_config_says_so_in_one_line_and_how_to_pass_one(tmp_path: Path) -> None:
    missing = tmp_path / "cluster.toml"
    code, out, err = _run("kueue", "--config", str(missing), "--offline")
    assert (code, out) == (2, "")
    assert err == (
        f"labgang export kueue: --config: {missing}: no such file; pass --config FILE (e.g. config/cluster.toml)\n"
    )


def test_a_config_that_is_not_toml_is_one_line_naming_the_flag(tmp_path: Path) -> None:
    bad = tmp_path / "cluster.toml"
    bad.write_text("this is not = = toml\n")
    code, _, err = _run("slurm", "--config", str(bad), "--offline")
    assert code == 2 and err.startswith(f"labgang export slurm: --config: {bad}: ") and err.count("\n") == 1, err
