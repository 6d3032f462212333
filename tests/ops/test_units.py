"""The systemd units pass `systemd-analyze verify`, keep jobs alive across agent restarts,
and the coordinator's sandbox scores as hardened."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from labgang.launcher.cli.install import render_unit

UNITS = ("labgang-coordinator.service", "labgang-agent.service")


def _systemd_analyze() -> str:
    exe = shutil.which("systemd-analyze")
    if exe is None:
        pytest.fail(
            "systemd-analyze not found: these tests need it; on Debian/Ubuntu run "
            "`apt-get install systemd` (it does not need systemd running)"
        )
    return exe


def _labgang_bin() -> Path:
    exe = Path(sys.executable).parent / "labgang"
    assert exe.is_file(), f"{exe} missing: install labgang into this venv (pip install -e .)"
    return exe


@pytest.fixture
def rendered(tmp_path, repo_root) -> dict[str, Path]:
    """The units as `labgang install` writes them: ExecStart= at a labgang that exists here."""
    out = {}
    for name in UNITS:
        path = tmp_path / name
        path.write_text(render_unit((repo_root / "systemd" / name).read_text(), _labgang_bin()))
        out[name] = path
    return out


def _verify(paths) -> subprocess.CompletedProcess:
    return subprocess.run([_systemd_analyze(), "verify", *map(str, paths)], capture_output=True, text=True, timeout=60)


def test_units_verify_cleanly(rendered):
    result = _verify(rendered.values())
    # verify exits 0 on unknown keys and bad values; it only warns, so its output must be empty too.
    problems = [line for line in (result.stdout + result.stderr).splitlines() if "labgang" in line]
    assert result.returncode == 0 and not problems, result.stdout + result.stderr


def test_verify_would_catch_a_broken_unit(rendered):
    """Control: the check above can fail (a typo'd key and a bad Type= are reported)."""
    broken = rendered["labgang-agent.service"]
    broken.write_text(broken.read_text().replace("KillMode=process", "KilMode=process\nType=notifyy"))
    result = _verify([broken])
    assert "Unknown key" in result.stderr and "KilMode" in result.stderr
    assert "notifyy" in result.stderr


def test_verify_would_catch_a_missing_executable(tmp_path, repo_root):
    unit = tmp_path / "labgang-agent.service"
    unit.write_text(
        (repo_root / "systemd" / "labgang-agent.service")
        .read_text()
        .replace("/usr/local/bin/labgang", str(tmp_path / "no-such-labgang"))
    )
    result = _verify([unit])
    assert result.returncode != 0 and "no-such-labgang" in result.stderr


def test_both_units_are_notify_and_restart_on_failure(rendered, unit_service):
    for path in rendered.values():
        service = unit_service(path)
        assert service["Type"] == ["notify"], path.name
        assert service["Restart"] == ["on-failure"], path.name
        assert service["Environment"] == ["LABGANG_STATE_DIR=/var/lib/labgang"], path.name
        assert re.search(r" --config /etc/labgang/\w+\.toml$", service["ExecStart"][0]), path.name


def test_agent_stop_signals_only_the_agent(rendered, unit_service):
    """Jobs outlive the agent: only its main process is signalled, a rank's OOM kill does not stop it."""
    service = unit_service(rendered["labgang-agent.service"])
    assert service["KillMode"] == ["process"]
    assert service["OOMPolicy"] == ["continue"]
    assert service["TasksMax"] == ["infinity"]
    assert "User" not in service  # root: it starts ranks as their users
    # Ranks inherit the agent's namespaces: no filesystem sandbox may leak into jobs.
    for key in ("ProtectHome", "PrivateTmp", "ProtectSystem", "NoNewPrivileges"):
        assert key not in service, key


def test_coordinator_runs_unprivileged_and_sandboxed(rendered, unit_service):
    service = unit_service(rendered["labgang-coordinator.service"])
    assert service["User"] == ["labgang"]
    assert service["ProtectSystem"] == ["strict"]
    assert service["StateDirectory"] == ["labgang"]
    assert service["StateDirectoryMode"] == ["0755"]  # users reach the API socket inside it
    assert service["LoadCredential"] == ["cluster.token:/etc/labgang/cluster.token"]


def test_coordinator_exposure_score_is_low(rendered):
    """systemd's own sandbox rating: 'OK' (<= 2.0 of 10); an unhardened service rates 9.6."""
    exe = _systemd_analyze()
    # --threshold is on systemd's internal 0..100 scale (20 = 2.0 shown).
    ok = subprocess.run(
        [exe, "security", "--offline=yes", "--threshold=20", str(rendered["labgang-coordinator.service"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert ok.returncode == 0, ok.stdout[-600:]
    agent = subprocess.run(
        [exe, "security", "--offline=yes", "--threshold=20", str(rendered["labgang-agent.service"])],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert agent.returncode != 0, "control: the unsandboxed agent must score above the threshold"
