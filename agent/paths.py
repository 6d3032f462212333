"""Where labgang keeps its state: the database, the user API socket, agent journals and logs.

Everything lives under one *state directory* so several instances can run side by
side (tests, a second lab): ``--state-dir DIR`` on every command, else the
``LABGANG_STATE_DIR`` environment variable, else ``/var/lib/labgang`` for root and
``~/.local/state/labgang`` (``$XDG_STATE_HOME/labgang`` when that is set) for
anyone else.
"""

from __future__ import annotations

import os
from pathlib import Path

STATE_DIR_ENV = "LABGANG_STATE_DIR"
SYSTEM_STATE_DIR = Path("/var/lib/labgang")
SOCKET_NAME = "labgang.sock"
DB_NAME = "labgang.db"
AGENT_DIR_NAME = "agent"


def default_state_dir() -> Path:
    """Return the state directory to use when no ``--state-dir`` was given.

    Returns:
        ``$LABGANG_STATE_DIR`` if set and non-empty; ``/var/lib/labgang`` when running
        as root (euid 0); otherwise ``$XDG_STATE_HOME/labgang`` or
        ``~/.local/state/labgang``. The directory is not created.
    """
    env = os.environ.get(STATE_DIR_ENV, "").strip()
    if env:
        return Path(env).expanduser()
    if os.geteuid() == 0:
        return SYSTEM_STATE_DIR
    xdg = os.environ.get("XDG_STATE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "labgang"


def resolve_state_dir(state_dir: str | os.PathLike[str] | None) -> Path:
    """Return ``state_dir`` as a Path, or :func:`default_state_dir` when it is None or empty."""
    if state_dir is None or str(state_dir) == "":
        return default_state_dir()
    return Path(state_dir).expanduser()


def socket_path(state_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of the user API Unix socket (``<state_dir>/labgang.sock``).

    The coordinator listens there; on a node without the coordinator, the node's agent
    listens there and forwards each request over its link.
    """
    return resolve_state_dir(state_dir) / SOCKET_NAME


def db_path(state_dir: str | os.PathLike[str] | None = None) -> Path:
    """Path of the coordinator's SQLite database (``<state_dir>/labgang.db``)."""
    return resolve_state_dir(state_dir) / DB_NAME


def agent_state_dir(state_dir: str | os.PathLike[str] | None = None) -> Path:
    """Directory of a node agent's supervisor journal and rank logs (``<state_dir>/agent``)."""
    return resolve_state_dir(state_dir) / AGENT_DIR_NAME


def ensure_state_dir(state_dir: str | os.PathLike[str] | None = None) -> Path:
    """Create the state directory (mode 0700 when new) and return it.

    Raises:
        OSError: the directory cannot be created.
    """
    path = resolve_state_dir(state_dir)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path
