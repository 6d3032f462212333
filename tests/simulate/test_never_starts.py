"""``labgang simulate`` names the jobs that can never start (one line each, ``--json``, ``--trace``):
a job mix with one fails (exit 1, as the coordinator would refuse it); a checked file warns."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from labgang.launcher.cli.simulate import simulate

MIX = """
[scenario]
name = "never"
[[nodes]]
name = "n1"
gpus = 2
model = "NVIDIA H100"
[[queues]]
name = "q"
nominal = { gpu = 4 }
[[queues]]
name = "small"
nominal = { gpu = 1 }
[[jobs]]
id = "ok"
queue = "q"
duration = 5
[[jobs]]
id = "huge"
queue = "q"
gpus_per_worker = 3
[[jobs]]
id = "overquota"
queue = "small"
workers = 2
[[jobs]]
id = "elastic"
queue = "small"
workers = 4
min_workers = 1
duration = 5
[[jobs]]
id = "a100"
queue = "q"
model = "A100"
"""

HUGE = (
    "FAIL {path}: jobs[1] ('huge') can never start (gpus_per_worker): no placement for 1 x 3 gpu even on an "
    "empty cluster (2 gpu in all, largest node has 2); the coordinator would refuse it at submission"
)
OVERQUOTA = (
    "FAIL {path}: jobs[2] ('overquota') can never start (workers): job needs 2 gpu but queue small can hold "
    "at most 1; the coordinator would refuse it at submission"
)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mix.toml"
    path.write_text(text)
    return path


def test_one_failing_line_per_job_that_can_never_start(tmp_path: Path) -> None:
    path = write(tmp_path, MIX)
    res = CliRunner().invoke(simulate, [str(path)])
    assert res.exit_code == 1, res.output  # the coordinator would refuse them: the job mix cannot run as written
    warnings = [line for line in res.stderr.splitlines() if line.startswith("FAIL")]
    assert warnings[:2] == [HUGE.format(path=path), OVERQUOTA.format(path=path)]
    # the elastic gang starts at its minimum: no warning; the model nobody has: the "model" key
    assert len(warnings) == 3 and "jobs[4] ('a100') can never start (model): " in warnings[2]
    assert "QUEUE" in res.stdout  # the job mix's summary still follows


def test_json_lists_the_warnings_with_the_summary(tmp_path: Path) -> None:
    path = write(tmp_path, MIX)
    res = CliRunner().invoke(simulate, ["--json", str(path)])
    assert res.exit_code == 1, res.output
    [result] = json.loads(res.stdout)["files"]
    assert result["status"] == "fail"
    assert result["failures"][:2] == [
        HUGE.format(path=path).removeprefix(f"FAIL {path}: "),
        OVERQUOTA.format(path=path).removeprefix(f"FAIL {path}: "),
    ]
    assert [(w["job"], w["index"], w["key"]) for w in result["warnings"]] == [
        ("huge", 1, "gpus_per_worker"),
        ("overquota", 2, "workers"),
        ("a100", 4, "model"),
    ]
    assert result["warnings"][1]["reason"] == "job needs 2 gpu but queue small can hold at most 1"
    by_queue = {q["queue"]: q for q in result["summary"]["queues"]}
    assert (by_queue["q"]["jobs"], by_queue["q"]["finished"], by_queue["small"]["started"]) == (3, 1, 1)
    assert "WARNING" not in res.stdout


def test_json_reports_failures_and_malformed_files(tmp_path: Path) -> None:
    good = write(tmp_path, MIX + '[[expect]]\nrunning = ["ok"]\n')
    bad = tmp_path / "bad.toml"
    bad.write_text(MIX.replace('queue = "small"\nworkers = 2', 'queue = "nope"\nworkers = 2'))
    res = CliRunner().invoke(simulate, ["--json", str(good), str(bad)])
    assert res.exit_code == 2
    first, second = json.loads(res.stdout)["files"]
    assert (first["status"], first["expectations"]) == ("fail", 1)
    assert first["failures"] == ["expect[0] at the end: running: expected [ok], got [] (missing [ok])"]
    assert "summary" not in first
    assert second["status"] == "error"
    assert second["problems"] == ["jobs[2] ('overquota').queue: unknown queue 'nope'; allowed: q, small"]


def test_trace_has_a_never_starts_event_and_json_excludes_trace(tmp_path: Path) -> None:
    path = write(tmp_path, MIX)
    res = CliRunner().invoke(simulate, ["--trace", str(path)])
    events = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    assert [e["job"] for e in events if e["event"] == "never_starts"] == ["huge", "overquota", "a100"]
    res = CliRunner().invoke(simulate, ["--trace", "--json", str(path)])
    assert res.exit_code == 2
    assert "--json and --trace cannot be combined" in res.output


def test_in_a_checked_file_a_job_that_never_starts_is_a_warning_the_checks_decide(tmp_path: Path) -> None:
    path = write(tmp_path, MIX + '[[expect]]\npending = ["huge", "overquota", "a100"]\n')
    res = CliRunner().invoke(simulate, [str(path)])
    assert res.exit_code == 0, res.output
    assert HUGE.format(path=path).replace("FAIL", "WARNING", 1) in res.stderr.splitlines()


def test_a_quota_above_the_scenarios_nodes_is_a_warning(tmp_path: Path) -> None:
    path = write(tmp_path, MIX + '[[expect]]\npending = ["huge", "overquota", "a100"]\n')
    res = CliRunner().invoke(simulate, [str(path)])
    assert (
        f"WARNING {path}: queue 'q': nominal quota gpu=4 is above the cluster's 2 gpu (1 node); "
        "at most 2 can ever be in use"
    ) in res.stderr.splitlines()
    assert not [line for line in res.stderr.splitlines() if "queue 'small'" in line]  # 1 gpu fits: no warning
    res = CliRunner().invoke(simulate, ["--json", str(path)])
    [result] = json.loads(res.stdout)["files"]
    assert result["quota_warnings"] == [
        "queue 'q': nominal quota gpu=4 is above the cluster's 2 gpu (1 node); at most 2 can ever be in use"
    ]


def test_a_duplicate_job_id_is_named_once(tmp_path: Path) -> None:
    text = MIX.replace('id = "overquota"', 'id = "huge"') + '[[expect]]\npending = ["c", "c"]\n'
    res = CliRunner().invoke(simulate, [str(write(tmp_path, text))])
    assert res.exit_code == 2
    lines = res.stderr.splitlines()
    assert [line for line in lines if "'huge'" in line] == [
        f"ERROR {tmp_path / 'mix.toml'}: jobs[2]: duplicate name 'huge'"
    ]
    assert len([line for line in lines if "unknown job 'c'" in line]) == 1, lines
