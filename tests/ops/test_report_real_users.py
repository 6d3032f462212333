"""Accounting with real Unix users (issue 24): on root's ``labgang up`` over a simulated 8-GPU box, one
user's attempt that root's higher-priority job preempts and another user's attempt that its owner
cancels are both counted, per user, in ``labgang report`` as either user reads it, and
``history --attempts`` shows the preempted attempt to its owner.

The users reach root's instance with no variable set (``point_system_instance``, as
``tests/ops/test_one_labgang_per_machine.py``)."""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import time

from unix_users import UserShell
from up_harness import Up


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout


def wait_until(what: str, check, timeout: float = 90.0):
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)
    return got


def state_of(shell: UserShell, job_id: str) -> dict:
    return json.loads(ok(shell.run(["show", "--json", job_id])))["job"]


def test_a_preempted_and_a_cancelled_attempt_of_two_users_both_count_in_report(
    system: Up, lab_users: list[UserShell]
) -> None:
    preempted_user, cancelling_user = lab_users
    kept = ok(cancelling_user.run(["submit", "-g", "2", "--grace", "1s", "--", "sleep", "600"])).strip()
    wait_until("the second user's job running", lambda: state_of(cancelling_user, kept)["state"] == "running")
    victim = ok(preempted_user.run(["submit", "-g", "6", "--grace", "1s", "--", "sleep", "600"])).strip()
    wait_until("the first user's job running", lambda: state_of(preempted_user, victim)["state"] == "running")
    # root (an admin) may give a raw priority: its 6-GPU job preempts the most recently admitted one
    preemptor = system.submit("-p", "100", "-g", "6", "--grace", "1s", "--", "sleep", "600")
    wait_until(
        "the first user's job preempted and back in its queue",
        lambda: (j := state_of(preempted_user, victim))["state"] == "pending" and j["restart_count"] == 1,
    )
    system.wait_state(preemptor, {"running"})
    ok(cancelling_user.run(["cancel", kept]))
    wait_until("the cancel to finish", lambda: state_of(cancelling_user, kept)["state"] == "cancelled")

    for reader in lab_users:  # every user may read the report, and sees both users' attempts
        report = json.loads(ok(reader.run(["report", "--by", "user", "--json"])))
        rows = {row["user"]: row for row in report["rows"]}
        assert rows[preempted_user.user.name]["gpu_hours"] > 0, rows
        assert rows[cancelling_user.user.name]["gpu_hours"] > 0, rows
        assert rows[preempted_user.user.name]["attempts"] == 1 and rows[cancelling_user.user.name]["attempts"] == 1
    history = json.loads(ok(preempted_user.run(["history", "--attempts", "--json"])))
    [row] = [r for r in history["jobs"] if r["id"] == victim]
    assert [a["code"] for a in row["attempt_records"]] == ["PR"]
    assert row["attempt_records"][0]["gpus"] == 6 and row["gpu_hours"] > 0
    for job_id in (victim, preemptor):
        system.cli("cancel", job_id)


def test_a_user_who_cannot_read_the_store_is_told_whom_to_ask_for_an_export(
    system: Up, lab_users: list[UserShell]
) -> None:
    store = system.state_dir / "labgang.db"
    assert store.exists() and not store.stat().st_mode & 0o004  # the system instance's store: root's alone
    shell = lab_users[0]
    out = tempfile.mkdtemp(prefix="lgexp")
    os.chmod(out, 0o777)  # noqa: S103 - the user must be able to write there (the export must still not)
    for args in (["history", "--export", f"{out}/h.toml", "--since", "1h"], ["plan", "replay", "--since", "1h"]):
        done = shell.run(args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and "readable only by whoever runs that labgang" in lines[0], lines
        assert "labgang history --export FILE" in lines[0] and "unable to open" not in lines[0], lines
    assert not os.path.exists(f"{out}/h.toml")
