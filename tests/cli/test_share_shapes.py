"""A share of one GPU in the job lists: ``labgang queue``'s GANG column (``1xshard:2``, ``1xmps:25``,
not a whole GPU's ``1x1``), squeue's ``%b`` (``shard:2``, ``mps:25``, as Slurm's gres names them) and
``labgang show``'s Gang line and device-memory budget (docs/sharing.md)."""

from __future__ import annotations

from labgang.launcher.cli.format import job_detail
from labgang.launcher.cli.squeue_format import format_jobs
from labgang.launcher.jobtable import gang_shape, job_table

GIB = 1024**3
BASE = {
    "id": "7",
    "name": "eval",
    "user": "ann",
    "uid": 1000,
    "queue": "team",
    "state": "pending",
    "workers": 1,
    "gpus_per_worker": 1,
    "resource": "gpu",
    "priority": 0,
    "submit_time": 1000.0,
    "reason": None,
    "nodes": [],
    "array_id": None,
    "array_index": None,
    "array_limit": None,
}


def test_the_gang_column_shows_the_share_not_a_whole_gpu() -> None:
    shard = {**BASE, "shards": 2, "mps": 0}
    mps = {**BASE, "id": "8", "shards": 0, "mps": 25}
    whole = {**BASE, "id": "9", "shards": 0, "mps": 0}
    assert (gang_shape(shard), gang_shape(mps), gang_shape(whole)) == ("1xshard:2", "1xmps:25", "1x1")
    rows = {line.split()[0]: line.split()[5] for line in job_table([shard, mps, whole], 1060.0).splitlines()[1:]}
    assert rows == {"7": "1xshard:2", "8": "1xmps:25", "9": "1x1"}
    assert gang_shape({**BASE}) == "1x1"  # a row without the share fields (an older coordinator)


def test_squeue_b_names_the_share_as_slurm_gres_does_and_other_fields_still_work() -> None:
    jobs = [{**BASE, "shards": 1}, {**BASE, "id": "8", "mps": 50}, {**BASE, "id": "9", "gpus_per_worker": 2}]
    out = format_jobs(jobs, "%i %b %u %t", 1060.0)
    assert [line.split() for line in out.splitlines()] == [
        ["JOBID", "TRES_PER_NODE", "USER", "ST"],
        ["7", "shard:1", "ann", "PD"],
        ["8", "mps:50", "ann", "PD"],
        ["9", "gpu:2", "ann", "PD"],
    ]


def test_show_says_what_share_of_the_card_and_its_budget() -> None:
    text = job_detail({**BASE, "shards": 2, "mps": 0, "gpu_mem": 20 * GIB}, 1060.0)
    lines = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in text.splitlines() if ":" in line}
    assert lines["Gang"] == "1xshard:2 (one rank on 2 shards of one GPU, time-sliced)"
    assert lines["GPU memory"].startswith("20") and lines["GPU memory"].endswith("(--gpu-mem)")
    mps = job_detail({**BASE, "shards": 0, "mps": 25, "gpu_mem": 0}, 1060.0)
    assert "1xmps:25 (one rank on 25 % of one GPU's SMs through MPS)" in mps
    assert "none (the rank may take the whole card's memory) (--gpu-mem)" in mps
    whole = job_detail({**BASE}, 1060.0)
    assert "1x1 (ranks x devices per rank)" in whole and "GPU memory" not in whole
