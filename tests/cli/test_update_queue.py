"""``labgang update JOB Partition=QUEUE`` (scontrol's ``update jobid=J partition=P``) with real Unix
users (``lab_users``) and root's ``labgang up``: a pending job moves to another queue, runs there
and is kept there in the store; a move is refused in one line, changing nothing, wherever a
submission to that queue would be (a queue the user may not use, a priority it would not give the
user, a job it could never start) and once the job has left pending."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from up_harness import Up, shared_up

pytestmark = pytest.mark.slow

CONFIG = """
admins = ["root"]
default_queue = "vision"

[priority_classes]
normal = 0
urgent = 50

[[queues]]
name = "vision"
nominal = { gpu = 8 }
priority_classes = ["normal", "urgent"]

[[queues]]
name = "nlp"
nominal = { gpu = 2 }
priority_classes = ["normal"]

[[queues]]
name = "private"
nominal = { gpu = 8 }
users = ["root"]
"""


@pytest.fixture(scope="module")
def lab(lab_users) -> Iterator[tuple[Up, list]]:
    with shared_up("lgpart-", CONFIG) as up:
        yield up, lab_users


def test_a_pending_job_moves_to_another_queue_and_runs_there(lab) -> None:
    up, (alice, _bob) = lab
    env = {"LABGANG_STATE_DIR": str(up.state_dir)}
    job = alice.run(["submit", "-H", "-g", "1", "--", "true"], env=env).stdout.strip()
    done = alice.run(["update", job, "Partition=nlp"], env=env)
    assert (done.returncode, done.stdout) == (0, f"job {job}: updated (queue nlp)\n"), done.stderr
    view = up.job(job)
    assert view["queue"] == "nlp" and view["state"] == "pending"
    moved = next(h for h in view["history"] if h["event"] == "updated")
    assert moved["message"] == f"by {alice.user.name}: queue vision -> nlp"
    assert alice.run(["release", job], env=env).returncode == 0
    assert up.wait_state(job, {"succeeded", "failed"})["state"] == "succeeded"
    rows = json.loads(up.cli("history", "-j", job, "--json").stdout)["jobs"]
    assert [(r["id"], r["queue"]) for r in rows] == [(job, "nlp")], rows
    # the store's queue column moved with it: history's queue filter is a query on it
    for queue, listed in (("nlp", True), ("vision", False)):
        found = json.loads(up.cli("history", "-q", queue, "-u", "all", "--json").stdout)["jobs"]
        assert (job in [r["id"] for r in found]) is listed, (queue, found)


def test_a_move_a_submission_there_would_be_refused_is_refused_in_one_line(lab) -> None:
    up, (alice, _bob) = lab
    env = {"LABGANG_STATE_DIR": str(up.state_dir)}
    plain = alice.run(["submit", "-H", "-g", "1", "--", "true"], env=env).stdout.strip()
    urgent = alice.run(["submit", "-H", "-g", "1", "-p", "urgent", "--", "true"], env=env).stdout.strip()
    big = alice.run(["submit", "-H", "-g", "4", "--", "true"], env=env).stdout.strip()
    name = alice.user.name
    cases = [
        (
            (plain, "Partition=private"),
            1,
            f"labgang update: job {plain}: Partition: user {name!r} may not submit to queue 'private' "
            "(allowed: vision, nlp)\n",
        ),
        (
            (plain, "Queue=nowhere"),
            2,
            f"labgang update: job {plain}: Partition: 'nowhere' is not a queue; allowed: vision, nlp, private\n",
        ),
        (
            (urgent, "Partition=nlp"),
            1,
            f"labgang update: job {urgent}: Partition: priority 50 (job {urgent}'s) is not one queue nlp gives a "
            "non-admin (a number up to its default 0, or its classes normal (0)); lower it first (update "
            "Priority=...) or ask an admin\n",
        ),
        ((big, "Partition=nlp"), 1, f"labgang update: job {big}: Partition: job can never start in queue nlp: "),
    ]
    for args, status, words in cases:
        done = alice.run(["update", *args], env=env)
        assert done.returncode == status, (args, done.stdout, done.stderr)
        assert done.stdout == "" and len(done.stderr.splitlines()) == 1, (args, done.stderr)
        assert done.stderr.startswith(words) if words.endswith(": ") else done.stderr == words, (args, done.stderr)
    for job in (plain, urgent, big):
        view = up.job(job)
        assert view["queue"] == "vision" and "updated" not in [h["event"] for h in view["history"]]
    # root (an admin) may move the urgent job where alice may not
    assert up.cli("update", urgent, "Partition=nlp").returncode == 0
    assert up.job(urgent)["queue"] == "nlp"
    for job in (plain, urgent, big):
        up.cli("cancel", job)


def test_a_running_job_keeps_its_queue(lab, tmp_path) -> None:
    up, (alice, _bob) = lab
    env = {"LABGANG_STATE_DIR": str(up.state_dir)}
    job = alice.run(["submit", "-g", "1", "--", "sleep", "600"], env=env).stdout.strip()
    up.wait_state(job, {"running"})
    done = alice.run(["update", job, "partition=nlp"], env=env)
    assert done.returncode == 1
    assert done.stderr == (
        f"labgang update: job {job} is running: its queue can only be changed while the job is pending\n"
    )
    assert up.job(job)["queue"] == "vision"
    assert up.cli("cancel", job).returncode == 0


def test_update_refusals_name_the_key_typed_not_submits_flag(lab) -> None:
    """A new user's finding: `update Priority=` refusals said `-p/--priority:`, submit's flag."""
    up, (alice, _bob) = lab
    env = {"LABGANG_STATE_DIR": str(up.state_dir)}
    job = alice.run(["submit", "-H", "-g", "1", "--", "true"], env=env).stdout.strip()
    try:
        for args, line in (
            (
                ["Priority=urgent"],
                f"labgang update: job {job}: priority 50 is above job {job}'s 0: only an admin may raise it",
            ),
            (["Dependency=afterok:99999"], f"labgang update: job {job}: Dependency: no job 99999"),
            (["Name="], f"labgang update: job {job}: Name: must not be empty"),
        ):
            done = alice.run(["update", job, *args], env=env)
            assert done.returncode in (1, 2) and done.stderr.startswith(line), (args, done.stderr)
            assert "-p/--priority" not in done.stderr and "-d/--dependency" not in done.stderr, done.stderr
    finally:
        up.cli("cancel", job)


def test_a_priority_lowered_in_the_same_update_lets_the_job_move(lab) -> None:
    """``update J Priority=normal Partition=nlp``: the move is judged with the priority it gives, and
    the class by the queue the job goes to (nlp lists normal, not urgent)."""
    up, (alice, _bob) = lab
    env = {"LABGANG_STATE_DIR": str(up.state_dir)}
    urgent = alice.run(["submit", "-H", "-g", "1", "-p", "urgent", "--", "true"], env=env).stdout.strip()
    try:
        done = alice.run(["update", urgent, "Priority=normal", "Partition=nlp"], env=env)
        assert done.returncode == 0, done.stderr
        view = up.job(urgent)
        assert (view["queue"], view["priority"]) == ("nlp", 0)
    finally:
        up.cli("cancel", urgent)
