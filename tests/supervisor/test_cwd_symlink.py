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


@needs_root
def test_the_shim_enters_cwd_as_the_user(behind_a_link: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    rank_dir = behind_a_link / "rank"
    rank_dir.mkdir(mode=0o700)
    log = behind_a_link / "rank.log"
    cfg = {
        "argv": ["/bin/sh", "-c", "cat secret.txt; echo ran-in=$(pwd)"],
        "env": {"PATH": "/usr/bin:/bin"},
        "cwd": str(behind_a_link / "link"),
        "uid": nobody.pw_uid,
        "gid": nobody.pw_gid,
        "groups": [],
        "drop_privileges": True,
        "log_path": str(log),
        "log_max_bytes": 1 << 20,
        "log_header": None,
    }
    (rank_dir / "launch.bin").write_bytes(marshal.dumps(cfg))
    done = subprocess.run([sys.executable, shim_module.__file__, str(rank_dir)], timeout=60, check=False)
    assert done.returncode == 0
    text = log.read_text()
    assert "the-secret" not in text
    assert "ran-in" not in text  # the command never ran
    assert "[labgang] cannot enter cwd" in text and "Permission denied" in text
    assert json.loads((rank_dir / "exit.json").read_text())["exit_status"] == 126


@needs_root
def test_the_shim_still_enters_a_cwd_the_user_may_enter(behind_a_link: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    (behind_a_link / "secret").chmod(0o755)
    rank_dir = behind_a_link / "rank"
    rank_dir.mkdir(mode=0o700)
    log = behind_a_link / "rank.log"
    cfg = {
        "argv": ["/bin/sh", "-c", "cat secret.txt; id -u"],
        "env": {"PATH": "/usr/bin:/bin"},
        "cwd": str(behind_a_link / "link"),
        "uid": nobody.pw_uid,
        "gid": nobody.pw_gid,
        "groups": [],
        "drop_privileges": True,
        "log_path": str(log),
        "log_max_bytes": 1 << 20,
        "log_header": None,
    }
    (rank_dir / "launch.bin").write_bytes(marshal.dumps(cfg))
    subprocess.run([sys.executable, shim_module.__file__, str(rank_dir)], timeout=60, check=True)
    assert log.read_text().split() == ["the-secret", str(nobody.pw_uid)]
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
