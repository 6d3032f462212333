"""`labgang run` where a new user expected srun's behaviour, against a real ``labgang up --simulate``:
its output closed under it (``| head -1``) cancels the job, ``--pty`` with a pipe on standard input
warns and runs, and ``-D/--chdir`` sets the ranks' working directory (docs/slurm.md)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from up_harness import REPO, Up, running_up

pytestmark = pytest.mark.slow

STARTS = {
    "fast": ["-m", "labgang.launcher"],
    "click": ["-c", "from labgang.launcher.cli.main import main; main()"],
}
"""How a test starts the CLI: the fast path (quick.py) or the click command it hands over to."""


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgr")


def labgang(
    up: Up, *args: str, cwd: Path = REPO, stdin: int | IO[Any] | None = subprocess.DEVNULL, path: str = "fast"
) -> subprocess.CompletedProcess[str]:
    """``labgang ARGS`` in ``cwd`` with ``stdin``; output as text."""
    return subprocess.run(
        [sys.executable, *STARTS[path], *args],
        cwd=cwd,
        env=up.env,
        stdin=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def job_count(up: Up) -> int:
    """How many jobs the store has, finished or not (``history --json`` of every user)."""
    out = up.cli("history", "--json", "--user", "all")
    assert out.returncode == 0, out.stderr
    return len(json.loads(out.stdout)["jobs"])


def submitted(stderr: str) -> str:
    found = re.search(r"submitted job (\d+)", stderr)
    assert found is not None, stderr
    return found[1]


@pytest.mark.parametrize("path", ["fast", "click"])
def test_head_taking_its_line_cancels_the_job_and_run_exits_141(up: Up, path: str) -> None:
    """``labgang run -- CMD | head -1``: head reads the first line and exits while the job has nothing
    more to print for minutes. run notices the closed pipe, cancels the job as srun does and exits
    141 (128 + SIGPIPE) with one line naming the job."""
    proc = subprocess.Popen(
        [sys.executable, *STARTS[path], "run", "--", "sh", "-c", "echo first; echo second; exec sleep 300"],
        cwd=REPO,
        env=up.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    assert proc.stdout.readline() == b"first\n"
    proc.stdout.close()  # as head -1 exits
    try:
        code = proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("labgang run kept waiting for a job whose output goes nowhere") from None
    stderr = proc.stderr.read().decode()
    job_id = submitted(stderr)
    assert code == 141, stderr
    assert stderr.splitlines()[-1] == f"labgang run: output closed (broken pipe): cancelled job {job_id}"
    assert "Traceback" not in stderr and "Exception ignored" not in stderr
    assert up.wait_state(job_id, {"cancelled", "failed", "succeeded"})["state"] == "cancelled"


def test_a_pipe_closed_before_any_output_cancels_a_pending_or_running_job(up: Up) -> None:
    """The reader goes away before the job printed anything (``| true``): still cancelled, not waited for."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "labgang.launcher", "run", "--", "sleep", "300"],
        cwd=REPO,
        env=up.env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    try:
        code = proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("labgang run kept waiting with its output closed") from None
    stderr = proc.stderr.read().decode()
    job_id = submitted(stderr)
    assert (code, stderr.splitlines()[-1]) == (141, f"labgang run: output closed (broken pipe): cancelled job {job_id}")
    assert up.wait_state(job_id, {"cancelled", "failed", "succeeded"})["state"] == "cancelled"


def test_pty_with_a_pipe_on_stdin_warns_and_runs_the_piped_commands(up: Up) -> None:
    """``echo cmd | labgang run --pty -- bash``: as srun, a warning that --pty is disregarded, then the
    pipe is bash's standard input, and the exit status is the job's."""
    producer = subprocess.Popen(["printf", "echo from-the-pipe\\nexit 7\\n"], stdout=subprocess.PIPE)
    assert producer.stdout is not None
    out = labgang(up, "run", "--pty", "--", "bash", stdin=producer.stdout)
    producer.stdout.close()
    assert producer.wait() == 0
    assert out.returncode == 7, out.stderr
    assert out.stdout == "from-the-pipe\n"
    warnings = [line for line in out.stderr.splitlines() if "warning" in line]
    assert warnings == [
        "labgang run: warning: --pty: standard input is not a terminal; running without a pseudo-terminal"
    ]


@pytest.mark.parametrize("path", ["fast", "click"])
def test_chdir_sets_the_ranks_directory_relative_to_the_submit_directory(up: Up, tmp_path: Path, path: str) -> None:
    work = tmp_path / "work"
    work.mkdir()
    args = ("run", "-n", "2", "--all-ranks", "-D", "work", "-o", "out-%t.txt", "--", "pwd")
    out = labgang(up, *args, cwd=tmp_path, path=path)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == [f"0: {work}", f"1: {work}"]
    assert (work / "out-0.txt").read_text() == f"{work}\n"  # --output is relative to the working directory
    absolute = labgang(up, "run", "--chdir", str(work), "--", "pwd", path=path)
    assert (absolute.returncode, absolute.stdout) == (0, f"{work}\n"), absolute.stderr
    default = labgang(up, "run", "--", "pwd", cwd=tmp_path, path=path)
    assert default.stdout == f"{tmp_path}\n"


@pytest.mark.parametrize("command", ["submit", "run"])
def test_a_missing_chdir_is_one_line_exit_2_and_nothing_stored(up: Up, tmp_path: Path, command: str) -> None:
    before = job_count(up)
    out = labgang(up, command, "-D", "nowhere", "--", "true", cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert out.stderr.splitlines() == [
        f"labgang {command}: -D/--chdir: 'nowhere': no such directory ({tmp_path}/nowhere); allowed: an "
        "existing directory, absolute or relative to the submit directory"
    ]
    assert job_count(up) == before


def test_sbatch_chdir_in_a_batch_script(up: Up, tmp_path: Path) -> None:
    (tmp_path / "runs").mkdir()
    script = tmp_path / "job.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --chdir=runs\n#SBATCH -o log-%j.txt\npwd\n")
    out = labgang(up, "submit", str(script), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    assert up.wait_state(job_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert (tmp_path / "runs" / f"log-{job_id}.txt").read_text() == f"{tmp_path / 'runs'}\n"
    short = tmp_path / "short.sh"
    short.write_text("#!/bin/bash\n#SBATCH -D /no/such/dir\npwd\n")
    before = job_count(up)
    bad = labgang(up, "submit", str(short), cwd=tmp_path)
    assert bad.returncode == 2 and len(bad.stderr.splitlines()) == 1, bad.stderr
    assert "-D/--chdir: '/no/such/dir': no such directory" in bad.stderr
    assert job_count(up) == before


def fake_system_srun(folder: Path) -> dict[str, str]:
    """A ``PATH`` whose ``srun`` is a stand-in for a system Slurm's (it says so and fails), first."""
    folder.mkdir()
    srun = folder / "srun"
    srun.write_text("#!/bin/sh\necho reached-the-system-srun\nexit 99\n")
    srun.chmod(0o755)
    return {"PATH": f"{folder}:{os.environ['PATH']}"}


def test_srun_in_a_batch_script_runs_the_step_in_each_rank_never_a_system_slurm(up: Up, tmp_path: Path) -> None:
    """The script runs on every rank; ``srun CMD`` in it is labgang's, first on the script's PATH: CMD
    runs in that rank (so once per rank over the job), ``srun -n 1 CMD`` only in rank 0."""
    script = tmp_path / "steps.sbatch"
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH --ntasks=2\n"
        "#SBATCH --gres=gpu:1\n"
        "srun --mpi=pmix -l sh -c 'echo step $SLURM_PROCID'\n"
        "srun -n 1 echo once\n"
        "srun sh -c 'exit 3' || echo \"status $?\"\n"
    )
    env = {**up.env, **fake_system_srun(tmp_path / "slurm-bin")}
    out = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "submit", str(script)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    job_id = out.stdout.strip()
    assert up.wait_state(job_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert up.cli("logs", job_id).stdout.splitlines() == ["step 0", "once", "status 3"]
    assert up.cli("logs", job_id, "-r", "1").stdout.splitlines() == ["step 1", "status 3"]


def test_slurm_gpus_on_node_is_this_jobs_gpus_not_the_nodes(up: Up) -> None:
    out = labgang(up, "run", "-n", "2", "-g", "3", "--all-ranks", "--", "sh", "-c", 'echo "$SLURM_GPUS_ON_NODE"')
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == ["0: 6", "1: 6"]  # both ranks on the one 8-GPU node
    one = labgang(up, "run", "-g", "3", "--", "sh", "-c", 'echo "$SLURM_GPUS_ON_NODE"')
    assert one.stdout == "3\n", one.stderr


@pytest.mark.parametrize("path", ["fast", "click"])
def test_a_refused_sbatch_partition_names_the_script_line(up: Up, tmp_path: Path, path: str) -> None:
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/bash\n#SBATCH -n 1\n#SBATCH --partition=gpu\nhostname\n")
    before = job_count(up)
    out = labgang(up, "submit", "script.sh", cwd=tmp_path, path=path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("labgang submit: script.sh:3: #SBATCH --partition=gpu: "), lines
    assert "gpu" in lines[0].split("#SBATCH --partition=gpu: ", 1)[1]
    assert job_count(up) == before
    # the command line wins over the directive, and then the refusal is the command line's own
    own = labgang(up, "submit", "-q", "nope", "script.sh", cwd=tmp_path, path=path)
    assert own.returncode == 2 and "script.sh:3" not in own.stderr, own.stderr
    bad_dir = tmp_path / "dir.sh"
    bad_dir.write_text("#!/bin/bash\n#SBATCH --chdir=missing\npwd\n")
    refused = labgang(up, "submit", "dir.sh", cwd=tmp_path, path=path)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("labgang submit: dir.sh:2: #SBATCH --chdir=missing: -D/--chdir: 'missing': ")


@pytest.mark.parametrize("path", ["fast", "click"])
def test_a_refused_gpu_count_names_the_sbatch_gres_line_not_the_tasks_line(up: Up, tmp_path: Path, path: str) -> None:
    """``--gres=gpu:N`` is per node: 4 tasks of a node with gpu:16 are 16 GPUs, over the 8 of the
    machine; the refusal names the --gres line that asked for them."""
    script = tmp_path / "t4.sh"
    script.write_text("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --ntasks-per-node=4\n#SBATCH --gres=gpu:16\nhostname\n")
    before = job_count(up)
    out = labgang(up, "submit", "t4.sh", cwd=tmp_path, path=path)
    assert out.returncode == 1, out.stderr
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("labgang submit: t4.sh:4: #SBATCH --gres=gpu:16: "), lines
    assert "job needs 16 gpu" in lines[0]
    assert job_count(up) == before


@pytest.mark.parametrize("path", ["fast", "click"])
def test_run_keeps_the_ranks_stderr_on_its_stderr_and_stdout_on_its_stdout(up: Up, path: str) -> None:
    """As srun: a rank's stderr comes out on run's stderr, its stdout on run's stdout (``2>/dev/null``
    silences the one, ``| grep`` sees only the other); ``labgang logs`` still has both, in one log."""
    script = "echo out-$RANK; echo err-$RANK >&2; echo more-$RANK"
    out = labgang(up, "run", "-n", "2", "--all-ranks", "--", "sh", "-c", script, path=path)
    assert out.returncode == 0, out.stderr
    assert sorted(out.stdout.splitlines()) == ["0: more-0", "0: out-0", "1: more-1", "1: out-1"]
    assert sorted(line for line in out.stderr.splitlines() if "err-" in line) == ["0: err-0", "1: err-1"]
    one = labgang(up, "run", "--", "sh", "-c", "echo to-out; echo to-err >&2; exit 3", path=path)
    assert (one.returncode, one.stdout) == (3, "to-out\n"), one.stderr
    assert "to-err" in one.stderr.splitlines()
    logs = up.cli("logs", submitted(one.stderr))
    assert sorted(logs.stdout.splitlines()) == ["to-err", "to-out"]


@pytest.mark.parametrize("path", ["fast", "click"])
def test_quiet_run_prints_only_the_jobs_output_and_errors(up: Up, path: str) -> None:
    """``run -Q`` (srun's ``--quiet``): no "submitted", "running on" or pending lines on stderr, only
    what the rank wrote there and, for a job that did not succeed, its end line; the exit status is
    still the job's. Without -Q those lines are there."""
    script = "echo out; echo err >&2; exit 4"
    quiet = labgang(up, "run", "-Q", "--", "sh", "-c", script, path=path)
    assert (quiet.returncode, quiet.stdout) == (4, "out\n")
    # what the rank wrote, then only the end of a job that did not succeed (srun -Q says a step failed)
    [said, ended] = quiet.stderr.splitlines()
    assert said == "err" and ended.startswith("labgang: job ") and " failed (exit status 4)" in ended, quiet.stderr
    long_form = labgang(up, "run", "--quiet", "-n", "1", "--", "sh", "-c", "echo x", path=path)
    assert (long_form.returncode, long_form.stdout, long_form.stderr) == (0, "x\n", "")
    plain = labgang(up, "run", "--", "sh", "-c", script, path=path)
    assert (plain.returncode, plain.stdout) == (4, "out\n")
    assert "err" in plain.stderr.splitlines() and "submitted job" in plain.stderr, plain.stderr
