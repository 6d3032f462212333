"""The command-line parser of the fast path (:mod:`labgang.launcher.cli.quick`): a flag table per
command, read the way click reads a well-formed command line; anything else is click's. And
:func:`normal_job_id`, the job ids every command reads (here so that ``show JOB`` loads nothing more).

Stdlib only, without ``typing`` at run time (docs/cli-startup.md).
"""

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    # kind of each flag's value: None for a switch, else a converter that raises ValueError
    Converter = Callable[[str], Any] | None


class Repeated:
    """A flag that may be given several times (click's ``multiple=True``): its values, converted
    by ``convert``, are collected in a list in the order given."""

    def __init__(self, convert: "Callable[[str], Any]") -> None:
        self.convert = convert

    def __call__(self, text: str) -> "Any":
        return self.convert(text)


class NotFast(Exception):
    """The argv is not the plain case the fast path handles: let the click command take it."""


def parse(
    args: "list[str]", flags: "dict[str, tuple[str, Converter]]", *, interspersed: bool
) -> "tuple[dict[str, Any], list[str]]":
    """Parse ``args`` against ``flags`` the way click would for a well-formed command line.

    Args:
        args: the arguments after the command name.
        flags: option string -> (destination, converter or None for a switch); a
            :class:`Repeated` converter collects every value given, in a list.
        interspersed: False for ``submit``/``run``: the first positional argument (or ``--``)
            ends the options, the rest is the command to run.

    Returns:
        (the options by destination, the positional arguments).

    Raises:
        NotFast: a help flag, an unknown option, a missing or malformed value, or a form this
            parser leaves to click (short options bundled together).
    """
    options: dict[str, Any] = {}
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positional.extend(args[i:])
            break
        if not arg.startswith("-") or arg == "-":
            positional.append(arg)
            if not interspersed:
                positional.extend(args[i:])
                break
            continue
        name, eq, inline = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        if name not in flags and not arg.startswith("--") and arg[:2] in flags and flags[arg[:2]][1] is not None:
            name, eq, inline = arg[:2], "=", arg[2:]  # -n4
        if name not in flags:
            raise NotFast(arg)
        dest, convert = flags[name]
        if convert is None:
            if eq:
                raise NotFast(arg)
            options[dest] = True
            continue
        if eq:
            text = inline
        elif i < len(args):
            text, i = args[i], i + 1
        else:
            raise NotFast(arg)
        try:
            value = convert(text)
        except ValueError:
            raise NotFast(arg) from None
        if isinstance(convert, Repeated):
            options.setdefault(dest, []).append(value)
        else:
            options[dest] = value
    return options, positional


def normal_job_id(text: str) -> "str | None":
    """``"12"`` for ``" 012"``, ``"12_7"`` for an array task ``"12_07"``; None for anything that is
    not a job id (a positive decimal number, optionally ``_`` and a task index)."""
    head, sep, index = text.strip().partition("_")
    if not (head.isascii() and head.isdigit() and int(head) > 0):
        return None
    if not sep:
        return str(int(head))
    if not (index.isascii() and index.isdigit()):
        return None
    return f"{int(head)}_{int(index)}"
