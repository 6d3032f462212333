"""A state directory this user cannot read (another user's ``labgang up --state-dir`` in a 0700 dir)
is one line naming ``--state-dir``, never a traceback: on the fast path (``python -m labgang.launcher``)
and on click's, for every client command. One the user may list but not enter (0744) gets past that
check and still ends in one line (the connection's "permission denied"), not the ``UnboundLocalError``
``starting_pid`` raised on its unreadable ``up.starting``. Real users: ``lab_users``."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

COMMANDS = (
    ["queue"],
    ["submit", "--", "echo", "hi"],
    ["run", "--", "echo", "hi"],
    ["cancel", "3"],
    ["show", "3"],
    ["logs", "3"],
    ["history"],
)
CLICK = "from labgang.launcher.cli.main import main; main()"


@pytest.fixture
def root_dir() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="lgunread-", dir="/tmp"))  # root's, mode 0700
    base.chmod(0o700)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize("args", COMMANDS, ids=lambda args: args[0])
def test_another_users_state_dir_is_one_line(lab_users, root_dir: Path, args: list[str]) -> None:
    bob = lab_users[0]
    fast = bob.run(args, env={"LABGANG_STATE_DIR": str(root_dir)}, timeout=30)
    click = bob.run_argv([str(bob.python), "-c", CLICK, args[0], "--state-dir", str(root_dir), *args[1:]], timeout=30)
    for done in (fast, click):
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert done.stdout == ""
        assert done.stderr.splitlines() == [
            f"labgang {args[0]}: --state-dir: directory '{root_dir}' is not readable"
        ], done.stderr


def test_a_dir_that_cannot_be_entered_is_one_line(lab_users, root_dir: Path) -> None:
    root_dir.chmod(0o744)  # listable, not searchable: up.starting cannot be opened
    done = lab_users[0].run(["queue"], env={"LABGANG_STATE_DIR": str(root_dir)}, timeout=30)
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and "permission denied" in lines[0], done.stderr
    assert "Traceback" not in done.stderr
