"""``labgang logs`` of another user's job, with real Unix users (``lab_users``, tests/unix_users.py):
root runs ``labgang up``; one user holds a job, the other asks for its output. ``logs`` and
``logs -f`` refuse at once (exit 1, one line naming the owner), before the job has started."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from up_harness import Up, shared_up

pytestmark = pytest.mark.slow

CONFIG = """
admins = ["root"]
default_queue = "vision"

[[queues]]
name = "vision"
nominal = { gpu = 8 }
"""


@pytest.fixture
def lab(lab_users) -> Iterator[tuple[Up, list]]:
    with shared_up("lglogs-", CONFIG) as up:
        yield up, lab_users


def test_logs_follow_of_another_users_held_job_is_refused_at_once(lab) -> None:
    # the new user's bob ran `labgang logs -f 90` on alice's held job: it said "has not started" and
    # waited, and was refused only once alice released the job
    up, (owner, other) = lab
    env = {"LABGANG_STATE_DIR": str(up.state_dir)}
    submitted = owner.run(["submit", "-q", "vision", "-H", "--", "sh", "-c", "echo SECRET"], env=env)
    assert submitted.returncode == 0, submitted.stderr
    job = submitted.stdout.strip()
    refusal = f"job {job} belongs to {owner.user.name}; only its owner or an admin may read its logs"
    for args in (["logs", job], ["logs", "-f", job]):
        done = other.run(args, env=env, timeout=30)  # the old -f waited here until the job started
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert done.stdout == "" and refusal in done.stderr, (args, done.stderr)
        assert "has not started" not in done.stderr, done.stderr
    assert up.job(job)["state"] == "pending"  # nothing changed: still held
    # its owner may read it: told it has not started
    mine = owner.run(["logs", job], env=env, timeout=30)
    assert mine.returncode == 0 and f"job {job} has not started (PENDING: " in mine.stderr, mine.stderr
