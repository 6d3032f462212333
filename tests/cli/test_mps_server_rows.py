"""labgang's own MPS servers through a real ``labgang up --simulate --config`` (MPS on): an
``--mps`` job's card shows the control daemon the agent started for it, and ``top --once`` labels
it as labgang's MPS server for that user and job (the new user saw ``not labgang's`` rows, one per
MPS card), while ``nodes`` and the pitfalls do not count it as a foreign process."""

from __future__ import annotations

import getpass
import json
import time
from collections.abc import Iterator

import pytest
from up_harness import WAIT_S, Up, running_up

pytestmark = pytest.mark.slow

CONFIG = """
default_queue = "team"

[sharing]
mps = true

[[queues]]
name = "team"
nominal = { gpu = 8 }
share_gpus = "queue"
"""


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgmps", CONFIG)


def mps_servers(up: Up) -> list[dict]:
    """Every process the nodes' inventories mark as labgang's MPS server."""
    nodes = json.loads(up.cli("nodes", "--json").stdout)["nodes"]
    return [
        p
        for n in nodes
        for g in (n.get("inventory") or {}).get("gpus", [])
        for p in g.get("processes") or []
        if p.get("mps_server")
    ]


def test_top_labels_labgangs_mps_server_and_nodes_and_pitfalls_do_not_call_it_foreign(up: Up) -> None:
    job = up.submit("--mps", "50", "--", "sleep", "300")
    try:
        view = up.wait_state(job, {"running"})
        ((device,),) = [rank["devices"] for rank in view["ranks"]]
        deadline = time.monotonic() + WAIT_S
        while not (servers := mps_servers(up)):  # the agent's next inventory shows the daemon on the card
            assert time.monotonic() < deadline, up.cli("nodes", "--json").stdout
            time.sleep(0.2)
        (server,) = servers
        assert server["mps_server"] == getpass.getuser() and server["mps_jobs"] == [job], server
        top = up.cli("top", "--once").stdout
        rows = [line for line in top.splitlines() if f" {server['pid']} " in line]
        assert rows and all(f"MPS server ({getpass.getuser()}: {job})" in row for row in rows), top
        assert "not labgang's" not in top, top
        nodes = json.loads(up.cli("nodes", "--json").stdout)["nodes"]
        states = {d["uuid"]: d["state"] for n in nodes for d in n["devices"]}
        assert states[device] == "allocated" and "foreign" not in states.values(), states
        assert "not started by labgang" not in top, top  # no foreign-process pitfall
    finally:
        up.cli("cancel", job)
