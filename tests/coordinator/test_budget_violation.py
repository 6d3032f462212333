"""A node's budget violations (``kind = "gpu-mem"``) as the coordinator takes them from its agent:
kept per node for ``GET /v1/nodes`` with usage and budget, applied once to the job (its history
names the process, its usage and its budget), not shown as device violations."""

from __future__ import annotations

from pathlib import Path

import pytest
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.violations import take_violations, violation_views
from labgang.launcher.pitfalls import NodeView
from lifecycle_driver import make_coord, start, submit

GIB = 1024**3


@pytest.fixture
def coord(tmp_path: Path):
    yield from make_coord(tmp_path)


async def test_a_budget_violation_is_kept_shown_and_written_once(coord: Coordinator):
    job_id = await submit(coord)
    start(coord, job_id)
    run_id = coord.jobs[job_id].run_id
    item = {
        "kind": "gpu-mem",
        "job_id": run_id,
        "rank": 0,
        "device": "GPU-a",
        "pid": 4242,
        "used": 6 * GIB,
        "budget": 4 * GIB,
        "allowed": ["GPU-a"],
    }
    conn = coord.agents.nodes["n1"]
    take_violations(coord, conn, [item])
    take_violations(coord, conn, [{**item, "used": 7 * GIB}])  # every inventory while it lasts
    lines = [h.message for h in coord.jobs[job_id].history if h.event == "gpu-mem-violation"]
    assert lines == ["rank 0 on n1 (pid 4242) uses 6.0 GiB of device GPU-a, over its --gpu-mem budget of 4.0 GiB"]
    assert not [h for h in coord.jobs[job_id].history if h.event == "device-violation"]
    (view,) = violation_views(coord, conn)
    assert view == {
        "job": job_id,
        "user": "root",
        "rank": 0,
        "pid": 4242,
        "device": "GPU-a",
        "allowed": ["GPU-a"],
        "kind": "gpu-mem",
        "used": 7 * GIB,
        "budget": 4 * GIB,
    }
    node = NodeView.from_api({"name": "n1", "inventory": None, "violations": [view]})
    assert node.violations == ()  # the device-violation pitfall is for devices a rank was not given
