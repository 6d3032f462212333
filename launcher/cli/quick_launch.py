"""What the ``labgang`` command that ``labgang install --venv`` writes runs: the hot commands without ``site``.

That command (:mod:`labgang.launcher.cli.install_launcher` writes it in place of pip's console script)
starts its venv's interpreter as ``python -I -S``: no ``site``, so none of its ``.pth`` files is read,
and nothing from the user's environment (``PYTHON*`` variables, the user's site-packages, the current
directory) reaches ``sys.path``. It sets ``sys.prefix``/``sys.exec_prefix`` to the venv and appends the
venv's site-packages itself, as ``site`` would for a venv, then calls :func:`main`:

- the hot commands (:data:`labgang.launcher.cli.quick.FAST_COMMANDS`: ``submit``, ``queue``, ``cancel``,
  ``show``...) run here, importing only the stdlib and labgang (tests/cli/test_quick.py holds them to that);
- anything else (a command the fast path hands to click, a click usage error, ``labgang coordinator``)
  takes the full path: :func:`restart_with_site` replaces this process (same pid, file descriptors,
  signal dispositions and environment) with the venv's interpreter, *with* ``site``, on the same file
  and the same ``argv``, which is then exactly what pip's console script runs; nothing was read or
  written before that;
- so does every command when a ``PYTHON*`` variable that changes what a command prints or how it
  runs is set (:data:`HONOURED`): ``-I`` would ignore it, the full path honours it, as pip's script does;
  ``PYTHONUNBUFFERED`` is applied here (:func:`unbuffered_stdio`).

Run with ``site`` (the restarted process, or ``python VENV/bin/labgang``), :func:`main` is
:func:`labgang.launcher.cli.quick.main`. docs/cli-startup.md has the measurements.
"""

import os
import sys

# PYTHON* variables a user sets to change what a command shows or how it runs: with one of these set,
# every command takes the full path, where the interpreter reads them. The others are ignored by the
# fast path on purpose (-I): the ones that change sys.path (PYTHONPATH, PYTHONHOME, PYTHONUSERBASE,
# PYTHONSAFEPATH, PYTHONPLATLIBDIR: labgang's own venv only), the bytecode cache's
# (PYTHONDONTWRITEBYTECODE, PYTHONPYCACHEPREFIX: where compiled files go, not what runs) and the
# interactive prompt's PYTHONSTARTUP (a command has no prompt). PYTHONUNBUFFERED, which container images
# often set, is applied here (unbuffered_stdio) rather than by a second start.
HONOURED = frozenset(
    {
        "PYTHONIOENCODING",
        "PYTHONUTF8",
        "PYTHONCOERCECLOCALE",
        "PYTHONWARNINGS",
        "PYTHONDEVMODE",
        "PYTHONINSPECT",
        "PYTHONVERBOSE",
        "PYTHONDEBUG",
        "PYTHONOPTIMIZE",
        "PYTHONPROFILEIMPORTTIME",
        "PYTHONFAULTHANDLER",
        "PYTHONTRACEMALLOC",
        "PYTHONHASHSEED",
        "PYTHONMALLOC",
        "PYTHONINTMAXSTRDIGITS",
        "PYTHONNODEBUGRANGES",
        "PYTHONBREAKPOINT",
        "PYTHONASYNCIODEBUG",
    }
)


def restart_with_site() -> None:
    """Replace this process with ``sys.executable`` run, with ``site``, on the same script and arguments
    (``sys.argv``), as pip's console script would be run; flushes the standard streams first.

    Does not return. Raises:
        OSError: the interpreter cannot be executed (then this process goes on raising it).
    """
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, [sys.executable, *sys.argv])  # noqa: S606 - the same command, no shell


def unbuffered_stdio() -> None:
    """Make ``sys.stdout`` and ``sys.stderr`` what ``python -u`` (``PYTHONUNBUFFERED``) makes them, which
    ``-I`` left buffered: text written through at once to an unbuffered file, the same encoding and errors."""
    import io

    for name in ("stdout", "stderr"):
        old = getattr(sys, name)
        if old is None:
            continue
        raw = io.FileIO(old.fileno(), "wb", closefd=False)
        new = io.TextIOWrapper(raw, encoding=old.encoding, errors=old.errors, newline="\n", write_through=True)
        new.mode = "w"  # type: ignore[misc]  # as the interpreter labels its standard streams
        setattr(sys, name, new)
        setattr(sys, f"__{name}__", new)


def main() -> None:
    """Run the command in ``sys.argv``: the fast path here when this interpreter started without ``site``
    (and no :data:`HONOURED` variable is set), the full path (:func:`restart_with_site`) otherwise."""
    from labgang.launcher.cli import quick

    if not sys.flags.no_site:
        quick.main()
        return
    if not HONOURED.isdisjoint(os.environ):
        restart_with_site()
    quick.ExitHandlerCount.watch()  # nothing ran before us: a count of 0 lets a fast command skip teardown
    if os.environ.get("PYTHONUNBUFFERED"):
        unbuffered_stdio()
    quick.main(full=restart_with_site)
