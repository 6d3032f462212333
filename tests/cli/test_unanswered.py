"""When no coordinator answers, the advice is only what is true here (launcher/api/unanswered.py):
``systemctl`` only when labgang's units are installed, ``start one with `labgang up``` only in the
caller's own state directory, and ``history --json``'s refusal is a JSON error object on stdout.
Real processes; a real second Unix user (``lab_users``) where whose directory it is matters."""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from labgang.launcher.api.unanswered import unanswered_message


def units_in(folder: Path, *names: str) -> tuple[str, ...]:
    for name in names:
        (folder / f"{name}.service").write_text("[Service]\n")
    return (str(folder),)


def test_the_system_instance_owner_is_told_systemctl_only_where_the_units_are_installed(tmp_path: Path) -> None:
    sock = str(tmp_path / "labgang.sock")  # the caller's own directory, as root's /var/lib/labgang is root's
    none = tmp_path / "none"
    none.mkdir()
    assert unanswered_message(sock, system=True, unit_dirs=(str(none),)) == (
        f"no labgang coordinator at {sock}; start this machine's with `labgang up`"
    )
    units = tmp_path / "units"
    units.mkdir()
    assert unanswered_message(sock, system=True, unit_dirs=units_in(units, "labgang-coordinator", "labgang-agent")) == (
        f"no labgang coordinator at {sock}; start this machine's with `labgang up` or "
        "`systemctl start labgang-coordinator` (on a lab node the agent serves this socket: "
        "see `systemctl status labgang-agent`)"
    )


def test_ones_own_private_state_directory_mentions_systemctl_only_where_the_agent_unit_is_installed(
    tmp_path: Path,
) -> None:
    sock = str(tmp_path / "labgang.sock")  # a `labgang up` of one's own: not the system instance
    none = tmp_path / "none"
    none.mkdir()
    assert unanswered_message(sock, system=False, unit_dirs=(str(none),)) == (
        f"no labgang coordinator at {sock}; start one with `labgang up`"
    )
    units = tmp_path / "units"
    units.mkdir()
    assert unanswered_message(sock, system=False, unit_dirs=units_in(units, "labgang-agent")) == (
        f"no labgang coordinator at {sock}; start one with `labgang up` (on a lab node the agent serves "
        "this socket: see `systemctl status labgang-agent`)"
    )


def test_another_users_state_directory_names_its_owner_instead_of_start_one_and_json_gets_json(lab_users) -> None:
    """bob with LABGANG_STATE_DIR set to root's directory of a stopped instance (its store root's alone):
    he cannot start labgang there, so the line names root; ``--json`` prints the error object."""
    (other, _) = lab_users
    with tempfile.TemporaryDirectory(prefix="lgun", dir="/tmp") as d:
        Path(d).chmod(0o755)
        store = Path(d) / "labgang.db"
        store.write_bytes(b"")
        store.chmod(0o600)
        expected = (
            f"no labgang coordinator at {d}/labgang.sock; its state directory {d} belongs to root: ask them to "
            f"start it (`labgang up`); and its store: the labgang store {store} is readable only by whoever runs "
            "that labgang (file mode 600, owner root)"
        )
        for args in (["history"], ["history", "-s", "failed"]):
            out = other.run(args, env={"LABGANG_STATE_DIR": d})
            assert (out.returncode, out.stdout, out.stderr) == (1, "", f"labgang history: {expected}\n"), args
        out = other.run(["history", "--json"], env={"LABGANG_STATE_DIR": d})
        assert (out.returncode, out.stderr) == (1, f"labgang history: {expected}\n")
        assert json.loads(out.stdout) == {"error": {"message": expected, "field": None, "allowed": None}}


def test_a_user_of_a_system_instance_started_with_labgang_up_is_not_told_to_run_systemctl(
    lab_users, tmp_path: Path
) -> None:
    """As a real second user, for a system socket in root's directory: with no unit installed the line
    names root as the one to ask and no systemctl; with the units installed, ``systemctl status``."""
    (other, _) = lab_users
    system = Path(tempfile.mkdtemp(prefix="lgsy", dir="/tmp"))
    try:
        system.chmod(0o755)
        units = system / "units"
        units.mkdir()
        units.chmod(0o755)
        probe = (
            "from labgang.launcher.api.unanswered import unanswered_message as m; "
            f"print(m({str(system / 'labgang.sock')!r}, system=True, unit_dirs=({str(units)!r},)))"
        )

        def said() -> str:
            done = other.run_argv([str(other.python), "-c", probe])
            assert done.returncode == 0, done.stderr
            return done.stdout.strip()

        head = f"this machine's labgang at {system / 'labgang.sock'} does not answer; ask whoever runs it"
        root_owns = f"(root, whose state directory {system} it is; no labgang systemd unit is installed here)"
        assert said() == f"{head} {root_owns}"
        units_in(units, "labgang-coordinator", "labgang-agent")
        assert said() == f"{head} (as root: `systemctl status labgang-coordinator labgang-agent`)"
    finally:
        subprocess.run(["rm", "-rf", str(system)], check=False)
