"""Make a regular (non-editable) install of this checkout in a temporary venv, for ``cli_latency.py --python``.

Not a benchmark: the development venv installs labgang in editable mode, whose import hook
(setuptools' ``__editable___*_finder``, loaded by a ``.pth`` file at every interpreter start)
imports pathlib, re, enum and more before any command runs. That raises the ``python -c pass``
floor itself, so ratios measured there flatter every command. This script builds a wheel of the
working tree (copied first, so the build writes nothing into the checkout; ``pip wheel --no-deps
--no-build-isolation``, offline), creates a venv, installs
the wheel with the development venv's pip (so the ``labgang`` console script is what that
pip writes: pip 26 writes one without ``import re``, pip 23 one with it, about 8 ms more a
command; a warning says so), and links every other distribution of the development venv into the new
site-packages (no download, no copy). It prints the new interpreter's path.

Usage: python bench/regular_install.py [--dest DIR] [--source CHECKOUT]
           (default: a new folder under /tmp; this checkout, or another one to compare with)
then:  python bench/cli_latency.py --python DIR/bin/python
(``cli_latency.py --regular`` calls :func:`make` itself and measures both installs in one run.)
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
# What the editable install put in site-packages (and pip, which the new venv has its own of).
SKIP_PREFIXES = ("__editable__", "labgang", "pip", "_distutils_hack", "distutils-precedence", "__pycache__")


def make(source: Path = REPO, dest: Path | None = None) -> Path:
    """Build a regular install of ``source`` into the venv ``dest`` (None: a new folder under /tmp);
    return its interpreter's path."""
    base = Path(tempfile.mkdtemp(prefix="lgreg-", dir="/tmp"))
    dest = dest or base / "venv"
    wheels = base / "wheels"
    copy = base / "source"
    shutil.copytree(
        source,
        copy,
        ignore=shutil.ignore_patterns(".git", ".venv", "build", "*.egg-info", "__pycache__", ".pytest_cache"),
    )
    subprocess.run([sys.executable, "-m", "venv", str(dest)], check=True)
    build = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels)]
    subprocess.run([*build, str(copy)], check=True, cwd=base)  # nothing is written into the checkout
    [wheel] = wheels.glob("labgang-*.whl")
    python = dest / "bin" / "python"
    subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
    )
    ours = Path(sysconfig.get_paths()["purelib"])
    theirs = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    for entry in sorted(ours.iterdir()):
        if entry.name.startswith(SKIP_PREFIXES) or (theirs / entry.name).exists():
            continue
        (theirs / entry.name).symlink_to(entry)
    if "import re" in (dest / "bin" / "labgang").read_text():
        # pip 23 (Python 3.11's ensurepip) writes console scripts that import re (~8 ms a start);
        # pip 26 does not. Measure with the pip users get: upgrade the development venv's pip.
        print(
            f"warning: {dest / 'bin' / 'labgang'} imports re: an old pip wrote it (pip install -U pip)", file=sys.stderr
        )
    return python


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=None, help="folder for the venv (must not exist)")
    parser.add_argument("--source", type=Path, default=REPO, help="the checkout to install (default: this one)")
    args = parser.parse_args()
    print(make(args.source, args.dest))


if __name__ == "__main__":
    main()
