"""The simulated MPS daemon serves a real other user who cannot run the agent's interpreter
(root's venv under a folder only root may enter): the agent owns the daemon, the user its folders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from labgang.agent import mps
from labgang.agent.mps import MpsDaemons, SimulatedMpsControl
from unix_users import cannot_create_users, throwaway_users

CARD = "GPU-11111111-2222-3333-4444-555555555555"

pytestmark = pytest.mark.skipif(cannot_create_users() is not None, reason=str(cannot_create_users()))


def test_a_user_who_cannot_run_the_agents_python_gets_a_serving_daemon(monkeypatch: pytest.MonkeyPatch):
    private = Path(tempfile.mkdtemp(prefix="lg-agentvenv-"))  # 0700: only root enters
    shared = Path(tempfile.mkdtemp(prefix="lg-mps-"))
    try:
        os.chmod(private, 0o700)
        os.chmod(shared, 0o755)  # noqa: S103 -- alice walks to her FIFO
        (private / "venv").symlink_to(Path(sys.prefix))
        monkeypatch.setattr(mps.sys, "executable", str(private / "venv" / "bin" / Path(sys.executable).name))
        with throwaway_users(1) as (alice,):
            as_alice = {"user": alice.uid, "group": alice.gid, "extra_groups": []}
            with pytest.raises(PermissionError):  # she really cannot run the agent's interpreter
                subprocess.run([mps.sys.executable, "-c", ""], **as_alice, check=False)  # type: ignore[call-overload]
            control = SimulatedMpsControl(scope="t")
            daemons = MpsDaemons(control, shared / "mps")
            dirs = daemons.acquire(("5.0", 0), CARD, alice.uid, alice.gid)
            fifo = Path(dirs.pipe) / "control"
            assert fifo.exists()
            for path in (Path(dirs.pipe), Path(dirs.log), fifo):
                assert (path.stat().st_uid, path.stat().st_gid) == (alice.uid, alice.gid), path
            said = subprocess.run(  # type: ignore[call-overload]
                ["sh", "-c", f"echo get_server_list > {fifo}"],
                **as_alice,
                capture_output=True,
                check=False,
                timeout=10,
            )
            assert said.returncode == 0, said.stderr
            daemons.release(("5.0", 0))
            assert not control.daemons()
            log_text = (Path(dirs.log) / "control.log").read_text()
            assert "Accepting command: get_server_list" in log_text and "Exit" in log_text
    finally:
        shutil.rmtree(private, ignore_errors=True)
        shutil.rmtree(shared, ignore_errors=True)
