"""Job arrays and dependencies in scenario files (docs/scenarios.md, "Arrays and dependencies"):
bad input is one line naming the key, jobs carry the coordinator's ids inside and the file's
names outside, and the reason a dependency cancelled a job reaches every output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from labgang.launcher.cli.simulate import simulate
from labgang.launcher.simulate import ScenarioError, Simulation, parse_scenario, run_scenario


def doc(*jobs: dict[str, Any], expect: list[dict[str, Any]] | None = None, gpus: int = 4) -> dict[str, Any]:
    return {
        "scenario": {"name": "t"},
        "nodes": [{"name": "n1", "gpus": gpus}],
        "queues": [{"name": "q", "nominal": {"gpu": gpus}}],
        "jobs": [{"queue": "q", **j} for j in jobs],
        "expect": expect or [],
    }


def problems(d: dict[str, Any]) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        parse_scenario(d)
    return info.value.problems


@pytest.mark.parametrize(
    "array,line",
    [
        ("0,5-2", "jobs[0] ('s').array: \"5-2\": end below start"),
        ("0-9%0", "jobs[0] ('s').array: \"%0\": the cap must be a whole number >= 1 (tasks running at once)"),
        ("", "jobs[0] ('s').array: empty; allowed: indices and ranges such as 0-99, 1,3,5-9, 0-20:4, with %N to cap"),
        ("0-20000", "jobs[0] ('s').array: \"0-20000\": index 20000 is over the largest allowed, 10000"),
        ("x", "jobs[0] ('s').array: \"x\": index 'x' is not a whole number >= 0"),
    ],
)
def test_a_bad_array_spec_is_one_line_from_the_submit_parser(array: str, line: str) -> None:
    (found,) = problems(doc({"id": "s", "array": array}))
    assert found.startswith(line), found
    assert "allowed" in found


@pytest.mark.parametrize(
    "jobs,line",
    [
        (
            [{"id": "a"}, {"id": "b", "dependency": "afterok:trian"}],
            "jobs[1] ('b').dependency: no job 'trian' in this file (in 'afterok:trian'); allowed: the id of a job "
            "in [[jobs]], or a task of a job array as NAME_INDEX",
        ),
        (
            [{"id": "a"}, {"id": "b", "dependency": "bogus:a"}],
            "jobs[1] ('b').dependency: 'bogus:a': 'bogus' is not a dependency type; allowed: after, afterany, "
            "afterok, afternotok, aftercorr, singleton",
        ),
        (
            [{"id": "a"}, {"id": "c"}, {"id": "b", "dependency": "afterok:a,afterok:c?afterok:a"}],
            "jobs[2] ('b').dependency: 'afterok:a,afterok:c?afterok:a' mixes ',' (all of) and '?' (any of); "
            "a dependency uses one of them",
        ),
        (
            [{"id": "a"}, {"id": "b", "dependency": "afterok:a:"}],
            "jobs[1] ('b').dependency: 'afterok:a:': '' is not a job id; allowed: a job id of this file, or an "
            "array task as NAME_INDEX",
        ),
        (
            [{"id": "a"}, {"id": "b", "dependency": "singleton:a"}],
            "jobs[1] ('b').dependency: 'singleton:a': singleton takes no job id",
        ),
        (
            [{"id": "a", "dependency": "afterok:b"}, {"id": "b", "dependency": "afterok:a"}],
            "jobs[0] ('a').dependency: a cycle of dependencies (a -> b -> a); allowed: jobs submitted before this one",
        ),
        (
            [{"id": "a", "dependency": "afterok:a"}],
            "jobs[0] ('a').dependency: a cycle of dependencies (a -> a); allowed: jobs submitted before this one",
        ),
        (
            [{"id": "a", "dependency": "afterok:b"}, {"id": "b", "submit": 5.0}],
            "jobs[0] ('a').dependency: 'b' is submitted after this job (submit 5 s, jobs[1]); allowed: jobs "
            "submitted before it (earlier submit, or the same and earlier in the file)",
        ),
        (
            [{"id": "a"}, {"id": "b", "running": True, "dependency": "afterok:a"}],
            "jobs[1] ('b').dependency: not allowed with running = true (that job is already running)",
        ),
        ([{"id": "s", "array": "0-1", "running": True}], "jobs[0] ('s').array: not allowed with running = true"),
        (
            [{"id": "s", "array": "0-3"}, {"id": "s_2"}],
            "jobs[1] ('s_2'): the name 's_2' is taken by another job or array task",
        ),
    ],
)
def test_a_bad_dependency_is_one_line_naming_the_key(jobs: list[dict[str, Any]], line: str) -> None:
    found = problems(doc(*jobs))
    assert found == [line]


def test_expectations_name_jobs_tasks_or_whole_arrays() -> None:
    found = problems(doc({"id": "s", "array": "0-1"}, expect=[{"running": ["s_5"]}]))
    assert found == [
        "expect[0].running: unknown job 's_5'; allowed: a job id, an array's id (all its tasks) or one task as "
        "NAME_INDEX"
    ]
    report = run_scenario(
        parse_scenario(
            doc(
                {"id": "s", "array": "0-1", "duration": 1.0},
                expect=[{"at": 0.0, "running": ["s"]}, {"finished": ["s_0", "s_1"]}],
            )
        )
    )
    assert report.ok, report.failures
    report = run_scenario(parse_scenario(doc({"id": "s", "array": "0-2%1"}, expect=[{"at": 0.0, "running": ["s"]}])))
    assert report.failures == ["expect[0] at t=0: running: expected [s_0, s_1, s_2], got [s_0] (missing [s_1, s_2])"]


def test_inside_jobs_carry_the_coordinators_ids() -> None:
    """Jobs are numbered as the coordinator numbers submissions: an array takes one number per task,
    its id is its first task's, and the job after it gets the number past its tasks."""
    s = parse_scenario(
        doc(
            {"id": "prep"},
            {"id": "sweep", "array": "0,4,8", "dependency": "afterok:prep"},
            {"id": "eval", "dependency": "afterany:sweep?prep"},
        )
    )
    sim = Simulation(s)
    ids = {j.id: j.record.id for j in sim.jobs.values()}
    assert ids == {"prep": "1", "sweep_0": "2_0", "sweep_4": "2_4", "sweep_8": "2_8", "eval": "5"}
    assert sim.jobs["sweep_4"].record.spec.dependency == "afterok:1"
    assert sim.jobs["eval"].record.spec.dependency == "afterany:2?afterany:1"
    task = sim.jobs["sweep_8"].record.spec.array
    assert task is not None and (task.array_id, task.index, task.count, task.low, task.high, task.step) == (
        "2",
        8,
        3,
        0,
        8,
        4,
    )
    assert s.ids.shown("preempted by job 5: waits for afterok:2 (task 2_4 failed); array 2 runs") == (
        "preempted by job eval: waits for afterok:sweep (task sweep_4 failed); array sweep runs"
    )


NEVER = """
[scenario]
name = "never"
[[nodes]]
name = "n1"
gpus = 1
[[queues]]
name = "q"
nominal = { gpu = 1 }
[[jobs]]
id = "train"
queue = "q"
duration = 2.0
[[jobs]]
id = "notify"
queue = "q"
dependency = "afternotok:train"
[[jobs]]
id = "after"
queue = "q"
dependency = "afterok:notify"
"""


def test_the_reason_a_dependency_cancelled_a_job_is_shown_in_every_output(tmp_path: Path) -> None:
    path = tmp_path / "never.toml"
    path.write_text(NEVER)
    runner = CliRunner()
    res = runner.invoke(simulate, [str(path)])
    assert res.exit_code == 0, res.output
    assert f"CANCELLED {path}: notify (dependency_never): afternotok:train can never be satisfied (succeeded)" in (
        res.output
    )
    assert f"CANCELLED {path}: after (dependency_never): afterok:notify can never be satisfied (cancelled)" in (
        res.output
    )
    res = runner.invoke(simulate, ["--json", str(path)])
    assert res.exit_code == 0, res.output
    (result,) = json.loads(res.output)["files"]
    assert result["cancelled"] == [
        {
            "job": "notify",
            "code": "dependency_never",
            "reason": "afternotok:train can never be satisfied (succeeded)",
        },
        {"job": "after", "code": "dependency_never", "reason": "afterok:notify can never be satisfied (cancelled)"},
    ]
    res = runner.invoke(simulate, ["--trace", str(path)])
    events = [json.loads(line) for line in res.output.splitlines() if line.startswith("{")]
    held = [e for e in events if e["event"] == "pending" and e["job"] == "notify"]
    assert held[0]["t"] == 0.0 and held[0]["code"] == "dependency"
    assert held[0]["message"] == "waits for afternotok:train (pending)"
    cancels = [(e["t"], e["job"], e["code"]) for e in events if e["event"] == "cancel"]
    assert cancels == [(2.0, "notify", "dependency_never"), (2.0, "after", "dependency_never")]


def test_a_dependency_on_a_job_that_finished_before_its_submission() -> None:
    """The model keeps only active jobs: the simulation hands it the finished targets at
    submission, as the coordinator reads them from its store."""
    report = run_scenario(
        parse_scenario(
            doc(
                {"id": "a", "duration": 1.0},
                {"id": "b", "submit": 5.0, "dependency": "afterok:a", "duration": 1.0},
                {"id": "c", "submit": 5.0, "dependency": "afternotok:a"},
                expect=[{"at": 5.0, "running": ["b"], "cancelled": ["c"]}],
            )
        )
    )
    assert report.ok, report.failures


def test_a_dependency_on_a_running_job_and_a_tenant_on_an_array() -> None:
    d = doc(
        {"id": "r", "running": True, "duration": 3.0},
        {"id": "s", "array": "0-1", "dependency": "afterok:r", "tenant": "alice", "duration": 1.0},
        expect=[{"at": 2.0, "pending": ["s"]}, {"at": 3.0, "running": ["s"]}],
    )
    d["scenario"] |= {"requires": ["admission_fair_sharing"], "admission_fair_sharing": {"half_life": 60.0}}
    d["tenants"] = [{"name": "alice", "queue": "q"}]
    report = run_scenario(parse_scenario(d))
    assert report.ok, report.failures
