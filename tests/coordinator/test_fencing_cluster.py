"""Fencing on node loss, end to end (docs/queue-semantics.md §A5): a real coordinator and two real
agents (simulated 4-GPU nodes) as subprocesses on loopback, each agent's link through a relay
that can cut it like a network partition. The rank under test writes, with ``time.time()``,
when it started, when it got SIGTERM (it carries on: only SIGKILL ends it, as a rank busy
writing a checkpoint would) and, every few milliseconds, that it is still alive.

Cut the link of the node that runs the job's only rank: that node's agent must stop the rank on
its own lease (nothing from the coordinator can reach it), and the coordinator must start the
next attempt on the other node only after ``node_timeout_s`` + grace since its last word from
the lost node, so the two attempts never run at once. With the agent itself dead (SIGKILL while cut
off, and no new one), the rank's small parent stops it on the same lease.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from harness import Cluster, rank_script, wait_for
from linkcut import LinkCutter

pytestmark = pytest.mark.slow

NODES = {"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"}
NODE_TIMEOUT_S = 3.0
GRACE_S = 1.0

STUBBORN_RANK = """
import os, signal, time
base = os.environ['TEST_BASE']
run = '%s.%s' % (os.environ['LABGANG_JOB_ID'], os.environ['LABGANG_RESTART_COUNT'])

def mark(name):
    now = time.time()
    with open(os.path.join(base, '%s-%s' % (name, run)), 'a') as f:
        f.write('%r\\n' % now)

signal.signal(signal.SIGTERM, lambda signum, frame: mark('term'))  # noted, then ignored
mark('start')
while not os.path.exists(os.path.join(base, 'go')):
    mark('alive')
    time.sleep(0.02)
"""


def times(path: Path) -> list[float]:
    """The instants a rank wrote to ``path``, one per line."""
    return [float(line) for line in path.read_text().split()]


def history(job: dict[str, Any], event: str) -> list[dict[str, Any]]:
    return [h for h in job["history"] if h["event"] == event]


def start_relayed(cluster: Cluster) -> dict[str, LinkCutter]:
    """Start the coordinator, and each agent dialling it through its own relay."""
    relays: dict[str, LinkCutter] = {}
    cluster.start_coordinator()
    for node in NODES:
        relays[node] = LinkCutter(cluster.port)
        cluster.start_agent(node, coordinator_port=relays[node].port)
    wait_for(lambda: cluster.connected_nodes() == set(NODES), timeout=20, what="both agents connected")
    return relays


def start_stubborn_job(cluster: Cluster) -> tuple[str, str]:
    """Submit the one-rank job; return its id and its node once it writes."""
    job = cluster.submit(rank_script(STUBBORN_RANK), workers=1, gpus_per_worker=4, grace_s=GRACE_S)
    j = job["id"]
    (node,) = cluster.wait_state(j, "running")["nodes"]
    wait_for(lambda: (cluster.base / f"alive-{j}.0").exists(), what="the first attempt writing")
    return j, node


def test_a_partitioned_node_stops_its_rank_and_the_next_attempt_waits_for_the_fence() -> None:
    cluster = Cluster(NODES, node_timeout_s=NODE_TIMEOUT_S)
    relays: dict[str, LinkCutter] = {}
    try:
        relays = start_relayed(cluster)
        j, lost = start_stubborn_job(cluster)
        (other,) = set(NODES) - {lost}
        base = cluster.base

        relays[lost].cut()
        # Nothing from the coordinator reaches the lost node now: whatever stops the rank there is its own agent.
        start_1 = wait_for(lambda: (base / f"start-{j}.1").exists() and times(base / f"start-{j}.1"), timeout=30)[0]
        alive_0 = times(base / f"alive-{j}.0")
        assert max(alive_0) < start_1, (
            f"the first attempt still wrote {max(alive_0) - start_1:.2f} s after the second started"
        )
        term_0 = times(base / f"term-{j}.0")  # SIGTERM came, from the agent's own lease
        assert len(term_0) == 1, term_0
        assert any(t > term_0[0] for t in alive_0)  # it ran on after SIGTERM: SIGKILL after the grace ended it
        assert "no answer from the coordinator" in cluster.log_text(f"agent-{lost}")

        again = cluster.wait_state(j, "running", timeout=20)
        assert (again["nodes"], again["restart_count"]) == ([other], 1)
        node_view = next(n for n in cluster.client().nodes() if n["name"] == lost)
        assert not node_view["connected"]
        last_word = node_view["last_seen"]  # frozen while the link is cut
        (requeued,) = history(again, "requeued")
        assert requeued["time"] >= last_word + NODE_TIMEOUT_S + GRACE_S, (requeued, last_word)
        assert history(again, "fenced") and history(again, "fence-expired")

        relays[lost].mend()
        wait_for(lambda: cluster.connected_nodes() == set(NODES), timeout=20, what=f"{lost} back")
        (base / "go").write_text("go")
        done = cluster.wait_state(j, {"succeeded", "failed"}, timeout=20)
        assert done["state"] == "succeeded", done
        assert sorted(p.name for p in base.glob("start-*")) == [f"start-{j}.0", f"start-{j}.1"]
    finally:
        cluster.stop()
        for relay in relays.values():
            relay.close()


def test_a_node_back_soon_after_its_agent_stopped_the_rank_reports_the_exit_and_the_job_is_requeued() -> None:
    """The link returns as soon as the agent has sent SIGTERM on its lease: the rank's exit (it is
    killed after its grace) travels over the mended link marked as the fence's doing, so the job is
    requeued, not failed, and its next attempt still starts only after the old one ended."""
    cluster = Cluster(NODES, node_timeout_s=NODE_TIMEOUT_S)
    relays: dict[str, LinkCutter] = {}
    try:
        relays = start_relayed(cluster)
        j, node = start_stubborn_job(cluster)
        base = cluster.base
        relays[node].cut()
        wait_for(lambda: (base / f"term-{j}.0").exists(), timeout=20, what="the agent's own SIGTERM")
        relays[node].mend()
        ended = wait_for(
            lambda: v if ((v := cluster.job(j))["state"] == "failed" or history(v, "requeued")) else None,
            timeout=30,
            what="the first attempt requeued (or the job failed)",
        )
        assert ended["state"] != "failed", ended["history"]
        again = cluster.wait_state(j, "running", timeout=20)
        assert again["restart_count"] == 1 and not history(again, "failed"), again["history"]
        start_1 = wait_for(lambda: (base / f"start-{j}.1").exists() and times(base / f"start-{j}.1"), what="start 1")[0]
        alive_0 = times(base / f"alive-{j}.0")
        assert max(alive_0) < start_1, f"the first attempt still wrote {max(alive_0) - start_1:.2f} s after the second"
        (base / "go").write_text("go")
        done = cluster.wait_state(j, {"succeeded", "failed"}, timeout=20)
        assert done["state"] == "succeeded", done
    finally:
        cluster.stop()
        for relay in relays.values():
            relay.close()


def test_an_agent_restarted_while_cut_off_stops_the_ranks_it_re_adopts_on_the_lease_it_inherited() -> None:
    """The agent dies just after the link is cut and a new one starts, still cut off: it never hears
    the coordinator, yet it stops the rank it re-adopted when its predecessor's lease runs out."""
    cluster = Cluster(NODES, node_timeout_s=8.0)  # room for an agent restart inside the lease on a loaded machine
    relays: dict[str, LinkCutter] = {}
    try:
        relays = start_relayed(cluster)
        j, node = start_stubborn_job(cluster)
        base = cluster.base
        relays[node].cut()
        cluster.kill(f"agent-{node}")  # SIGKILL: its rank runs on (ranks outlive their agent)
        cluster.start_agent(node, coordinator_port=relays[node].port)
        start_1 = wait_for(
            lambda: (base / f"start-{j}.1").exists() and times(base / f"start-{j}.1"), timeout=40, what="start 1"
        )[0]
        alive_0 = times(base / f"alive-{j}.0")
        assert max(alive_0) < start_1, f"the first attempt still wrote {max(alive_0) - start_1:.2f} s after the second"
        assert len(times(base / f"term-{j}.0")) == 1
        assert "no answer from the coordinator" in cluster.log_text(f"agent-{node}")
    finally:
        cluster.stop()
        for relay in relays.values():
            relay.close()


def rank_pid(cluster: Cluster, node: str) -> int:
    """The pid of the one rank the agent of ``node`` journalled (``rank.json``, written by its small parent)."""
    (rank_file,) = (cluster.agent_dir(node) / "agent" / "ranks").glob("*/0/rank.json")
    return int(json.loads(rank_file.read_text())["pid"])


def process_alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] not in (b"Z", b"X")
    except OSError:
        return False


def test_a_dead_agent_cut_off_leaves_no_rank_running_past_the_fence() -> None:
    """The agent is SIGKILLed while its link is cut and never comes back: no agent can stop the rank,
    yet it is gone by the node's last contact + ``node_timeout_s`` + grace, when the coordinator
    counts it stopped and starts the next attempt elsewhere."""
    cluster = Cluster(NODES, node_timeout_s=NODE_TIMEOUT_S)
    relays: dict[str, LinkCutter] = {}
    try:
        relays = start_relayed(cluster)
        j, lost = start_stubborn_job(cluster)
        (other,) = set(NODES) - {lost}
        base = cluster.base
        pid = rank_pid(cluster, lost)

        relays[lost].cut()
        cluster.kill(f"agent-{lost}")  # SIGKILL, and no agent starts again on that node
        wait_for(lambda: not process_alive(pid), timeout=20, what="the first attempt's rank gone")
        node_view = next(n for n in cluster.client().nodes() if n["name"] == lost)
        assert not node_view["connected"]
        fence_ends = node_view["last_seen"] + NODE_TIMEOUT_S + GRACE_S  # last_seen is frozen while cut
        alive_0 = times(base / f"alive-{j}.0")
        assert max(alive_0) < fence_ends, f"the rank still wrote {max(alive_0) - fence_ends:.2f} s after the fence"
        term_0 = times(base / f"term-{j}.0")  # from its small parent: the agent was dead
        assert len(term_0) == 1, term_0
        assert any(t > term_0[0] for t in alive_0)  # it ran on after SIGTERM: SIGKILL after the grace ended it

        start_1 = wait_for(lambda: (base / f"start-{j}.1").exists() and times(base / f"start-{j}.1"), timeout=30)[0]
        assert max(alive_0) < start_1
        again = cluster.wait_state(j, "running", timeout=20)
        assert (again["nodes"], again["restart_count"]) == ([other], 1)
        (base / "go").write_text("go")
        done = cluster.wait_state(j, {"succeeded", "failed"}, timeout=20)
        assert done["state"] == "succeeded", done
    finally:
        cluster.stop()
        for relay in relays.values():
            relay.close()
