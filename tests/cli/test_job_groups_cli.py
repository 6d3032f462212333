"""A job of groups on the command line (docs/job-groups.md): Slurm's ``:`` between groups and
``-f job.toml``; the click command and the fast path send the same body; bad input is one line
naming the group and the option, exit 2, nothing sent; against a real coordinator the job is one
row of ``queue`` with shape ``1x0+4x2`` and ``show`` lists its groups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from coordinator_harness import running_coordinator
from labgang.launcher.cli import job_request, quick, submission
from labgang.launcher.cli.main import cli

from tests.cli.test_quick import click_run, fast_run

ENV = {"HOME": "/home/u"}
MPI = ["-n", "1", "-g", "0", "--", "mpirun", "a", ":", "-n", "4", "-g", "2", "--", "python", "worker.py"]


def _click(args: list[str]) -> dict[str, object]:
    ctx = submission.submit.make_context("submit", list(args))
    params = dict(ctx.params)
    for key in ("state_dir", "as_json"):
        params.pop(key, None)
    with ctx:
        return submission.build_submission(**params, env=ENV, cwd="/work")


def _fast(args: list[str]) -> dict[str, object]:
    options, argv = quick._parse_submission(args, quick._submit_flags())
    for key in ("state_dir", "as_json"):
        options.pop(key, None)
    return job_request.build_submission(argv=argv, **options, env=ENV, cwd="/work")


def test_colon_separated_groups_make_one_body_on_both_paths() -> None:
    args = ["-q", "lab", "--colocate", "g0,g1", *MPI[:-3], "--group", "w", "-c", "2", "--", "python", "w.py", ":"]
    body = _fast(args)
    assert body == _click(args)
    assert body["groups"] == [
        {"workers": 1, "gpus_per_worker": 0, "argv": ["mpirun", "a"]},
        {"workers": 4, "gpus_per_worker": 2, "name": "w", "cpus_per_task": 2, "argv": ["python", "w.py", ":"]},
    ]
    assert body["colocate"] == [["g0", "g1"]] and body["queue"] == "lab"
    assert not {"workers", "gpus_per_worker", "argv"} & set(body)  # the shape is in the groups


def test_group_names_the_first_group_before_the_first_separator() -> None:
    """``--group NAME`` before the first ``--`` names the first group (Slurm's first component), as
    ``--group`` after a ``:`` names that group; the fast path leaves it to the click command."""
    body = _click(
        ["--group", "launcher", "-n", "1", "-g", "0", "--", "mpirun", ":", "--group", "w", "-n", "2", "--", "w"]
    )
    groups = body["groups"]
    assert isinstance(groups, list)
    assert [g.get("name") for g in groups] == ["launcher", "w"]
    assert groups[0] == {"workers": 1, "gpus_per_worker": 0, "name": "launcher", "argv": ["mpirun"]}


def test_a_colon_that_is_an_argument_is_not_a_separator() -> None:
    body = _fast(["--", "echo", ":", "x"])
    assert body["argv"] == ["echo", ":", "x"] and "groups" not in body


def test_a_job_file_gives_the_groups(tmp_path: Path) -> None:
    job = tmp_path / "job.toml"
    job.write_text(
        'colocate = [["leader", "worker"]]\n'
        '[[group]]\nname = "leader"\ncommand = "python leader.py --port 1"\nenv = { ROLE = "lead" }\n'
        'resources = { gpus = 1, cpus = 4, mem = "16G" }\n'
        '[[group]]\nname = "worker"\nranks = 3\ncommand = ["python", "w.py"]\n'
        'resources = { mig = "1g.10gb", topology = "node" }\n'
    )
    body = _fast(["-f", str(job), "--name", "lws"])
    assert body == _click(["-f", str(job), "--name", "lws"])
    assert body["groups"] == [
        {
            "workers": 1,
            "name": "leader",
            "gpus_per_worker": 1,
            "cpus_per_task": 4,
            "mem": 16 * 1024**3,
            "env": {"ROLE": "lead"},
            "argv": ["python", "leader.py", "--port", "1"],
        },
        {"workers": 3, "name": "worker", "mig": "1g.10gb", "topology": "node", "argv": ["python", "w.py"]},
    ]
    assert body["colocate"] == [["leader", "worker"]] and body["name"] == "lws"


@pytest.mark.parametrize(
    ("args", "file_text", "line"),
    [
        (
            ["--", "a", ":", "-n", "2", "--exclusive", "--", "b"],
            None,
            "group 1 (after ':' number 1): --exclusive is not an option a group takes; "
            "allowed: -n, -g (0 allowed), --mig, -N/--nodes, --gpu-model, --min-workers, -c, --mem, "
            "--mem-per-gpu, --topology, --group",
        ),
        (
            ["--", "a", ":", "-n", "0", "--", "b"],
            None,
            "labgang submit: group g1: -n/--workers: 0 is not allowed; allowed: a whole number >= 1\n",
        ),
        (
            ["--", "a", ":", "--group", "workers", "-n", "2", "-c", "0", "--", "b"],
            None,
            "labgang submit: group workers: -c/--cpus-per-task: 0 is not allowed; allowed: a whole number >= 1\n",
        ),
        (
            ["--", "a", ":", "-n", "2", "-g", "1", "--topology=ring", "--", "b"],
            None,
            "labgang submit: group g1: --topology: ring is not allowed; allowed: nvlink, pcie-switch, numa, node\n",
        ),
        (
            ["-n", "0", "-g", "0", "--", "a", ":", "-n", "2", "--", "b"],
            None,
            "labgang submit: group g0: -n/--workers: 0 is not in the range x>=1; allowed: an integer >= 1\n",
        ),
        (
            ["--group", "launcher", "-n", "1", "-g", "-1", "--", "a", ":", "-n", "2", "--", "b"],
            None,
            "labgang submit: group launcher: -g/--gpus-per-worker: -1 is not in the range x>=0; allowed: an integer",
        ),
        (
            ["--group", "launcher", "--", "a"],
            None,
            "--group: names the first group of a job of groups (CMD : OPTIONS -- CMD); a job alone has no groups",
        ),
        (
            ["--group", "launcher"],
            "[[group]]\ncommand = 'a'\n[[group]]\ncommand = 'b'\n",
            "--group: names the first group of a job of groups on the command line",
        ),
        (
            ["--", "a", ":", "-n", "2"],
            None,
            "group 1 (after ':' number 1): missing CMD: give the group's command after --",
        ),
        (
            ["--colocate", "g0", "--", "a"],
            None,
            "--colocate: names groups of a job of groups; give them with CMD : OPTIONS -- CMD or -f job.toml",
        ),
        ([], "[[group]]\ncommand = 'a'\n", "group: give two or more [[group]] tables (one group: use plain submit)"),
        (
            [],
            "[[group]]\ncommand = 'a'\n[[group]]\ncommand = 'b'\nresources = { gpus = -1 }\n",
            "group[1].resources.gpus: -1; allowed: a whole number >= 0",
        ),
        (
            [],
            "[[group]]\ncommand = 'a'\nram = 3\n[[group]]\ncommand = 'b'\n",
            "group[0]: unknown key 'ram'; allowed: name, ranks, command, env, resources",
        ),
        (["-n", "2"], "[[group]]\ncommand = 'a'\n[[group]]\ncommand = 'b'\n", "-f: the job file gives every group's"),
        (  # no shell runs a command string: a shell line is refused with the form that gets one
            [],
            "[[group]]\ncommand = 'a'\n[[group]]\ncommand = 'cd data && python prep.py'\n",
            "group[1].command: '&&' would reach the program as a word: no shell runs a command string; "
            'for a shell line give command = ["sh", "-c", \'cd data && python prep.py\']',
        ),
        (
            [],
            "[[group]]\ncommand = 'python x.py | tee log'\n[[group]]\ncommand = 'b'\n",
            "group[0].command: '|' would reach the program as a word",
        ),
        (
            [],
            "[[group]]\ncommand = 'a'\n[[group]]\ncommand = 'echo \"unclosed'\n",
            "group[1].command: no closing quotation in 'echo \"unclosed'",
        ),
    ],
)
def test_bad_groups_are_one_line_naming_the_group_exit_2(tmp_path, args, file_text, line) -> None:
    if file_text is not None:
        (tmp_path / "job.toml").write_text(file_text)
        args = ["-f", str(tmp_path / "job.toml"), *args]
    result = CliRunner().invoke(cli, ["submit", "--state-dir", str(tmp_path / "none"), *args], prog_name="labgang")
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and line in result.output, result.output


@pytest.fixture
def coordinator(tmp_path):
    """A real coordinator (no agent: jobs stay pending) with one queue, ``default``."""
    yield from running_coordinator(tmp_path, "")


@pytest.mark.slow
def test_a_job_of_groups_is_one_row_of_queue_and_show_lists_its_groups(coordinator, tmp_path) -> None:
    submitted = fast_run(coordinator, "submit", "--name", "mpi", *MPI)
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    for run in (fast_run, click_run):
        table = run(coordinator, "queue")
        [row] = table.stdout.splitlines()[1:]
        assert row.split()[0] == job_id and "1x0+4x2" in row.split(), table.stdout
        shown = run(coordinator, "show", job_id)
        assert shown.returncode == 0, shown.stderr
        lines = [" ".join(line.split()) for line in shown.stdout.splitlines()]
        assert "Group g0: 1x0 rank 0: mpirun a" in lines, shown.stdout
        assert "Group g1: 4x2 ranks 1-4: python worker.py" in lines
        assert "submitted by root to queue default: 1 x 0 + 4 x 2 gpu" in " ".join(shown.stdout.split())
        view = json.loads(run(coordinator, "show", "--json", job_id).stdout)["job"]
        assert (view["workers"], [g["first_rank"] for g in view["groups"]]) == (5, [0, 1])
    # explain names the groups and the group that keeps the job waiting (no agent: no node at all)
    explained = click_run(coordinator, "explain", job_id)
    assert explained.returncode == 0, explained.stderr
    said = " ".join(explained.stdout.split())
    assert f"job {job_id} (groups g0 1 x 0 + g1 4 x 2 gpu, admitted all or nothing)" in said, said
    assert "group g0: the cluster has no node" in said or "group g1:" in said, said
    # refused at the coordinator: one line naming the group's field, nothing stored
    bad = fast_run(coordinator, "submit", "--", "a", ":", "-n", "2", "--mig", "1g.10gb", "--", "b")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1, bad.stderr
    assert "every group's devices must be of one kind; got gpu, mig-1g.10gb" in bad.stderr
    assert len(json.loads(fast_run(coordinator, "queue", "--json").stdout)["jobs"]) == 1
