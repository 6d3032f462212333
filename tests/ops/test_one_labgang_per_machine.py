"""One labgang per machine, found by everyone (issue 24): with root's ``labgang up`` serving a simulated
8-GPU box, two real Unix users with no ``LABGANG_*`` variable and no flag reach it with submit, queue,
show and top; a user's own ``labgang up`` is refused while it serves (one line naming it), but still
runs on a simulated machine or an explicit ``--state-dir``; and when the system instance is gone, no
error tells a user to start a scheduler of their own over its GPUs.

The system instance lives in a directory of the test's (``point_system_instance`` points the users'
interpreter at it, as ``/etc/labgang/system.toml`` would), never in the machine's ``/var/lib/labgang``.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from unix_users import UserShell, point_system_instance
from up_harness import H100X8, Up

STOP_S = 60.0


def everyones_jobs(up: Up) -> dict[str, dict]:
    """Every user's jobs, as root sees them with the instance's state dir: ``queue --all --json`` by id."""
    return {job["id"]: job for job in json.loads(ok(up.cli("queue", "--all", "--json")))["jobs"]}


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr)
    return done.stdout


def test_two_users_with_no_settings_submit_list_and_watch_on_roots_instance(
    system: Up, lab_users: list[UserShell]
) -> None:
    jobs = {}
    for shell in lab_users:
        assert not any(k.startswith("LABGANG_") for k in shell.env()), shell.env()
        submitted = shell.run(["submit", "-g", "1", "--name", f"by-{shell.user.name}", "--", "sleep", "60"])
        jobs[shell.user.name] = ok(submitted).strip()
    for shell in lab_users:
        job_id = jobs[shell.user.name]
        deadline = time.monotonic() + 60
        while (shown := json.loads(ok(shell.run(["show", "--json", job_id]))))["job"]["state"] != "running":
            assert time.monotonic() < deadline, shown
            time.sleep(0.2)
        assert shown["job"]["user"] == shell.user.name
        listed = ok(shell.run(["queue"]))
        assert f"by-{shell.user.name}" in listed and shell.user.name in listed, listed
        everyone = ok(shell.run(["queue", "--all"]))
        assert all(f"by-{s.user.name}" in everyone for s in lab_users), everyone
        watched = ok(shell.run(["top", "--once"]))
        assert f"by-{shell.user.name}" in watched or job_id in watched, watched
    # Root's own view (its state dir given) holds the same two jobs, owned by the two users.
    seen = {j["user"] for j in everyones_jobs(system).values()}
    assert {s.user.name for s in lab_users} <= seen, seen
    for shell in lab_users:
        ok(shell.run(["cancel", jobs[shell.user.name]]))
    assert not (lab_users[0].user.home / ".local" / "state" / "labgang").exists()


def test_a_users_labgang_up_is_refused_in_one_line_while_the_system_instance_serves(
    system: Up, lab_users: list[UserShell]
) -> None:
    shell = lab_users[1]
    done = shell.run(["up"])
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert str(system.state_dir / "labgang.sock") in lines[0] and "--simulate" in lines[0], lines
    assert not (shell.user.home / ".local" / "state" / "labgang").exists()  # nothing created


def wait_for_banner(proc: subprocess.Popen[str]) -> list[str]:
    """The lines ``labgang up`` printed up to its ``try:`` line; fails if it exits first."""
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("try: "):
            return lines
    raise AssertionError(f"labgang up ended (status {proc.wait()}) before serving: {lines}")


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_a_users_simulated_labgang_up_still_runs_and_says_how_to_reach_it(
    system: Up, lab_users: list[UserShell]
) -> None:
    shell = lab_users[0]
    proc = shell.start(["up", "--simulate", str(H100X8)])
    try:
        banner = wait_for_banner(proc)
        own = shell.user.home / ".local" / "state" / "labgang"
        assert f"  in other shells: export LABGANG_STATE_DIR={own}" in banner, banner
        ok(shell.run(["queues"], env={"LABGANG_STATE_DIR": str(own)}))
        # Without the variable the user's commands still reach the machine's instance.
        probe = ok(shell.run(["submit", "--name", "still-system", "--", "true"]))
        assert system.job(probe.strip())["user"] == shell.user.name, probe
    finally:
        stop(proc)
    assert proc.returncode == 0


def test_a_users_up_beside_the_system_instance_says_how_to_reach_it_in_its_try_line(
    system: Up, lab_users: list[UserShell]
) -> None:
    # the new user copied the banner's `try:` line and reached root's instance, not her own
    shell = lab_users[1]
    proc = shell.start(["up", "--simulate", str(H100X8)])
    try:
        *_, tried = wait_for_banner(proc)
        own = shell.user.home / ".local" / "state" / "labgang"
        prefix = f"try: LABGANG_STATE_DIR={own} labgang run "
        assert tried.startswith(prefix), tried
        # the line's own setting reaches her instance: a job submitted with it is on hers, not root's
        env = {"LABGANG_STATE_DIR": str(own)}
        mine = ok(shell.run(["submit", "--name", "on-mine", "--", "true"], env=env)).strip()
        assert json.loads(ok(shell.run(["show", "--json", mine], env=env)))["job"]["name"] == "on-mine"
        assert not any(j.get("name") == "on-mine" for j in everyones_jobs(system).values())
    finally:
        stop(proc)
    assert proc.returncode == 0


def test_an_explicit_state_dir_is_not_refused(system: Up, lab_users: list[UserShell]) -> None:
    shell = lab_users[1]
    own = shell.user.home / "lab-own"
    proc = shell.start(["up", "--state-dir", str(own)])
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()
    finally:
        stop(proc)
    # Past the refusal: it serves (a machine with a driver) or says the driver is missing (CI).
    assert "served by its labgang" not in first, first
    assert first.startswith("labgang up: coordinator and agent") or "NVML" in first or "nvml" in first, first


def stale_socket(directory: Path) -> None:
    """A socket file nobody listens on: what a killed system instance leaves."""
    directory.mkdir(mode=0o755)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(directory / "labgang.sock"))
    listener.close()
    (directory / "labgang.sock").chmod(0o666)  # as the coordinator leaves it: anyone may connect


def test_when_the_system_instance_is_gone_no_error_advises_a_scheduler_of_ones_own(
    system: Up, lab_users: list[UserShell]
) -> None:
    shell = lab_users[0]
    gone = system.state_dir.parent / "gone"
    stale_socket(gone)
    point_system_instance(shell.python, gone)
    try:
        done = shell.run(["queue"])
    finally:
        point_system_instance(shell.python, system.state_dir)
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert str(gone / "labgang.sock") in done.stderr and "does not answer" in done.stderr, done.stderr
    assert "labgang up" not in done.stderr, done.stderr
