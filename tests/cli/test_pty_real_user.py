"""`labgang run --pty -- sh` typed by an ordinary Unix user (``lab_users``, tests/unix_users.py) against
root's real `labgang up --simulate`: the shell runs as that user, on a terminal of its own that the
user owns, with the window size of the user's terminal; Ctrl-C reaches its foreground job, and its
exit status is run's. Another user cannot type into it."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from pty_terminal import Terminal
from up_harness import Up

pytestmark = pytest.mark.slow


@pytest.fixture
def lab(lab_users) -> Iterator[tuple[Up, list]]:
    base = Path(tempfile.mkdtemp(prefix="lgpty-", dir="/tmp"))
    base.chmod(0o755)  # the socket is 0666; the users must reach it
    state = base / "state"
    state.mkdir(mode=0o755)
    up = Up(state)
    try:
        yield up, lab_users
    finally:
        up.stop()
        shutil.rmtree(base, ignore_errors=True)


def user_terminal(up: Up, shell, *args: str, rows: int = 27, cols: int = 93) -> Terminal:
    """`labgang run --pty ARGS` started as ``shell``'s user on a pseudo-terminal of ROWS x COLS."""
    return Terminal(
        up,
        *args,
        rows=rows,
        cols=cols,
        python=shell.python,
        cwd=shell.user.home,
        env=shell.env({"LABGANG_STATE_DIR": str(up.state_dir)}),
        user=shell.user.uid,
        group=shell.user.gid,
        extra_groups=os.getgrouplist(shell.user.name, shell.user.gid),
    )


def test_an_ordinary_users_interactive_shell_runs_as_them_on_their_own_terminal(lab) -> None:
    up, (lab1, lab2) = lab
    term = user_terminal(up, lab1, "--", "sh")
    term.type('echo "who=$(id -un) uid=$(id -u)"; stty size; ls -l "$(tty)"; echo "job=$LABGANG_JOB_ID end$((6*7))"\n')
    out = term.read_until(b" end42").decode(errors="replace")  # the output, not the echo of the typed line
    assert f"who={lab1.user.name} uid={lab1.user.uid}" in out  # the rank is the user, not root
    assert "27 93" in out  # the size of the user's terminal
    pts_lines = [line for line in out.splitlines() if "/dev/pts/" in line and line.startswith("c")]
    assert pts_lines and pts_lines[0].split()[2] == lab1.user.name, out  # the rank's terminal is theirs
    job_id = out.split("job=")[-1].split()[0]
    # another user may not type into it (nor may they see it as theirs)
    other = lab2.run(["show", job_id], env={"LABGANG_STATE_DIR": str(up.state_dir)})
    assert other.returncode == 0  # reading is allowed; typing is not:
    probe = lab2.run_argv(
        [
            str(lab2.python),
            "-c",
            "import sys; from labgang.launcher.api.client import Client, ApiError\n"
            "c = Client.for_state_dir(sys.argv[1])\n"
            "try:\n    c.pty_input(sys.argv[2], b'echo intruder\\n')\nexcept ApiError as e:\n    print(e.status)\n",
            str(up.state_dir),
            job_id,
        ]
    )
    assert probe.stdout.strip() == "403", (probe.stdout, probe.stderr)
    term.type("sleep 30; echo not-interrupted\n")
    typed = time.monotonic()
    term.read_until(b"sleep 30; echo not-interrupted\r")
    time.sleep(0.5)  # the shell has started the sleep (its echo is back) before Ctrl-C is typed
    term.type("\x03")
    term.type("echo after-ctrl-c; exit 4\n")
    term.read_until(b"after-ctrl-c")
    assert term.finish() == 4
    assert time.monotonic() - typed < 25
    assert b"intruder" not in term.seen
    assert up.job(job_id)["user"] == lab1.user.name
