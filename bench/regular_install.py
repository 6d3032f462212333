"""Make the regular install ``labgang install --venv`` makes, in a temporary venv, for ``cli_latency.py``.

Not a benchmark: the development venv installs labgang in editable mode, whose import hook
(setuptools' ``__editable___*_finder``, loaded by a ``.pth`` file at every interpreter start)
imports pathlib, re, enum and more before any command runs. That raises the ``python -c pass``
floor itself, so ratios measured there flatter every command. This script runs the real
``labgang install --venv DEST --prefix SCRATCH`` of this checkout (launcher/cli/system_venv.py: a venv
from ``--python``, pip's regular install of a copy of the checkout, and the ``bin/labgang`` launcher that
starts the hot commands without ``site``), after linking every other distribution of the development
venv into the new venv's site-packages, so that pip finds labgang's dependencies installed and downloads
nothing but what its build needs. It prints the new interpreter's path.

The interpreter is a system one (``/usr/bin/python3`` by default, as ``labgang install`` chooses): a
venv from a pyenv under ``/root`` is refused there, since other users could not run it.

Usage: python bench/regular_install.py [--dest DIR] [--python /usr/bin/python3]
           (default: a new folder under /tmp)
then:  python bench/cli_latency.py --python DIR/bin/python
(``cli_latency.py --regular`` calls :func:`make` itself and measures both installs in one run.)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = Path("/usr/bin/python3")
# What the editable install put in site-packages (and pip, setuptools: the new venv has its own).
SKIP_PREFIXES = (
    "__editable__",
    "labgang",
    "pip",
    "setuptools",
    "pkg_resources",
    "_distutils_hack",
    "distutils-precedence",
    "__pycache__",
)


def make(dest: Path | None = None, python: Path = SYSTEM_PYTHON) -> Path:
    """Run ``labgang install --venv`` of this checkout into ``dest`` (None: a new folder under /tmp, which
    every user may search, as the install requires); return the venv's interpreter's path.

    Raises:
        subprocess.CalledProcessError: venv, pip or the install failed (their output went to stderr).
    """
    base = Path(tempfile.mkdtemp(prefix="lgreg-", dir="/tmp"))
    base.chmod(0o755)  # install --venv refuses a venv other users cannot reach
    dest = (dest or base / "venv").absolute()
    subprocess.run([str(python), "-m", "venv", str(dest)], check=True)
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = next((dest / "lib").glob("python3*/site-packages"))
    for entry in sorted(ours.iterdir()):
        if entry.name.startswith(SKIP_PREFIXES) or (theirs / entry.name).exists():
            continue
        (theirs / entry.name).symlink_to(entry)
    install = [sys.executable, "-m", "labgang.launcher", "install", "--venv", str(dest), "--python", str(python)]
    done = subprocess.run(
        [*install, "--prefix", str(base / "root")], check=True, capture_output=True, text=True, cwd=REPO
    )
    for line in done.stdout.splitlines():
        if line.startswith("venv "):
            print(line, file=sys.stderr)  # what labgang install says it made
    return dest / "bin" / "python"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=None, help="folder for the venv")
    parser.add_argument("--python", type=Path, default=SYSTEM_PYTHON, help="the interpreter the venv is made from")
    args = parser.parse_args()
    print(make(args.dest, args.python))


if __name__ == "__main__":
    main()
