"""Where labgang keeps its state: the database, the user API socket, agent journals and logs.

Everything lives under one *state directory* so several instances can run side by
side (tests, a second lab): ``--state-dir DIR`` on every command, else the
``LABGANG_STATE_DIR`` environment variable, else the *system* state directory for root
(``/var/lib/labgang``, or the ``state_dir`` of the system config) and
``~/.local/state/labgang`` (``$XDG_STATE_HOME/labgang`` when that is set) for
anyone else. Which coordinator a user's command talks to (the system instance first) is
:mod:`labgang.launcher.api.discovery`'s to decide.

The system config is one small TOML file, ``/etc/labgang/system.toml``, with one key::

    state_dir = "/srv/labgang"   # where this machine's system instance keeps its socket

A venv may carry its own (``<venv>/etc/labgang/system.toml``, read first), so that an
install such as ``/opt/labgang/venv`` says where its instance lives.
"""

import os

# pathlib is imported where a Path is returned, not here: `labgang submit` and `labgang queue`
# find their socket with socket_file() and never need it (bench/cli_latency.py).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

STATE_DIR_ENV = "LABGANG_STATE_DIR"
SYSTEM_STATE_DIR = "/var/lib/labgang"
SYSTEM_CONFIG = "/etc/labgang/system.toml"
SYSTEM_CONFIG_IN_VENV = os.path.join("etc", "labgang", "system.toml")
SOCKET_NAME = "labgang.sock"
DB_NAME = "labgang.db"
AGENT_DIR_NAME = "agent"
KEPT_JOBS_NAME = "up.kept"
"""``<state_dir>/up.kept``: the ids (a JSON list) of the jobs an orderly stop left running
(``labgang up --keep-jobs``), written before the socket file goes and removed by the next
coordinator once it listens; ``labgang run`` reads it to wait for that start instead of saying
its job was cancelled (``launcher/cli/follow.py``)."""


def system_config_files() -> "list[str]":
    """Where the system config may be, first found wins: the running venv's
    ``etc/labgang/system.toml`` (only inside a venv), then ``/etc/labgang/system.toml``."""
    import sys

    found = []
    if sys.prefix != sys.base_prefix:
        found.append(os.path.join(sys.prefix, SYSTEM_CONFIG_IN_VENV))
    found.append(SYSTEM_CONFIG)
    return found


def system_state_dir_text() -> str:
    """The state directory of this machine's system instance (the one root runs).

    Returns:
        The ``state_dir`` of the first system config file that exists
        (:func:`system_config_files`), else ``/var/lib/labgang``.

    Raises:
        ValueError: that file cannot be read, is not TOML, or its ``state_dir`` is not an
            absolute path (the message names the file and the field).
    """
    for candidate in system_config_files():
        try:
            with open(candidate, "rb") as fh:
                raw = fh.read()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise ValueError(f"{candidate}: cannot read the system config ({exc.strerror})") from exc
        try:
            text = raw.decode("utf-8")
            data = plain_toml(text)
            if data is None:  # not the plain form `labgang install` writes: TOML's own reader decides
                import tomllib  # it imports re, enum, datetime...: several interpreter starts of a command

                data = tomllib.loads(text)
        except ValueError as exc:  # UnicodeDecodeError, tomllib.TOMLDecodeError
            raise ValueError(f"{candidate}: not a TOML file ({exc})") from exc
        value = data.get("state_dir", SYSTEM_STATE_DIR)
        if not isinstance(value, str) or not os.path.isabs(value):
            raise ValueError(f"{candidate}: state_dir = {value!r}; allowed: an absolute directory path")
        return value
    return SYSTEM_STATE_DIR


_BARE_KEY = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")


def _no_control(text: str) -> bool:
    """No control character but tab (what TOML allows in a comment and in a basic string)."""
    return text.isprintable() or all(char == "\t" or (char >= " " and char != "\x7f") for char in text)


def plain_toml(text: str) -> "dict[str, str] | None":
    """The keys of ``text`` when it is TOML of the plainest form, as :func:`tomllib.loads` reads it;
    None when it is anything else, which only :mod:`tomllib` may read (or refuse).

    The plainest form: blank lines, comments and ``key = "value"`` lines (a bare key once, a basic
    string without escapes, maybe a comment after it), lines ended by LF or CRLF: what ``labgang
    install`` writes as the system config and what a person edits it into. Every hot command without
    ``--state-dir`` reads that file (:func:`system_state_dir_text`), and importing :mod:`tomllib`
    (``re``, ``enum``, ``datetime``...) costs it several interpreter starts (docs/cli-startup.md).
    tests/test_plain_toml.py holds it to :mod:`tomllib` with hypothesis.
    """
    lines = text.replace("\r\n", "\n")
    if "\r" in lines:  # a carriage return that ends no line: TOML refuses it
        return None
    out: dict[str, str] = {}
    for line in lines.split("\n"):
        body = line.lstrip(" \t")
        if not body or (body.startswith("#") and _no_control(body)):
            continue
        key, equals, rest = body.partition("=")
        key = key.rstrip(" \t")
        if not equals or not key or not _BARE_KEY.issuperset(key) or key in out:
            return None
        rest = rest.lstrip(" \t")
        end = rest.find('"', 1)
        if not rest.startswith('"') or end < 0:
            return None
        value, tail = rest[1:end], rest[end + 1 :].lstrip(" \t")
        if "\\" in value or not _no_control(value) or (tail and not (tail.startswith("#") and _no_control(tail))):
            return None
        out[key] = value
    return out


def user_state_dir_text() -> str:
    """A user's own state directory: ``$XDG_STATE_HOME/labgang`` or ``~/.local/state/labgang``."""
    xdg = os.environ.get("XDG_STATE_HOME", "").strip()
    base = os.path.expanduser(xdg) if xdg else os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "labgang")


def default_state_dir_text() -> str:
    """:func:`default_state_dir` as text (no pathlib).

    Raises:
        ValueError: as root, the system config is invalid (:func:`system_state_dir_text`).
    """
    env = os.environ.get(STATE_DIR_ENV, "").strip()
    if env:
        return os.path.expanduser(env)
    if os.geteuid() == 0:
        return system_state_dir_text()
    return user_state_dir_text()


def default_state_dir() -> "Path":
    """Return the state directory to use when no ``--state-dir`` was given.

    Returns:
        ``$LABGANG_STATE_DIR`` if set and non-empty; the system state directory
        (:func:`system_state_dir_text`) when running as root (euid 0); otherwise
        ``$XDG_STATE_HOME/labgang`` or ``~/.local/state/labgang``. The directory is not created.
        This is where ``labgang up`` and the daemons keep their state; a command looking
        for a coordinator asks :func:`labgang.launcher.api.discovery.find_socket_file`.
    """
    from pathlib import Path

    return Path(default_state_dir_text())


def resolve_state_dir(state_dir: "str | os.PathLike[str] | None") -> "Path":
    """Return ``state_dir`` as a Path, or :func:`default_state_dir` when it is None or empty."""
    from pathlib import Path

    if state_dir is None or str(state_dir) == "":
        return default_state_dir()
    return Path(state_dir).expanduser()


def socket_file(state_dir: "str | os.PathLike[str] | None" = None) -> str:
    """:func:`socket_path` as text, without importing pathlib (the fast CLI path's socket)."""
    if state_dir is None or str(state_dir) == "":
        return os.path.join(default_state_dir_text(), SOCKET_NAME)
    return os.path.join(os.path.expanduser(os.fspath(state_dir)), SOCKET_NAME)


def socket_path(state_dir: "str | os.PathLike[str] | None" = None) -> "Path":
    """Path of the user API Unix socket (``<state_dir>/labgang.sock``).

    The coordinator listens there; on a node without the coordinator, the node's agent
    listens there and forwards each request over its link.
    """
    return resolve_state_dir(state_dir) / SOCKET_NAME


def db_path(state_dir: "str | os.PathLike[str] | None" = None) -> "Path":
    """Path of the coordinator's SQLite database (``<state_dir>/labgang.db``)."""
    return resolve_state_dir(state_dir) / DB_NAME


def agent_state_dir(state_dir: "str | os.PathLike[str] | None" = None) -> "Path":
    """Directory of a node agent's supervisor journal and rank logs (``<state_dir>/agent``)."""
    return resolve_state_dir(state_dir) / AGENT_DIR_NAME


def ensure_state_dir(state_dir: "str | os.PathLike[str] | None" = None) -> "Path":
    """Create the state directory (mode 0700 when new) and return it.

    Raises:
        OSError: the directory cannot be created.
    """
    path = resolve_state_dir(state_dir)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    return path
