"""One error style for every ``labgang`` command: ``labgang <command>: <flag>: <problem>; allowed: ...``.

Refusals from the coordinator and checks in the commands already print one line naming the
command and the flag (:class:`labgang.launcher.cli.errors.CommandFailed`). click's own usage
errors (a bad ``-n 0``, an unknown option, a missing argument) would print its three-line
``Usage:/Try/Error:`` block instead; :class:`OneLineUsageError` re-renders them in the same
one-line style, keeping exit status 2. :class:`labgang.launcher.cli.main.LazyGroup` wraps
every subcommand with it.
"""

from __future__ import annotations

from typing import IO, Any

import click


def _flag(param: click.Parameter | None) -> str | None:
    """``-n/--workers`` for an option, its metavar (``JOB``) for an argument, None for neither."""
    if param is None:
        return None
    if isinstance(param, click.Option):
        return "/".join(param.opts[:2])  # -n/--workers, not its Slurm synonym too (--ntasks)
    return param.human_readable_name.removesuffix("...")


def _allowed(param: click.Parameter | None) -> str | None:
    """What a range or choice parameter allows, in words (None when click's type says nothing)."""
    kind = getattr(param, "type", None)
    if isinstance(kind, click.Choice):
        return ", ".join(map(str, kind.choices))
    if isinstance(kind, (click.IntRange, click.FloatRange)):
        noun = "an integer" if isinstance(kind, click.IntRange) else "a number"
        low = None if kind.min is None else f"{'>' if kind.min_open else '>='} {kind.min}"
        high = None if kind.max is None else f"{'<' if kind.max_open else '<='} {kind.max}"
        if low and high:
            return f"{noun} from {kind.min} to {kind.max}"
        return f"{noun} {low or high}"
    return None


def _tidy(text: str) -> str:
    text = text.strip().rstrip(".")
    first = text.split(None, 1)[0].split(":", 1)[0] if text else ""
    if first[1:] != first[1:].lower():  # a name as written (TimeLimit, JobName, GPU): kept
        return text
    return text[:1].lower() + text[1:]


def command_path(ctx: click.Context | None) -> str:
    """``labgang config check`` for a context of that command, whatever name the root was invoked by."""
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    if ctx is not None and not isinstance(ctx.command, click.Group) and ctx.command.name:
        names.append(ctx.command.name)  # a subcommand run on its own (tests, embedding)
    return " ".join(["labgang", *reversed(names)])


def _option_names(ctx: click.Context | None) -> list[str]:
    """Every option string of the command ``ctx`` runs (``-n``, ``--workers``...), in its order."""
    if ctx is None:
        return []
    options = [param for param in ctx.command.params if isinstance(param, click.Option)]
    return [opt for param in options for opt in param.opts + param.secondary_opts]


def usage_line(exc: click.UsageError, path: str | None = None) -> str:
    """Render a click usage error as one line: ``labgang submit: -n/--workers: 0 is not in the range x>=1;
    allowed: an integer >= 1``.

    Args:
        exc: the error click raised (its ``ctx`` names the command, ``param`` the flag).
        path: the command (``labgang queue``) when ``exc`` has no context: click's parser raises
            a missing option value (``queue -u``) without one.

    Returns:
        The line, without a newline. Unknown options and commands point at ``--help``.
    """
    path = command_path(exc.ctx) if exc.ctx is not None or path is None else path
    if isinstance(exc, click.NoSuchOption):
        from labgang.launcher.cli.suggest import option_hint

        text = f"no such option {exc.option_name!r}"
        command = exc.ctx.command.name if exc.ctx is not None else None
        hint = option_hint(exc.option_name, _option_names(exc.ctx), slurm=command in ("submit", "run"))
        if hint:
            text += f" ({hint})"
        return f"{path}: {text}; see `{path} --help`"
    if isinstance(exc, click.MissingParameter):
        return f"{path}: {_tidy(exc.format_message())}; see `{path} --help`"
    if isinstance(exc, click.BadParameter):
        flag = _flag(exc.param)
        text = _tidy(exc.message)
        allowed = _allowed(exc.param)
        if isinstance(getattr(exc.param, "type", None), click.Choice) and " is not one of " in text:
            text = text.split(" is not one of ", 1)[0] + " is not allowed"
        if allowed and "allowed:" not in text:
            text += f"; allowed: {allowed}"
        return f"{path}: {flag}: {text}" if flag else f"{path}: {text}"
    text = _tidy(exc.format_message())
    if text.startswith("no such command"):
        text += f"; see `{path} --help`"
    return f"{path}: {text}"


# click >= 8.2 raises this for a group run without a command; its message is the whole help.
_NO_ARGS_IS_HELP: tuple[type[click.UsageError], ...] = tuple(
    kind for kind in [getattr(click.exceptions, "NoArgsIsHelpError", None)] if isinstance(kind, type)
)


class CommandFailed(click.ClickException):
    """One line on stderr (``labgang <command>: <message>``) and an exit status; raised in a command
    run with ``--json``, also the error object on stdout (:mod:`labgang.launcher.cli.json_error`).

    Args:
        message: the line, without the command's name. exit_code: 2 for a bad value, 1 for a refusal.
        field, allowed: what the JSON error object names (the field or flag, and what it allows).
    """

    def __init__(self, message: str, exit_code: int = 1, *, field: str | None = None, allowed: Any = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code  # type: ignore[misc]  # click types it a ClassVar yet reads it per instance
        self.field = field
        self.allowed = allowed
        # click shows the error after the command's context has closed: name the command now.
        ctx = click.get_current_context(silent=True)
        self.prefix = command_path(ctx) + ": "
        self.as_json = bool(ctx is not None and ctx.params.get("as_json"))

    def show(self, file: IO[Any] | None = None) -> None:
        if self.as_json:
            from labgang.launcher.cli.json_error import print_error_json

            print_error_json(self.format_message(), self.field, self.allowed)
        click.echo(self.prefix + self.format_message(), err=True)


def asks_json(args: list[str]) -> bool:
    """Whether a command's own arguments ``args`` (as typed, before they are parsed) ask for ``--json``:
    a usage error is raised before the command's parameters exist. Words after ``--`` are the job's."""
    words = args[: args.index("--")] if "--" in args else args
    return "--json" in words


def _json_field(exc: click.UsageError) -> tuple[str | None, str | None]:
    """The JSON error object's ``field`` (the parameter's name: ``workers``) and ``allowed`` of a usage error."""
    param = getattr(exc, "param", None)
    if param is None or param.name is None:
        return None, None
    return param.name, _allowed(param)


class OneLineUsageError(click.UsageError):
    """A click usage error shown as one :func:`usage_line` on stderr; exit status 2. With ``as_json``
    (the command was given ``--json``), the error object goes to stdout first, as every other refusal
    of a ``--json`` command does (:mod:`labgang.launcher.cli.json_error`)."""

    def __init__(self, original: click.UsageError, path: str | None = None, *, as_json: bool = False) -> None:
        super().__init__(original.message, original.ctx)
        self.original = original
        self.path = path
        self.as_json = as_json

    def show(self, file: IO[Any] | None = None) -> None:
        line = usage_line(self.original, self.path)
        if self.as_json:
            from labgang.launcher.cli.json_error import print_error_json

            field, allowed = _json_field(self.original)
            print_error_json(line.split(": ", 1)[1] if ": " in line else line, field, allowed)
        click.echo(line, err=True)


def one_line(exc: click.ClickException, ctx: click.Context, *, as_json: bool = False) -> click.ClickException:
    """Make ``exc`` print in the one-line style (usage errors keep exit status 2).

    Args:
        exc: what a command raised.
        ctx: the group's context (names the subcommand when ``exc`` carries no context).
        as_json: the command was given ``--json`` (:func:`asks_json`): a usage error prints the
            error object on stdout too.
    """
    if isinstance(exc, (OneLineUsageError, CommandFailed, _NO_ARGS_IS_HELP)):
        return exc  # bare `labgang`: the group's help, whole, on stderr with status 2 (as click prints it)
    sub = ctx.invoked_subcommand
    path = command_path(ctx) + (f" {sub}" if sub else "")
    if isinstance(exc, click.UsageError):
        return OneLineUsageError(exc, path, as_json=as_json)
    if type(exc).show is not click.ClickException.show:
        return exc  # it prints itself its own way
    failed = CommandFailed(exc.format_message(), exc.exit_code)
    failed.prefix = path + ": "
    return failed
