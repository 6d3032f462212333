"""Job arrays end to end (docs/arrays.md): `labgang up --simulate` in the background, the shell
commands against it, real task processes started by its agent, and a restart of `labgang up`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from up_harness import Up, running_up

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lga")


def _running(jobs: dict[str, dict]) -> list[str]:
    return sorted(i for i, j in jobs.items() if j["state"] in ("admitted", "running"))


def test_bad_spec_is_one_line_naming_the_part(up: Up) -> None:
    out = up.cli("submit", "--array", "0,5-2", "--", "true")
    assert out.returncode == 2
    assert (
        out.stderr.strip()
        .splitlines()[-1]
        .endswith('--array: "5-2": end below start (a range is START-END with START <= END, e.g. 2-5)')
    )
    assert len(out.stderr.strip().splitlines()) == 1
    over = up.cli("submit", "--array", "0-20000", "--", "true")
    assert over.returncode == 2 and '"0-20000": index 20000 is over the largest allowed, 10000' in over.stderr
    # past what any cluster allows: refused before sending, and not in the cluster's limit's name
    huge = up.cli("submit", "--array", "0-99999999", "--", "true")
    assert (huge.returncode, huge.stderr) == (
        2,
        'labgang submit: --array: "0-99999999": index 99999999 is over the largest allowed, 1000000 '
        "(the most any cluster's limits.max_array_size allows)\n",
    )


def test_run_waits_for_every_task_and_each_task_gets_its_variables(up: Up) -> None:
    script = 'echo "$SLURM_ARRAY_TASK_ID $LABGANG_ARRAY_TASK_COUNT $SLURM_ARRAY_JOB_ID $LABGANG_ARRAY_TASK_MAX"'
    out = up.cli("run", "--array", "0-6:2", "--", "sh", "-c", script)
    assert out.returncode == 0, out.stderr
    found = re.search(r"submitted job array (\d+)", out.stderr)
    assert found is not None, out.stderr
    array_id = found[1]
    for index in (0, 2, 4, 6):
        assert f"{array_id}_{index} succeeded" in out.stderr
        logs = up.cli("logs", f"{array_id}_{index}")
        assert logs.stdout.strip() == f"{index} 4 {array_id} 6", logs.stderr
    history = up.cli("history", "--json")
    ids = [row["id"] for row in json.loads(history.stdout)["jobs"]]
    assert {f"{array_id}_{i}" for i in (0, 2, 4, 6)} <= set(ids)


def test_cap_folded_queue_line_show_and_cancel(up: Up) -> None:
    out = up.cli("submit", "--array", "0-5%2", "--", "sleep", "300")
    assert out.returncode == 0, out.stderr
    array_id = out.stdout.strip()
    assert array_id.isdigit()
    jobs = up.wait("two tasks running", lambda jobs: len(_running(jobs)) == 2)
    assert _running(jobs) == [f"{array_id}_0", f"{array_id}_1"]
    table = up.cli("queue").stdout
    assert f"{array_id}_[2-5%2]" in table
    assert re.search(rf"{array_id}_\[2-5%2\].*\(array {array_id} runs at most 2 tasks at once \(%2\)\)", table)
    show = up.cli("show", "--json", f"{array_id}_3")
    assert json.loads(show.stdout)["job"]["reason"]["code"] == "array_limit"
    one = up.cli("cancel", f"{array_id}_5")
    assert one.returncode == 0 and one.stdout.strip() == f"job {array_id}_5: cancelled"
    assert f"{array_id}_[2-4%2]" in up.cli("queue").stdout
    every = up.cli("cancel", array_id)
    assert every.returncode == 0, every.stderr
    assert every.stdout.strip().startswith(f"array {array_id}: ")
    assert "3 cancelled" in every.stdout and "2 terminating" in every.stdout
    up.wait("the array gone from the queue", lambda jobs: not any(i.startswith(f"{array_id}_") for i in jobs))


def test_an_array_survives_a_restart_of_labgang_up(up: Up) -> None:
    out = up.cli("submit", "--array", "0-3%1", "--", "sleep", "300")
    array_id = out.stdout.strip()
    up.wait("one task running", lambda jobs: _running(jobs) == [f"{array_id}_0"])
    up.stop()
    up.start()
    jobs = up.wait("one task running again", lambda jobs: len(_running(jobs)) == 1)
    tasks = {i: j for i, j in jobs.items() if j.get("array_id") == array_id}
    assert sorted(tasks) == [f"{array_id}_{i}" for i in range(4)]
    assert all(j["array_limit"] == 1 for j in tasks.values())
    waiting = [j for j in tasks.values() if j["state"] == "pending"]
    assert len(waiting) == 3 and all(j["reason"]["code"] == "array_limit" for j in waiting)
    assert up.cli("cancel", array_id).returncode == 0
