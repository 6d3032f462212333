"""Real Unix users for the tests where who you are matters (discovery, priorities, limits, accounting).

``throwaway_users(n)`` creates ``n`` unprivileged users with home directories (``useradd -m``) and
removes them, homes included, afterwards. ``UserShell`` runs labgang as one of them: a real process
with that uid, gid and groups (the kernel says who it is, so the coordinator's ``SO_PEERCRED`` sees
that user), started with an environment a login would give (``HOME``, ``USER``, ``LOGNAME``,
``PATH``) and nothing else: no ``LABGANG_*`` variable unless a test passes one.

Which Python such a user runs: the test venv's interpreter usually resolves into root's home (a
pyenv under ``/root``, mode 0700), which other users cannot execute. ``shared_python`` therefore
makes a venv from the system's ``/usr/bin/python3`` (readable by all) whose site-packages only adds
the test venv's (``site.addsitedir`` in a ``.pth``: the installed dependencies and the editable
labgang checkout, which must be readable by everyone). Both interpreters must be the same
``major.minor`` for the compiled dependencies to load; where that or ``useradd`` is missing, the
fixtures skip with the reason.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

SYSTEM_PYTHON = Path("/usr/bin/python3")


def cannot_create_users() -> str | None:
    """Why this run cannot create throwaway users, or ``None`` when it can (root with ``useradd``)."""
    if os.geteuid() != 0:
        return "creating throwaway Unix users needs root"
    if shutil.which("useradd") is None or shutil.which("userdel") is None:
        return "creating throwaway Unix users needs useradd and userdel"
    return None


def cannot_share_python() -> str | None:
    """Why other users cannot run this checkout's labgang, or ``None`` when ``shared_python`` works."""
    if not SYSTEM_PYTHON.exists():
        return f"{SYSTEM_PYTHON} is missing: no interpreter every user may run"
    probe = subprocess.run(
        [str(SYSTEM_PYTHON), "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
        capture_output=True,
        text=True,
        check=False,
    )
    ours, theirs = f"{sys.version_info[0]}.{sys.version_info[1]}", probe.stdout.strip() or "?"
    if theirs != ours:
        return f"{SYSTEM_PYTHON} is Python {theirs}, the test venv {ours}: their compiled packages differ"
    for needed in (Path(sysconfig.get_paths()["purelib"]), Path(__file__).resolve().parent.parent):
        for folder in [needed, *needed.parents]:
            if not folder.stat().st_mode & 0o001:
                return f"{folder} is not searchable by other users, so they cannot import labgang from {needed}"
    return None


def shared_python(parent: Path) -> Path:
    """A venv under ``parent`` (made readable by all) from ``/usr/bin/python3`` that imports this venv's
    packages; returns its ``bin/python``.

    Raises:
        subprocess.CalledProcessError: ``python3 -m venv`` failed.
    """
    venv = parent / "uservenv"
    subprocess.run([str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True)
    ours = sysconfig.get_paths()["purelib"]
    site_dirs = list(venv.glob("lib/python3*/site-packages"))
    assert len(site_dirs) == 1, site_dirs
    (site_dirs[0] / "labgang_tests.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    for path in [parent, *parent.rglob("*")]:
        mode = path.lstat().st_mode
        if not path.is_symlink():
            path.chmod(mode | 0o055 if path.is_dir() else mode | 0o044)
    return venv / "bin" / "python"


@dataclass(frozen=True)
class UnixUser:
    """One throwaway user: ``name``, numeric ``uid``/``gid`` and ``home`` directory."""

    name: str
    uid: int
    gid: int
    home: Path


@contextmanager
def throwaway_users(count: int, prefix: str = "lgu") -> Iterator[list[UnixUser]]:
    """Create ``count`` users named ``<prefix><n><random>`` with homes; delete them (and homes) on exit.

    Raises:
        subprocess.CalledProcessError: ``useradd`` refused (the caller checked ``cannot_create_users``).
    """
    suffix = uuid.uuid4().hex[:6]
    names = [f"{prefix}{n}{suffix}" for n in range(1, count + 1)]
    created: list[str] = []
    try:
        for name in names:
            subprocess.run(["useradd", "-m", "-s", "/bin/sh", name], check=True, capture_output=True)
            created.append(name)
        users = []
        for name in names:
            entry = pwd.getpwnam(name)
            users.append(UnixUser(name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir)))
        yield users
    finally:
        for name in created:
            subprocess.run(["pkill", "-KILL", "-u", name], check=False, capture_output=True)
            subprocess.run(["userdel", "-r", name], check=False, capture_output=True)


@dataclass(frozen=True)
class UserShell:
    """Runs commands as ``user`` with a login's environment and nothing else; ``python`` is an
    interpreter that user may execute (``shared_python``)."""

    user: UnixUser
    python: Path

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The environment a login shell would give: ``HOME``, ``USER``, ``LOGNAME``, ``PATH`` (+ ``extra``)."""
        env = {
            "HOME": str(self.user.home),
            "USER": self.user.name,
            "LOGNAME": self.user.name,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "LANG": "C.UTF-8",
        }
        env.update(extra or {})
        return env

    def run(
        self,
        args: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        timeout: float = 60,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``labgang ARGS`` as the user (a real process with the user's uid, gid and groups) in their
        home; returns the finished process with text ``stdout``/``stderr``."""
        return self.run_argv([str(self.python), "-m", "labgang.launcher", *args], env=env, timeout=timeout, input=input)

    def run_argv(
        self,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        timeout: float = 60,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run ``argv`` as the user, as ``run`` does."""
        return subprocess.run(
            list(argv),
            user=self.user.uid,
            group=self.user.gid,
            extra_groups=os.getgrouplist(self.user.name, self.user.gid),
            env=self.env(env),
            cwd=self.user.home,
            capture_output=True,
            text=True,
            input=input,
            timeout=timeout,
            check=False,
        )


@contextmanager
def lab_shells(count: int = 2) -> Iterator[list[UserShell]]:
    """``count`` throwaway users, each with a ``UserShell`` on a shared interpreter. Callers check
    ``cannot_create_users()`` and ``cannot_share_python()`` first (the fixtures skip on them)."""
    with tempfile.TemporaryDirectory(prefix="labgang-users-") as tmp:
        python = shared_python(Path(tmp))
        with throwaway_users(count) as users:
            yield [UserShell(user, python) for user in users]
