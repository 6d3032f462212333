"""What Slurm users trying labgang from the README found, against a real ``labgang up --simulate``:
a batch script with arguments keeps its ``#SBATCH`` lines (as ``sbatch script.sh a b``), a directive's
bad value names its ``file:line``, ``#SBATCH --gres=gpu:N`` beside a ``--gpus`` total that disagrees is
refused naming both lines, ``queue -j`` of an id labgang never had says so and exits 1 (as squeue's
"Invalid job id specified"), ``queue -n`` lists jobs by name (as squeue -n), ``queue --json -o`` is
refused instead of ignoring ``-o``, and ``submit --json --array`` reports the array, not its first
task alone."""

from __future__ import annotations

import json
import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest
from up_harness import Up, next_id, refused, running_up


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgsuf")


def script(tmp_path: Path, *directives: str, body: str = 'echo "args: $#: $*"') -> str:
    path = tmp_path / "job.sh"
    path.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in directives) + body + "\n")
    return str(path)


def test_a_batch_script_with_arguments_reads_its_sbatch_lines_and_gets_the_arguments(up: Up, tmp_path) -> None:
    path = script(tmp_path, "-n 2", "-J sweep", "--ntasks-per-node=2")
    job = up.submit(path, "lr=3", "two words")
    view = up.wait_state(job, {"succeeded"})
    assert (view["workers"], view["name"]) == (2, "sweep")  # the #SBATCH lines count, as without arguments
    assert view["argv"] == ["/bin/bash", path, "lr=3", "two words"]
    assert up.cli("logs", job).stdout.strip().splitlines()[-1] == "args: 2: lr=3 two words"
    plain = up.submit("--hold", "--", path, "x")  # after --, the file is a command as typed: no directives read
    try:
        assert (up.job(plain)["workers"], up.job(plain)["argv"]) == (1, [path, "x"])
    finally:
        up.cli("cancel", plain)


@pytest.mark.parametrize(
    ("directive", "words"),
    [
        ("-N x", ["job.sh:2: #SBATCH -N x: -N/--nodes: 'x'", "allowed: an integer >= 1"]),
        (
            "--nodes=1-2",
            ["job.sh:2: #SBATCH --nodes=1-2: -N/--nodes: '1-2' is a range of node counts", "allowed: an integer >= 1"],
        ),
        ("--ntasks=0", ["job.sh:2: #SBATCH --ntasks=0: -n/--workers: 0", "allowed: an integer >= 1"]),
        ("-c x", ["job.sh:2: #SBATCH -c x: -c/--cpus-per-task: 'x'", "allowed:"]),
        ("--gpus-per-task=x", ["job.sh:2: #SBATCH --gpus-per-task=x: -g/--gpus-per-worker: 'x'", "allowed:"]),
        ("-t xx", ["job.sh:2: #SBATCH -t xx: -t/--time: 'xx' is not a time limit", "allowed:"]),
        ("--begin=never", ["job.sh:2: #SBATCH --begin=never: -b/--begin: 'never' is not a begin time", "allowed:"]),
        ("--signal=NOPE", ["job.sh:2: #SBATCH --signal=NOPE: --signal: unknown signal 'NOPE'", "allowed:"]),
        ("--ntasks-per-node=x", ["job.sh:2: #SBATCH --ntasks-per-node x: allowed: a whole number"]),
    ],
)
def test_a_bad_directive_value_names_its_file_and_line_and_sends_nothing(up: Up, tmp_path, directive, words) -> None:
    path = script(tmp_path, directive)
    before = next_id(up)
    line = refused(
        up.cli("submit", path), 2, *[f"{tmp_path}/{word}" if word.startswith("job.sh") else word for word in words]
    )
    assert line.startswith(f"labgang submit: {tmp_path}/job.sh:2: #SBATCH ")
    assert next_id(up) == before + 1  # nothing was submitted in between


def test_nodes_as_a_slurm_range_on_the_command_line_is_one_line_naming_the_flag(up: Up) -> None:
    refused(
        up.cli("submit", "-N", "1-2", "--", "true"),
        2,
        "labgang submit: -N/--nodes: '1-2' is a range of node counts (Slurm's --nodes=MIN-MAX)",
        "allowed: an integer >= 1",
    )


def test_gres_gpu_and_a_gpus_total_that_disagree_are_refused_naming_both_lines(up: Up, tmp_path) -> None:
    """Slurm refuses ``--gpus`` that is not ``--gres=gpu:N`` times the nodes; labgang let ``--gpus`` win
    without a word."""
    path = script(tmp_path, "--gres=gpu:2", "--gpus=3")
    before = next_id(up)
    refused(
        up.cli("submit", path),
        2,
        f"{path}:3: #SBATCH --gpus 3: conflicts with {path}:2: #SBATCH --gres gpu:2",
        "(2 GPUs per node on 1 node is 2 GPUs, not 3)",
        "allowed: one of the two",
    )
    assert next_id(up) == before + 1
    agreeing = up.submit("--hold", script(tmp_path, "--gres=gpu:2", "--gpus=2"))  # the same request twice
    try:
        assert (up.job(agreeing)["workers"], up.job(agreeing)["gpus_per_worker"]) == (1, 2)
    finally:
        up.cli("cancel", agreeing)


def test_queue_j_of_an_id_labgang_never_had_is_refused_as_squeue_does(up: Up) -> None:
    refused(up.cli("queue", "-j", "999999"), 1, "labgang queue: -j/--jobs: invalid job id specified", "999999")
    out = up.cli("queue", "-j", "999999", "--json")
    assert out.returncode == 1 and "invalid job id specified" in json.loads(out.stdout)["error"]["message"]
    held = up.submit("--hold", "--", "true")
    finished = up.submit("--", "true")
    up.wait_state(finished, {"succeeded"})
    try:
        out = up.cli("queue", "-j", f"{held},999999,{finished}", "-o", "%i")
        assert (out.returncode, out.stdout.split()) == (0, ["JOBID", held]), out.stderr  # the known one listed
        assert out.stderr.splitlines() == [
            f"labgang queue: note: job {finished} has finished (succeeded); see `labgang show {finished}` or "
            "`labgang history`",
            "labgang queue: note: no job 999999: invalid job id",
        ]
    finally:
        up.cli("cancel", held)


def test_queue_n_lists_the_active_jobs_of_those_names_as_squeue_n(up: Up) -> None:
    """``-n/--name`` (squeue -n): the caller's active jobs of those names, comma-separated or
    repeated, with ``-o`` and ``--json`` too; none of them a note naming the names, exit 0."""
    sweep = [up.submit("--hold", "-J", "qn-sweep", "--", "true") for _ in range(2)]
    prep = up.submit("--hold", "-J", "qn-prep", "--", "true")
    other = up.submit("--hold", "-J", "qn-other", "--", "true")
    try:
        out = up.cli("queue", "-n", "qn-sweep", "-o", "%i %j")
        assert (out.returncode, out.stdout.split()) == (
            0,
            ["JOBID", "NAME", sweep[0], "qn-sweep", sweep[1], "qn-sweep"],
        )
        for form in (["--name", "qn-prep,qn-sweep"], ["-n", "qn-sweep", "-n", "qn-prep"]):
            out = up.cli("queue", *form, "--json")
            assert out.returncode == 0, out.stderr
            assert [job["id"] for job in json.loads(out.stdout)["jobs"]] == [*sweep, prep]
        out = up.cli("queue", "-n", "qn-none,qn-nothing")
        assert out.returncode == 0 and other not in out.stdout
        assert out.stderr == (
            "labgang queue: note: no active job named qn-none, qn-nothing among yours (--all: everyone's); "
            "finished jobs are in `labgang history`\n"
        )
    finally:
        up.cli("cancel", *sweep, prep, other)


@pytest.mark.parametrize("form", [["-o", "%i %j"], ["-l"]])
def test_queue_json_with_a_format_is_refused_not_silently_ignored(up: Up, form: list[str]) -> None:
    flag = "-o/--format" if form[0] == "-o" else "-l/--long"
    refused(up.cli("queue", "--json", *form), 2, f"labgang queue: --json and {flag} exclude each other")


@pytest.mark.parametrize("click_path", [False, True], ids=["fast", "click"])
def test_submit_json_of_an_array_reports_the_array_and_its_tasks(up: Up, tmp_path, click_path: bool) -> None:
    # an #SBATCH option labgang lacks gets a warning line, which the click command prints: its path too
    path = script(tmp_path, *(["--account=lab"] if click_path else []), body="true")
    out = up.cli("submit", "--json", "--hold", "--array", "0-3", path)
    assert out.returncode == 0, out.stderr
    assert ("warning" in out.stderr) == click_path
    reply = json.loads(out.stdout)
    array = reply["array"]
    try:
        assert reply["job"]["id"] == f"{array}_0"  # the first task, as before
        assert (reply["tasks"], reply["states"]) == (4, {"pending": 4})
        assert [j["id"] for j in reply["jobs"]] == [f"{array}_{i}" for i in range(4)]
    finally:
        up.cli("cancel", array)


def test_history_attempts_sifted_by_their_end_still_says_when_the_limit_cut_the_jobs(up: Up) -> None:
    """``history --attempts -s END`` keeps the attempts that ended so among the jobs ``--limit`` let
    through: it said nothing of the cut once the sifted rows were fewer than the limit (a new user's
    ``-s PR,RQ`` lost the preemptions of older jobs without a word)."""
    done = up.submit("--", "true")
    up.wait_state(done, {"succeeded"})
    for _ in range(2):
        up.wait_state(up.submit("--", "false"), {"failed"})
    # PR (an attempt's end only) makes the coordinator list every job and labgang sift their attempts
    sifted = up.cli("history", "--attempts", "-u", "all", "-s", "CD,PR", "--limit", "2")
    assert sifted.returncode == 0, sifted.stderr
    assert done not in sifted.stdout.split()  # older than the two jobs the limit let through
    assert sifted.stderr.splitlines()[-1] == (
        "labgang history: searched the 2 most recently submitted jobs; older ones with --limit N or --until"
    ), sifted.stderr
    as_json = json.loads(up.cli("history", "--attempts", "-u", "all", "-s", "CD,PR", "--limit", "2", "--json").stdout)
    assert as_json == {"jobs": [], "limit_reached": True}
    wider = up.cli("history", "--attempts", "-u", "all", "-s", "CD,PR", "--limit", "3")
    assert done in wider.stdout.split(), wider.stdout  # the cut was the only reason it was missing


def test_queue_takes_squeues_me_and_partition(up: Up) -> None:
    """``squeue --me`` and ``-p/--partition QUEUE`` were "no such option" for a new user."""
    job = up.submit("--hold", "--name", "mine", "--", "true")
    me = pwd.getpwuid(os.geteuid()).pw_name
    try:
        by_queue = up.cli("queue", "-q", "default", "-o", "%i %P %u")
        assert job in by_queue.stdout.split(), by_queue
        for args in (("-p", "default"), ("--partition", "default"), ("--partition=default",)):
            listed = up.cli("queue", *args, "-o", "%i %P %u")
            assert (listed.returncode, listed.stdout) == (0, by_queue.stdout), args
        mine = up.cli("queue", "--me", "-o", "%i %u")
        assert mine.returncode == 0 and mine.stdout == up.cli("queue", "-u", me, "-o", "%i %u").stdout, mine
        assert job in mine.stdout.split(), mine
        assert up.cli("queue", "--me").stdout.splitlines()[0].split()[0] == "JOBID"  # the default table too
    finally:
        up.cli("cancel", job)
