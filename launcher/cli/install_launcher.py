"""The ``labgang`` command ``labgang install --venv`` writes into its venv in place of pip's console script.

pip's script starts the venv's interpreter with ``site`` (which reads every ``.pth`` file of the venv),
about a third of a hot command's start. This one's first line runs the venv's interpreter as
``python -I -S`` (``-IS``: Linux hands a ``#!`` line's options to the interpreter as one argument, and
``-IS`` is one cluster of flags), so the interpreter starts once, without ``site``; the script sets
``sys.prefix`` to the venv and appends exactly the venv's site-packages, written in here at install time,
then enters :mod:`labgang.launcher.cli.quick_launch` (the hot commands here, the rest restarted with
``site``: exactly pip's script). docs/cli-startup.md.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

# Linux reads at most 127 bytes of a #! line before 5.1 (255 since): past that the kernel would cut it.
SHEBANG_LIMIT = 127

LAUNCHER = """#!{python} -IS
# labgang's command, written by `labgang install --venv` in place of pip's console script: the hot
# commands start without `site`, everything else restarts with it (labgang.launcher.cli.quick_launch;
# docs/cli-startup.md). `pip install` into this venv writes pip's script back, which works too.
import sys

if sys.flags.no_site:
    sys.prefix = sys.exec_prefix = {venv}
    sys.path.extend({site_packages})
from labgang.launcher.cli.quick_launch import main

main()
"""


class LauncherError(Exception):
    """The launcher could not be written or does not run; pip's script is left in place."""


def site_packages(python: Path) -> list[str]:
    """The site-packages folders ``site`` puts on ``sys.path`` for ``python`` (a venv's interpreter), in order.

    Raises:
        subprocess.CalledProcessError: ``python`` failed.
    """
    code = "import json, os, site; print(json.dumps([d for d in site.getsitepackages() if os.path.isdir(d)]))"
    done = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True)
    found: list[str] = json.loads(done.stdout)
    return found


def render(python: Path, venv: Path, folders: list[str]) -> str:
    """The launcher's text for the venv ``venv`` (absolute), its interpreter ``python`` and its
    site-packages ``folders``.

    Raises:
        LauncherError: the ``#!`` line would be longer than :data:`SHEBANG_LIMIT` bytes, or a path holds
            whitespace (a ``#!`` line cannot quote it).
    """
    shebang = f"#!{python} -IS"
    if len(shebang.encode()) > SHEBANG_LIMIT:
        raise LauncherError(f"{python}: the #! line would be {len(shebang.encode())} bytes, over {SHEBANG_LIMIT}")
    if any(ch.isspace() for ch in str(python)):
        raise LauncherError(f"{python}: a #! line cannot hold a path with whitespace")
    # JSON's string and list literals are Python's too (double quotes, as the formatter writes them)
    return LAUNCHER.format(python=python, venv=json.dumps(str(venv)), site_packages=json.dumps(folders))


def write(venv: Path) -> Path:
    """Replace ``venv``'s ``bin/labgang`` (pip's console script) with the launcher, mode 0755, and check
    that it runs (``labgang --help``, the fast path); return its path.

    Raises:
        LauncherError: it could not be rendered, or it did not run (pip's script is put back then).
        subprocess.CalledProcessError: the venv's interpreter failed to name its site-packages.
    """
    venv = venv.absolute()
    python = venv / "bin" / "python"
    script = venv / "bin" / "labgang"
    text = render(python, venv, site_packages(python))
    pips = script.read_bytes()
    tmp = script.with_name(".labgang.labgang-install")
    tmp.write_text(text)
    tmp.chmod(0o755)
    os.replace(tmp, script)
    ran = subprocess.run([str(script), "--help"], capture_output=True, text=True, check=False)
    if ran.returncode != 0 or not ran.stdout.startswith("Usage: labgang"):
        script.write_bytes(pips)
        raise LauncherError(f"{script} did not run (status {ran.returncode}): {ran.stderr.strip()[-300:]}")
    return script
