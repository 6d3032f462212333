"""``-D/--chdir`` into a directory the submitting user may not enter, with real Unix users
(``lab_users``, tests/unix_users.py): refused at submission in one line (exit 2, nothing stored),
instead of a job that fails at launch. Root's own submission into it is taken."""

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
    with shared_up("lgchdir-", CONFIG) as up:
        yield up, lab_users


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
