"""cluster.toml's [sharing] table and the queues' share_gpus / share_with: parsing, errors, config check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from labgang.launcher.config.cluster import ConfigError, parse_config
from labgang.launcher.model import NodeGpuSharing


def _queues(**extra) -> list[dict]:
    return [
        {"name": "default", "nominal": {"gpu": 8}, "share_gpus": "queue", "share_with": ["b"], **extra},
        {"name": "b", "nominal": {"gpu": 8}, "share_gpus": "user", "share_with": ["default"]},
    ]


def test_sharing_table_and_queue_keys_reach_the_scheduler_specs() -> None:
    cfg = parse_config(
        {
            "sharing": {"shards_per_gpu": 4, "mps": True, "nodes": {"old": {"shards_per_gpu": 0, "mps": False}}},
            "queues": _queues(),
        }
    )
    sharing = cfg.gpu_sharing()
    assert (sharing.shards_per_gpu, sharing.mps) == (4, True)
    assert sharing.node("old") == NodeGpuSharing(0, False)
    assert sharing.node("new") == NodeGpuSharing(4, True)
    specs = {q.name: q for q in cfg.queue_specs()}
    assert (specs["default"].share_gpus, specs["default"].share_with) == ("queue", ("b",))
    assert specs["b"].share_gpus == "user"


def test_sharing_is_off_and_queues_do_not_share_by_default() -> None:
    cfg = parse_config({"queues": [{"name": "default"}]})
    assert not cfg.gpu_sharing().enabled
    assert cfg.queue_specs()[0].share_gpus == "none"


@pytest.mark.parametrize(
    "data, expected",
    [
        (
            {"queues": [{"name": "default", "share_gpus": "team"}]},
            "queues[0].share_gpus: 'team' is not allowed; allowed: none, queue, user",
        ),
        (
            {"sharing": {"shards_per_gpu": 65}, "queues": [{"name": "default"}]},
            "sharing.shards_per_gpu: 65 is out of range; allowed: 0 (off) to 64",
        ),
        (
            {"sharing": {"shards_per_gpu": 4, "nodes": {"n1": {"shards_per_gpu": 8}}}, "queues": [{"name": "default"}]},
            "sharing.nodes.n1.shards_per_gpu: 8 is not allowed; allowed: 0 (off) or 4",
        ),
        (
            {"sharing": {"mps": "yes"}, "queues": [{"name": "default"}]},
            "sharing.mps: 'yes' is not allowed; allowed: true or false",
        ),
        (
            {"queues": [_queues()[0], {"name": "b", "share_gpus": "queue"}]},
            "queues[0].share_with: queue 'b' does not name 'default' in its share_with; "
            "both queues must name each other",
        ),
        (
            {"queues": [{"name": "default", "share_gpus": "queue", "share_with": ["nope"]}]},
            "queues[0].share_with: unknown queue 'nope'; allowed: default",
        ),
        (
            {"queues": [{"name": "default", "share_with": ["b"]}, {"name": "b", "share_with": ["default"]}]},
            "queues[0].share_with: queue 'default' has share_gpus = 'none'",
        ),
    ],
    ids=["share-gpus", "shards-range", "node-override", "mps-bool", "one-sided", "unknown-queue", "none-names"],
)
def test_sharing_errors_name_the_key_and_allowed_values(data: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems


def test_config_check_refuses_a_bad_sharing_value_with_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[sharing]\nshards_per_gpu = -1\n[[queues]]\nname = "default"\nshare_gpus = "queue"\n')
    out = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "config", "check", str(bad)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        f"{bad}: sharing.shards_per_gpu: -1 is out of range; allowed: 0 (off) to 64"
    ], out.stderr
    good = tmp_path / "good.toml"
    good.write_text('[sharing]\nshards_per_gpu = 4\n[[queues]]\nname = "default"\nshare_gpus = "queue"\n')
    ok = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "config", "check", str(good)], capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
