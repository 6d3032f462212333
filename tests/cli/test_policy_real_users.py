"""Who may use what, with real Unix users (``lab_users``, tests/unix_users.py): root runs
``labgang up`` on a simulated 8-GPU box with a two-team config; two ordinary users submit through
the CLI. Neither may use a priority their queue does not allow (exit 1, one line, nothing stored),
and a per-user GPU limit holds with an honest reason while the other user's job starts."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from up_harness import Up, shared_up

CONFIG = """
admins = ["root"]
default_queue = "vision"

[priority_classes]
low = -10
normal = 0
high = 100
serving = 1000

[[cohorts]]
name = "lab"

[[queues]]
name = "vision"
cohort = "lab"
nominal = { gpu = 4 }
priority_classes = ["low", "normal", "high"]
default_priority_class = "normal"
max_gpus_per_user = 2
max_submitted_jobs_per_user = 3

[[queues]]
name = "nlp"
cohort = "lab"
nominal = { gpu = 4 }
priority_classes = ["low", "normal"]
"""


@pytest.fixture
def lab(lab_users) -> Iterator[tuple[Up, list]]:
    with shared_up("lgpolicy-", CONFIG) as up:
        yield up, lab_users


def as_user(up: Up, shell, *args: str):
    return shell.run(list(args), env={"LABGANG_STATE_DIR": str(up.state_dir)})


def test_a_user_cannot_raise_their_priority(lab) -> None:
    up, (lab1, lab2) = lab
    refused = [
        (lab1, ["-q", "vision", "-p", "2000000"], "a number (-p 2000000) above the queue's default (0) is for admins"),
        (lab2, ["-q", "nlp", "-p", "high"], "priority: class 'high' is not allowed in queue nlp"),
        (lab2, ["-q", "vision", "-p", "serving"], "priority: class 'serving' is not allowed in queue vision"),
    ]
    for shell, args, message in refused:
        done = as_user(up, shell, "submit", *args, "--", "sleep", "1")
        assert done.returncode == 1, (done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and message in lines[0], done.stderr
    assert up.jobs() == {}  # nothing was stored
    ok = as_user(up, lab1, "submit", "-q", "vision", "-p", "high", "--", "sleep", "300")
    assert ok.returncode == 0, ok.stderr
    assert up.job(ok.stdout.strip())["priority"] == 100
    root = up.submit("-q", "nlp", "-p", "2000000", "--", "sleep", "300")  # root is an admin
    assert up.job(root)["priority"] == 2000000


def test_a_per_user_gpu_limit_holds_with_an_honest_reason(lab) -> None:
    up, (lab1, lab2) = lab
    first = as_user(up, lab1, "submit", "-q", "vision", "-g", "2", "--", "sleep", "300")
    assert first.returncode == 0, first.stderr
    up.wait_state(first.stdout.strip(), {"running"})
    second = as_user(up, lab1, "submit", "-q", "vision", "-g", "1", "--", "sleep", "300")
    assert second.returncode == 0, second.stderr
    other = as_user(up, lab2, "submit", "-q", "vision", "-g", "2", "--", "sleep", "300")
    assert other.returncode == 0, other.stderr
    up.wait_state(other.stdout.strip(), {"running"})  # lab2 is not held by lab1's limit
    held = up.job(second.stdout.strip())
    assert held["state"] == "pending"
    assert held["reason"]["code"] == "user_limit"
    assert held["reason"]["message"] == (
        f"user {lab1.user.name} runs 2 of 2 gpu allowed in queue vision (max_gpus_per_user); job needs 1"
    )
    seen = as_user(up, lab1, "queues", "--json")
    assert seen.returncode == 0, seen.stderr
    vision = next(q for q in json.loads(seen.stdout)["queues"] if q["name"] == "vision")
    assert vision["user_limits"] == {"max_gpus_per_user": 2, "max_submitted_jobs_per_user": 3}
    assert vision["at_limits"] == {"max_gpus_per_user": sorted([lab1.user.name, lab2.user.name])}
    told = as_user(up, lab2, "explain", second.stdout.strip())
    assert told.returncode == 0, told.stderr
    assert f"user {lab1.user.name} runs 2 of 2 gpu allowed in queue vision" in told.stdout
    third = as_user(up, lab1, "submit", "--", "sleep", "300")  # no -q: the default queue, vision
    assert third.returncode == 0, third.stderr
    fourth = as_user(up, lab1, "submit", "--", "sleep", "300")
    assert fourth.returncode == 1, (fourth.stdout, fourth.stderr)
    assert fourth.stderr.strip() == (
        f"labgang submit: user {lab1.user.name} has 3 of 3 unfinished jobs allowed in queue vision "
        "(max_submitted_jobs_per_user); refused 1 more job: cancel some or wait for them to end"
    )


def test_cancel_u_all_is_every_users_for_an_admin_and_a_users_own(lab) -> None:
    """``cancel -u all`` names every user (as ``history -u all``), not a user called "all": root (an
    admin) cancels both users' matching jobs; a user's own are cancelled and each other user's job
    is refused in its own line, exit 1, and stays."""
    up, (lab1, lab2) = lab
    jobs = {}
    for shell in (lab1, lab2):
        for queue in ("vision", "nlp"):
            done = as_user(up, shell, "submit", "-q", queue, "--", "sleep", "300")
            assert done.returncode == 0, done.stderr
            jobs[(shell.user.name, queue)] = done.stdout.strip()
    # `queue -u all` is every user's too (the fast path's table, JSON, and the squeue view's -l)
    listed = as_user(up, lab1, "queue", "-u", "all", "--json")
    assert listed.returncode == 0, listed.stderr
    assert {j["id"] for j in json.loads(listed.stdout)["jobs"]} >= set(jobs.values()), listed.stdout
    for view in (("queue", "-u", "all"), ("queue", "-u", f"all,{lab1.user.name}", "-l")):
        shown = as_user(up, lab2, *view)
        assert shown.returncode == 0 and not shown.stderr, (view, shown.stderr)
        assert all(job in shown.stdout.split() for job in jobs.values()), (view, shown.stdout)
    by_root = up.cli("cancel", "-u", "all", "-q", "nlp")
    assert by_root.returncode == 0, by_root.stderr
    nlp = sorted(jobs[(s.user.name, "nlp")] for s in (lab1, lab2))
    assert [line.rsplit(": ", 1)[0] for line in by_root.stdout.splitlines()] == [f"job {j}" for j in nlp]
    assert all(line.endswith((": cancelled", ": terminating")) for line in by_root.stdout.splitlines())
    for job in nlp:  # a terminating nlp job is still lab1's unfinished job: wait, or lab1 names it again
        up.wait_state(job, {"cancelled"})
    by_lab1 = as_user(up, lab1, "cancel", "-u", "all")
    assert by_lab1.returncode == 1, (by_lab1.stdout, by_lab1.stderr)
    [mine] = by_lab1.stdout.splitlines()
    assert mine.startswith(f"job {jobs[(lab1.user.name, 'vision')]}: "), mine
    [refused] = by_lab1.stderr.strip().splitlines()
    assert jobs[(lab2.user.name, "vision")] in refused, refused
    kept = jobs.pop((lab2.user.name, "vision"))
    assert up.job(kept)["state"] in ("pending", "running")  # another user's job is not lab1's to cancel
    for job in jobs.values():
        up.wait_state(job, {"cancelled"})
