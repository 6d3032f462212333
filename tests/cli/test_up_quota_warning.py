"""``labgang up --config`` warns in its banner of a nominal quota above its machine's devices."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from up_harness import Up


@pytest.mark.slow
def test_the_banner_names_a_queue_whose_quota_is_above_the_machine(tmp_path: Path) -> None:
    config = tmp_path / "cluster.toml"
    config.write_text('[[queues]]\nname = "default"\nnominal = { gpu = 64 }\n')
    with tempfile.TemporaryDirectory(prefix="lgq-", dir="/tmp") as d:
        up = Up(Path(d), args=("--config", str(config)))  # answers once its banner is out
        try:
            lines = up.output().splitlines()
            assert (
                "  warning: queue 'default': nominal quota gpu=64 is above the cluster's 8 gpu (1 node); "
                "at most 8 can ever be in use"
            ) in lines, lines
        finally:
            assert up.stop() == 0, up.output()
