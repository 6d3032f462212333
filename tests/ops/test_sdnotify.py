"""sd_notify datagrams reach a real AF_UNIX socket, as systemd's notify socket would receive them."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

import pytest
from labgang.agent import sdnotify


@pytest.fixture
def notify_socket(tmp_path, monkeypatch):
    """A bound datagram socket standing where systemd's would; $NOTIFY_SOCKET points at it."""
    path = tmp_path / "notify"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.settimeout(5)
    monkeypatch.setenv("NOTIFY_SOCKET", str(path))
    yield sock
    sock.close()


def test_ready_sends_ready_and_status(notify_socket):
    assert sdnotify.ready("serving on 127.0.0.1:7420") is True
    assert notify_socket.recv(4096) == b"READY=1\nSTATUS=serving on 127.0.0.1:7420"


def test_stopping_and_status(notify_socket):
    assert sdnotify.stopping() is True
    assert notify_socket.recv(4096) == b"STOPPING=1"
    assert sdnotify.status("3 nodes, 12 jobs") is True
    assert notify_socket.recv(4096) == b"STATUS=3 nodes, 12 jobs"


def test_abstract_namespace_socket(monkeypatch):
    name = f"labgang-test-{os.getpid()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.settimeout(5)
        monkeypatch.setenv("NOTIFY_SOCKET", "@" + name)
        assert sdnotify.ready() is True
        assert sock.recv(4096) == b"READY=1"


def test_without_systemd_it_is_a_no_op(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert sdnotify.ready() is False
    assert sdnotify.status("x") is False


def test_unset_environment_keeps_children_from_inheriting(notify_socket):
    assert sdnotify.ready(unset_environment=True) is True
    assert "NOTIFY_SOCKET" not in os.environ
    assert notify_socket.recv(4096) == b"READY=1"
    assert sdnotify.ready() is False


def test_a_separate_process_notifies(notify_socket):
    """The real situation: the service is another process that inherited $NOTIFY_SOCKET."""
    code = "from labgang.agent import sdnotify; raise SystemExit(0 if sdnotify.ready('up') else 3)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=30)
    assert notify_socket.recv(4096) == b"READY=1\nSTATUS=up"


@pytest.mark.parametrize("value", ["relative/path", "vsock:2:1234"])
def test_unsupported_socket_value_is_a_clear_error(monkeypatch, value):
    monkeypatch.setenv("NOTIFY_SOCKET", value)
    with pytest.raises(ValueError, match="NOTIFY_SOCKET"):
        sdnotify.ready()


@pytest.mark.parametrize("line", ["READY", "STATUS=a\nREADY=1"])
def test_malformed_assignment_is_refused(notify_socket, line):
    with pytest.raises(ValueError, match="KEY=VALUE"):
        sdnotify.notify(line)


def test_missing_socket_raises_oserror(tmp_path, monkeypatch):
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "nobody-listens"))
    with pytest.raises(OSError):
        sdnotify.ready()
