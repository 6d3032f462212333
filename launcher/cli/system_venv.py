"""``labgang install --venv DIR``: a labgang every user of the machine can run.

A venv made from a system Python that every user can read (``/usr/bin/python3``, not a pyenv under
``/root``), with this checkout installed into it as a regular (non-editable) install: pip builds it from a
temporary copy of the checkout, so nothing is written into the checkout and the installed labgang does
not depend on the clone staying put (``systemd/`` and ``config/`` travel as data files, under the venv's
``share/labgang``). Its ``bin/labgang`` is then the launcher that starts the hot commands without ``site``
(:mod:`labgang.launcher.cli.install_launcher`); everything is made readable by all and linked as
``/usr/local/bin/labgang``, which the systemd units then start. README, "Many users on one machine".
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from labgang.launcher.cli import install_launcher
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.install_access import Identity, run_problem

DEFAULT_PYTHON = Path("/usr/bin/python3")
LINK_PATH = PurePosixPath("usr/local/bin/labgang")
# What pip need not copy to build the checkout (a development venv, git's objects, build leftovers).
NOT_COPIED = (".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache", ".hypothesis")


class VenvError(CommandFailed):
    """A refused ``--venv``/``--python`` with one clear message (exit status 1)."""


def check_shareable(python: Path, source: Path) -> None:
    """Refuse a venv other users could not run (``python`` must be runnable by every user), or one that
    cannot be built (``source`` must be a source checkout: its ``pyproject.toml``, readable by whoever
    installs). The checkout itself need not be readable by others: the install is a copy.

    Raises:
        VenvError: naming the interpreter or the checkout, and what is allowed.
    """
    anyone = Identity.anyone()
    problem = run_problem(python, anyone)
    if problem is not None:
        raise VenvError(
            f"--python: {python} cannot be run by every user ({problem}); "
            f"allowed: a system Python such as {DEFAULT_PYTHON}"
        )
    if not (source / "pyproject.toml").is_file() or not (source / "setup.py").is_file():
        raise VenvError(
            f"--venv: {source} is not a labgang source checkout (no pyproject.toml and setup.py there); "
            "give the checkout with --source (e.g. --source /opt/labgang/src)"
        )


def steps(python: Path, venv: Path, source: Path) -> list[list[str]]:
    """The commands that make the venv and install ``source`` into it (a regular install: pip builds a
    wheel of ``source`` and installs it, with its dependencies)."""
    return [
        [str(python), "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(source)],
    ]


def make_venv(
    python: Path,
    venv: Path,
    source: Path,
    run: Callable[[Sequence[str]], object] = lambda argv: subprocess.run(argv, check=True),
) -> tuple[Path, str]:
    """Run :func:`steps` on a temporary copy of ``source`` (so the build writes nothing into the
    checkout), write the launcher in place of pip's ``bin/labgang``
    (:func:`labgang.launcher.cli.install_launcher.write`), make everything under ``venv`` readable (and
    its directories searchable) by all, and check that every user can run its ``bin/labgang``.

    Returns:
        ``(bin/labgang, what it is)``: one line for the summary; where the launcher could not be
        written (a ``#!`` line too long, or it did not run), pip's console script is kept and the line
        says why.

    Raises:
        subprocess.CalledProcessError: venv or pip failed (their output went to the terminal).
        VenvError: the result is not runnable by every user.
    """
    with tempfile.TemporaryDirectory(prefix="labgang-install-") as scratch:
        copy = Path(scratch) / "labgang"
        shutil.copytree(source, copy, ignore=shutil.ignore_patterns(*NOT_COPIED), symlinks=True)
        for argv in steps(python, venv, copy):
            run(argv)
    try:
        install_launcher.write(venv)
        what = "regular install; hot commands start without site (python -I -S)"
    except install_launcher.LauncherError as err:
        what = f"regular install; pip's console script kept, the launcher without site was not written: {err}"
    for root, dirs, files in os.walk(venv):
        for name in [*dirs, *files]:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                mode = os.lstat(path).st_mode
                os.chmod(path, mode | (0o555 if os.path.isdir(path) or mode & 0o100 else 0o444))
    os.chmod(venv, os.stat(venv).st_mode | 0o555)  # noqa: S103 - every user runs this venv
    labgang = venv / "bin" / "labgang"
    problem = run_problem(labgang, Identity.anyone())
    if problem is not None:
        raise VenvError(f"--venv: {labgang} still cannot be run by every user: {problem}")
    return labgang, what


def link(prefix: Path, labgang: Path, *, force: bool) -> tuple[Path, str]:
    """Point ``<prefix>/usr/local/bin/labgang`` at ``labgang``.

    Returns:
        ``(link, action)``, action "written", "replaced" or "unchanged".

    Raises:
        VenvError: something else is there and ``force`` is False.
    """
    target = prefix / LINK_PATH
    if target.is_symlink() and os.readlink(target) == str(labgang):
        return target, "unchanged"
    existed = target.exists() or target.is_symlink()
    if existed and not force:
        raise VenvError(f"{target} exists and is not a link to {labgang}; nothing was written (use --force)")
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(".labgang.labgang-install")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(labgang)
    os.replace(tmp, target)
    return target, "replaced" if existed else "written"
