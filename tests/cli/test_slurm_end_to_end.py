"""A Slurm user's habits against a real ``labgang up --simulate`` (docs/slurm.md): the ``SLURM_*``
variables in every rank, array tasks by their own numbers in ``show``/``logs``/``cancel``, ``show``
and ``logs`` of an array id, ``--time`` in minutes."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from up_harness import REPO, Up, running_up

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgs")


def test_each_array_task_gets_slurms_variables_and_answers_to_its_own_number(up: Up) -> None:
    script = (
        'echo "$SLURM_JOB_ID $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_PROCID/$SLURM_NTASKS $SLURM_SUBMIT_DIR"'
    )
    out = up.cli("run", "--array", "0-2", "--name", "sw", "--", "sh", "-c", script)
    assert out.returncode == 0, out.stderr
    found = re.search(r"submitted job array (\d+)", out.stderr)
    assert found is not None, out.stderr
    array_id = int(found[1])
    for index in range(3):
        number = array_id + index  # each task's own number: the array id is its first task's
        logs = up.cli("logs", str(number))
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout.split() == [str(number), str(array_id), str(index), "0/1", str(REPO)]
        shown = up.job(f"{array_id}_{index}" if index == 0 else str(number))  # the array's id names the array
        assert (shown["id"], shown["numeric_id"]) == (f"{array_id}_{index}", number)
    text = up.cli("show", str(array_id + 1)).stdout
    assert text.splitlines()[0].endswith(f"(number {array_id + 1}: its SLURM_JOB_ID)")
    assert f"Directory:   {REPO}" in text and "Command:     sh -c " in text
    assert "Exit status: 0 (Slurm 0:0)" in text


def test_show_and_logs_of_an_array_id_summarise_and_pick_the_first(up: Up) -> None:
    array_id = up.submit("--array", "0-3", "--", "sh", "-c", 'test "$SLURM_ARRAY_TASK_ID" -lt 2 || exit 3')
    up.wait("every task finished", lambda jobs: not any(i.startswith(f"{array_id}_") for i in jobs))
    show = up.cli("show", array_id)
    assert show.returncode == 0, show.stderr
    rows = {line.split()[0]: line.split()[1:] for line in show.stdout.splitlines() if line[:1].isupper()}
    assert rows["SUCCEEDED"] == ["2", f"{array_id}_[0-1]"] and rows["FAILED"] == ["2", f"{array_id}_[2-3]"]
    summary = json.loads(up.cli("show", "--json", array_id).stdout)
    assert summary["states"] == {"succeeded": 2, "failed": 2} and summary["tasks"] == 4
    failed = up.job(f"{array_id}_3")
    assert failed["exit_status"] == 3
    logs = up.cli("logs", array_id)
    assert logs.returncode == 0
    assert f"{array_id} is a job array with tasks {array_id}_[0-3]; showing {array_id}_0" in logs.stderr


def test_cancel_takes_an_array_tasks_number_and_time_is_in_minutes(up: Up) -> None:
    array_id = int(up.submit("--array", "0-1", "--time", "90", "--", "sleep", "300"))
    up.wait(
        "both tasks running",
        lambda jobs: all(jobs.get(f"{array_id}_{i}", {}).get("state") == "running" for i in (0, 1)),
    )
    assert up.job(f"{array_id}_1")["time_limit_s"] == 90 * 60
    out = up.cli("cancel", str(array_id + 1))
    assert out.returncode == 0 and out.stdout.strip() == f"job {array_id}_1: terminating", out.stderr
    assert up.job(f"{array_id}_0")["state"] == "running"
    assert up.cli("cancel", str(array_id)).returncode == 0
    missing = up.cli("show", str(array_id + 50))
    assert missing.returncode == 1 and f"no job {array_id + 50}" in missing.stderr


def test_a_batch_script_with_sbatch_lines_runs_unchanged(up: Up, tmp_path: Path) -> None:
    script = tmp_path / "train.sbatch"
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH --job-name=sweep\n"
        "#SBATCH --ntasks=2\n"
        "#SBATCH --gres=gpu:1\n"
        "#SBATCH --time=10\n"
        "#SBATCH --mem=4G\n"
        "\n"
        'echo "$SLURM_JOB_NAME $SLURM_PROCID/$SLURM_NTASKS $SLURM_GPUS_ON_NODE $0"\n'
    )
    out = up.cli("submit", str(script))
    assert out.returncode == 0, out.stderr
    assert out.stderr.strip() == ""  # --mem is read as labgang's --mem (counted per node)
    job_id = out.stdout.strip()
    job = up.wait_state(job_id, {"succeeded", "failed"})
    assert job["state"] == "succeeded", job
    assert (job["name"], job["workers"], job["time_limit_s"], job["argv"]) == (
        "sweep",
        2,
        600,
        ["/bin/bash", str(script)],
    )
    assert up.cli("logs", job_id).stdout.split() == ["sweep", "0/2", "2", str(script)]
    assert up.cli("logs", job_id, "-r", "1").stdout.split() == ["sweep", "1/2", "2", str(script)]


def test_begin_waits_with_begintime_then_the_coordinator_wakes_and_starts_it(up: Up) -> None:
    later = up.submit("--begin", "now+1hour", "--", "true")
    job = up.job(later)
    assert job["state"] == "pending" and job["reason"]["code"] == "begin_time", job
    assert job["reason"]["message"].startswith("BeginTime: not before ")
    assert "Begin:       " in up.cli("show", later).stdout and "(in 59m" in up.cli("show", later).stdout
    soon = up.submit("--begin", "now+2", "--", "true")  # two seconds: the coordinator must wake for it
    assert up.job(soon)["reason"]["code"] == "begin_time"
    done = up.wait_state(soon, {"succeeded", "failed"}, timeout=60)
    assert done["state"] == "succeeded" and done["start_time"] >= done["begin_time"]
    assert up.job(later)["state"] == "pending"
    assert up.cli("cancel", later).returncode == 0
    bad = up.cli("submit", "--begin", "soon", "--", "true")
    assert bad.returncode == 2 and bad.stderr.startswith("labgang submit: -b/--begin: 'soon' is not a begin time")


def test_output_and_error_files_appear_with_the_patterns_names(up: Up, tmp_path: Path) -> None:
    script = 'echo "out $SLURM_PROCID"; echo "err $SLURM_PROCID" >&2'
    out = up.cli(
        "run", "-n", "2", "-o", f"{tmp_path}/o-%x-%j-%t.txt", "-e", f"{tmp_path}/e-%j.txt", "-J", "pat",
        "--", "sh", "-c", script,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    job_id = re.search(r"submitted job (\d+)", out.stderr)[1]  # type: ignore[index]
    assert (tmp_path / f"o-pat-{job_id}-0.txt").read_text() == "out 0\n"
    # no %t in -e: only rank 0 has an error file; rank 1's stderr goes to its output file
    assert (tmp_path / f"o-pat-{job_id}-1.txt").read_text().splitlines() == ["out 1", "err 1"]
    assert (tmp_path / f"e-{job_id}.txt").read_text() == "err 0\n"
    assert sorted(up.cli("logs", job_id).stdout.splitlines()) == ["err 0", "out 0"]  # logs still has it
    shown = up.cli("show", job_id).stdout
    assert f"Output:      {tmp_path}/o-%x-%j-%t.txt" in shown and f"Error file:  {tmp_path}/e-%j.txt" in shown
    bad = up.cli("submit", "-o", "x-%q", "--", "true")
    assert bad.returncode == 2
    assert (
        bad.stderr.strip()
        == "labgang submit: -o/--output: 'x-%q': '%q' is not an escape; allowed: %j, %A, %a, %x, %u, %N, %t, %%"
    )


def test_aftercorr_runs_each_task_after_its_counterpart_and_needs_an_array(up: Up) -> None:
    first = up.submit("--array", "0-2", "--", "sh", "-c", 'test "$SLURM_ARRAY_TASK_ID" != 1')  # task 1 fails
    second = up.submit("--array", "0-2", "-d", f"aftercorr:{first}", "--", "true")
    assert up.job(f"{second}_1")["dependency"] == f"afterok:{first}_1"
    states = {i: up.wait_state(f"{second}_{i}", {"succeeded", "failed", "cancelled"})["state"] for i in range(3)}
    assert states == {0: "succeeded", 1: "cancelled", 2: "succeeded"}
    assert up.job(f"{first}_1")["state"] == "failed"
    alone = up.cli("submit", "-d", f"aftercorr:{first}", "--", "true")
    assert alone.returncode == 2 and "aftercorr is for a job array" in alone.stderr


def test_after_plus_minutes_is_released_but_waits_until_the_delay_passed(up: Up) -> None:
    server = up.submit("--", "sleep", "300")
    up.wait_state(server, {"running"})
    client = up.submit("-d", f"after:{server}+1", "--", "true")
    deadline = time.monotonic() + 30
    while (job := up.job(client))["reason"] is None or "holds from" not in job["reason"]["message"]:
        assert time.monotonic() < deadline, job
        time.sleep(0.1)
    assert job["state"] == "pending" and job["dependency"] == f"after:{server}+1"
    assert job["reason"]["code"] == "dependency"
    assert job["reason"]["message"].startswith(f"after:{server}+1 (running); holds from ")
    start = up.job(server)["start_time"]
    assert up.job(client)["state"] == "pending" and time.time() < start + 60  # not before the minute
    assert up.cli("cancel", client, server).returncode == 0
