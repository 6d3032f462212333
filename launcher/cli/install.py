"""``labgang install``: put the systemd units, example configuration and cluster token in place.

What it writes (under ``--prefix``, default ``/``), by ``--role``:

| file | role | mode |
| --- | --- | --- |
| ``etc/systemd/system/labgang-coordinator.service`` | coordinator | 0644 |
| ``etc/sysusers.d/labgang.conf`` (the ``labgang`` system user) | coordinator | 0644 |
| ``etc/labgang/cluster.toml`` (example queues) | coordinator | 0644 |
| ``etc/systemd/system/labgang-agent.service`` | agent | 0644 |
| ``etc/labgang/agent.toml`` (example agent config) | agent | 0644 |
| ``etc/labgang/cluster.token`` (shared secret) | both | 0600 |
| ``etc/labgang/system.toml`` (where the service keeps its state: every user's CLI finds it) | both | 0644 |

The units and examples are read from the source checkout labgang runs from
(``systemd/`` and ``config/``), or from the copies a regular install carries
(``<venv>/share/labgang``); the units' ``ExecStart=`` is pointed at the
``labgang`` executable given by ``--bin`` (default: the one beside this Python).

Rules: a file that exists with exactly the content to be written is left alone
("unchanged"; so installing the coordinator and an agent into one prefix shares
``labgang.sh``); nothing that exists with other content is overwritten without
``--force``, and then the whole install is refused before anything is written. An existing cluster token is
always kept (replacing it would lock out every agent) unless ``--token-from``
names a different one and ``--force`` is given. ``--print`` writes nothing and
prints every file instead (the token as a placeholder, never the secret).
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import click
import labgang.launcher
from labgang.agent.token import token_problem
from labgang.launcher.cli import system_venv
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.install_access import Identity, run_problem

ROLES = ("all", "coordinator", "agent")
UNIT_BIN_PLACEHOLDER = "/usr/local/bin/labgang"
# Where a regular install keeps its copies of systemd/ and config/ (setup.py's data_files), under its prefix.
DATA_DIR = PurePosixPath("share/labgang")
TOKEN_PATH = PurePosixPath("etc/labgang/cluster.token")
TOKEN_BYTES = 32
# systemd hands the coordinator its own copy of the token (LoadCredential= in the unit).
COORDINATOR_CREDENTIAL = "/run/credentials/labgang-coordinator.service/cluster.token"
SYSUSERS_PATH = PurePosixPath("etc/sysusers.d/labgang.conf")
# Every user's CLI finds the service's socket through this file (launcher/api/discovery.py), with no
# variable in their environment: a LABGANG_STATE_DIR exported to every login shell (as an earlier
# profile.d script did) would also make a user's own `labgang up --simulate` collide with the service.
SYSTEM_TOML = (
    b"# labgang: this machine's labgang service keeps its state, and every user's socket, here;\n"
    b"# each user's `labgang` finds it without a variable. Written by `labgang install`.\n"
    b'state_dir = "/var/lib/labgang"\n'
)


class InstallError(CommandFailed):
    """A refusal with one clear message (exit status 1)."""


@dataclass(frozen=True, slots=True)
class InstallFile:
    """One file ``labgang install`` writes.

    Attributes:
        path: where, relative to the prefix (``etc/labgang/cluster.toml``).
        content: the bytes to write; None for the cluster token when a new one is made.
        mode: permission bits (0o644, 0o600).
        secret: True for the token: never printed, kept when it exists.
    """

    path: PurePosixPath
    content: bytes | None
    mode: int
    secret: bool = False


def source_root() -> Path:
    """The folder holding ``systemd/`` and ``config/``: the source checkout labgang runs from (an editable
    install), else the copies a regular install carries as data files (``<prefix>/share/labgang``, the
    venv's, or the user's for a ``pip install --user``).

    Raises:
        InstallError: neither holds the unit files.
    """
    import site
    import sysconfig

    checkout = Path(labgang.launcher.__file__).resolve().parent.parent
    candidates = [checkout, Path(sysconfig.get_path("data")) / DATA_DIR, Path(site.getuserbase()) / DATA_DIR]
    for root in candidates:
        if (root / "systemd" / "labgang-agent.service").is_file():
            return root
    raise InstallError(
        f"unit files not found under {', '.join(str(root / 'systemd') for root in candidates)}: install labgang "
        "from its source checkout (pip install /path/to/labgang, or labgang install --venv from the checkout)"
    )


def default_bin() -> Path | None:
    """The ``labgang`` executable beside the running Python (a venv's ``bin/``), else on $PATH."""
    beside = Path(sys.executable).parent / "labgang"
    if beside.is_file() and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("labgang")
    return Path(found) if found else None


def check_bin(path: Path) -> Path:
    """Validate the executable the units will start.

    Raises:
        InstallError: not absolute, contains whitespace (systemd would split it), or not executable.
    """
    if not path.is_absolute():
        raise InstallError(f"--bin: {path} must be an absolute path (systemd's ExecStart= needs one)")
    if any(ch.isspace() for ch in str(path)):
        raise InstallError(f"--bin: {path!s} contains whitespace; allowed: a path without spaces")
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise InstallError(f"--bin: {path} is not an executable file")
    return path


def render_unit(text: str, labgang_bin: Path) -> str:
    """Point a unit template's ``ExecStart=`` at ``labgang_bin``.

    Raises:
        InstallError: the template has no ``ExecStart=`` naming ``/usr/local/bin/labgang``.
    """
    new, count = re.subn(rf"(?m)^ExecStart={re.escape(UNIT_BIN_PLACEHOLDER)} ", f"ExecStart={labgang_bin} ", text)
    if count == 0:
        raise InstallError(f"unit template has no 'ExecStart={UNIT_BIN_PLACEHOLDER} ...' line")
    return new


def render_cluster_config(text: str) -> str:
    """Point the example ``cluster.toml``'s ``token_file`` at the coordinator's systemd credential.

    Raises:
        InstallError: the example has no top-level ``token_file = ...`` line.
    """
    line = (
        f'token_file = "{COORDINATOR_CREDENTIAL}"'
        "   # systemd's private copy of /etc/labgang/cluster.token (LoadCredential=)"
    )
    new, count = re.subn(r"(?m)^token_file\s*=.*$", line, text, count=1)
    if count != 1:
        raise InstallError("example cluster.toml has no 'token_file = ...' line")
    return new


def plan(role: str, labgang_bin: Path, *, root: Path, token: bytes | None = None) -> list[InstallFile]:
    """The files an install of ``role`` writes, in order.

    Args:
        role: "all", "coordinator" or "agent".
        labgang_bin: the absolute path the units' ``ExecStart=`` runs.
        root: the source checkout (:func:`source_root`).
        token: the cluster token to install (from ``--token-from``); None makes a new one at write time.

    Raises:
        InstallError: an unknown role, or a template that cannot be rendered.
    """
    if role not in ROLES:
        raise InstallError(f"--role: {role!r} is not a role; allowed: {', '.join(ROLES)}")
    files: list[InstallFile] = []
    if role in ("all", "coordinator"):
        unit = (root / "systemd" / "labgang-coordinator.service").read_text()
        files += [
            InstallFile(
                PurePosixPath("etc/systemd/system/labgang-coordinator.service"),
                render_unit(unit, labgang_bin).encode(),
                0o644,
            ),
            InstallFile(SYSUSERS_PATH, (root / "systemd" / "labgang.sysusers").read_bytes(), 0o644),
            InstallFile(
                PurePosixPath("etc/labgang/cluster.toml"),
                render_cluster_config((root / "config" / "cluster.toml").read_text()).encode(),
                0o644,
            ),
        ]
    if role in ("all", "agent"):
        unit = (root / "systemd" / "labgang-agent.service").read_text()
        files += [
            InstallFile(
                PurePosixPath("etc/systemd/system/labgang-agent.service"),
                render_unit(unit, labgang_bin).encode(),
                0o644,
            ),
            InstallFile(PurePosixPath("etc/labgang/agent.toml"), (root / "config" / "agent.toml").read_bytes(), 0o644),
        ]
    files.append(InstallFile(PurePosixPath("etc/labgang/system.toml"), SYSTEM_TOML, 0o644))
    files.append(InstallFile(TOKEN_PATH, token, 0o600, secret=True))
    return files


def _identical(target: Path, content: bytes | None) -> bool:
    """True when ``target`` is a regular file holding exactly ``content``."""
    return content is not None and target.is_file() and target.read_bytes() == content


def conflicts(files: list[InstallFile], prefix: Path) -> list[Path]:
    """Targets that exist with other content and would be replaced.

    A target already holding exactly the planned content is not a conflict, nor is an
    existing token when no new one is given (it is kept).
    """
    found = []
    for f in files:
        target = prefix / f.path
        if not target.exists():
            continue
        if _identical(target, f.content) or (f.secret and f.content is None):
            continue
        found.append(target)
    return found


def _write(target: Path, content: bytes, mode: int) -> None:
    """Write ``content`` with ``mode`` from the first byte on (a secret is never briefly readable)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.labgang-install")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
    os.fchmod(fd, mode)  # a leftover temporary file keeps its old mode through O_CREAT
    with os.fdopen(fd, "wb") as fh:
        fh.write(content)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, target)


def write(files: list[InstallFile], prefix: Path, *, force: bool) -> list[tuple[Path, str]]:
    """Write the planned files under ``prefix``.

    Returns:
        ``(path, action)`` per file, action in "written", "replaced", "unchanged" (the
        file already held this content), "kept" (an existing token).

    Raises:
        InstallError: some targets exist and ``force`` is False (nothing is written then).
    """
    existing = conflicts(files, prefix)
    if existing and not force:
        listing = "\n  ".join(str(p) for p in existing)
        raise InstallError(f"these files exist; nothing was written (use --force to replace them):\n  {listing}")
    done = []
    for f in files:
        target = prefix / f.path
        if f.secret and target.exists() and (f.content is None or target not in existing):
            done.append((target, "kept"))
            continue
        if _identical(target, f.content):
            done.append((target, "unchanged"))
            continue
        action = "replaced" if target.exists() else "written"
        content = f.content if f.content is not None else secrets.token_urlsafe(TOKEN_BYTES).encode() + b"\n"
        _write(target, content, f.mode)
        done.append((target, action))
    return done


def render_for_print(files: list[InstallFile], prefix: Path) -> str:
    """Every planned file with a header line, the token as a placeholder."""
    parts = []
    for f in files:
        parts.append(f"# ==> {prefix / f.path} (mode {f.mode:04o}) <==")
        if f.secret:
            where = (
                "copied from --token-from" if f.content is not None else f"{TOKEN_BYTES} random bytes, url-safe base64"
            )
            parts.append(f"# (the cluster token: {where}; kept if the file exists)\n")
        else:
            assert f.content is not None  # only the secret is made at write time
            parts.append(f.content.decode())
    return "\n".join(parts)


def unit_users(files: list[InstallFile]) -> list[tuple[str, str, Path]]:
    """``(unit file name, User=, ExecStart= program)`` of each planned unit that names a ``User=``."""
    found = []
    for f in files:
        if f.path.suffix != ".service" or f.content is None:
            continue
        text = f.content.decode()
        user = re.search(r"(?m)^User=(\S+)\s*$", text)
        program = re.search(r"(?m)^ExecStart=(\S+)", text)
        if user and program:
            found.append((f.path.name, user.group(1), Path(program.group(1))))
    return found


def _warn_unit_users(files: list[InstallFile]) -> None:
    """Warn (stderr) of each unit whose ``User=`` cannot run its ``ExecStart=``: systemd would fail it
    with status 203/EXEC."""
    for unit, user, program in unit_users(files):
        problem = run_problem(program, Identity.of(user))
        if problem is not None:
            click.echo(
                f"labgang install: warning: {unit} runs as User={user}, who cannot run ExecStart={program}: "
                f"{problem}; install with --venv /opt/labgang/venv (a venv every user can run)",
                err=True,
            )


def create_system_user(prefix: Path) -> str:
    """Create the ``labgang`` user from the installed sysusers.d file (``systemd-sysusers --root``),
    then look for it in the prefix's ``etc/passwd``, the file systemd-sysusers wrote.

    Returns:
        What was checked, for the summary: with ``--prefix DIR`` the user is in DIR's passwd file,
        not among this host's users, and the line says so.
    """
    exe = shutil.which("systemd-sysusers")
    conf = prefix / SYSUSERS_PATH
    if exe is None:
        return f"systemd-sysusers not found: create the 'labgang' system user yourself ({conf})"
    subprocess.run([exe, f"--root={prefix}", str(conf)], check=True, capture_output=True, text=True)
    passwd = prefix / "etc/passwd"
    try:
        lines = passwd.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        lines = []
    entry = next((line.split(":") for line in lines if line.startswith("labgang:")), None)
    if entry is None or len(entry) < 3:
        return f"systemd-sysusers ran, but {passwd} has no 'labgang' user: create it yourself ({conf})"
    if prefix == Path("/"):
        return f"system user 'labgang' (uid {entry[2]}) found in {passwd} (systemd-sysusers)"
    return (
        f"user 'labgang' (uid {entry[2]}) found in {passwd} (systemd-sysusers --root={prefix}); "
        "this host's own users are unchanged"
    )


@click.command("install")
@click.option(
    "--role",
    type=click.Choice(ROLES),
    default="all",
    show_default=True,
    help="coordinator host, GPU node (agent), or both on one machine.",
)
@click.option("--print", "print_only", is_flag=True, help="Print the files instead of writing them.")
@click.option(
    "--force", is_flag=True, help="Replace files that exist (an existing token is kept unless --token-from differs)."
)
@click.option(
    "--prefix",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("/"),
    show_default=True,
    help="Install under this root instead of /.",
)
@click.option(
    "--bin",
    "labgang_bin",
    type=click.Path(path_type=Path),
    default=None,
    help="The labgang executable the units start (default: the one beside this Python).",
)
@click.option(
    "--venv",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="First make a venv here from --python that every user can run (e.g. /opt/labgang/venv), install "
    "this checkout into it and link it as /usr/local/bin/labgang; the units start that.",
)
@click.option(
    "--python",
    "python",
    type=click.Path(dir_okay=False, path_type=Path),
    default=system_venv.DEFAULT_PYTHON,
    show_default=True,
    help="The interpreter the --venv is made from: one every user may run (not a pyenv under /root).",
)
@click.option(
    "--token-from",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Install this cluster token (a GPU node gets the coordinator's) instead of making one.",
)
@click.option(
    "--source",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="The labgang checkout to install with --venv and to take the units from (default: the one this "
    "labgang was installed from; a labgang that --venv made has none, so give it to upgrade).",
)
def install(
    role: str,
    print_only: bool,
    force: bool,
    prefix: Path,
    labgang_bin: Path | None,
    venv: Path | None,
    python: Path,
    token_from: Path | None,
    source: Path | None,
) -> None:
    """Install systemd units and example config (root).

    Writes the units, /etc/labgang examples and the cluster token (0600) under
    PREFIX; a file already holding the same content is left unchanged, one with other
    content is replaced only with --force. With --venv DIR, first makes a labgang every
    user can run (a venv from a system Python, linked as /usr/local/bin/labgang).
    """
    token = token_from.read_bytes() if token_from else None
    problem = None if token is None else token_problem(token)
    if problem is not None:
        raise InstallError(f"--token-from: {token_from} {problem}")
    root = source.absolute() if source is not None else source_root()
    if source is not None and not (root / "systemd" / "labgang-agent.service").is_file():
        raise InstallError(f"--source: {root} is not a labgang checkout (no systemd/labgang-agent.service)")
    if venv is not None:
        if labgang_bin is not None:
            raise InstallError("--bin and --venv exclude each other: the units start the venv's labgang")
        venv = venv.absolute()
        system_venv.check_shareable(python, root)
        found: Path | None = venv / "bin" / "labgang"
    else:
        found = labgang_bin or default_bin()
    if found is None:
        raise InstallError("--bin: no labgang executable found beside this Python or on $PATH; give --bin PATH")
    exec_bin = found.absolute() if venv is not None else check_bin(found.absolute())
    files = plan(role, exec_bin, root=root, token=token)
    if print_only:
        if venv is not None:
            click.echo("# ==> the venv every user runs <==")
            for argv in system_venv.steps(python, venv, root):
                click.echo("# would run: " + " ".join(argv))
            click.echo(
                f"# (a regular install, built from a temporary copy of {root}; then {venv}/bin/labgang is "
                "replaced by a launcher that starts the hot commands without site)"
            )
            click.echo(f"# would link: {prefix / system_venv.LINK_PATH} -> {exec_bin}\n")
        click.echo(render_for_print(files, prefix))
        if venv is None:
            _warn_unit_users(files)
        return
    if prefix == Path("/") and os.geteuid() != 0:
        raise InstallError("installing into / needs root (or use --print, or --prefix DIR)")
    if venv is not None:
        _, what = system_venv.make_venv(python, venv, root)
        click.echo(f"{'venv':8} {venv} ({what}; it does not need {root} any more)")
        linked, action = system_venv.link(prefix, exec_bin, force=force)
        click.echo(f"{action:8} {linked} -> {exec_bin}")
    for target, action in write(files, prefix, force=force):
        click.echo(f"{action:8} {target}")
    _warn_unit_users(files)
    if role in ("all", "coordinator"):
        click.echo(create_system_user(prefix))
    units = {
        "all": "labgang-coordinator labgang-agent",
        "coordinator": "labgang-coordinator",
        "agent": "labgang-agent",
    }[role]
    click.echo(
        f"next: edit {prefix / 'etc/labgang'}/*.toml, then: systemctl daemon-reload && systemctl enable --now {units}"
    )
