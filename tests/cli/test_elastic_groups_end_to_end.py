"""Elastic groups end to end (issue 27: ``--min-workers`` per group) on a real ``labgang up
--simulate`` (8×H100) with real rank processes: with 6 of the 8 GPUs held by another job, a
launcher (1 rank, no GPU) plus workers (``-n 4 -g 1 --min-workers 2``) starts at once with its
workers' group at 2 ranks. Every rank sees the sizes it started with (``WORLD_SIZE``,
``LABGANG_GROUP_SIZE``, ``SLURM_NTASKS_HET_GROUP_1``), the job's history says each group's
started size, and ``--success-policy group:g0`` ends it when the launcher exits 0 (its two
workers stopped)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from up_harness import WAIT_S, Up, running_up

pytestmark = pytest.mark.slow

KEYS = ("RANK", "WORLD_SIZE", "LABGANG_GROUP", "LABGANG_GROUP_RANK", "LABGANG_GROUP_SIZE", "SLURM_NTASKS_HET_GROUP_1")
# Every rank writes its variables to <dir>/env-<rank>.json; the launcher (rank 0) then waits for
# both workers' files and exits 0, a worker runs until it is stopped.
RANK = (
    "import json, os, sys, time\n"
    "base, rank = sys.argv[1], os.environ['RANK']\n"
    f"env = {{k: os.environ.get(k) for k in {list(KEYS)!r}}}\n"
    "path = os.path.join(base, f'env-{rank}.json')\n"
    "open(path + '.tmp', 'w').write(json.dumps(env))\n"
    "os.replace(path + '.tmp', path)\n"
    "seen = lambda r: os.path.exists(os.path.join(base, f'env-{r}.json'))\n"
    "while rank != '0' or not (seen(1) and seen(2)):\n"
    "    time.sleep(0.05)\n"
)


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgeg")


def test_an_elastic_job_of_groups_starts_at_every_groups_minimum_and_its_ranks_see_those_sizes(
    up: Up, tmp_path: Path
) -> None:
    blocker = up.submit("-n", "6", "-g", "1", "--", "sleep", "600")
    up.wait_state(blocker, {"running"})
    job_id = up.submit(
        "--success-policy", "group:g0", "-n", "1", "-g", "0", "--", sys.executable, "-c", RANK, str(tmp_path),
        ":", "-n", "4", "-g", "1", "--min-workers", "2", "--", sys.executable, "-c", RANK, str(tmp_path),
    )  # fmt: skip
    done = up.wait_state(job_id, {"succeeded", "failed", "cancelled"}, timeout=WAIT_S)
    assert done["state"] == "succeeded", done
    assert sorted(r["rank"] for r in done["ranks"]) == [0, 1, 2]  # 1 launcher + 2 of the 4 workers
    envs = [json.loads((tmp_path / f"env-{rank}.json").read_text()) for rank in (0, 1, 2)]
    assert [tuple(e[k] for k in KEYS) for e in envs] == [
        ("0", "3", "g0", "0", "1", "2"),
        ("1", "3", "g1", "0", "2", "2"),
        ("2", "3", "g1", "1", "2", "2"),
    ]
    admitted = [h["message"] for h in done["history"] if h["event"] == "admitted"]
    assert len(admitted) == 1 and admitted[0].startswith("started with 3 of 5 ranks (g0 1 of 1, g1 2 of 4 (min 2))")
    cancelled = up.cli("cancel", blocker)
    assert cancelled.returncode == 0, cancelled.stderr
    up.wait_state(blocker, {"cancelled"})


def test_a_group_minimum_above_its_ranks_is_refused_naming_the_field(up: Up) -> None:
    before = set(up.jobs())
    out = up.cli(
        "submit", "-n", "1", "-g", "0", "--", "true", ":", "-n", "2", "-g", "1", "--min-workers", "3", "--", "true"
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "group 1 --min-workers: 3; allowed: 1 to 2" in out.stderr
    assert set(up.jobs()) == before  # nothing stored


def test_an_exclusive_job_of_groups_with_a_cpu_only_launcher_runs_and_says_so(up: Up) -> None:
    job_id = up.submit(
        "--exclusive", "-n", "1", "-g", "0", "-c", "2", "--", "true", ":", "-n", "2", "-g", "1", "--", "true"
    )
    done = up.wait_state(job_id, {"succeeded", "failed", "cancelled"}, timeout=WAIT_S)
    assert done["state"] == "succeeded", done
    assert done["exclusive"] is True
    assert [(g["name"], g["cpus_per_task"]) for g in done["groups"]] == [("g0", 2), ("g1", 0)]


def test_memory_per_gpu_for_a_group_with_no_device_is_refused(up: Up) -> None:
    before = set(up.jobs())
    out = up.cli("submit", "-n", "1", "-g", "0", "--mem-per-gpu", "1G", "--", "true", ":", "-g", "1", "--", "true")
    assert out.returncode == 2, out.stdout + out.stderr
    assert "group 0 --mem-per-gpu: a group with gpus_per_worker 0 has no device" in out.stderr, out.stderr
    assert set(up.jobs()) == before


def test_a_group_name_with_a_dash_is_accepted_and_one_spelling_the_same_variable_refused(up: Up) -> None:
    job_id = up.submit(
        "-n", "1", "-g", "1", "--", "true", ":", "--group", "data-loader", "-n", "1", "-g", "0", "--", "true"
    )
    assert [g["name"] for g in up.job(job_id)["groups"]] == ["g0", "data-loader"]
    up.wait_state(job_id, {"succeeded"})
    before = set(up.jobs())
    out = up.cli(
        "submit", "-n", "1", "-g", "1", "--", "true", ":", "--group", "DATA_loader", "-n", "1", "-g", "1", "--", "true",
        ":", "--group", "data-loader", "-n", "1", "-g", "0", "--", "true",
    )  # fmt: skip
    assert out.returncode == 2, out.stdout + out.stderr
    assert "group names 'DATA_loader', 'data-loader' are one variable name (LABGANG_GROUP_DATA_LOADER_ADDR)" in (
        out.stderr
    )
    assert set(up.jobs()) == before
