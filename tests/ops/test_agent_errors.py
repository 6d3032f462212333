"""``labgang agent`` refuses what it cannot run with one line, never a traceback."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from pathlib import Path

from labgang.agent.supervisor.config import SupervisorConfig
from labgang.agent.supervisor.supervisor import Supervisor

REPO = Path(__file__).resolve().parents[2]
LABGANG = Path(sys.executable).parent / "labgang"
SIM = REPO / "config/sim/h100x8.toml"


def test_a_second_agent_on_the_same_state_dir_is_one_line(tmp_path: Path) -> None:
    token = tmp_path / "cluster.token"
    token.write_text(secrets.token_urlsafe(32) + "\n")
    token.chmod(0o600)
    state = tmp_path / "state"
    config = tmp_path / "agent.toml"
    config.write_text(
        f'node = "n1"\ncoordinator = "http://127.0.0.1:9"\nstate_dir = "{state}"\ntoken_file = "{token}"\n'
    )
    # The first agent: what it holds is its supervisor's lock on <state_dir>/agent.
    first = Supervisor.from_config(state / "agent", SupervisorConfig())
    try:
        result = subprocess.run(
            [str(LABGANG), "agent", "--config", str(config), "--simulate", str(SIM)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    finally:
        first.close()
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines()[-1] == (
        f"labgang agent: state_dir: {state / 'agent'} is already supervised by another agent "
        f"(pid {os.getpid()}); one agent per state dir"
    )
