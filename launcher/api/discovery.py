"""Which coordinator a command talks to when no ``--state-dir`` names one.

One labgang per machine, found by everyone: on a box where root runs labgang (``labgang up`` as
root, or the systemd units), every user's CLI and TUI reach that *system instance* without
setting anything. The order:

1. ``--state-dir`` / ``LABGANG_STATE_DIR`` (the caller passes the former; the latter is read here);
2. root: the system state directory (:func:`labgang.agent.paths.system_state_dir_text`);
3. the system instance, when it answers (or its ``labgang up`` is still starting);
4. the user's own (``~/.local/state/labgang``), when it answers or is starting;
5. the system instance's socket when its file, or its database (a stopped instance removed its
   socket), is there: the error then names it and does not advise starting a second scheduler
   over its GPUs;
6. the user's own socket (nothing runs: the error advises ``labgang up``).

Where no system socket file exists (no system instance here), nothing is probed: a few ``stat``
calls, no ``socket`` import (``bench/cli_latency.py``: every shell command pays its imports). Else
probing costs one ``connect()`` on a Unix socket per candidate. Nothing here imports pathlib.
"""

import os

from labgang.agent import paths

# Beside the socket while `labgang up` starts (labgang.launcher.api.client.STARTING_MARKER).
_STARTING_MARKER = "up.starting"


class SystemConfigInvalid(Exception):
    """The system config (:func:`labgang.agent.paths.system_config_files`) cannot be used; the
    message is one line naming the file and the field."""


def answers(socket_file: str) -> bool:
    """True when something accepts a connection on the Unix socket ``socket_file``."""
    # The C socket type, as launcher/api/wire.py talks: every user's hot command probes the system
    # instance here, and the socket module's enums and selectors would cost it ~2 ms (docs/cli-startup.md).
    import _socket

    probe = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(socket_file)
    except OSError:
        return False
    finally:
        probe.close()
    return True


def starting(socket_file: str) -> bool:
    """True while a ``labgang up`` for ``socket_file`` is starting (its pid marker names a live process,
    one of another user's included)."""
    try:
        with open(os.path.join(os.path.dirname(socket_file), _STARTING_MARKER)) as marker:
            pid = int(marker.read().strip())
    except (OSError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except PermissionError:
        return True  # root's `labgang up`, seen by a user: alive, not ours to signal
    except OSError:
        return False
    return True


def serving_pid(socket_file: str) -> "int | None":
    """The pid of the process that serves ``socket_file`` (the kernel's ``SO_PEERCRED``), or None when
    nothing answers there."""
    import socket
    import struct

    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(socket_file)
        creds = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except OSError:
        return None
    finally:
        probe.close()
    pid = struct.unpack("3i", creds)[0]
    return pid if pid > 0 else None


def system_socket_file() -> str:
    """The system instance's user API socket (``/var/lib/labgang/labgang.sock`` unless the system config
    names another state directory).

    Raises:
        SystemConfigInvalid: the system config is unreadable or its ``state_dir`` is not an absolute path.
    """
    try:
        return os.path.join(paths.system_state_dir_text(), paths.SOCKET_NAME)
    except ValueError as exc:
        raise SystemConfigInvalid(str(exc)) from exc


def is_system_socket(socket_file: "str | os.PathLike[str]") -> bool:
    """True when ``socket_file`` is the system instance's socket (False when the system config is invalid)."""
    try:
        system = system_socket_file()
    except SystemConfigInvalid:
        return False
    return os.path.normpath(os.fspath(socket_file)) == os.path.normpath(system)


def find_socket_file(state_dir: "str | os.PathLike[str] | None" = None) -> str:
    """The user API socket a command talks to (the order is in the module docstring).

    Args:
        state_dir: ``--state-dir`` when given (it wins over everything); None to discover.

    Raises:
        SystemConfigInvalid: the system config is unreadable or names no usable state directory.
    """
    if state_dir is not None and str(state_dir) != "":
        return paths.socket_file(state_dir)
    env = os.environ.get(paths.STATE_DIR_ENV, "").strip()
    if env:
        return paths.socket_file(env)
    system = system_socket_file()
    if os.geteuid() == 0:
        return system
    if starting(system):
        return system
    own = os.path.join(paths.user_state_dir_text(), paths.SOCKET_NAME)
    if not os.path.exists(system):
        if not os.path.exists(os.path.join(os.path.dirname(system), paths.DB_NAME)):
            return own  # no system instance here (nor a stopped one): no probe needed
        # A stopped system instance (its database is there, its socket gone): named unless the user's runs.
        return own if (os.path.exists(own) and answers(own)) or starting(own) else system
    if answers(system):
        return system
    if (os.path.exists(own) and answers(own)) or starting(own):
        return own
    return system


def system_instance_serving() -> "str | None":
    """The system instance's socket when it answers (or is starting) and this process is not root,
    else None: what ``labgang up`` by a user checks before scheduling this machine's GPUs a second time.

    Raises:
        SystemConfigInvalid: the system config is unreadable or names no usable state directory.
    """
    if os.geteuid() == 0:
        return None
    system = system_socket_file()
    if starting(system) or (os.path.exists(system) and answers(system)):
        return system
    return None
