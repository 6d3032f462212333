"""``labgang top``: watch allocation and pitfall metrics (Textual TUI), or print one frame with ``--once``."""

from __future__ import annotations

import asyncio
import shutil
import sys

import click
from labgang.launcher.api.client import ClientError


@click.command("top")
@click.option("--local", is_flag=True, help="Read this machine's GPUs through NVML; no coordinator needed.")
@click.option(
    "--simulate",
    "simulate",
    metavar="FILE",
    type=click.Path(exists=True, dir_okay=False),
    help="Use the simulated NVML from a machine file (config/sim/*.toml); implies --local.",
)
@click.option("--once", is_flag=True, help="Print one plain-text frame and exit (scripts, SSH, tests).")
@click.option(
    "--state-dir",
    metavar="DIR",
    type=click.Path(file_okay=False),
    help="State directory of the coordinator (default: $LABGANG_STATE_DIR or the user default).",
)
@click.option(
    "--interval",
    default=1.0,
    show_default=True,
    type=click.FloatRange(min=1.0),
    help="Seconds between refreshes (at least 1).",
)
@click.option(
    "--width",
    default=None,
    type=click.IntRange(min=40),
    help="Line width for --once (default: the terminal's, at most 200).",
)
@click.option(
    "--thresholds",
    "thresholds_file",
    metavar="FILE",
    type=click.Path(exists=True, dir_okay=False),
    help='TOML file with a [pitfalls] table of thresholds (README, "Pitfall thresholds"), e.g. the cluster '
    "config; for --local/--simulate views (with a coordinator, its own [pitfalls] apply).",
)
def top(
    local: bool,
    simulate: str | None,
    once: bool,
    state_dir: str | None,
    interval: float,
    width: int | None,
    thresholds_file: str | None,
) -> None:
    """Watch who holds which GPU, why jobs wait, and what quietly wastes GPUs.

    Without --local it asks the coordinator (start one with `labgang up`). Keys in the
    TUI: 1/2/3 tabs, f filter, m mine, s sort, d details, c cancel, ? help, q quit.
    """
    from labgang.agent.nvml import NvmlUnavailable
    from labgang.launcher.pitfalls import PitfallThresholds
    from labgang.tui.sources import open_source

    try:
        thresholds = PitfallThresholds.from_toml(thresholds_file) if thresholds_file else None
    except ValueError as exc:
        raise click.UsageError(f"--thresholds: {exc}") from exc
    try:
        source = open_source(local=local, simulate=simulate, state_dir=state_dir)
    except NvmlUnavailable as exc:
        raise click.UsageError(str(exc)) from exc
    except ValueError as exc:
        raise click.UsageError(f"--simulate: {exc}") from exc
    if once:
        from labgang.tui.plain import render_frame

        try:
            state = asyncio.run(_one_state(source, thresholds))
        except ClientError as exc:
            click.echo(f"labgang top: {exc}", err=True)
            sys.exit(1)
        cols = width or min(200, shutil.get_terminal_size().columns if sys.stdout.isatty() else 160)
        click.echo(render_frame(state, width=cols), nl=False)
        return
    from labgang.tui.app import make_app

    make_app(source, thresholds=thresholds, refresh_s=interval).run()


async def _one_state(source, thresholds):
    """Fetch one snapshot and build its state (``--once``)."""
    from labgang.tui.sources import current_user
    from labgang.tui.state import StateBuilder

    try:
        snapshot = await source.fetch()
    finally:
        await source.aclose()
    builder = StateBuilder(thresholds, mode=source.mode, source=source.description, user=current_user())
    return builder.build(snapshot)
