"""``labgang drain`` / ``labgang resume`` on real processes: a coordinator and two agents on
simulated 4-GPU nodes. A drained node gets no new job while its running job runs on; ``labgang
nodes`` shows it drng, then drain, with its reason; the drain outlives a restart of the
coordinator; ``resume`` gives the node back and the waiting job starts there. Bad requests are one
line each and change nothing."""

from __future__ import annotations

import json
import signal

import pytest
from harness import Cluster, rank_script, wait_for

pytestmark = pytest.mark.slow


def _node_line(table: str, node: str) -> list[str]:
    return next(line.split() for line in table.splitlines() if line.split()[:1] == [node])


def test_a_drained_node_takes_no_new_job_keeps_its_running_one_and_survives_a_restart() -> None:
    cluster = Cluster({"n1": "n1-4gpu.toml", "n2": "n2-4gpu.toml"}, nominal_gpus=8)
    hold = rank_script(
        "import os, sys, time\n"
        "stop = os.path.join(os.environ['TEST_BASE'], 'stop-' + sys.argv[1])\n"
        "while not os.path.exists(stop):\n"
        "    time.sleep(0.05)\n"
    )
    try:
        cluster.start()
        first = cluster.submit([*hold, "first"], gpus_per_worker=4)
        running = cluster.wait_state(first["id"], "running", timeout=20)
        busy = running["ranks"][0]["node"]
        other = "n2" if busy == "n1" else "n1"

        said = cluster.cli_ok("drain", busy, "--reason", "PSU swap")
        assert said == f"node {busy}: drained (PSU swap)\n"
        table = cluster.cli_ok("nodes")
        assert _node_line(table, busy)[:3] == [busy, "drng", "4/0/0/4"], table
        assert f"drained: {busy} by root since " in table and table.rstrip().endswith(": PSU swap"), table
        assert cluster.job(first["id"])["state"] == "running"  # its running job runs on

        second = cluster.submit([*hold, "second"], gpus_per_worker=4)
        assert cluster.wait_state(second["id"], "running", timeout=20)["ranks"][0]["node"] == other
        (cluster.base / "stop-first").write_text("go")
        cluster.wait_state(first["id"], "succeeded", timeout=30)
        table = cluster.cli_ok("nodes")
        assert _node_line(table, busy)[:3] == [busy, "drain", "0/0/4/4"], table  # idle, not offered

        # The drain is in the store: a restarted coordinator keeps it. A 1-GPU job fits only the
        # drained node; a cycle of the new coordinator finds no GPU for it.
        cluster.kill("coordinator", signal.SIGTERM)
        cluster.start_coordinator()
        wait_for(lambda: cluster.connected_nodes() == {"n1", "n2"}, timeout=20, what="agents reconnected")
        view = next(n for n in json.loads(cluster.cli_ok("nodes", "--json"))["nodes"] if n["name"] == busy)
        drain = view["drain"]
        assert view["state"] == "drain"  # the table's STATE word, in --json too
        assert (drain["reason"], drain["by"]) == ("PSU swap", "root")
        third = cluster.submit([*hold, "third"], gpus_per_worker=1)
        reason = wait_for(lambda: cluster.job(third["id"])["reason"], timeout=20, what="the job's pending reason")
        assert reason["message"].startswith("0 gpu free"), reason
        assert cluster.job(third["id"])["state"] == "pending"
        sentences = cluster.cli_ok("explain", third["id"]).splitlines()
        assert sentences[1].startswith("It waits: 0 gpu free") and sentences[2] == (
            f"Drained nodes take no new job: {busy} (4 gpu, by root: PSU swap); "
            "an admin's `labgang resume NODE` offers them again."
        ), sentences

        answer = json.loads(cluster.cli_ok("resume", busy, "--json"))
        assert answer == [{"node": busy, "drain": None, "ended": {**drain}}]
        assert cluster.wait_state(third["id"], "running", timeout=20)["ranks"][0]["node"] == busy
        table = cluster.cli_ok("nodes")
        assert _node_line(table, busy)[1] == "mix" and "drained:" not in table, table
    finally:
        cluster.stop()


def test_bad_drain_and_resume_requests_are_one_line_each_and_change_nothing() -> None:
    cluster = Cluster({"n1": "n1-4gpu.toml"}, nominal_gpus=4)
    try:
        cluster.start()
        cases = [
            (("drain", "n9", "--reason", "x"), 1, "labgang drain: no node 'n9'; nodes: n1\n"),
            (("resume", "n9"), 1, "labgang resume: no node 'n9'; nodes: n1\n"),
            (("resume", "n1"), 1, "labgang resume: node n1 is not drained\n"),
            (
                ("drain", "n1", "--reason", " "),
                2,
                "labgang drain: node n1: reason is missing or empty; allowed: printable text of 1 to 256 characters\n",
            ),
            (
                ("drain", "n1", "--reason", "x" * 257),
                2,
                "labgang drain: node n1: reason has 257 characters; allowed: printable text of 1 to 256 characters\n",
            ),
            (("drain", "n1", "--reason", "a\x1b[2Jb"), 2, None),
            (
                ("drain", "n[1-", "--reason", "x"),
                2,
                "labgang drain: NODE: host list 'n[1-': a '[' without its ']'; "
                "allowed: node names or Slurm host lists such as gpu[01-04,07]\n",
            ),
            (
                ("resume", "n[2-1]"),
                2,
                "labgang resume: NODE: host list 'n[2-1]': the range 2-1 ends below its start; "
                "allowed: node names or Slurm host lists such as gpu[01-04,07]\n",
            ),
        ]
        for args, status, line in cases:
            done = cluster.cli(*args)
            assert done.returncode == status, (args, done.stdout, done.stderr)
            assert done.stdout == "", (args, done.stdout)
            assert len(done.stderr.splitlines()) == 1, (args, done.stderr)
            if line is not None:
                assert done.stderr == line, (args, done.stderr)
        refused = cluster.cli("drain", "n9", "--reason", "x", "--json")
        assert json.loads(refused.stdout)["error"] == {
            "message": "no node 'n9'; nodes: n1",
            "field": "node",
            "allowed": ["n1"],
        }
        assert all(n["drain"] is None for n in json.loads(cluster.cli_ok("nodes", "--json"))["nodes"])
        # one good and one unknown node: the good one is drained, the exit status says the refusal
        both = cluster.cli("drain", "n1", "n9", "--reason", "disk")
        assert both.returncode == 1 and both.stdout == "node n1: drained (disk)\n", both
        assert cluster.cli_ok("nodes").splitlines()[1].split()[:2] == ["n1", "drain"]
        # draining a drained node again replaces its reason, as Slurm's
        assert cluster.cli_ok("drain", "n1", "-r", "disk, then fans") == "node n1: drained (disk, then fans)\n"
        assert cluster.cli_ok("nodes").rstrip().endswith(": disk, then fans")
        # a Slurm host list names nodes as scontrol's NodeName= does: each is acted on or refused
        assert cluster.cli_ok("resume", "n[1]").startswith("node n1: resumed")
        listed = cluster.cli("drain", "n[1-2]", "--reason", "rack power")
        assert listed.returncode == 1 and listed.stdout == "node n1: drained (rack power)\n", listed
        assert listed.stderr == "labgang drain: no node 'n2'; nodes: n1\n", listed
    finally:
        cluster.stop()
