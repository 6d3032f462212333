"""``labgang coordinator`` and ``labgang agent``: the two long-running services."""

from __future__ import annotations

import asyncio
import logging

import click


def _logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )


@click.command("coordinator")
@click.option(
    "--config",
    "config_file",
    required=True,
    type=click.Path(dir_okay=False),
    help="cluster.toml (check it with `labgang config check`).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Database and socket directory [default: $LABGANG_STATE_DIR, /var/lib/labgang as root, "
    "else ~/.local/state/labgang].",
)
@click.option("--tcp-host", default=None, help="Address for the agent link and read-only API [config tcp_host].")
@click.option(
    "--tcp-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port for the agent link and read-only API [config tcp_port].",
)
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def coordinator(
    config_file: str, state_dir: str | None, tcp_host: str | None, tcp_port: int | None, verbose: bool
) -> None:
    """Run the coordinator: user API on <state-dir>/labgang.sock, agent link on TCP."""
    from labgang.agent.token import TokenError
    from labgang.launcher.config import ConfigError, load_config
    from labgang.launcher.coordinator.app import serve

    _logging(verbose)
    try:
        cfg = load_config(config_file)
    except ConfigError as exc:
        click.echo(f"{exc.source}: invalid configuration", err=True)
        for problem in exc.problems:
            click.echo(f"  {problem}", err=True)
        raise SystemExit(2) from None
    try:
        asyncio.run(serve(cfg, state_dir, tcp_host=tcp_host, tcp_port=tcp_port))
    except (TokenError, RuntimeError, OSError) as exc:
        click.echo(f"labgang coordinator: {exc}", err=True)
        raise SystemExit(2) from None


@click.command("agent")
@click.option("--config", "config_file", required=True, type=click.Path(dir_okay=False), help="agent.toml.")
@click.option(
    "--simulate",
    type=click.Path(dir_okay=False),
    default=None,
    help="Use a simulated NVML machine file instead of the driver (config/sim/*.toml).",
)
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Journal, rank logs and node socket directory [agent.toml state_dir].",
)
@click.option(
    "--stop-jobs-on-exit",
    is_flag=True,
    help="Stop every rank when the agent exits (default: leave them for the next agent to re-adopt).",
)
@click.option("-v", "--verbose", is_flag=True, help="Debug logging.")
def agent(
    config_file: str, simulate: str | None, state_dir: str | None, stop_jobs_on_exit: bool, verbose: bool
) -> None:
    """Run a node agent: report the node's GPUs, run ranks, serve the node's user API socket."""
    from labgang.agent.config import AgentConfigError, load_agent_config
    from labgang.agent.nvml import NvmlUnavailable
    from labgang.agent.service import main_async
    from labgang.agent.supervisor.errors import SupervisorError

    _logging(verbose)
    try:
        cfg = load_agent_config(config_file)
    except AgentConfigError as exc:
        click.echo(str(exc), err=True)
        raise SystemExit(2) from None
    updates = {}
    if simulate:
        updates["simulate"] = simulate
    if state_dir:
        updates["state_dir"] = state_dir
    if updates:
        cfg = cfg.model_copy(update=updates)
    try:
        asyncio.run(main_async(cfg, stop_jobs_on_exit=stop_jobs_on_exit))
    except (AgentConfigError, NvmlUnavailable, SupervisorError, ValueError, OSError) as exc:
        # SupervisorError: another agent already supervises this state dir (one line naming its pid).
        # ValueError/OSError: a --simulate machine file that is missing, binary or malformed
        # (agent/nvml/formats.py names the file and the problem in one line).
        what = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.filename else exc
        click.echo(f"labgang agent: {what}", err=True)
        raise SystemExit(2) from None
