"""``labgang queue`` of shares, as the coordinator renders it (``view=queue`` rows and ``view=table``):
a share of one GPU shows ``1xshard:N`` / ``1xmps:P`` in the GANG column, not a whole GPU's ``1x1``.
Fake clock, real SQLite store."""

from __future__ import annotations

from pathlib import Path

from labgang.launcher import jobtable
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import table_view, views
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.store import Store
from lifecycle_driver import ROOT, Clock


async def test_queue_rows_carry_the_share_and_the_table_shows_it(tmp_path: Path):
    config = parse_config(
        {
            "sharing": {"shards_per_gpu": 4, "mps": True},
            "queues": [{"name": "default", "nominal": {"gpu": 8}, "share_gpus": "queue"}],
        }
    )
    coord = Coordinator(config, Store(tmp_path / "db"), clock=Clock())
    try:
        shard = await coord.desk.submit(ROOT, {"argv": ["eval"], "shards": 2, "gpu_mem": 4 << 30})
        mps = await coord.desk.submit(ROOT, {"argv": ["serve"], "mps": 25})
        whole = await coord.desk.submit(ROOT, {"argv": ["train"], "gpus_per_worker": 1})
        rows = [views.queue_row(coord.jobs[j.id]) for j in (shard, mps, whole)]
        assert [(r["shards"], r["mps"]) for r in rows] == [(2, 0), (0, 25), (0, 0)]
        gang = [table_view.row(coord.jobs[j.id])[0][jobtable.HEADERS.index("GANG")] for j in (shard, mps, whole)]
        assert gang == ["1xshard:2", "1xmps:25", "1x1"]
    finally:
        coord.store.close()
