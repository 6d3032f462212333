"""``--output``/``--error`` files (Slurm's sbatch -o/-e): the rank's small parent writes them as the
rank's user, besides the log ``labgang logs`` reads (agent/supervisor/shim.py)."""

from __future__ import annotations

import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest
from labgang.agent.supervisor import RankState, Supervisor

SCRIPT = "echo to-stdout; echo to-stderr >&2; echo more-stdout"


def _done(sup: Supervisor, job_id: str) -> bool:
    return sup.status(job_id, 0).state is RankState.GONE


def test_stdout_and_stderr_go_to_their_files_and_both_to_the_log(sup, make_spec, h, state_dir):
    out_dir = Path(tempfile.mkdtemp(prefix="lgout-", dir="/tmp"))
    try:
        out, err = out_dir / "o.txt", out_dir / "e.txt"
        out.write_text("stale content from an earlier run\n")  # truncated, as sbatch does
        spec = make_spec(["sh", "-c", SCRIPT], output_path=str(out), error_path=str(err))
        sup.launch(spec)
        h.run_until(sup, lambda: _done(sup, "job1"))
        assert out.read_text() == "to-stdout\nmore-stdout\n"
        assert err.read_text() == "to-stderr\n"
        log = sup.log_path("job1", 0).read_text()
        assert "to-stdout" in log and "to-stderr" in log and "more-stdout" in log
        assert stat.S_IMODE(out.stat().st_mode) == 0o644
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


def test_without_an_error_file_stderr_goes_to_the_output_file(sup, make_spec, h):
    out_dir = Path(tempfile.mkdtemp(prefix="lgout-", dir="/tmp"))
    try:
        out = out_dir / "both.txt"
        sup.launch(make_spec(["sh", "-c", SCRIPT], output_path=str(out)))
        h.run_until(sup, lambda: _done(sup, "job1"))
        assert sorted(out.read_text().splitlines()) == ["more-stdout", "to-stderr", "to-stdout"]
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)


needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("useradd") is None, reason="creating a throwaway user needs root and useradd"
)


@pytest.fixture(scope="module")
def account():
    """A throwaway unprivileged user, removed after the module."""
    name = f"lgto{uuid.uuid4().hex[:8]}"
    subprocess.run(["useradd", "-M", "-s", "/bin/sh", name], check=True)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], check=False, capture_output=True)


@needs_root
def test_files_are_written_as_the_user_and_a_place_the_user_may_not_write_is_refused(
    state_dir, make_spec, cleanup, h, account
):
    sup = Supervisor(state_dir)  # a root agent running a user's rank: privileges are dropped
    cleanup.append(sup)
    base = Path(tempfile.mkdtemp(prefix="lgout-", dir="/tmp"))
    try:
        os.chmod(base, 0o755)  # noqa: S103 - the user must traverse it
        mine = base / "mine"
        mine.mkdir()
        os.chown(mine, account.pw_uid, account.pw_gid)
        roots = base / "roots"  # 0755, root's: the user may not create files here
        roots.mkdir()
        os.chmod(roots, 0o755)  # noqa: S103
        ok = mine / "out.txt"
        sup.launch(make_spec(["sh", "-c", SCRIPT], job_id="joba", uid=account.pw_uid, output_path=str(ok)))
        denied = roots / "out.txt"
        sup.launch(
            make_spec(["sh", "-c", "echo still-runs"], job_id="jobb", uid=account.pw_uid, output_path=str(denied))
        )
        h.run_until(sup, lambda: _done(sup, "joba") and _done(sup, "jobb"))
        assert ok.stat().st_uid == account.pw_uid and "to-stdout" in ok.read_text()
        assert not denied.exists()
        log = sup.log_path("jobb", 0).read_text()
        assert f"[labgang] cannot write {denied}: Permission denied; output only in the log" in log
        assert "still-runs" in log and sup.status("jobb", 0).exit_status == 0
    finally:
        shutil.rmtree(base, ignore_errors=True)
