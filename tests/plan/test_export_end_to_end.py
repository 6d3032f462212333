"""``labgang history --export`` and ``labgang plan replay`` against a real ``labgang up --simulate``:
real jobs (a preemption, an array with a cap, a dependency) in a real store; the export reads
back through ``labgang simulate``, the replay reads the store, and the store does not change."""

from __future__ import annotations

import json
import sqlite3
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w
from up_harness import REPO, Up

pytestmark = pytest.mark.slow

N1 = REPO / "config" / "sim" / "n1-4gpu.toml"


def _store_rows(state: Path) -> tuple[list[tuple], int]:
    with sqlite3.connect(state / "labgang.db") as db:
        return db.execute("SELECT id, state, status FROM jobs ORDER BY seq").fetchall(), db.execute(
            "SELECT COUNT(*) FROM events"
        ).fetchone()[0]


@pytest.fixture(scope="module")
def finished() -> Iterator[Up]:
    with tempfile.TemporaryDirectory(prefix="lgp", dir="/tmp") as d:
        up = Up(Path(d), N1)
        try:
            first = up.submit("-g", "2", "--grace", "1s", "--", "sleep", "1")
            up.submit("-g", "2", "--grace", "1s", "--", "sleep", "2")
            up.submit("-g", "4", "-p", "5", "--", "sleep", "1")  # preempts a lower-priority gang
            up.submit("-g", "1", "--array", "0-3%2", "--", "sleep", "0.5")
            up.submit("-g", "1", "-d", f"afterok:{first}", "--", "true")
            up.wait("every job finished", lambda jobs: not jobs)
            yield up
        finally:
            up.stop()


def test_export_round_trips_through_simulate(finished: Up, tmp_path: Path) -> None:
    before = _store_rows(finished.state_dir)
    out_file = tmp_path / "h.toml"
    out = finished.cli("history", "--export", str(out_file))
    assert out.returncode == 0, out.stderr
    assert "wrote 8 finished jobs (5 [[jobs]] tables)" in out.stderr
    data = tomllib.loads(out_file.read_text())
    assert data["nodes"] == [{"name": "vm", "gpus": 4, "model": data["nodes"][0]["model"]}]
    by_id = {j["id"]: j for j in data["jobs"]}
    assert by_id["j3"]["priority"] == 5 and by_id["j3"]["gpus_per_worker"] == 4
    assert by_id["j4"]["array"] == "0-3%2" and len(by_id["j4"]["durations"]) == 4
    assert by_id["j8"]["dependency"] == "afterok:j1"
    assert all(j["duration"] > 0 for j in data["jobs"] if "duration" in j)
    sim = finished.cli("simulate", "--json", str(out_file))
    assert sim.returncode == 0, sim.stdout + sim.stderr
    summary = json.loads(sim.stdout)["files"][0]["summary"]
    assert summary["jobs"] == 8
    assert summary["queues"][0]["finished"] == 8
    assert _store_rows(finished.state_dir) == before  # nothing written


def test_replay_reads_the_store(finished: Up, tmp_path: Path) -> None:
    before = _store_rows(finished.state_dir)
    out = finished.cli("plan", "replay", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    (queue,) = doc["queues"]
    assert queue["queue"] == "default" and queue["jobs"] == 8 and queue["started"] == 8
    assert queue["wait_p90_s"] is not None and queue["wait_p90_s"] >= queue["wait_p50_s"]
    assert queue["preemptions"] >= 1  # the priority-5 gang preempts in the replay as it did for real
    config = tmp_path / "c.toml"
    config.write_text('default_queue = "vision"\n[[queues]]\nname = "vision"\nnominal = { gpu = 4 }\n')
    refused = finished.cli("plan", "replay", "--config", str(config))
    assert refused.returncode == 1
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "does not define the queue default of the history (it has vision); give --map-queues to replay "
            "those jobs in its default queue 'vision'"
        )
    )
    mapped = finished.cli("plan", "replay", "--config", str(config), "--map-queues", "--json")
    assert mapped.returncode == 0, mapped.stderr
    assert json.loads(mapped.stdout)["queues"][0]["queue"] == "vision"
    target = finished.cli("plan", "replay", "--target", "default:p90-wait<=1h")
    assert target.returncode == 0, target.stderr
    assert "smallest added capacity meeting every target: +0 node(s) of 4 GPUs = +0 GPUs" in target.stdout
    assert "what limited each queue" in target.stdout
    empty = finished.cli("plan", "replay", "--until", "2000-01-01")
    assert empty.returncode == 1
    assert "no finished jobs in the period" in empty.stderr
    assert _store_rows(finished.state_dir) == before


def test_an_export_after_a_config_change_keeps_the_old_queue_and_replays(tmp_path: Path) -> None:
    """Jobs ran in the built-in ``default`` queue; the instance then restarted with a config of other
    queues. The export keeps their queue, defined so that the file replays as it stands; a file
    written without it (as before) is refused with a line naming --map-queues, which then maps it."""
    lab = tmp_path / "lab.toml"
    lab.write_text(
        'default_queue = "vision"\n[[queues]]\nname = "vision"\nnominal = { gpu = 2 }\n'
        '[[queues]]\nname = "nlp"\nnominal = { gpu = 2 }\n'
    )
    with tempfile.TemporaryDirectory(prefix="lgq", dir="/tmp") as d:
        before = Up(Path(d), N1)
        try:
            before.submit("-g", "2", "--", "true")
            before.submit("-g", "1", "--", "true")
            before.wait("every job finished", lambda jobs: not jobs)
        finally:
            assert before.stop() == 0
        after = Up(Path(d), N1, args=("--config", str(lab)))
        try:
            exported = tmp_path / "sys.toml"
            out = after.cli("history", "--export", str(exported), "--since", "1h")
            assert out.returncode == 0, out.stderr
            assert "queue default of the period is not in the queue policy now" in out.stderr
            data = tomllib.loads(exported.read_text())
            assert [j["queue"] for j in data["jobs"]] == ["default", "default"]
            assert [q["name"] for q in data["queues"]] == ["vision", "nlp", "default"]
            assert data["queues"][-1] == {"name": "default", "nominal": {"gpu": 4}}
            replayed = after.cli("plan", "replay", str(exported), "--json")
            assert replayed.returncode == 0, replayed.stderr
            assert [(q["queue"], q["jobs"]) for q in json.loads(replayed.stdout)["queues"] if q["jobs"]] == [
                ("default", 2)
            ]

            data["queues"].pop()  # a file exported before retired queues were kept
            old = tmp_path / "old.toml"
            old.write_text(tomli_w.dumps(data))
            refused = after.cli("plan", "replay", str(old))
            assert refused.returncode == 1
            assert refused.stderr.count("\n") == 1, refused.stderr
            assert (
                f"{old} does not define the queue default of its jobs (it has vision, nlp); give --map-queues "
                "to replay those jobs in its queue 'vision'" in refused.stderr
            )
            mapped = after.cli("plan", "replay", str(old), "--map-queues", "--json")
            assert mapped.returncode == 0, mapped.stderr
            assert [(q["queue"], q["jobs"]) for q in json.loads(mapped.stdout)["queues"] if q["jobs"]] == [
                ("vision", 2)
            ]
        finally:
            assert after.stop() == 0
