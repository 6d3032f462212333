"""``labgang plan replay`` on hand-built histories: figures, targets, what limited a queue, refusals."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from click.testing import CliRunner
from labgang.launcher.cli.main import cli
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.plan.replay import ALL, ClusterChange, PlanRefused, percentile, replay, with_cluster, with_config
from labgang.launcher.plan.target import parse_target, search


def history(jobs: list[dict[str, Any]], *, gpus: int = 4, nominal: int = 4, nodes: int = 1) -> dict[str, Any]:
    """A scenario like ``history --export`` writes: one queue ``default``."""
    return {
        "scenario": {"name": "t"},
        "nodes": [{"name": f"n{i}", "gpus": gpus} for i in range(1, nodes + 1)],
        "queues": [{"name": "default", "nominal": {"gpu": nominal}}],
        "jobs": jobs,
    }


def job(ident: str, submit: float, duration: float, gpus: int = 4, **more: Any) -> dict[str, Any]:
    return {"id": ident, "queue": "default", "gpus_per_worker": gpus, "submit": submit, "duration": duration, **more}


QUEUED = history([job("a", 0, 100), job("b", 10, 50), job("c", 20, 50)])
"""a runs 0-100; b waits 90 s (100-150); c waits 130 s (150-200)."""


def test_percentile_nearest_rank() -> None:
    assert percentile([], 0.9) is None
    assert percentile([5.0, 1.0, 3.0, 2.0], 0.5) == 2.0
    assert percentile([float(i) for i in range(1, 11)], 0.9) == 9.0


def test_waits_utilization_and_quota_limit() -> None:
    r = replay(QUEUED)
    q = r.figures("default")
    assert q is not None
    assert (q.jobs, q.started) == (3, 3)
    # waits 0, 90, 130: p50 90, p90 130, max 130
    assert (q.wait_p50_s, q.wait_p90_s, q.wait_max_s) == (90.0, 130.0, 130.0)
    assert r.span_s == 200.0
    assert q.gpu_utilization == pytest.approx(1.0)  # 4 GPUs busy for all 200 s
    # The tail (c) waited 130 s over its queue's nominal 4: quota.
    assert q.limits == {"quota": pytest.approx(130.0)}
    assert q.main_limit() == ("quota", 1.0)


def test_capacity_limit_and_borrowing() -> None:
    # Nominal quota above the cluster: the waits come from capacity.
    r = replay(history([job("a", 0, 100), job("b", 10, 50)], nominal=8))
    q = r.figures("default")
    assert q is not None and q.limits == {"capacity": pytest.approx(90.0)}
    # A queue with nominal 2 in a cohort borrowing 2 from a lender for 100 s: 200 GPU-seconds borrowed.
    data = history([job("a", 0, 100)], nominal=2)
    data["queues"][0]["cohort"] = "lab"
    data["queues"].append({"name": "lender", "cohort": "lab", "nominal": {"gpu": 2}})
    q = replay(data).figures("default")
    assert q is not None
    assert q.borrowed_gpu_h == pytest.approx(200 / 3600)
    assert q.peak_borrowed == 2


def test_a_share_counts_its_fraction_of_a_gpu_in_borrowing() -> None:
    # Nominal 1 in a cohort with a lender: a whole GPU 0-100 s is within it; two one-shard jobs (a
    # quarter GPU each, 4 shards per card) run 0-100 s and 0-50 s above it: 0.5 GPU borrowed for 50 s,
    # then 0.25 GPU for 50 s, as simulate's device-hours count a share (not a whole GPU each).
    data = history([job("w", 0, 100, gpus=1)], nominal=1, gpus=2)
    data["jobs"] += [
        {"id": f"s{i}", "queue": "default", "workers": 1, "shards": 1, "submit": 0.0, "duration": d}
        for i, d in enumerate((100.0, 50.0))
    ]
    data["sharing"] = {"shards_per_gpu": 4}
    data["queues"][0].update(cohort="lab", share_gpus="queue")
    data["queues"].append({"name": "lender", "cohort": "lab", "nominal": {"gpu": 1}})
    r = replay(data)
    q = r.figures("default")
    assert q is not None and q.started == 3 and q.wait_max_s == 0.0
    assert q.borrowed_gpu_h == pytest.approx((0.5 * 50 + 0.25 * 50) / 3600)
    assert q.peak_borrowed == 0.5
    assert q.gpu_utilization == pytest.approx((100 + 25 + 12.5) / (2 * 100))


def test_fragmentation_limit() -> None:
    # Two nodes of 3 GPUs, two busy on each: a 2-GPU rank has 2 free GPUs in all but no node holds it.
    jobs = [job("x", 0, 100, gpus=2), job("y", 0, 100, gpus=2), job("big", 10, 10, gpus=2)]
    data = history(jobs, gpus=3, nominal=6, nodes=2)
    q = replay(data).figures("default")
    assert q is not None and q.wait_max_s == 90.0
    assert q.main_limit() == ("fragmentation", 1.0)


def test_preemptions_counted() -> None:
    data = history([job("low", 0, 100), job("high", 10, 10, priority=5)])
    data["queues"][0]["within_queue"] = "lower-priority"
    q = replay(data).figures("default")
    assert q is not None and q.preemptions == 1


def test_cluster_changes() -> None:
    grown = with_cluster(QUEUED, ClusterChange(add_nodes=2, node_gpus=4, quota_to="default"))
    assert [n["name"] for n in grown["nodes"]] == ["n1", "added-1", "added-2"]
    assert grown["queues"][0]["nominal"] == {"gpu": 12}
    q = replay(grown).figures(ALL)
    assert q is not None and q.wait_max_s == 0.0
    box = with_cluster(QUEUED, ClusterChange(gpus=8))
    assert box["nodes"] == [{"name": "box", "gpus": 8}]
    with pytest.raises(PlanRefused, match="--remove-node: no node 'n9' in the cluster; allowed: n1"):
        with_cluster(QUEUED, ClusterChange(remove=("n9",)))
    with pytest.raises(PlanRefused, match="no node would be left"):
        with_cluster(QUEUED, ClusterChange(remove=("n1",)))


def test_target_search_finds_smallest_added_capacity() -> None:
    data = history([job(f"j{i}", 0, 100) for i in range(4)])  # 4 gangs of 4 GPUs at once; waits 0, 100, 200, 300

    def run(n: int) -> Any:
        return replay(with_cluster(data, ClusterChange(add_nodes=n, node_gpus=4, quota_to="default")))

    # p90 of 4 jobs is the 4th: <= 100 s needs 2 gangs at once per 100 s... (+1 node: waits 0,0,100,100)
    target = parse_target("p90-wait<=100", ["default"])
    found = search([target], run, 16)
    assert found.added == 1
    assert found.result.figures(ALL).wait_p90_s == 100.0  # type: ignore[union-attr]
    assert found.tried[0] is False
    per_queue = parse_target("default:max-wait<=0s", ["default"])
    found = search([per_queue], run, 16)
    assert found.added == 3
    impossible = search([parse_target("max-wait<=0", ["default"])], run, 1)
    assert impossible.added is None and impossible.best_added == 1


def test_bad_targets() -> None:
    with pytest.raises(ValueError, match="'p91-wait' is not a metric; allowed: p50-wait, p90-wait, max-wait"):
        parse_target("p91-wait<=1h", ["a"])
    with pytest.raises(ValueError, match="no queue 'nlp' in the replay; allowed: a"):
        parse_target("nlp:p90-wait<=1h", ["a"])
    with pytest.raises(ValueError, match="does not parse"):
        parse_target("p90-wait>1h", ["a"])
    with pytest.raises(ValueError, match="is not a duration"):
        parse_target("p90-wait<=soon", ["a"])


def test_config_must_cover_the_history_queues() -> None:
    config = parse_config({"default_queue": "vision", "queues": [{"name": "vision", "nominal": {"gpu": 8}}]})
    with pytest.raises(PlanRefused, match=r"new\.toml does not define the queue default of the history .*--map-queues"):
        with_config(QUEUED, config, map_queues=False, source="new.toml")
    mapped = with_config(QUEUED, config, map_queues=True, source="new.toml")
    assert {j["queue"] for j in mapped["jobs"]} == {"vision"}
    q = replay(with_cluster(mapped, ClusterChange(gpus=8))).figures("vision")
    assert q is not None and q.wait_max_s == 40.0  # a and b together; c waits for b (10-60): 20 -> 60


def test_cli_file_input(tmp_path: Path) -> None:
    path = tmp_path / "h.toml"
    path.write_text(tomli_w.dumps(QUEUED))
    out = CliRunner().invoke(cli, ["plan", "replay", str(path), "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["queues"][0]["queue"] == "default"
    assert (doc["queues"][0]["wait_p50_s"], doc["queues"][0]["wait_p90_s"]) == (90.0, 130.0)
    text = CliRunner().invoke(cli, ["plan", "replay", str(path), "--target", "p90-wait<=60s", "--node-gpus", "4"])
    assert text.exit_code == 0, text.output
    assert "smallest added capacity meeting every target: +1 node(s) of 4 GPUs = +4 GPUs" in text.output
    assert "default: p90 wait" in text.output
    none = CliRunner().invoke(cli, ["plan", "replay", str(path), "--target", "p90-wait<=0", "--max-add-nodes", "1"])
    assert none.exit_code == 1
    assert "no capacity tried meets every target: the largest tried, +1 node(s)" in none.output
    empty = tmp_path / "empty.toml"
    empty.write_text(tomli_w.dumps({**QUEUED, "jobs": []}))
    refused = CliRunner().invoke(cli, ["plan", "replay", str(empty)])
    assert refused.exit_code == 1
    assert "no finished jobs to replay" in refused.output


def test_a_target_on_a_queue_its_quota_limits_is_refused_at_once_naming_the_quota(tmp_path: Path) -> None:
    """A new user's finding: ``--target 'nlp:p90-wait<=1s'`` tried up to +64 nodes although nlp's
    waits came from its quota (100%), which added nodes (their quota goes to ``default``) never raise."""
    data = history([job("d", 0, 10, gpus=1)], gpus=8, nominal=4)
    data["queues"].append({"name": "nlp", "nominal": {"gpu": 2}})
    data["jobs"] += [{**job(f"n{i}", i, 100, gpus=2), "queue": "nlp"} for i in range(3)]
    path = tmp_path / "h.toml"
    path.write_text(tomli_w.dumps(data))
    out = CliRunner().invoke(cli, ["plan", "replay", str(path), "--target", "nlp:p90-wait<=1s", "--node-gpus", "4"])
    assert out.exit_code == 1, out.output
    (line,) = out.output.strip().splitlines()
    assert "nlp's waits come from quota (100% of its tail's waiting), not capacity" in line, line
    assert "added nodes raise queue 'default''s (--quota-to) nominal quota, not nlp's" in line
    assert "nlp's nominal quota (or its borrowing) is what limits it (nlp p90 wait 3m18s (target <= 1s))" in line
    # the added nodes' quota going to nlp: they can help, and the search finds how many
    raised = ["--target", "nlp:p90-wait<=1s", "--node-gpus", "4", "--quota-to", "nlp"]
    found = CliRunner().invoke(cli, ["plan", "replay", str(path), *raised])
    assert found.exit_code == 0, found.output
    assert "smallest added capacity meeting every target: +1 node(s) of 4 GPUs" in found.output


def test_never_started_jobs_are_named_with_what_they_last_waited_for(tmp_path: Path) -> None:
    """A new user's finding: "1 job(s) never started" named no job. A gang larger than the queue can
    ever hold, a job whose dependency is on it, and a job held for good are each named, in the
    history's order, with the reason it last had; the text names the first ten, --json every one."""
    jobs = [
        job("ok", 0, 10, gpus=1),
        job("big", 0, 10, gpus=4, workers=2),
        job("after", 0, 10, gpus=1, dependency="afterok:big"),
        job("kept", 0, 10, gpus=1, hold=True),
    ]
    r = replay(history(jobs))
    assert r.never_started == 3
    got = [(u.job, u.queue, u.reason) for u in r.unstarted]
    assert got == [("big", "default", "unschedulable"), ("after", "default", "dependency"), ("kept", "default", "held")]
    assert r.unstarted[0].message == "job needs 8 gpu but queue default can hold at most 4"
    assert "afterok:big" in r.unstarted[1].message  # in the history's names, not the replay's ids
    path = tmp_path / "h.toml"
    path.write_text(tomli_w.dumps(history(jobs + [job(f"w{i}", 0, 10, gpus=1, hold=True) for i in range(10)])))
    text = CliRunner().invoke(cli, ["plan", "replay", str(path)])
    assert text.exit_code == 0, text.output
    assert "13 job(s) never started (not in the waits), each with what it last waited for:" in text.output
    assert "  big (queue default): unschedulable: job needs 8 gpu but queue default can hold at most 4" in text.output
    assert "  w6 (queue default): held:" in text.output and "w7 (queue default)" not in text.output
    assert "  ... and 3 more (--json lists every one)" in text.output
    doc = json.loads(CliRunner().invoke(cli, ["plan", "replay", str(path), "--json"]).output)
    assert [u["job"] for u in doc["never_started_jobs"]] == ["big", "after", "kept"] + [f"w{i}" for i in range(10)]
    assert doc["never_started_jobs"][1] == {
        "job": "after",
        "queue": "default",
        "reason": "dependency",
        "message": "waits for afterok:big (pending)",
    }


def test_a_target_capacity_cannot_meet_says_what_the_tail_waited_for(tmp_path: Path) -> None:
    """A new user's finding: ``--target`` on waits that come from an array's ``%1`` cap searched up
    to the largest size and said only the best figure. Now the refusal (and --json's
    ``unmet_because``) says the tail waited for what added nodes do not shorten, with the reason."""
    data = history([job("sweep", 0, 100, gpus=1, array="0-4%1")], gpus=8, nominal=8)
    path = tmp_path / "h.toml"
    path.write_text(tomli_w.dumps(data))
    args = ["plan", "replay", str(path), "--target", "p90-wait<=60s", "--max-add-nodes", "2"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 1, out.output
    (line,) = out.output.strip().splitlines()
    assert "no capacity tried meets every target: the largest tried, +2 node(s)" in line, line
    assert line.endswith(
        "every job's p90 tail waited 100% for what added nodes do not shorten (dependencies, array caps, "
        "holds, begin times, user limits): array_limit 6m40s"  # the last task waited 4 x 100 s
    ), line
    doc = json.loads(CliRunner().invoke(cli, [*args, "--json"]).output)
    assert doc["target"]["met"] is False
    assert doc["target"]["unmet_because"] == [line.rpartition("; ")[2]]
