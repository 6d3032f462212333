"""``labgang submit SCRIPT``: ``#LABGANG``/``#SBATCH`` lines read as flags, the command line
winning, warnings and refusals for options labgang lacks, both the fast path and click
(launcher/cli/batch_script.py, docs/slurm.md)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from labgang.launcher.cli import job_request, quick, submission
from labgang.launcher.cli.batch_script import SRUN_SHIM_DIR, BadScript, directive_lines, sbatch_flags, script_form
from labgang.launcher.cli.main import cli

ENV = {"HOME": "/home/u", "PATH": "/bin"}

SCRIPT = """#!/bin/bash
# a comment before the directives is fine
#SBATCH -N 2
#SBATCH --ntasks-per-node=2   # two per node
#SBATCH --gres=gpu:a100:4   # per node: 2 per rank
#SBATCH -t 1:00:00
#SBATCH -J mytrain
#SBATCH -p vision
#SBATCH --qos=high
#SBATCH --array=0-3%2
#SBATCH --signal=B:USR1@90
#SBATCH -d afterok:7
#LABGANG --grace 5s

echo "$SLURM_JOB_ID"
#SBATCH -n 99
"""


def _write(tmp_path: Path, text: str, name: str = "train.sbatch") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def click_body(args: list[str], command=submission.submit) -> dict[str, object]:
    ctx = command.make_context(command.name, list(args))
    params = dict(ctx.params)
    params.pop("state_dir")
    params.pop("as_json", None)
    params.pop("all_ranks", None)
    return submission.build_submission(**params, env=ENV, cwd="/work")


def fast_body(args: list[str], flags=None) -> dict[str, object]:
    options, argv = quick._parse_submission(args, flags or quick._submit_flags())
    options.pop("state_dir", None)
    options.pop("as_json", None)
    options.pop("all_ranks", None)
    return job_request.build_submission(argv=argv, **options, env=ENV, cwd="/work")


def test_sbatch_lines_become_the_flags_labgang_has(tmp_path):
    path = _write(tmp_path, SCRIPT)
    body = fast_body([path])
    assert body == click_body([path])
    assert body["argv"] == ["/bin/bash", path]
    assert (body["workers"], body["nodes"], body["gpus_per_worker"], body["gpu_model"]) == (4, 2, 2, "a100")
    assert (body["time_limit_s"], body["name"], body["queue"], body["priority"]) == (
        3600.0,
        "mytrain",
        "vision",
        "high",
    )
    assert (body["array"], body["signal"], body["dependency"], body["grace_s"]) == (
        "0-3%2",
        "B:SIGUSR1@90",  # B: kept: to the script's shell alone, as Slurm
        "afterok:7",
        5.0,
    )


def test_the_command_line_wins_and_labgang_lines_win_over_sbatch(tmp_path):
    path = _write(tmp_path, "#SBATCH -n 2\n#SBATCH -J a\n#LABGANG -n 3\nrun\n")
    assert fast_body([path])["workers"] == 3
    body = fast_body(["-n", "5", "--name", "b", path])
    assert (body["workers"], body["name"]) == (5, "b")
    assert body == click_body(["-n", "5", "--name", "b", path])


def test_a_script_without_shebang_runs_with_bash_and_is_named_after_its_file(tmp_path):
    path = _write(tmp_path, "echo hi\n", "job.sh")
    body = fast_body([path])
    assert body["argv"] == ["bash", path] and body["name"] == "job.sh"
    py = _write(tmp_path, "#!/usr/bin/env python3\n#SBATCH -n 2\nprint(1)\n", "job.py")
    assert fast_body([py])["argv"] == ["/usr/bin/env", "python3", py]


def test_a_relative_script_runs_by_its_absolute_path(tmp_path, monkeypatch):
    _write(tmp_path, "#SBATCH -n 2\necho\n", "rel.sbatch")
    monkeypatch.chdir(tmp_path)
    body = fast_body(["rel.sbatch"])
    assert body["argv"] == ["bash", os.path.join(str(tmp_path), "rel.sbatch")] and body["workers"] == 2


def test_after_dashdash_the_file_is_a_plain_command(tmp_path):
    path = _write(tmp_path, "#SBATCH -n 2\necho\n")
    assert fast_body(["--", path])["argv"] == [path]
    assert fast_body(["--", path, "x"])["argv"] == [path, "x"]
    assert fast_body(["/bin/true"])["argv"] == ["/bin/true"]  # a program: not read for directives
    assert fast_body(["/bin/echo", "x"])["argv"] == ["/bin/echo", "x"]


def test_a_script_with_arguments_is_read_for_its_directives_and_gets_them(tmp_path):
    """As ``sbatch script.sh a b``: the words after the script are its arguments, and its ``#SBATCH``
    lines are read as without them (they were ignored: the file ran as a plain command)."""
    path = _write(tmp_path, "#SBATCH -n 2\n#SBATCH -J sweep\necho\n")
    body = fast_body([path, "x", "--lr", "3", "--", "y"])
    assert body == click_body([path, "x", "--lr", "3", "--", "y"])
    assert body["argv"] == ["bash", path, "x", "--lr", "3", "--", "y"]
    assert (body["workers"], body["name"]) == (2, "sweep")
    body = fast_body(["-n", "3", path, "x"])  # the command line's options still win
    assert (body["workers"], body["argv"]) == (3, ["bash", path, "x"])
    groups = fast_body(["-n", "1", path, ":", "-n", "2", "--", "true"])  # a job of groups: its command as typed
    assert groups["groups"][0]["argv"] == [path] and groups["groups"][1]["argv"] == ["true"]


def test_directives_stop_at_the_first_command_line():
    lines = directive_lines("#!/bin/sh\n\n#SBATCH -n 1\n# note\n#SBATCHX -n 3\n#LABGANG -g 2\nexit 0\n#SBATCH -n 9\n")
    assert lines == [(3, "#SBATCH", " -n 1"), (6, "#LABGANG", " -g 2")]


def _cli(args: list[str]):
    return CliRunner().invoke(cli, args, prog_name="labgang")


def test_an_option_labgang_lacks_gets_one_warning_line_naming_it(tmp_path):
    path = _write(tmp_path, "#SBATCH --mem-per-cpu=8G\n#SBATCH --account=lab\n#SBATCH -c 4\necho\n")
    _, positional = quick.parse([path], quick._submit_flags(), interspersed=False)
    _, warnings = script_form([path], positional, strict=False) or ([], [])
    assert warnings == [
        f"{path}:1: #SBATCH --mem-per-cpu is ignored: labgang counts memory per node (--mem) or per GPU "
        "(--mem-per-gpu), not per CPU",
        f"{path}:2: #SBATCH --account is ignored: labgang has no such option",
    ]
    with pytest.raises(quick.NotFast):  # the click command prints the warnings
        fast_body([path])
    assert click_body([path])["argv"] == ["bash", path]


def test_error_on_unknown_sbatch_refuses_and_sends_nothing(tmp_path, fake):
    path = _write(tmp_path, "#SBATCH --account=lab\necho\n")
    result = _cli(["submit", "--state-dir", str(fake.socket_path.parent), "--error-on-unknown-sbatch", path])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"labgang submit: {path}:1: #SBATCH --account: labgang has no such option (--error-on-unknown-sbatch); "
        "see docs/slurm.md for the #SBATCH options labgang reads"
    )
    assert not [r for r in fake.received if r[0] == "POST"]


def test_a_script_on_standard_input_is_refused_and_sends_nothing(fake):
    """sbatch reads a script from stdin; labgang's ranks run the script's file, so ``submit -``
    says so (it ran ``-`` as a command, which failed at launch with exit 127)."""
    with pytest.raises(quick.NotFast):  # the click command words it
        fast_body(["-"])
    result = _cli(["submit", "--state-dir", str(fake.socket_path.parent), "-"])
    assert result.exit_code == 2
    assert result.output.strip() == (
        "labgang submit: -: labgang reads a batch script from a file, not from standard input (its ranks run "
        "the file itself); save it (e.g. job.sh) and submit that, or give a command after --"
    )
    assert not [r for r in fake.received if r[0] == "POST"]
    assert click_body(["--", "-"])["argv"] == ["-"]  # after --, a command as typed


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("#!/bin/bash\r\n#SBATCH -n 2\r\necho hi\r\n", "has DOS line breaks (\\r\\n)"),
        ("", "the batch script is empty"),
        ("  \n\n", "the batch script is empty"),
    ],
    ids=["crlf", "empty", "blank"],
)
def test_scripts_sbatch_refuses_are_refused_in_one_line(tmp_path, fake, text, fragment):
    """sbatch refuses an empty script and DOS line breaks (each command would end in a \\r);
    labgang ran both."""
    path = _write(tmp_path, text)
    result = _cli(["submit", "--state-dir", str(fake.socket_path.parent), path])
    assert result.exit_code == 2
    assert result.output.startswith(f"labgang submit: {path}: ") and fragment in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not [r for r in fake.received if r[0] == "POST"]


def test_warnings_go_to_stderr_and_the_job_is_submitted(tmp_path, fake):
    path = _write(tmp_path, "#SBATCH --account=lab\n#SBATCH -n 2\necho\n")
    result = _cli(["submit", "--state-dir", str(fake.socket_path.parent), path])
    assert result.exit_code == 0, result.output
    assert (
        f"labgang submit: warning: {path}:1: #SBATCH --account is ignored: labgang has no such option" in result.output
    )
    posts = [body for method, _, body in fake.received if method == "POST"]
    assert len(posts) == 1 and posts[0]["workers"] == 2 and posts[0]["argv"] == ["bash", path]


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("#SBATCH --gres=nic:2", "labgang counts only GPUs"),
        ("#SBATCH --gres=shard:two", "shard:N with a whole number"),
        ('#SBATCH -J "open', "No closing quotation"),
        ("#SBATCH --ntasks-per-node=x -N 2", "a whole number of tasks per node"),
        ("#LABGANG -n 2 -- x", "#LABGANG takes flags only"),
    ],
)
def test_directives_that_cannot_be_used_are_refused_naming_the_line(tmp_path, line, fragment):
    path = _write(tmp_path, f"{line}\necho\n")
    _, positional = quick.parse([path], quick._submit_flags(), interspersed=False)
    with pytest.raises(BadScript, match=fragment) as caught:
        script_form([path], positional, strict=False)
    assert str(caught.value).startswith(f"{path}:")


def test_sbatch_begin_is_read(tmp_path):
    path = _write(tmp_path, "#SBATCH --begin=2030-01-01T00:00\necho\n")
    body = fast_body([path])
    assert body == click_body([path])
    import datetime

    assert body["begin_time"] == datetime.datetime(2030, 1, 1).timestamp()


def test_sbatch_mail_and_hold_become_labgangs_flags(tmp_path):
    path = _write(tmp_path, "#!/bin/sh\n#SBATCH --mail-type=END,FAIL\n#SBATCH --mail-user=ada@lab\n#SBATCH -H\ntrue\n")
    body = fast_body([path])
    assert body == click_body([path])
    assert (body["mail_type"], body["mail_user"], body["hold"]) == (["END", "FAIL"], "ada@lab", True)


def test_sbatch_nodes_without_tasks_is_one_task_per_node(tmp_path):
    """As Slurm: ``#SBATCH --nodes=2`` alone is two tasks, one a node (it was refused: nodes (2)
    cannot exceed workers (1)); ``--gres=gpu:N`` is then each task's N; -n on the command line wins."""
    path = _write(tmp_path, "#SBATCH --nodes=2\n#SBATCH --gres=gpu:4\nsrun python train.py\n")
    body = fast_body([path])
    assert body == click_body([path])
    assert (body["workers"], body["nodes"], body["gpus_per_worker"]) == (2, 2, 4)
    assert fast_body(["-n", "4", path])["workers"] == 4
    assert fast_body([_write(tmp_path, "#SBATCH -N 2\n#SBATCH -n 6\necho\n", "b.sh")])["workers"] == 6


def test_sbatch_host_requests_become_labgang_flags(tmp_path):
    path = _write(tmp_path, "#SBATCH -c 6\n#SBATCH --mem=8G\n#SBATCH --exclusive\necho\n")
    body = fast_body([path])
    assert body == click_body([path])
    assert (body["cpus_per_task"], body["mem"], body["exclusive"]) == (6, 8 * 1024**3, True)
    assert fast_body(["--mem", "500", path])["mem"] == 500 * 1024**2  # the command line wins


def test_sbatch_gpu_mem_and_gpus_for_one_task_are_mapped(tmp_path):
    path = _write(tmp_path, "#!/bin/bash\n#SBATCH --gres=shard:2\n#SBATCH --gpu-mem=4G\necho hi\n")
    body = fast_body([path])
    assert body == click_body([path])
    assert (body["shards"], body["gpu_mem"]) == (2, 4 * 1024**3)
    path = _write(tmp_path, "#!/bin/bash\n#SBATCH --gpus=2\necho hi\n", "two.sbatch")
    body = fast_body([path])
    assert body == click_body([path])
    assert (body["workers"], body["gpus_per_worker"]) == (1, 2)


@pytest.mark.parametrize(
    ("lines", "workers", "per_rank"),
    [
        (["--nodes=1", "--ntasks-per-node=4", "--gres=gpu:4"], 4, 1),  # the torchrun-on-Slurm header
        (["--gres=gpu:4", "--nodes=2", "--ntasks-per-node=2"], 4, 2),
        (["-N 2", "-n 4", "--gres=gpu:4"], 4, 2),
        (["-N 1", "-n 2", "--gres=gpu:4"], 2, 2),
        (["-n 2", "--gres=gpu:4"], 2, 4),  # tasks per node not given: a rank may have a node to itself
        (["--gres=gpu:4"], 1, 4),
        (["--ntasks-per-node=4", "--gres=gpu:4", "--gpus-per-task=3"], 4, 3),  # per rank, the later line
        (["--ntasks-per-node=4", "--gpus-per-task=3", "--gres=gpu:8"], 4, 2),
    ],
)
def test_sbatch_gres_gpu_is_per_node_shared_by_its_tasks(tmp_path, lines, workers, per_rank):
    path = _write(tmp_path, "#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in lines) + "echo hi\n")
    body = fast_body([path])
    assert body == click_body([path])
    assert (body["workers"], body["gpus_per_worker"]) == (workers, per_rank)


@pytest.mark.parametrize(
    ("lines", "fragment"),
    [
        (
            ["--ntasks-per-node=4", "--gres=gpu:6"],
            "6 GPUs per node do not divide evenly among the tasks of a node (--ntasks-per-node 4)",
        ),
        (["-N 2", "-n 3", "--gres=gpu:2"], "(--ntasks 3 on --nodes 2)"),
        (["--ntasks-per-node=4", "--gres=gpu:2"], "2 GPUs per node"),
    ],
)
def test_sbatch_gres_gpu_that_tasks_cannot_share_is_refused_naming_both(tmp_path, lines, fragment):
    path = _write(tmp_path, "".join(f"#SBATCH {line}\n" for line in lines) + "echo\n")
    _, positional = quick.parse([path], quick._submit_flags(), interspersed=False)
    with pytest.raises(BadScript) as caught:
        script_form([path], positional, strict=False)
    text = str(caught.value)
    assert fragment in text and "\n" not in text
    assert text.startswith(f"{path}:{len(lines)}: #SBATCH --gres gpu:")
    result = CliRunner().invoke(cli, ["submit", "--state-dir", str(tmp_path / "s"), path], prog_name="labgang")
    assert result.exit_code == 2 and fragment in result.output, result.output


@pytest.mark.parametrize(
    ("lines", "workers", "per_rank"),
    [
        (["-n 4", "--gpus=8"], 4, 2),  # the job's total, shared evenly by its ranks
        (["-n 2", "-G 4"], 2, 2),  # -G is --gpus
        (["--nodes=2", "--ntasks-per-node=2", "--gpus=8"], 4, 2),
        (["-N 2", "--gpus=4"], 2, 2),  # one task a node
        (["-n 2", "--gpus-per-task=3", "--gpus=6"], 2, 3),  # the same request, said twice
        # --gpus-per-node is --gres=gpu:N: per node, shared by the node's tasks (a torchrun header)
        (["--nodes=1", "--ntasks-per-node=1", "--gpus-per-node=4"], 1, 4),
        (["--nodes=2", "--ntasks-per-node=4", "--gpus-per-node=4"], 8, 1),
        (["-N 1", "-n 2", "--gpus-per-node=a100:4"], 2, 2),
    ],
)
def test_sbatch_gpus_total_and_gpus_per_node_become_gpus_per_rank(tmp_path, lines, workers, per_rank):
    """A Slurm user's GPU request never gives fewer GPUs than it says: ``--gpus``/``-G`` (the job's
    total) and ``--gpus-per-node`` were ignored with a warning, and the job ran on one GPU a rank."""
    path = _write(tmp_path, "#!/bin/bash\n" + "".join(f"#SBATCH {line}\n" for line in lines) + "echo hi\n")
    body = fast_body([path])
    assert body == click_body([path])
    assert (body["workers"], body["gpus_per_worker"]) == (workers, per_rank)
    _, warnings = sbatch_flags(directive_lines(Path(path).read_text()), path, strict=True)
    assert warnings == []
    if "a100" in "".join(lines):
        assert body["gpu_model"] == "a100"


@pytest.mark.parametrize(
    ("lines", "fragment"),
    [
        (["-n 4", "--gpus=6"], "6 GPUs do not divide evenly among the job's 4 tasks"),
        (["-N 2", "--ntasks-per-node=2", "-G 2"], "2 GPUs do not divide evenly among the job's 4 tasks"),
        (["-n 2", "--gpus-per-task=2", "--gpus=6"], "conflicts with --gpus-per-task 2 (2 task(s) of 2 GPUs is not 6)"),
    ],
)
def test_sbatch_gpus_the_ranks_cannot_share_is_refused_in_one_line(tmp_path, lines, fragment):
    path = _write(tmp_path, "".join(f"#SBATCH {line}\n" for line in lines) + "echo\n")
    result = CliRunner().invoke(cli, ["submit", "--state-dir", str(tmp_path / "s"), path], prog_name="labgang")
    assert result.exit_code == 2 and fragment in result.output, result.output
    assert f"{path}:{len(lines)}: #SBATCH --gpus " in result.output, result.output
    assert len([line for line in result.output.splitlines() if line.strip()]) == 1, result.output


def test_sbatch_hetjob_is_refused_in_one_line_not_merged_into_one_gang(tmp_path):
    path = _write(tmp_path, "#!/bin/bash\n#SBATCH -n 1\n#SBATCH hetjob\n#SBATCH -n 2\necho hi\n")
    result = CliRunner().invoke(cli, ["submit", "--state-dir", str(tmp_path / "s"), path], prog_name="labgang")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "#SBATCH hetjob: labgang does not read a heterogeneous job" in lines[0], result.output


def test_a_batch_script_gets_labgangs_srun_first_on_its_path_a_command_does_not(tmp_path):
    path = _write(tmp_path, "#!/bin/bash\n#SBATCH -n 2\nsrun hostname\n")
    body = fast_body([path])
    assert body == click_body([path])
    assert body["env"]["PATH"] == f"{SRUN_SHIM_DIR}:/bin"
    assert fast_body(["--", "hostname"])["env"]["PATH"] == "/bin"
    assert os.access(os.path.join(SRUN_SHIM_DIR, "srun"), os.X_OK)


@pytest.mark.parametrize(
    ("args", "procid", "status", "stdout"),
    [
        (["-N", "2", "--mpi=pmix", "-l", "--gres", "gpu:1", "echo", "step"], "1", 0, "step\n"),
        (["-n", "1", "echo", "once"], "0", 0, "once\n"),
        (["-n", "1", "echo", "once"], "1", 0, ""),  # not one of the step's tasks: goes on at once
        (["--ntasks=2", "--", "echo", "-n", "x"], "1", 0, "x"),
        (["--chdir=/", "pwd"], "0", 0, "/\n"),
        (["sh", "-c", "exit 4"], "0", 4, ""),
    ],
)
def test_labgangs_srun_runs_the_step_in_this_rank(tmp_path, args, procid, status, stdout):
    done = subprocess.run(
        [os.path.join(SRUN_SHIM_DIR, "srun"), *args],
        env={"PATH": os.defpath, "SLURM_PROCID": procid},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert (done.returncode, done.stdout, done.stderr) == (status, stdout, "")


@pytest.mark.parametrize(("args", "line"), [([], "no command given"), (["-n", "x", "true"], "-n/--ntasks: 'x'")])
def test_labgangs_srun_refuses_in_one_line(args, line):
    done = subprocess.run(
        [os.path.join(SRUN_SHIM_DIR, "srun"), *args], env={"PATH": os.defpath}, capture_output=True, text=True
    )
    assert done.returncode == 1 and len(done.stderr.splitlines()) == 1 and line in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("-N x", "-N/--nodes: 'x'"),
        ("--nodes=1-2", "-N/--nodes: '1-2' is a range of node counts (Slurm's --nodes=MIN-MAX)"),
        ("-n x", "-n/--workers: 'x'"),
        ("--gpus-per-task=x", "-g/--gpus-per-worker: 'x'"),
        ("-t xx", "-t/--time: 'xx' is not a time limit"),
        ("-b never", "-b/--begin: 'never' is not a begin time"),
        ("--signal=NOPE", "--signal: unknown signal 'NOPE'"),
        ("-c 0", "-c/--cpus-per-task: 0"),
        ("--ntasks-per-node=x", "allowed: a whole number of tasks per node"),
    ],
)
def test_every_bad_directive_value_names_its_file_and_line(tmp_path, fake, line, fragment):
    """The values click's flag types refuse (``-N x``) and ``--ntasks-per-node`` lacked the ``file:line``
    that the others (``-p``, ``--mem``...) have."""
    path = _write(tmp_path, f"#!/bin/bash\n# setup\n#SBATCH {line}\necho\n")
    result = _cli(["submit", "--state-dir", str(fake.socket_path.parent), path])
    assert result.exit_code == 2
    [shown] = result.output.strip().splitlines()
    assert shown.startswith(f"labgang submit: {path}:3: #SBATCH ") and fragment in shown and "allowed:" in shown
    assert not [r for r in fake.received if r[0] == "POST"]
    result = _cli(["submit", "--state-dir", str(fake.socket_path.parent), "-N", "2", "-n", "2", "-c", "1", path])
    if line.split()[0].split("=")[0] in ("-N", "--nodes", "-n", "-c"):  # the command line's value wins: no refusal
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("lines", "fragment"),
    [
        (["--gres=gpu:2", "--gpus=3"], ":1: #SBATCH --gres gpu:2 (2 GPUs per node on 1 node is 2 GPUs, not 3)"),
        (["--gpus=3", "-N 2", "--gres=gpu:a100:2"], "(2 GPUs per node on 2 nodes is 4 GPUs, not 3)"),
        (
            ["-n 4", "--gres=gpu:4", "--gpus=8"],
            "not 8); allowed: one of the two, or a --gpus total equal to --gres's "
            "count times -N (for 2 nodes of 4 GPUs write -N 2, which Slurm infers and labgang does not)",
        ),
    ],
)
def test_sbatch_gres_gpu_and_a_gpus_total_that_disagree_are_refused_naming_both(tmp_path, lines, fragment):
    """Slurm refuses a ``--gpus`` total that is not ``--gres=gpu:N`` times the nodes; labgang let the later
    win without a word (``--gres=gpu:2`` with ``--gpus=3``: 3 GPUs)."""
    path = _write(tmp_path, "".join(f"#SBATCH {line}\n" for line in lines) + "echo\n")
    _, positional = quick.parse([path], quick._submit_flags(), interspersed=False)
    with pytest.raises(BadScript) as caught:
        script_form([path], positional, strict=False)
    text = str(caught.value)
    at = 1 + next(i for i, line in enumerate(lines) if line.startswith("--gpus"))
    assert text.startswith(f"{path}:{at}: #SBATCH --gpus ") and fragment in text and "\n" not in text


@pytest.mark.parametrize(
    ("lines", "workers", "per_rank"),
    [
        (["--gres=gpu:2", "--gpus=2"], 1, 2),
        (["--gpus=4", "--gres=gpu:4", "--ntasks-per-node=2"], 2, 2),  # the same request, said twice
    ],
)
def test_sbatch_gres_gpu_and_a_gpus_total_that_agree_are_one_request(tmp_path, lines, workers, per_rank):
    path = _write(tmp_path, "".join(f"#SBATCH {line}\n" for line in lines) + "echo\n")
    body = fast_body([path])
    assert body == click_body([path])
    assert (body["workers"], body["gpus_per_worker"]) == (workers, per_rank)


def test_a_pair_of_directives_refused_together_names_the_first_line(tmp_path, fake):
    """``--mem`` and ``--mem-per-gpu`` exclude each other; from two ``#SBATCH`` lines the refusal had
    no ``file:line`` (its message starts with the pair, not with one flag)."""
    path = _write(tmp_path, "#!/bin/bash\n#SBATCH --mem=1G\n#SBATCH --mem-per-gpu=1G\necho\n")
    result = _cli(["submit", "--state-dir", str(fake.socket_path.parent), path])
    assert result.exit_code == 2
    assert result.output.strip() == (
        f"labgang submit: {path}:2: #SBATCH --mem=1G: --mem and --mem-per-gpu exclude each other: "
        "give memory per node or per GPU"
    )
    result = _cli(["submit", "--state-dir", str(fake.socket_path.parent), "--mem", "2G", path])  # one typed
    assert result.output.strip().startswith(f"labgang submit: {path}:3: #SBATCH --mem-per-gpu=1G: --mem and ")
    assert not [r for r in fake.received if r[0] == "POST"]
