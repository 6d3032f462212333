"""squeue/sinfo views end to end against a real `labgang up --simulate` (8 simulated H100s):
`nodes` one line per node and `--gpus` per GPU, `queue -j`, `-o` and `--long` rendered from the
coordinator's JobViews, and a bad format refused in one line before anything is asked."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from up_harness import Up, running_up

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgs")


def test_nodes_and_queue_views(up, tmp_path):
    gate = tmp_path / "gate"
    running = up.submit("-n", "1", "-g", "2", "--name", "big", "--time", "1h", "--", "sh", "-c",
                        f"while [ ! -e {gate} ]; do sleep 0.05; done")  # fmt: skip
    up.wait_state(running, {"running"})
    held = up.submit("-H", "--name", "later", "--", "true")

    out = up.cli("nodes")
    assert out.returncode == 0, out.stderr
    header, line = out.stdout.splitlines()
    assert header.split() == ["NODE", "STATE", "GPUS(A/I/O/T)", "MIG", "CPUS", "MEMORY", "LIMITS", "MODEL"]
    cells = line.split()
    assert cells[1:3] == ["mix", "2/6/0/8"] and "H100" in line  # the model name has spaces
    assert cells[6] == "no"  # a simulated node's ranks are not held to their CPUs/memory
    per_gpu = up.cli("nodes", "--gpus").stdout
    assert f"allocated {running} (root, default)" in per_gpu and "confined:" in per_gpu
    assert "host limits (CPUs, memory): NOT enforced (simulated node: " in per_gpu
    as_json = json.loads(up.cli("nodes", "--json").stdout)
    assert as_json["nodes"][0]["host_limits"] == {
        "enforced": False,
        "reason": "simulated node: its ranks' cgroups are not probed",
    }

    out = up.cli("queue", "-o", "%i|%j|%T|%l|%D|%b|%R")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "JOBID|NAME |STATE  |TIME_LIMIT|NODES|TRES_PER_NODE|NODELIST(REASON)"
    row = {line.split("|")[0].strip(): [c.strip() for c in line.split("|")] for line in lines[1:]}
    node = up.job(running)["nodes"][0]
    assert row[running][1:] == ["big", "RUNNING", "1:00:00", "1", "gpu:2", node]
    assert row[held][1:5] == ["later", "PENDING", "UNLIMITED", "-"]
    assert row[held][6] == f"(held by root; `labgang release {held}` lets it be scheduled)"

    only = up.cli("queue", "-j", held, "--long").stdout.splitlines()
    assert only[0].split()[:3] == ["JOBID", "PARTITION", "NAME"] and len(only) == 2
    assert only[1].split()[:5] == [held, "default", "later", "root", "PENDING"]

    bad = up.cli("queue", "-o", "%i %Z")
    assert bad.returncode == 2
    assert bad.stderr.startswith("labgang queue: -o/--format: %Z is not a field labgang has; allowed: %i")
    assert len(bad.stderr.splitlines()) == 1
    gate.touch()
    up.cli("cancel", held)
