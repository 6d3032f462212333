"""A ``top --web`` viewer's app never outlives its server: it ends when the server is killed
(even ``kill -9``, which runs no clean-up) or stopped, and a second server on a port in use is
refused before it serves. A real server subprocess on one simulated node (no coordinator) and a
real websocket; no browser needed."""

from __future__ import annotations

import base64
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from browser import free_port, start_web
from harness import REPO, wait_for

pytestmark = pytest.mark.slow

NODE = str(REPO / "config/sim/h100x8.toml")


def open_page(port: int) -> socket.socket:
    """A viewer's websocket (the handshake by hand), held open until the app's first frames arrive."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    conn.sendall(
        f"GET /ws?width=100&height=30 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    received = b""
    while b"H100" not in received:  # the devices table: the app is up and drawing
        data = conn.recv(65536)
        assert data, f"the server closed the websocket: {received[:300]!r}"
        received += data
    return conn


def viewer_app(web: subprocess.Popen[bytes]) -> psutil.Process:
    """The one app process the server runs for the open page (its direct child: the shell execs it)."""
    children = wait_for(lambda: psutil.Process(web.pid).children(), what="the viewer's app process")
    (app,) = children
    assert "top" in app.cmdline() and "--read-only" in app.cmdline(), app.cmdline()
    return app


def ended(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGTERM], ids=["kill -9", "SIGTERM"])
def test_the_viewers_app_ends_when_its_server_goes(how: signal.Signals, tmp_path: Path) -> None:
    port = free_port()
    web = start_web(["--simulate", NODE], port, tmp_path / "web.log")
    app = None
    try:
        page = open_page(port)
        app = viewer_app(web)
        web.send_signal(how)
        web.wait(timeout=30)
        wait_for(
            lambda: ended(app), timeout=20, what=f"the viewer's app {app.pid} to end after its server got {how.name}"
        )
        page.close()
    finally:
        if web.poll() is None:
            web.kill()
            web.wait()
        if app is not None and not ended(app):
            app.kill()


def test_a_port_in_use_is_refused_before_serving(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        out = subprocess.run(
            [sys.executable, "-m", "labgang.launcher", "top", "--web", "--port", str(port), "--simulate", NODE],
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert out.returncode == 2, out
    assert f"--port {port}: cannot listen on 127.0.0.1:{port}" in out.stderr and "choose another --port" in out.stderr
    assert "Traceback" not in out.stderr and "on http://" not in out.stderr + out.stdout, out.stderr
