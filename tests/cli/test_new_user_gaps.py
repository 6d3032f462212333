"""What a Slurm user tried on day one and labgang got wrong, against a real ``labgang up --simulate``:
``queue -j`` with a word that is no job id, ``cancel 4,3``, a batch script path that does not exist,
``-t 0`` (no limit), a ``--begin`` ages ahead, a held array's reason, and a stale
``SLURM_CPUS_PER_TASK``/``SLURM_MEM_*`` from the submitting shell."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from labgang.launcher.cli.job_facts import split_job_list
from up_harness import REPO, Up, next_id, refused, running_up


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("4,3", ["4", "3"]),
        ("12_[1,3],7", ["12_[1,3]", "7"]),  # a comma inside a task list's brackets stays
        (" 4 , 3 ", ["4", "3"]),
        ("4,,3", ["4", "", "3"]),  # kept, for the caller to refuse
        ("21", ["21"]),
    ],
)
def test_a_job_list_splits_at_the_commas_outside_brackets(text, items):
    assert split_job_list(text) == items


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgn")


def test_queue_j_refuses_a_word_that_is_no_job_id_and_lists_the_ids_it_is_given(up: Up) -> None:
    refused(up.cli("queue", "-j", "21,abc"), 2, "labgang queue: -j/--jobs: 'abc' is not a job id", "allowed:")
    array = up.submit("--hold", "--array", "0-1", "--", "true")
    single = up.submit("--hold", "--", "true")
    try:
        shown = json.loads(up.cli("queue", "-j", f"{single},{int(array) + 1}", "--json").stdout)["jobs"]
        assert sorted(j["id"] for j in shown) == sorted([single, f"{array}_1"])  # a task by its own number too
    finally:
        up.cli("cancel", array, single)


def test_cancel_takes_a_comma_separated_list_as_scancel(up: Up) -> None:
    first = up.submit("--hold", "--", "sleep", "300")
    second = up.submit("--hold", "--", "sleep", "300")
    out = up.cli("cancel", f"{second},{first}")
    assert out.returncode == 0, out.stderr
    assert up.job(first)["state"] == "cancelled" and up.job(second)["state"] == "cancelled"
    refused(up.cli("cancel", f"{first},x"), 2, "'x' is not a job id")


@pytest.mark.parametrize("path", ["missing/train.sh", "train.sbatch", "./nope"])
def test_a_missing_batch_script_is_refused_not_run_as_a_command(up: Up, path: str) -> None:
    before = next_id(up)
    line = refused(up.cli("submit", path), 2, f"SCRIPT: {path!r} is no such file", f"labgang submit -- {path}")
    assert line.startswith("labgang submit: ")
    refused(up.cli("run", path), 2, f"SCRIPT: {path!r} is no such file")
    assert next_id(up) == before + 1  # nothing was submitted in between (only next_id's own job)


def test_time_zero_is_no_limit_as_in_slurm(up: Up) -> None:
    for form in ("0", "UNLIMITED"):
        job = up.submit("-t", form, "--", "true")
        assert up.wait_state(job, {"succeeded"})["time_limit_s"] is None


def test_a_begin_time_ages_ahead_is_refused_naming_the_limit(up: Up) -> None:
    before = next_id(up)
    refused(
        up.cli("submit", "-b", "now+99999999hour", "--", "true"),
        2,
        "-b/--begin: 'now+99999999hour' is 11,408 years ahead",
        "at most 3650 days (10 years) ahead",
    )
    assert next_id(up) == before + 1


def test_a_held_array_says_which_array_and_how_to_release_it(up: Up) -> None:
    array = up.submit("--hold", "--array", "0-2", "--", "true")
    try:
        want = f"held by root; `labgang release {array}` lets array {array} be scheduled"
        for index in range(3):
            assert up.job(f"{array}_{index}")["reason"]["message"].startswith(want)
        assert f"({want}" in up.cli("queue").stdout  # the folded row says it once
    finally:
        up.cli("cancel", array)


def test_a_stale_slurm_host_variable_does_not_reach_a_job_that_did_not_ask(up: Up) -> None:
    stale = {
        "SLURM_CPUS_PER_TASK": "64",
        "SLURM_MEM_PER_NODE": "9999",
        "SLURM_MEM_PER_GPU": "7",
        "SLURM_MEM_PER_CPU": "5",
    }
    show = 'echo "c=$SLURM_CPUS_PER_TASK n=$SLURM_MEM_PER_NODE g=$SLURM_MEM_PER_GPU p=$SLURM_MEM_PER_CPU"'

    def submit_from_a_stale_shell(*args: str) -> str:
        command = [sys.executable, "-m", "labgang.launcher", "submit", *args, "--", "sh", "-c", show]
        out = subprocess.run(command, cwd=REPO, env=up.env | stale, capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    plain = submit_from_a_stale_shell()
    asked = submit_from_a_stale_shell("-c", "2", "--mem", "1G")
    for job in (plain, asked):
        up.wait_state(job, {"succeeded"})
    header, line = up.cli("logs", plain).stdout.strip().splitlines()
    assert line == "c= n= g= p="
    assert "not passed from the submitted environment: SLURM_CPUS_PER_TASK, SLURM_MEM_PER_CPU" in header
    assert up.cli("logs", asked).stdout.strip().splitlines()[-1] == "c=2 n=1024 g= p="  # what it asked, in MiB
