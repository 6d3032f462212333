"""GPU sharing in ``labgang export``: Slurm's shard and mps GRES in slurm.conf and gres.conf per node (a
node override turns them off there), the sharing rules Slurm cannot say listed as gaps, and Kueue's gaps."""

from __future__ import annotations

from pathlib import Path

from labgang.launcher.config.cluster import parse_config
from labgang.launcher.export import kueue, slurm
from labgang.launcher.export.inventory import from_files

SIM = Path(__file__).resolve().parents[2] / "config" / "sim"


def _cfg(sharing: dict | None):
    data: dict = {
        "queues": [
            {"name": "default", "nominal": {"gpu": 8}, "share_gpus": "queue"},
            {"name": "guests", "nominal": {"gpu": 0}},
        ]
    }
    if sharing is not None:
        data["sharing"] = sharing
    return parse_config(data)


def _inv():
    return from_files([SIM / "n1-4gpu.toml", SIM / "n2-4gpu.toml"])


def test_slurm_gets_shard_and_mps_gres_per_node():
    cfg = _cfg({"shards_per_gpu": 4, "mps": True, "nodes": {"n2": {"shards_per_gpu": 0, "mps": False}}})
    result = slurm.export(cfg, _inv(), "x")
    conf, gres = result.files[slurm.SLURM_CONF], result.files[slurm.GRES_CONF]
    assert "GresTypes=gpu,shard,mps" in conf.splitlines()
    tres = next(line for line in conf.splitlines() if line.startswith("AccountingStorageTRES="))
    assert "gres/shard" in tres and "gres/mps" in tres
    n1 = next(line for line in conf.splitlines() if line.startswith("NodeName=n1 "))
    n2 = next(line for line in conf.splitlines() if line.startswith("NodeName=n2 "))
    assert ",shard:16,mps:400 " in n1
    assert "shard" not in n2 and "mps" not in n2
    assert "NodeName=n1 Name=shard Count=16" in gres.splitlines()
    assert "NodeName=n1 Name=mps Count=400" in gres.splitlines()
    assert not any(line.startswith("NodeName=n2 Name=shard") for line in gres.splitlines())
    fields = [g.field for g in result.gaps]
    assert "queues[0].share_gpus" in fields and "sharing.shards_per_gpu" in fields
    assert "queues[1].share_gpus" not in fields  # a queue that never shares loses nothing


def test_without_sharing_the_slurm_export_is_unchanged():
    before = slurm.export(_cfg(None), _inv(), "x")
    assert "GresTypes=gpu" in before.files[slurm.SLURM_CONF].splitlines()
    assert "shard" not in before.files[slurm.GRES_CONF]
    assert not [g for g in before.gaps if "shar" in g.field]


def test_kueue_says_sharing_does_not_translate():
    gaps = kueue.export(_cfg({"shards_per_gpu": 2}), _inv(), "x").gaps
    lines = [g.line() for g in gaps if g.field in ("sharing", "queues[0].share_gpus")]
    assert len(lines) == 2
    assert "timeSlicing.replicas" in lines[1] or "timeSlicing.replicas" in lines[0]
    assert not [g for g in kueue.export(_cfg(None), _inv(), "x").gaps if "shar" in g.field and "[" in g.field]
