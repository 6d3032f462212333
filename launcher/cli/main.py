"""The ``labgang`` command: one click group whose subcommands live in their own modules.

Each subcommand is imported only when it runs (``LazyGroup``), so ``labgang --help``
and ``labgang nodes`` do not pay for Textual or aiohttp. To add a command, write a
module under ``launcher/cli/`` (or elsewhere) exposing a ``click.Command`` and add
one line to ``COMMANDS`` (:mod:`labgang.launcher.cli.commands`, where ``labgang --help`` is
written without click).

Exit statuses everywhere: 0 success, 1 the job failed or the request was refused,
2 usage error (bad flag, bad file, no NVML driver).
"""

from __future__ import annotations

import importlib
from typing import Any

import click
from labgang.agent import labgang_version
from labgang.launcher.cli.commands import COMMANDS, GROUP_HELP
from labgang.launcher.cli.errors import asks_json, one_line


class LazyGroup(click.Group):
    """A click group that imports each subcommand's module on first use.

    Usage errors anywhere below it print as one line (:mod:`labgang.launcher.cli.errors`).
    """

    def make_context(
        self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any
    ) -> click.Context:
        as_json = asks_json(args)  # before click consumes ``args``
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.NoSuchOption as exc:
            said: click.UsageError = exc
            if exc.ctx is not None and exc.ctx.command is self and exc.option_name not in ("-h", "--help"):
                said = _option_before_command(exc, args)
            raise one_line(said, said.ctx or click.Context(self, info_name=info_name), as_json=as_json) from None
        except click.UsageError as exc:
            raise one_line(exc, exc.ctx or click.Context(self, info_name=info_name), as_json=as_json) from None

    def invoke(self, ctx: click.Context) -> Any:
        as_json = asks_json(ctx.args)  # the subcommand's own arguments, which click clears as it invokes it
        try:
            return super().invoke(ctx)
        except click.ClickException as exc:
            raise one_line(exc, ctx, as_json=as_json) from None

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else ""
        if name and not name.startswith("-") and name not in COMMANDS and not ctx.resilient_parsing:
            from labgang.launcher.cli.suggest import command_hint

            said = command_hint(name, COMMANDS)
            hint = f" ({said})" if said else ""
            raise click.UsageError(f"No such command {name!r}{hint}.", ctx)
        return super().resolve_command(ctx, args)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, attr = target[0].split(":")
        command: click.Command = getattr(importlib.import_module(f"labgang.{module_name}"), attr)
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, COMMANDS[name][1]) for name in self.list_commands(ctx)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


def _option_before_command(exc: click.NoSuchOption, args: list[str]) -> click.UsageError:
    """``labgang --state-dir D queue``: the group itself takes only ``--help`` and ``--version``, so say
    that options go after the command (named when the line has one) instead of only "no such option"."""
    command = next((word for word in args if word in COMMANDS), None)
    option = exc.option_name.partition("=")[0]
    where = (
        f"`labgang {command} {option} ...`); see `labgang {command} --help`"
        if command
        else (f"`labgang COMMAND {option} ...`); see `labgang --help`")
    )
    return click.UsageError(
        f"no such option {option!r} before the command (labgang itself takes only -h/--help and "
        f"-V/--version): put a command's options after it ({where}",
        exc.ctx,
    )


def _print_version(ctx: click.Context, param: click.Parameter, value: bool) -> None:
    # The version is looked up only when asked for: importlib.metadata costs tens of
    # milliseconds that `labgang --help` should not pay.
    if value and not ctx.resilient_parsing:
        click.echo(f"labgang, version {labgang_version()}")
        ctx.exit()


@click.group(cls=LazyGroup, help=GROUP_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    "-V",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def cli() -> None:
    """The ``labgang`` group (its help: :data:`labgang.launcher.cli.commands.GROUP_HELP`)."""


def main() -> None:
    """Run the click group on ``sys.argv`` (the console script, :func:`labgang.launcher.cli.quick.main`,
    takes the fast path for ``submit``, ``queue`` and ``cancel`` first)."""
    from labgang.launcher.cli.quick import escape_unencodable

    escape_unencodable()
    cli(prog_name="labgang")
