"""A new user's finding through a real ``labgang up --simulate --config`` (4 shards per card, MPS
on): a share of a card is billed as its part of the card, not as a whole GPU. ``history --attempts``
shows the part in GPUS (``0.25``, ``0.5``) and bills GPU-hours by it; ``history --json`` and
``report`` agree with the attempts (docs/sharing.md: a shard is ``1/shards_per_gpu`` gpu, ``--mps
P`` is ``P/100``, as ``simulate`` and ``plan`` count it)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from up_harness import Up, running_up

pytestmark = pytest.mark.slow

CONFIG = """
default_queue = "team"

[sharing]
shards_per_gpu = 4
mps = true

[[queues]]
name = "team"
nominal = { gpu = 8 }
share_gpus = "queue"
"""


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgsa", CONFIG)


def test_a_share_of_a_card_is_billed_as_its_part_of_the_card(up: Up) -> None:
    shard = up.submit("--shards", "1", "--gpu-mem", "2G", "--", "sleep", "1")
    mps = up.submit("--mps", "50", "--", "sleep", "1")
    whole = up.submit("--", "sleep", "1")
    for job in (shard, mps, whole):
        up.wait_state(job, {"succeeded"})

    out = up.cli("history", "--attempts", "--json")
    assert out.returncode == 0, out.stderr
    rows = {r["id"]: r for r in json.loads(out.stdout)["jobs"]}
    parts = {shard: 0.25, mps: 0.5, whole: 1}
    for job, part in parts.items():
        (attempt,) = rows[job]["attempt_records"]
        assert attempt["gpus"] == part and attempt["share"] == part, attempt
        assert attempt["gpu_hours"] == pytest.approx(part * attempt["elapsed_s"] / 3600.0)
        assert rows[job]["gpu_hours"] == pytest.approx(attempt["gpu_hours"])
    # a whole device stays a whole number in JSON
    assert isinstance(rows[whole]["attempt_records"][0]["gpus"], int)

    table = up.cli("history", "--attempts")
    assert table.returncode == 0, table.stderr
    lines = {line.split()[0]: line.split() for line in table.stdout.splitlines()[1:]}
    gpus_column = table.stdout.splitlines()[0].split().index("GPUS")  # ADMIT, START, END: 2 words each
    assert [lines[job][gpus_column + 3] for job in (shard, mps, whole)] == ["0.25", "0.5", "1"], table.stdout

    out = up.cli("report", "--json")
    assert out.returncode == 0, out.stderr
    expected = sum(r["gpu_hours"] for r in rows.values())
    assert json.loads(out.stdout)["total"]["gpu_hours"] == pytest.approx(expected, rel=1e-6)
