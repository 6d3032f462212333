"""``labgang install --venv DIR``: a labgang every user of the machine can run.

A venv made from a system Python that every user can read (``/usr/bin/python3``, not a pyenv under
``/root``), with this checkout installed into it (editable, so ``labgang install`` run from it
still finds ``systemd/`` and ``config/``), made readable by all, and linked as
``/usr/local/bin/labgang``, which the systemd units then start. README, "Many users on one machine".
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path, PurePosixPath

from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.install_access import Identity, read_problem, run_problem

DEFAULT_PYTHON = Path("/usr/bin/python3")
LINK_PATH = PurePosixPath("usr/local/bin/labgang")


class VenvError(CommandFailed):
    """A refused ``--venv``/``--python`` with one clear message (exit status 1)."""


def check_shareable(python: Path, source: Path) -> None:
    """Refuse a venv other users could not run: ``python`` must be runnable and ``source`` (the
    checkout installed editable) readable by every user.

    Raises:
        VenvError: naming the directory or file in the way and its mode.
    """
    anyone = Identity.anyone()
    problem = run_problem(python, anyone)
    if problem is not None:
        raise VenvError(
            f"--python: {python} cannot be run by every user ({problem}); "
            f"allowed: a system Python such as {DEFAULT_PYTHON}"
        )
    for needed in (source, source / "pyproject.toml"):
        problem = read_problem(needed, anyone)
        if problem is not None:
            raise VenvError(
                f"--venv: the checkout {source} is installed editable, so every user must read it "
                f"({problem}); clone it somewhere readable, e.g. /opt/labgang/src"
            )


def steps(python: Path, venv: Path, source: Path) -> list[list[str]]:
    """The commands that make the venv and install ``source`` into it (editable)."""
    return [
        [str(python), "-m", "venv", str(venv)],
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-e", str(source)],
    ]


def make_venv(
    python: Path,
    venv: Path,
    source: Path,
    run: Callable[[Sequence[str]], object] = lambda argv: subprocess.run(argv, check=True),
) -> Path:
    """Run :func:`steps`, make everything under ``venv`` readable (and its directories searchable) by
    all, and check that every user can run its ``bin/labgang``; return that path.

    Raises:
        subprocess.CalledProcessError: venv or pip failed (their output went to the terminal).
        VenvError: the result is still not runnable by every user.
    """
    for argv in steps(python, venv, source):
        run(argv)
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
    return labgang


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
