"""``labgang history`` without ``-u`` as ``sacct``: root sees every user's jobs, another user only their own,
from the coordinator and from the store file when no coordinator answers; a state filter matching nothing
names the user filter in force. Real Unix users on root's ``labgang up --simulate`` (the ``system`` fixture,
as ``tests/ops/test_report_real_users.py``)."""

from __future__ import annotations

import json
import subprocess
import time

from unix_users import UserShell
from up_harness import Up


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout


def finished(shell: UserShell, job_id: str) -> None:
    deadline = time.monotonic() + 90
    while json.loads(ok(shell.run(["show", "--json", job_id])))["job"]["state"] != "succeeded":
        assert time.monotonic() < deadline, f"job {job_id} did not succeed"
        time.sleep(0.2)


def users_listed(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [row["user"] for row in json.loads(ok(done))["jobs"]]


def test_root_sees_every_users_history_by_default_and_a_user_their_own(system: Up, lab_users: list[UserShell]) -> None:
    alice, bob = lab_users
    first = ok(alice.run(["submit", "--", "true"])).strip()
    second = ok(bob.run(["submit", "--", "true"])).strip()
    finished(alice, first)
    finished(bob, second)
    names = sorted([alice.user.name, bob.user.name])

    def check(source: str) -> None:
        assert sorted(users_listed(system.cli("history", "--json"))) == names, source  # root: every user's
        empty = system.cli("history", "-s", "pending,cancelled")
        assert (empty.returncode, empty.stderr.splitlines()[-1]) == (
            0,
            "labgang history: note: no job of any user matches state pending,cancelled",
        ), source
        mine = system.cli("history", "-u", "root", "-s", "succeeded")
        assert mine.stderr.splitlines()[-1] == "labgang history: note: no job of user root matches state succeeded"

    check("coordinator")
    assert users_listed(bob.run(["history", "--json"])) == [bob.user.name]  # not an admin: their own
    none = bob.run(["history", "-s", "cancelled"])
    assert (none.returncode, none.stderr) == (
        0,
        f"labgang history: note: no job of user {bob.user.name} matches state cancelled (-u all for every user)\n",
    )

    assert system.stop() == 0  # no coordinator answers: root reads the store file itself, with the same default
    check("store")


def test_an_admin_of_the_recorded_config_reads_every_users_jobs_from_a_store_by_default(
    lab_users: list[UserShell],
) -> None:
    """The store fallback's default for a user who is not root: every user's when the config the instance
    last ran with names them in ``admins``, else their own (run as that real user)."""
    from labgang.launcher.config.cluster import parse_config

    alice, bob = lab_users
    config = parse_config({"queues": [{"name": "default"}], "admins": [bob.user.name]})
    meta = json.dumps({"source": None, "recorded_at": 0.0, "config": config.model_dump(mode="json")})
    probe = f"from labgang.launcher.cli.history_store import default_whose; print(default_whose({meta!r}))"
    for shell, expected in ((bob, "None"), (alice, alice.user.name)):
        assert ok(shell.run_argv([str(shell.python), "-c", probe])).strip() == expected, shell.user.name
    assert ok(alice.run_argv([str(alice.python), "-c", probe.replace(repr(meta), "None")])).strip() == alice.user.name


def test_a_user_of_a_stopped_system_instance_started_with_labgang_up_is_told_whom_to_ask(
    system: Up, lab_users: list[UserShell]
) -> None:
    """The store is root's alone, no coordinator answers: the line says whom to ask, and names
    ``systemctl`` only where labgang's units are installed (``labgang up`` installs none)."""
    from labgang.launcher.api.unanswered import installed_units

    if system.proc is not None and system.proc.poll() is None:
        assert system.stop() == 0
    done = lab_users[1].run(["history"])
    assert (done.returncode, done.stdout, len(done.stderr.splitlines())) == (1, "", 1), done.stderr
    head = f"labgang history: this machine's labgang at {system.state_dir / 'labgang.sock'} does not answer; "
    if installed_units():
        assert done.stderr.startswith(head + "ask whoever runs it (as root: `systemctl status"), done.stderr
    else:
        assert done.stderr.startswith(
            head + f"ask whoever runs it (root, whose state directory {system.state_dir} it is; "
            "no labgang systemd unit is installed here); and its store: "
        ), done.stderr
