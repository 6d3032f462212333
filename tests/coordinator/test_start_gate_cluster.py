"""A gang over two nodes starts behind one start gate: each agent parks its ranks and answers
the held ``launch``; the coordinator sends ``release_gate`` to both once both answered. A real
coordinator, two real agents (simulated 4-GPU nodes), real ranks stamping their own start."""

from __future__ import annotations

import pytest
from harness import Cluster, wait_for

pytestmark = pytest.mark.slow

NODES = {"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"}


@pytest.fixture
def cluster():
    c = Cluster(NODES)
    try:
        yield c.start()
    finally:
        c.stop()


def test_a_two_node_gang_is_released_on_both_nodes_by_the_coordinator(cluster: Cluster) -> None:
    out = cluster.base / "out"
    out.mkdir()
    job = cluster.submit(["/usr/bin/bash", "-c", f"echo $EPOCHREALTIME > {out}/$RANK"], workers=2, gpus_per_worker=4)
    done = cluster.wait_state(job["id"], {"succeeded", "failed"})
    assert done["state"] == "succeeded", done
    assert done["nodes"] == ["n1", "n2"]
    line = "start gate released on the coordinator's word (1 ranks)"
    wait_for(
        lambda: all(line in cluster.log_text(f"agent-{node}") for node in ("n1", "n2")),
        what="both agents released their rank on the coordinator's word",
    )
    stamps = [float((out / str(r)).read_text()) for r in range(2)]
    print(f"cross-node rank start spread: {abs(stamps[1] - stamps[0]) * 1e3:.1f} ms")
