"""What a user may not do is refused at once, with real Unix users (``lab_users``,
tests/unix_users.py) and root's ``labgang up``: ``labgang logs`` of another user's job (one holds
a job, the other asks for its output: ``logs`` and ``logs -f`` refuse at once, exit 1, one line
naming the owner, before the job has started), and ``-D/--chdir`` into a directory the submitter
may not enter (refused at submission in one line, exit 2, nothing stored, instead of a job that
fails at launch; root's own submission into it is taken)."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

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
    with shared_up("lgrefuse-", CONFIG) as up:
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


def test_a_directory_the_user_may_not_enter_is_refused_at_submission(lab) -> None:
    up, (alice, _bob) = lab
    env = {"LABGANG_STATE_DIR": str(up.state_dir)}
    with tempfile.TemporaryDirectory(prefix="lgprivate") as private:
        Path(private).chmod(0o700)  # root's: alice may see it exists, not enter it
        for command in ("submit", "run"):
            out = alice.run([command, "-D", private, "--", "true"], env=env, timeout=30)
            assert out.returncode == 2, (command, out.stdout, out.stderr)
            assert out.stderr.strip() == (
                f"labgang {command}: -D/--chdir: {private!r}: permission denied ({private}): you may not enter "
                "it; allowed: a directory you may enter"
            ), out.stderr
        listing = up.cli("queue", "--all", "--json")
        assert listing.returncode == 0 and json.loads(listing.stdout)["jobs"] == []  # nothing stored
        mine = up.cli("submit", "-D", private, "--", "true")
        assert mine.returncode == 0, mine.stderr


def test_only_an_admin_may_drain_or_resume_a_node(lab) -> None:
    """``labgang drain`` by a lab member who is not in ``admins``: refused in one line, exit 1, and
    the node stays offered; root (an admin) drains it, and the member may not resume it either."""
    up, (alice, _bob) = lab
    env = {"LABGANG_STATE_DIR": str(up.state_dir)}
    node = json.loads(up.cli("nodes", "--json").stdout)["nodes"][0]["name"]
    done = alice.run(["drain", node, "--reason", "mine now"], env=env)
    assert done.returncode == 1, done.stderr
    name = alice.user.name
    assert (
        done.stderr
        == f"labgang drain: node {node}: only an admin (cluster.toml admins) may drain a node; {name} is not one\n"
    )
    assert json.loads(up.cli("nodes", "--json").stdout)["nodes"][0]["drain"] is None
    assert up.cli("drain", node, "--reason", "maintenance").returncode == 0
    try:
        done = alice.run(["resume", node], env=env)
        assert done.returncode == 1 and "only an admin (cluster.toml admins) may resume a node" in done.stderr
        assert json.loads(up.cli("nodes", "--json").stdout)["nodes"][0]["drain"]["by"] == "root"
    finally:
        assert up.cli("resume", node).returncode == 0  # the shared instance's other tests need the node
