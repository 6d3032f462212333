"""``labgang top``: watch allocation and pitfall metrics (Textual TUI), or print one frame with ``--once``."""

from __future__ import annotations

import asyncio
import os
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
@click.option(
    "--web", is_flag=True, help="Serve the TUI to browsers (one app per viewer; read-only without the token)."
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="--web: address to listen on (beyond loopback needs --read-token-file).",
)
@click.option("--port", default=8642, show_default=True, type=click.IntRange(1, 65535), help="--web: TCP port.")
@click.option(
    "--token-file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="--web: the cluster token; a viewer who opens the page with ?token=<it> may cancel jobs (as you).",
)
@click.option(
    "--read-token-file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="--web: the read token; on a non-loopback --host a viewer must present it (or the cluster token).",
)
@click.option("--read-only", is_flag=True, hidden=True, help="Refuse to cancel (a --web viewer without the token).")
def top(
    local: bool,
    simulate: str | None,
    once: bool,
    state_dir: str | None,
    interval: float,
    width: int | None,
    thresholds_file: str | None,
    web: bool,
    host: str,
    port: int,
    token_file: str | None,
    read_token_file: str | None,
    read_only: bool,
) -> None:
    """Watch who holds which GPU, why jobs wait, and what quietly wastes GPUs.

    Without --local it asks the coordinator (start one with `labgang up`). When standard
    output is no terminal (a pipe, a file) it prints one frame, as --once. Keys in the
    TUI: 1-5 tabs (devices, jobs, queues, processes, graphs), f filter, m mine, s sort,
    o process sort, / process filter, d details, c cancel, ? help, q quit. --web serves
    the same app to browsers.
    """
    web_only = {
        "--host": host != "127.0.0.1",
        "--port": port != 8642,
        "--token-file": token_file,
        "--read-token-file": read_token_file,
    }
    given = [name for name, used in web_only.items() if used]
    if given and not web:
        raise click.UsageError(f"{', '.join(given)}: only with --web (they say how to serve the app to browsers)")
    if web:
        if once:
            raise click.UsageError("--web and --once: choose one (--once prints a frame; --web serves the app)")
        _serve_web(
            local=local,
            simulate=simulate,
            state_dir=state_dir,
            interval=interval,
            thresholds_file=thresholds_file,
            host=host,
            port=port,
            token_file=token_file,
            read_token_file=read_token_file,
        )
        return
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
    from labgang.tui import served_to_a_browser

    if not once and not sys.stdout.isatty() and not served_to_a_browser():
        once = True  # as nvitop: a pipe or a file gets one plain frame, not a full-screen app nobody sees
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
    if source.mode == "coordinator":  # none answers now: say so, as --once does, not an empty screen for ever
        from labgang.launcher.api.client import Client

        try:
            with Client.for_state_dir(state_dir) as client:
                client.version()
        except ClientError as exc:
            click.echo(f"labgang top: {exc}", err=True)
            sys.exit(1)
    from labgang.tui.app import make_app

    make_app(source, thresholds=thresholds, refresh_s=interval, read_only=read_only).run()


def _serve_web(
    *,
    local: bool,
    simulate: str | None,
    state_dir: str | None,
    interval: float,
    thresholds_file: str | None,
    host: str,
    port: int,
    token_file: str | None,
    read_token_file: str | None,
) -> None:
    """``top --web``: check the options, then serve until interrupted (tui/web.py)."""
    from labgang.agent.config import AgentConfigError
    from labgang.agent.token import read_token
    from labgang.tui.web import WebTop, WebTopError

    tokens: dict[str, str | None] = {}
    for option, path in (("--token-file", token_file), ("--read-token-file", read_token_file)):
        try:
            tokens[option] = read_token(path, by_coordinator=True) if path else None
        except (AgentConfigError, OSError) as exc:
            raise click.UsageError(f"{option}: {exc}") from exc
    argv = [sys.executable, "-m", "labgang.launcher", "top", "--interval", f"{interval:g}"]
    if local:
        argv.append("--local")
    if simulate:
        argv += ["--simulate", os.path.abspath(simulate)]
    if state_dir:
        argv += ["--state-dir", os.path.abspath(state_dir)]
    if thresholds_file:
        argv += ["--thresholds", os.path.abspath(thresholds_file)]
    try:
        server = WebTop(
            argv, host=host, port=port, cluster_token=tokens["--token-file"], read_token=tokens["--read-token-file"]
        )
        server.serve()
    except WebTopError as exc:
        raise click.UsageError(str(exc)) from exc


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
