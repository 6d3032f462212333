"""``labgang up``: a coordinator and this machine's agent in one foreground process.

The embedded default for one workstation. No configuration: the coordinator gets one
queue ``default`` whose nominal quota covers every allocatable device the agent sees
(:meth:`labgang.launcher.config.ClusterConfig.default_for`); the agent runs in the same
event loop and joins over loopback with a token that never leaves the process
(:func:`labgang.launcher.coordinator.app.serve` with ``local_agent``). Everything lives
under the state directory, so several instances can run side by side.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import click
from labgang.agent import paths
from labgang.launcher.cli.client import STARTING_MARKER, Client, ClientError

AGENT_JOIN_S = 30.0
KEEP_JOBS_HELP = (
    "Leave running ranks alive when labgang up stops; the next `labgang up` with the same state "
    "directory re-adopts them and records their exits. By default Ctrl-C stops every job's ranks "
    "(SIGTERM, then SIGKILL after the job's grace) before exiting, because once labgang up is gone "
    "nothing would watch them, and unwatched processes keep holding GPUs nobody can see in the queue; "
    "those jobs go back to their queue (restart count + 1, same submit time; cancelled if submitted "
    "with --no-requeue) and run again at the next `labgang up`."
)
SHUTDOWN_REASON = "stopped: labgang up shut down"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def shutdown_message(summary: dict[str, list[str]]) -> str:
    """One line saying what ``labgang up`` did with the jobs as it stopped.

    Args:
        summary: :func:`labgang.launcher.coordinator.app.serve`'s return value (job id lists
            under "requeued", "cancelled", "unfinished", "left_running", "pending").
    """

    def ids(key: str) -> str:
        return ", ".join(summary.get(key) or [])

    parts = []
    if summary.get("requeued"):
        n = len(summary["requeued"])
        parts.append(
            f"stopped {_plural(n, 'job')} ({ids('requeued')}); "
            f"{'it' if n == 1 else 'they'} will run again at the next `labgang up`"
        )
    if summary.get("cancelled"):
        parts.append(f"stopped and cancelled {ids('cancelled')} (submitted with --no-requeue)")
    if summary.get("unfinished"):
        parts.append(f"{ids('unfinished')} still stopping; the next `labgang up` finishes the stop and runs them again")
    if summary.get("left_running"):
        n = len(summary["left_running"])
        parts.append(
            f"left {_plural(n, 'job')} running ({ids('left_running')}); "
            f"the next `labgang up` re-adopts {'it' if n == 1 else 'them'}"
        )
    if summary.get("pending"):
        n = len(summary["pending"])
        parts.append(
            f"{_plural(n, 'pending job')} ({ids('pending')}) {'waits' if n == 1 else 'wait'} for the next `labgang up`"
        )
    return "labgang up: stopped" + (": " + "; ".join(parts) if parts else " (no jobs were running)")


def try_hint(inventory: Any) -> str:
    """The command to try first on this machine: a gang that fits its devices.

    Args:
        inventory: the agent's :class:`labgang.agent.inventory.NodeInventory`.

    Returns:
        ``labgang run -n 4 -g 2 -- python examples/ddp_allreduce.py`` on an 8-GPU machine;
        a smaller gang (or one MIG device per rank) where fewer devices are allocatable.
    """
    counts = Counter(device.resource for device in inventory.allocatable())
    gpus = counts.get("gpu", 0)
    if gpus >= 8:
        shape = "-n 4 -g 2"
    elif gpus >= 1:
        shape = f"-n {gpus} -g 1"
    elif counts:
        resource, n = max(sorted(counts.items()), key=lambda item: item[1])
        shape = f"-n {n} --mig {resource.removeprefix('mig-')}"
    else:
        shape = "-n 1 -g 1"
    return f"labgang run {shape} -- python examples/ddp_allreduce.py"


def wait_for_node(socket_path: Path, node: str, timeout: float) -> bool:
    """Poll the coordinator at ``socket_path`` until ``node`` is connected.

    Returns:
        True once ``GET /v1/nodes`` lists ``node`` as connected; False after ``timeout`` seconds.
    """
    deadline = time.monotonic() + timeout
    with Client(socket_path, timeout=5.0, wait_for_start=False) as probe:
        while time.monotonic() < deadline:
            try:
                if any(n.get("name") == node and n.get("connected") for n in probe.nodes()):
                    return True
            except ClientError:
                pass
            time.sleep(0.05)
    return False


def _describe_devices(inventory: Any) -> str:
    counts = Counter(device.resource for device in inventory.allocatable())
    if not counts:
        return "no allocatable devices"
    return ", ".join(f"{n} {resource}" for resource, n in sorted(counts.items()))


def _fail(message: str, code: int) -> None:
    click.echo(f"labgang up: {message}", err=True)
    raise SystemExit(code)


@click.command("up")
@click.option(
    "--simulate",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="Simulate this machine's GPUs from a machine file (config/sim/*.toml) instead of NVML.",
)
@click.option("--nvml", is_flag=True, help="Use the NVIDIA driver through NVML (the default without --simulate).")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=paths.STATE_DIR_ENV,
    show_envvar=True,
    default=None,
    help="Where the database, socket, journal and logs live "
    "[default: /var/lib/labgang as root, else ~/.local/state/labgang].",
)
@click.option("--keep-jobs", is_flag=True, help=KEEP_JOBS_HELP)
@click.option("-v", "--verbose", count=True, help="Log what the coordinator and agent do (-vv: debug).")
@click.pass_context
def up(
    ctx: click.Context, simulate: Path | None, nvml: bool, state_dir: Path | None, keep_jobs: bool, verbose: int
) -> None:
    """Run a coordinator and this machine's agent in the foreground (one workstation).

    One queue `default` covers every GPU (and MIG device) of the machine. Other shells
    of the same user find it without flags; with --state-dir, export LABGANG_STATE_DIR
    there too. Ctrl-C stops both cleanly, and by default stops the jobs' ranks with
    their grace (see --keep-jobs). Jobs stopped that way are not failures: they go
    back to their queue (restart count + 1, same submit time; cancelled if submitted
    with --no-requeue) and run again at the next `labgang up`; on exit it prints what
    it did with them.

    Example: labgang up --simulate config/sim/h100x8.toml
    """
    if simulate is not None and nvml:
        raise click.UsageError("--simulate and --nvml exclude each other: simulate a machine file, or use the driver")
    directory = paths.resolve_state_dir(state_dir)
    try:
        paths.ensure_state_dir(directory)
        marker = directory / STARTING_MARKER
        marker.write_text(f"{os.getpid()}\n")
    except OSError as exc:
        _fail(f"--state-dir: {directory}: {exc}", 2)
    try:
        _up(ctx, simulate, directory, keep_jobs, verbose, marker)
    finally:
        marker.unlink(missing_ok=True)


def _up(
    ctx: click.Context, simulate: Path | None, directory: Path, keep_jobs: bool, verbose: int, marker: Path
) -> None:
    logging.basicConfig(
        level=(logging.WARNING, logging.INFO, logging.DEBUG)[min(verbose, 2)],
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )

    from labgang.agent.inventory import read_inventory
    from labgang.agent.nvml import NvmlUnavailable, open_backend
    from labgang.agent.service import simulation_scope

    try:
        # A simulated machine is scoped to this state dir: another `labgang up --simulate`
        # of the same file on this host has the same UUIDs, and must not see our ranks as foreign.
        backend = open_backend(simulate, scope=simulation_scope(directory) if simulate else None)
    except NvmlUnavailable as exc:
        _fail(str(exc), 2)
    except (FileNotFoundError, ValueError) as exc:
        _fail(f"--simulate: {exc}", 2)

    from labgang.agent.config import AgentConfig
    from labgang.agent.service import AgentService
    from labgang.launcher.config import ClusterConfig
    from labgang.launcher.coordinator.app import TokenError, serve

    node = socket.gethostname()
    inventory = read_inventory(backend, hostname=node)
    config = ClusterConfig.default_for(inventory)
    explicit_dir = ctx.get_parameter_source("state_dir") is click.core.ParameterSource.COMMANDLINE
    agent = AgentService(
        AgentConfig(
            node=node,
            address="127.0.0.1",  # every rank runs here: rendezvous over loopback
            state_dir=str(directory),
            user_socket=False,  # the coordinator itself serves <state_dir>/labgang.sock
            simulate=str(simulate) if simulate else None,
            # One workstation, one person: whoever started `labgang up` may run jobs as
            # themselves, root included (a shared cluster's agent keeps root jobs off).
            supervisor={"allow_root": os.geteuid() == 0},
        ),
        backend=backend,
        stop_jobs_on_exit=not keep_jobs,
    )
    source = f"simulated from {simulate}" if simulate else f"NVML, driver {inventory.driver_version}"

    def banner(socket_path: str, joined: bool) -> str:
        lines = [
            f"labgang up: coordinator and agent for node {node} ({_describe_devices(inventory)}; {source})",
            f"  state dir: {directory}",
            f"  socket:    {socket_path}",
            f"  queue:     default ({', '.join(f'{k}={v}' for k, v in config.queues[0].nominal.items()) or 'empty'})",
            "  Ctrl-C stops labgang "
            + (
                "and leaves running jobs alive (--keep-jobs)"
                if keep_jobs
                else "and its jobs (each with its grace period; they run again at the next `labgang up`)"
            ),
        ]
        if explicit_dir:
            lines.append(f"  in other shells: export {paths.STATE_DIR_ENV}={directory}")
        if not joined:
            lines.append(
                f"  warning: the local agent has not joined within {AGENT_JOIN_S:g} s (run with -v to see why)"
            )
        lines.append(f"try: {try_hint(inventory)}")
        return "\n".join(lines)

    def announce(socket_path: str) -> None:
        # Commands wait while the marker exists: remove it once the agent has joined, so the
        # first job sees the machine's devices rather than an empty cluster.
        joined = wait_for_node(Path(socket_path), node, AGENT_JOIN_S)
        click.echo(banner(socket_path, joined))
        sys.stdout.flush()  # (click.get_text_stream is deprecated in click 8.5)
        marker.unlink(missing_ok=True)

    def ready(info: dict[str, Any]) -> None:
        threading.Thread(target=announce, args=(info["socket"],), name="labgang-up-announce", daemon=True).start()

    try:
        summary = asyncio.run(serve(config, directory, local_agent=agent, ready=ready, shutdown_reason=SHUTDOWN_REASON))
    except (RuntimeError, TokenError) as exc:
        _fail(str(exc), 1)
    except OSError as exc:
        _fail(f"{directory}: {exc}", 1)
    click.echo(shutdown_message(summary or {}))
