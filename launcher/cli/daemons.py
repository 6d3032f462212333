"""``labgang coordinator`` and ``labgang agent``: the two long-running services."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import click


def _config_failure(command: str, source: str, problems: list[str]) -> None:
    """Refuse a bad ``--config``: one line on stderr naming the command,
    the file, and each problem's key and allowed values (joined by ``; ``), then exit status 2.

    Raises:
        SystemExit: always, with status 2.
    """
    click.echo(f"labgang {command}: --config: {source}: " + "; ".join(problems), err=True)
    raise SystemExit(2)


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
    from labgang.launcher.config.cluster import ConfigError, load_config
    from labgang.launcher.coordinator.app import serve

    _logging(verbose)
    try:
        cfg = load_config(config_file)
    except ConfigError as exc:
        _config_failure("coordinator", exc.source, exc.problems)
    try:
        asyncio.run(
            serve(cfg, state_dir, tcp_host=tcp_host, tcp_port=tcp_port, config_source=str(Path(config_file).resolve()))
        )
    except (TokenError, RuntimeError, OSError, ValueError) as exc:
        # ValueError: without --state-dir, a broken /etc/labgang/system.toml (named in one line)
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
    from labgang.launcher.config.errors import AGENT_EXAMPLE, NO_SUCH_FILE, missing_file_problem

    _logging(verbose)
    try:
        cfg = load_agent_config(config_file)
    except AgentConfigError as exc:
        # the message starts with the file as agent/config.py names it: "agent.toml: interval_s: ...; ..."
        source = str(Path(config_file))
        problem = str(exc).removeprefix(f"{source}: ")
        if problem == NO_SUCH_FILE:  # worded as every command words a missing --config
            problem = missing_file_problem("--config", AGENT_EXAMPLE)
        _config_failure("agent", source, [problem])
    updates = {}
    if simulate:
        updates["simulate"] = simulate
    if state_dir:
        updates["state_dir"] = state_dir
    if updates:
        cfg = cfg.model_copy(update=updates)
    try:
        asyncio.run(main_async(cfg, stop_jobs_on_exit=stop_jobs_on_exit))
    except AgentConfigError as exc:  # a key of agent.toml found wrong at start-up (token_file, confine)
        _config_failure("agent", config_file, [str(exc)])
    except (NvmlUnavailable, SupervisorError, ValueError, OSError) as exc:
        # SupervisorError: another agent already supervises this state dir (one line naming its pid).
        # ValueError/OSError: a --simulate machine file that is missing, binary or malformed
        # (agent/nvml/formats.py names the file and the problem in one line).
        what = f"{exc.filename}: {exc.strerror}" if isinstance(exc, OSError) and exc.filename else exc
        click.echo(f"labgang agent: {what}", err=True)
        raise SystemExit(2) from None
