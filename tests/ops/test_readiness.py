"""Type=notify: the real services tell systemd they are ready only once they can serve.

The test binds the datagram socket systemd would pass in $NOTIFY_SOCKET, starts the real
`labgang coordinator` / `labgang agent` process, and checks what it can do the moment
READY=1 arrives.
"""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from harness import REPO, Cluster

pytestmark = pytest.mark.slow

READY_TIMEOUT_S = 10.0


@pytest.fixture
def cluster():
    c = Cluster({"n1": "n1-4gpu.toml"})
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def notify_socket(cluster):
    path = cluster.base / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(READY_TIMEOUT_S)
    yield sock, path
    sock.close()


def _spawn(cluster: Cluster, name: str, args: list[str], notify: Path, umask: int) -> subprocess.Popen:
    log = cluster.base / f"{name}.log"
    cluster.logs[name] = log
    env = dict(os.environ, PYTHONUNBUFFERED="1", NOTIFY_SOCKET=str(notify))
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "labgang.launcher", *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=REPO,
            start_new_session=True,
            umask=umask,
        )
    cluster.procs[name] = proc
    return proc


def _wait_ready(sock: socket.socket, cluster: Cluster, name: str) -> list[str]:
    try:
        lines = sock.recv(4096).decode().splitlines()
    except TimeoutError:
        pytest.fail(
            f"{name} sent no READY=1 within {READY_TIMEOUT_S:g} s; under Type=notify systemd "
            f"would kill it after TimeoutStartSec:\n{cluster.log_text(name)}"
        )
    assert "READY=1" in lines, lines
    return lines


def test_coordinator_is_ready_when_its_socket_answers(cluster, notify_socket, unit_service):
    """Started with the unit's UMask: ready only once it serves; database owner-only, socket open to all."""
    sock, path = notify_socket
    umask = int(unit_service(REPO / "systemd" / "labgang-coordinator.service")["UMask"][0], 8)
    _spawn(
        cluster,
        "coordinator",
        ["coordinator", "--config", str(cluster.config_file), "--state-dir", str(cluster.coord_dir)],
        path,
        umask=umask,
    )
    lines = _wait_ready(sock, cluster, "coordinator")
    with cluster.client() as client:  # at once, no retry: it must answer now
        assert client.version()
    assert any(line.startswith("STATUS=") for line in lines)
    with socket.create_connection(("127.0.0.1", cluster.port), timeout=5):
        pass  # the agent link's TCP port is open too
    assert stat.S_IMODE(cluster.socket.stat().st_mode) == 0o666
    assert stat.S_IMODE((cluster.coord_dir / "labgang.db").stat().st_mode) == 0o600


def test_agent_is_ready_once_it_has_recovered_and_serves_its_node_socket(cluster, notify_socket, monkeypatch):
    sock, path = notify_socket
    cluster.start_coordinator()
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))  # the harness passes our environment on
    cluster.start_agent("n1")
    _wait_ready(sock, cluster, "agent-n1")
    node_socket = cluster.agent_dir("n1") / "labgang.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.connect(str(node_socket))  # at once, no retry
