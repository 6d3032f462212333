"""A symlinked working directory cannot lead a rank where its user may not go: the shim
changes directory only after dropping to the user, and the supervisor refuses the real path
up front. Scenario: ``secret/`` (0700, root) holds ``proj/`` (0755) with ``secret.txt``
(0644); ``link -> secret/proj``; the rank runs as ``nobody`` with ``cwd = link``."""

from __future__ import annotations

import json
import marshal
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from labgang.agent.supervisor import LaunchRefused, Supervisor
from labgang.agent.supervisor import shim as shim_module

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="running a rank as another user needs root")


@pytest.fixture
def behind_a_link():
    base = Path(tempfile.mkdtemp(prefix="lgcwd-", dir="/tmp"))
    base.chmod(0o755)
    secret = base / "secret"
    (secret / "proj").mkdir(parents=True)
    secret.chmod(0o700)
    (secret / "proj").chmod(0o755)
    (secret / "proj" / "secret.txt").write_text("the-secret\n")
    (secret / "proj" / "secret.txt").chmod(0o644)
    (base / "link").symlink_to(secret / "proj")
    yield base
    shutil.rmtree(base, ignore_errors=True)


def run_shim_as_nobody(base: Path, command: str, *, check: bool) -> tuple[Path, str, int]:
    """Run the small parent on a rank folder under ``base`` as user nobody, in ``base/link``,
    with ``sh -c command``; (rank folder, the rank's log text, the shim's exit status)."""
    nobody = pwd.getpwnam("nobody")
    rank_dir = base / "rank"
    rank_dir.mkdir(mode=0o700)
    log = base / "rank.log"
    cfg = {
        "argv": ["/bin/sh", "-c", command],
        "env": {"PATH": "/usr/bin:/bin"},
        "cwd": str(base / "link"),
        "uid": nobody.pw_uid,
        "gid": nobody.pw_gid,
        "groups": [],
        "drop_privileges": True,
        "log_path": str(log),
        "log_max_bytes": 1 << 20,
        "log_header": None,
    }
    (rank_dir / "launch.bin").write_bytes(marshal.dumps(cfg))
    done = subprocess.run([sys.executable, shim_module.__file__, str(rank_dir)], timeout=60, check=check)
    return rank_dir, log.read_text(), done.returncode


@needs_root
def test_the_shim_enters_cwd_as_the_user(behind_a_link: Path) -> None:
    rank_dir, text, code = run_shim_as_nobody(behind_a_link, "cat secret.txt; echo ran-in=$(pwd)", check=False)
    assert code == 0
    assert "the-secret" not in text
    assert "ran-in" not in text  # the command never ran
    assert "[labgang] cannot enter cwd" in text and "Permission denied" in text
    assert json.loads((rank_dir / "exit.json").read_text())["exit_status"] == 126


@needs_root
def test_the_shim_still_enters_a_cwd_the_user_may_enter(behind_a_link: Path) -> None:
    (behind_a_link / "secret").chmod(0o755)
    rank_dir, text, _ = run_shim_as_nobody(behind_a_link, "cat secret.txt; id -u", check=True)
    assert text.split() == ["the-secret", str(pwd.getpwnam("nobody").pw_uid)]
    assert json.loads((rank_dir / "exit.json").read_text())["exit_status"] == 0


@needs_root
def test_the_supervisor_refuses_a_link_into_a_directory_the_user_may_not_enter(
    behind_a_link: Path, state_dir, make_spec, cleanup
) -> None:
    nobody = pwd.getpwnam("nobody")
    sup = Supervisor(state_dir)
    cleanup.append(sup)
    with pytest.raises(LaunchRefused, match=r"may not enter .*/secret on the way to"):
        sup.launch(make_spec(["cat", "secret.txt"], uid=nobody.pw_uid, cwd=str(behind_a_link / "link")))
    assert sup.ranks() == []
