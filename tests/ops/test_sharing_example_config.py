"""The shipped sharing example (``config/sharing.toml``): ``labgang config check`` accepts it as a
cluster config, and it gives what it says: shards and MPS on, one node kept whole, queues that share
by queue (naming each other), by user, and not at all."""

from __future__ import annotations

import tomllib
from pathlib import Path

from click.testing import CliRunner
from labgang.launcher.cli.config import config
from labgang.launcher.config.cluster import parse_config


def test_the_sharing_example_passes_config_check_and_configures_shards_mps_and_share_gpus(repo_root: Path) -> None:
    path = repo_root / "config" / "sharing.toml"
    res = CliRunner().invoke(config, ["check", str(path)])
    assert res.exit_code == 0, res.output
    assert res.output.startswith(f"{path}: cluster config ok ("), res.output
    cluster = parse_config(tomllib.loads(path.read_text()))
    sharing = cluster.gpu_sharing()
    assert (sharing.shards_per_gpu, sharing.mps) == (4, True)
    assert (sharing.node("big-box").shards_per_gpu, sharing.node("big-box").mps) == (0, False)
    assert (sharing.node("any-other").shards_per_gpu, sharing.node("any-other").mps) == (4, True)
    queues = {q.name: q for q in cluster.queues}
    assert {n: q.share_gpus for n, q in queues.items()} == {
        "team": "queue",
        "serving": "queue",
        "students": "user",
        "guests": "none",
    }
    assert (list(queues["team"].share_with), list(queues["serving"].share_with)) == (["serving"], ["team"])
