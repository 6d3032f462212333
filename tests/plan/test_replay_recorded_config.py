"""``plan replay`` and ``history --export`` from the store without ``--config``, against a real
``labgang up --simulate`` of a MIG machine started with ``--config``: the replay uses the config
the instance runs with (recorded in the store when it started) and says so, and the MIG jobs
start in the replay."""

from __future__ import annotations

import json
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from up_harness import REPO, Up

pytestmark = pytest.mark.slow

MIG_MACHINE = REPO / "config" / "sim" / "a100x8-mig.toml"  # 3 whole GPUs, 9 1g.10gb MIG devices among others
CONFIG = """\
default_queue = "vision"
[[queues]]
name = "vision"
nominal = { gpu = 3 }
[[queues]]
name = "nlp"
nominal = { "mig-1g.10gb" = 9 }
"""


@pytest.fixture(scope="module")
def finished() -> Iterator[tuple[Up, Path]]:
    with tempfile.TemporaryDirectory(prefix="lgr", dir="/tmp") as d:
        config = Path(d) / "cluster.toml"
        config.write_text(CONFIG)
        up = Up(Path(d) / "state", MIG_MACHINE, start=False, args=("--config", str(config)))
        up.state_dir.mkdir()
        up.start()
        try:
            up.submit("-q", "vision", "-g", "2", "--", "sleep", "0.5")
            up.submit("-q", "nlp", "--mig", "1g.10gb", "--", "sleep", "0.5")
            up.submit("-q", "nlp", "--mig", "1g.10gb", "-n", "2", "--", "sleep", "0.5")
            up.wait("every job finished", lambda jobs: not jobs)
            yield up, config
        finally:
            up.stop()


def test_replay_uses_the_recorded_config_and_starts_mig_jobs(finished: tuple[Up, Path]) -> None:
    up, config = finished
    out = up.cli("plan", "replay", "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    by_queue = {q["queue"]: q for q in doc["queues"]}
    assert set(by_queue) == {"vision", "nlp"} and doc["all"]["jobs"] == 3
    assert by_queue["vision"]["jobs"] == 1 and by_queue["vision"]["started"] == 1
    assert by_queue["nlp"]["jobs"] == 2 and by_queue["nlp"]["started"] == 2  # MIG jobs now replayed
    assert doc["never_started"] == 0
    assert f"queue policy: the config the instance runs with: {config.resolve()}" in out.stderr
    # the cluster: the coordinator's 3 whole GPUs plus one node per MIG profile
    assert "MIG device(s) as nodes NAME~PROFILE" in out.stderr


def test_export_carries_the_recorded_config_and_mig_nodes(finished: tuple[Up, Path], tmp_path: Path) -> None:
    up, _ = finished
    out_file = tmp_path / "h.toml"
    out = up.cli("history", "--export", str(out_file))
    assert out.returncode == 0, out.stderr
    data = tomllib.loads(out_file.read_text())
    assert [q["name"] for q in data["queues"]] == ["vision", "nlp"]
    assert data["queues"][1]["nominal"] == {"mig-1g.10gb": 9}
    whole = [n for n in data["nodes"] if "mig" not in n]
    mig = {n["mig"][0]: n["gpus"] for n in data["nodes"] if "mig" in n}
    assert sum(n["gpus"] for n in whole) == 3
    assert mig["1g.10gb"] == 9
    assert sorted(j.get("mig", "") for j in data["jobs"]) == ["", "1g.10gb", "1g.10gb"]
    sim = up.cli("simulate", "--json", str(out_file))
    assert sim.returncode == 0, sim.stdout + sim.stderr
    summary = json.loads(sim.stdout)["files"][0]["summary"]
    assert summary["jobs"] == 3
    assert sum(q["finished"] for q in summary["queues"]) == 3


def test_export_to_a_folder_that_is_missing_is_one_line_and_json_says_what_was_written(
    finished: tuple[Up, Path], tmp_path: Path
) -> None:
    up, _ = finished
    for bad in (tmp_path / "missing" / "h.toml", Path("/etc/passwd/h.toml")):
        out = up.cli("history", "--export", str(bad))
        assert out.returncode == 2, out
        assert out.stderr.strip() == f"labgang history: --export {bad}: cannot write it: " + (
            "No such file or directory" if "missing" in str(bad) else "Not a directory"
        )
    out_file = tmp_path / "h.toml"
    out = up.cli("history", "--export", str(out_file), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["path"] == str(out_file) and doc["jobs"] == 3 and doc["tasks"] == 3
    assert len(tomllib.loads(out_file.read_text())["jobs"]) == 3
