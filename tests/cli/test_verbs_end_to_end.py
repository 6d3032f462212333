"""scontrol's verbs end to end: a real `labgang up --simulate` with real ranks, and `submit --hold`,
`hold`, `release`, `requeue` (a running rank gets SIGTERM and the job runs again as a new attempt)
and `update`, each refusal one line with the right exit status."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from up_harness import Up, running_up

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def up() -> Iterator[Up]:
    yield from running_up("lgv")


def test_submit_hold_waits_until_release(up, tmp_path):
    marker = tmp_path / "ran"
    job_id = up.submit("-H", "--name", "heldjob", "--", "touch", str(marker))
    job = up.job(job_id)
    assert job["state"] == "pending" and job["hold"] == {"by": "root", "admin": False}
    assert job["reason"]["code"] == "held"
    line = next(line for line in up.cli("queue").stdout.splitlines() if "heldjob" in line)
    assert f"held by root; `labgang release {job_id}`" in line
    assert not marker.exists()
    out = up.cli("release", job_id)
    assert (out.returncode, out.stdout) == (0, f"job {job_id}: released\n")
    assert up.wait_state(job_id, {"succeeded", "failed"})["state"] == "succeeded"
    assert marker.exists()
    assert [h["event"] for h in up.job(job_id)["history"]][:3] == ["submitted", "held", "released"]


def test_requeue_stops_a_running_job_and_runs_it_again(up, tmp_path):
    # Attempt 0 records SIGTERM and exits; attempt 1 finds its mark and exits 0 at once.
    script = (
        f"if [ -e {tmp_path}/first ]; then exit 0; fi; "
        f"trap 'touch {tmp_path}/first; touch {tmp_path}/term; exit 143' TERM; "
        f"touch {tmp_path}/started; while true; do sleep 0.05; done"
    )
    job_id = up.submit("--grace", "20", "--", "sh", "-c", script)
    up.wait_state(job_id, {"running"})
    deadline_file = tmp_path / "started"
    up.wait("rank started", lambda jobs: deadline_file.exists())
    out = up.cli("requeue", job_id)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"job {job_id}: requeue requested")
    done = up.wait_state(job_id, {"succeeded", "failed", "cancelled"})
    assert done["state"] == "succeeded" and done["restart_count"] == 1
    assert (tmp_path / "term").exists()  # the rank got SIGTERM (its grace was not needed)
    events = [h["event"] for h in done["history"]]
    assert "requeued" in events and events.count("running") == 2
    stopping = next(h for h in done["history"] if h["event"] == "stopping")
    assert stopping["message"].startswith("requeue requested by root")


def test_refusals_are_one_line_and_change_nothing(up, tmp_path):
    finished = up.submit("--", "true")
    up.wait_state(finished, {"succeeded"})
    out = up.cli("hold", finished)
    assert out.returncode == 1
    assert out.stderr == f"labgang hold: job {finished} has succeeded: only a pending job can be held\n"
    out = up.cli("requeue", finished)
    assert out.returncode == 1 and "a finished job never runs again" in out.stderr
    out = up.cli("release", "99999")
    assert out.returncode == 1 and out.stderr.startswith("labgang release: ") and "99999" in out.stderr
    out = up.cli("update", finished, "Foo=1")
    assert out.returncode == 2
    assert "unknown key 'Foo'" in out.stderr and "Priority, TimeLimit" in out.stderr
    out = up.cli("update", finished, "Name=x")
    assert out.returncode == 1 and "a finished job cannot be updated" in out.stderr
    assert up.job(finished)["name"] != "x"


def test_update_changes_a_pending_job_and_says_so_in_its_history(up, tmp_path):
    job_id = up.submit("-H", "--name", "before", "--time", "2h", "--", "true")
    out = up.cli("update", job_id, "Name=after", "TimeLimit=30m", "Priority=7")
    assert out.returncode == 0, out.stderr
    job = up.job(job_id)
    assert (job["name"], job["time_limit_s"], job["priority"]) == ("after", 1800.0, 7)
    updated = next(h for h in job["history"] if h["event"] == "updated")
    assert updated["message"] == "by root: priority 0 -> 7, time limit 7200 s -> 1800 s, name before -> after"
    out = up.cli("update", job_id, "TimeLimit=soon")
    assert out.returncode == 2 and out.stderr.startswith("labgang update: ")
    up.cli("cancel", job_id)


def test_update_name_is_held_to_the_submission_limit_with_its_words(up):
    """A new user's finding: ``update Name=`` took 250 characters where ``submit --name`` stops at
    200 (``[limits] max_name_chars``), and 300 were refused in pydantic's words."""
    job_id = up.submit("-H", "--name", "before", "--", "true")
    try:
        for length in (201, 300, 5000):
            out = up.cli("update", job_id, "Name=" + "y" * length)
            assert out.returncode == 2, out.stderr
            assert (
                out.stderr
                == f"labgang update: job {job_id}: Name: must be at most 200 characters (limits.max_name_chars)\n"
            )
        assert up.job(job_id)["name"] == "before"
        assert up.cli("update", job_id, "Name=" + "z" * 200).returncode == 0
        assert up.job(job_id)["name"] == "z" * 200
    finally:
        up.cli("cancel", job_id)


def test_update_time_limit_unlimited_or_zero_lifts_it(up):
    for lifted in ("UNLIMITED", "0"):
        job_id = up.submit("-H", "--time", "2h", "--", "true")
        out = up.cli("update", job_id, f"TimeLimit={lifted}")
        assert out.returncode == 0, out.stderr
        assert up.job(job_id)["time_limit_s"] is None
        up.cli("cancel", job_id)


def test_update_confirms_every_field_it_changed(up):
    job_id = up.submit("-H", "--name", "before", "--time", "2h", "--", "true")
    out = up.cli("update", job_id, "TimeLimit=1:00:00")
    assert (out.returncode, out.stdout) == (0, f"job {job_id}: updated (time limit 1:00:00)\n"), out.stderr
    out = up.cli("update", job_id, "Name=after", "TimeLimit=UNLIMITED", "Priority=3")
    assert out.stdout == f"job {job_id}: updated (name after, time limit UNLIMITED, priority 3)\n", out.stderr
    up.cli("cancel", job_id)


def test_an_array_id_names_the_tasks_the_verb_takes(up):
    array = up.submit("--array", "0-2", "-H", "--", "true")
    tasks = [f"{array}_{i}" for i in range(3)]
    assert all(up.job(t)["hold"] == {"by": "root", "admin": False} for t in tasks)
    out = up.cli("release", array)
    assert (out.returncode, out.stdout.splitlines()) == (0, [f"job {t}: released" for t in tasks])
    for task in tasks:
        assert up.wait_state(task, {"succeeded", "failed"})["state"] == "succeeded"
    out = up.cli("hold", array)
    assert (out.returncode, out.stderr) == (1, f"labgang hold: job array {array} has no pending tasks\n")


def test_update_of_an_array_id_updates_each_unfinished_task(up):
    """``scontrol update jobid=ARRAY`` updates every task; a single task's --json stays one JobView."""
    array = up.submit("--array", "0-2", "-H", "--", "true")
    tasks = [f"{array}_{i}" for i in range(3)]
    out = up.cli("update", array, "Priority=-3", "TimeLimit=10")
    assert (out.returncode, out.stdout.splitlines()) == (
        0,
        [f"job {t}: updated (priority -3, time limit 10:00)" for t in tasks],
    ), out.stderr
    assert [up.job(t)["priority"] for t in tasks] == [-3, -3, -3]
    out = up.cli("update", array, "Priority=-4", "--json")
    assert out.returncode == 0 and [j["id"] for j in json.loads(out.stdout)] == tasks
    out = up.cli("update", tasks[1], "Priority=-5", "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["priority"] == -5  # one object, as before
    up.cli("cancel", array)
    out = up.cli("update", array, "Priority=-6")
    assert (out.returncode, out.stderr) == (1, f"labgang update: job array {array} has no unfinished tasks\n")


def test_history_j_lists_the_jobs_named_as_sacct_j(up):
    array = up.submit("--array", "0-1", "-H", "--", "true")
    plain = up.submit("--", "true")
    up.wait_state(plain, {"succeeded"})
    out = up.cli("history", "-j", array, "--json")
    assert out.returncode == 0, out.stderr
    assert [j["id"] for j in json.loads(out.stdout)["jobs"]] == [f"{array}_0", f"{array}_1"]
    out = up.cli("history", "-j", f"{array}_1,{plain}", "--json")
    assert [j["id"] for j in json.loads(out.stdout)["jobs"]] == [f"{array}_1", plain]
    out = up.cli("history", "-j", "99999")
    assert out.returncode == 0 and "labgang history: note: no job 99999 in the store" in out.stderr
    out = up.cli("history", "-j", "12x")
    assert (out.returncode, out.stderr) == (
        2,
        "labgang history: -j/--jobs: '12x' is not a job id; allowed: 12, 12_3 (a job or an array task)\n",
    )
    up.cli("cancel", array)


def test_sbatch_signal_b_goes_to_the_scripts_shell_alone(up, tmp_path):
    """``#SBATCH --signal=B:USR1@3``: the script's trap runs 3 s before its limit, and the child it
    runs, which USR1 would kill, runs on to its end (it was signalled with the whole group)."""
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n#SBATCH --signal=B:USR1@3\n#SBATCH -t 0:05\n"
        f"trap 'touch {tmp_path}/trapped' USR1\n"
        f"sh -c 'while [ ! -e {tmp_path}/trapped ]; do sleep 0.05; done; touch {tmp_path}/child-done' &\n"
        "wait $!\nwait\n"
    )
    job_id = up.submit(str(script))
    job = up.wait_state(job_id, {"succeeded", "failed", "timeout"}, timeout=30)
    assert job["state"] == "succeeded", job
    assert (tmp_path / "trapped").exists() and (tmp_path / "child-done").exists()
    (line,) = [h["message"] for h in job["history"] if h["event"] == "signal"]
    assert line == "signal SIGUSR1 sent to every rank's batch shell (B:), 3 s before the time limit of 5 s"
