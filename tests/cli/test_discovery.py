"""The order in which a command finds its coordinator (``launcher/api/discovery.py``), each case with real
Unix sockets that answer or not. Seen as a user (the module's ``os.geteuid`` reads 1000) with the system
config in a temporary file; ``tests/ops/test_one_labgang_per_machine.py`` runs the same with real users."""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from labgang.agent import paths
from labgang.launcher.api import discovery
from labgang.launcher.api.client import CoordinatorUnavailable, SystemConfigUnusable, socket_file_for


class Place:
    """A state directory whose socket can be served, left stale, or absent."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True)
        self.socket = str(directory / paths.SOCKET_NAME)
        self._listener: socket.socket | None = None

    def serve(self) -> None:
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.socket)
        self._listener.listen(4)

    def leave_stale(self) -> None:
        """What a killed coordinator leaves: the file, with nobody listening."""
        if self._listener is None:
            self.serve()
        assert self._listener is not None
        self._listener.close()
        self._listener = None

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()


@pytest.fixture
def base() -> Iterator[Path]:
    """A directory with a short path: a Unix socket's path holds at most 107 bytes, and pytest's
    ``tmp_path`` under a parallel run (``/tmp/pytest-of-USER/pytest-N/popen-gwN/TEST-NAME/``) plus
    ``home/.local/state/labgang/labgang.sock`` can exceed that."""
    with tempfile.TemporaryDirectory(prefix="lgd-") as folder:
        yield Path(folder)


@pytest.fixture
def places(base: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Place, Place]]:
    """(system, own): the system instance's directory (named by a system config) and a user's own."""
    system, own = Place(base / "system"), Place(base / "home" / ".local" / "state" / "labgang")
    config = base / "system.toml"
    config.write_text(f'state_dir = "{system.directory}"\n')
    monkeypatch.setattr(paths, "system_config_files", lambda: [str(config)])
    monkeypatch.setattr(discovery.os, "geteuid", lambda: 1000)
    monkeypatch.delenv(paths.STATE_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "home" / ".local" / "state"))
    yield system, own
    system.close()
    own.close()


def test_a_running_system_instance_wins_over_the_users_own(places: tuple[Place, Place]) -> None:
    system, own = places
    system.serve()
    own.serve()
    assert discovery.find_socket_file() == system.socket
    assert discovery.system_instance_serving() == system.socket


def test_without_a_system_instance_the_users_own_is_found(places: tuple[Place, Place]) -> None:
    _system, own = places
    assert discovery.find_socket_file() == own.socket  # nothing anywhere: the own one (labgang up advice)
    own.serve()
    assert discovery.find_socket_file() == own.socket
    assert discovery.system_instance_serving() is None


def test_a_stale_system_socket_yields_to_a_running_own_one_else_is_named(places: tuple[Place, Place]) -> None:
    system, own = places
    system.leave_stale()
    assert discovery.find_socket_file() == system.socket
    message = str(CoordinatorUnavailable(system.socket))
    assert "does not answer" in message and "labgang up" not in message, message
    own.serve()
    assert discovery.find_socket_file() == own.socket


def test_a_system_instance_still_starting_is_waited_for(places: tuple[Place, Place]) -> None:
    system, own = places
    own.serve()
    (system.directory / "up.starting").write_text(f"{os.getpid()}\n")
    assert discovery.find_socket_file() == system.socket


def test_state_dir_and_the_variable_come_first(places: tuple[Place, Place], monkeypatch: pytest.MonkeyPatch) -> None:
    system, own = places
    system.serve()
    assert discovery.find_socket_file(own.directory) == own.socket
    monkeypatch.setenv(paths.STATE_DIR_ENV, str(own.directory))
    assert discovery.find_socket_file() == own.socket


def test_root_talks_to_the_system_instance(places: tuple[Place, Place], monkeypatch: pytest.MonkeyPatch) -> None:
    system, own = places
    own.serve()
    monkeypatch.setattr(discovery.os, "geteuid", lambda: 0)
    assert discovery.find_socket_file() == system.socket
    assert discovery.system_instance_serving() is None  # root's own labgang up is the system instance


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('state_dir = "relative/dir"\n', "state_dir = 'relative/dir'; allowed: an absolute directory path"),
        ("state_dir = [\n", "not a TOML file"),
    ],
)
def test_a_broken_system_config_is_one_line_naming_it(
    places: tuple[Place, Place], base: Path, text: str, problem: str
) -> None:
    (base / "system.toml").write_text(text)
    with pytest.raises(SystemConfigUnusable) as caught:
        socket_file_for(None)
    assert str(caught.value).startswith(f"{base / 'system.toml'}: ") and problem in str(caught.value)
    assert "\n" not in str(caught.value)


def test_roots_labgang_up_names_a_broken_system_config_in_one_line(
    places: tuple[Place, Place], base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner
    from labgang.launcher.cli.up import up

    monkeypatch.setattr(discovery.os, "geteuid", lambda: 0)
    (base / "system.toml").write_text('state_dir = "relative/dir"\n')
    result = CliRunner().invoke(up, ["--simulate", "config/sim/h100x8.toml"])
    assert result.exit_code == 2, result.output
    assert result.stderr == (
        f"labgang up: {base / 'system.toml'}: state_dir = 'relative/dir'; allowed: an absolute directory path\n"
    )


def test_a_stopped_system_instance_without_its_socket_is_named(places: tuple[Place, Place]) -> None:
    system, own = places
    (system.directory / paths.DB_NAME).write_text("")  # what a stopped `labgang up` as root leaves
    assert discovery.find_socket_file() == system.socket
    message = str(CoordinatorUnavailable(system.socket))
    assert "ask whoever runs it" in message and "labgang up" not in message, message
    own.serve()
    assert discovery.find_socket_file() == own.socket
