"""The coordinator application factory and its server.

:func:`create_app` builds the aiohttp application (used by :func:`serve` and by the
tests); every resource is set up and torn down in a ``cleanup_ctx`` generator: the
SQLite store, the coordinator with its scheduling and timer loops. Agent websockets
are closed with GOING_AWAY on shutdown. :func:`serve` listens on the Unix socket
(user API, caller from SO_PEERCRED) and on TCP (agent link, read-only API), and
optionally runs an in-process agent (``labgang up``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import signal
import socket
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

from aiohttp import WSCloseCode, web
from labgang.agent import paths
from labgang.agent.connguard import (
    ConnectionGuard,
    ConnectionLimits,
    GuardedTCPSite,
    GuardedUnixSite,
)
from labgang.agent.supervisor.journal import write_json
from labgang.agent.token import read_token
from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.config.record import record_config
from labgang.launcher.coordinator import bodylog, keys, ratelog
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.metrics import add_metrics_routes
from labgang.launcher.coordinator.pitfall_watch import add_pitfall_watch
from labgang.launcher.coordinator.routes import error_middleware, setup_routes, tcp_auth_middleware
from labgang.launcher.coordinator.scheduling import scheduling_loop, timer_loop
from labgang.launcher.coordinator.store import JobRecord, Store
from labgang.launcher.lifecycle.states import EndReason, JobState

log = logging.getLogger("labgang.coordinator")


def load_token(path: str | Path, *, create: bool = True) -> str:
    """The cluster token (``labgang.agent.token.read_token``), created when missing and ``create``.

    Raises:
        TokenError: the file is readable by group or others, not a token
            (:func:`labgang.agent.token.token_problem`), or missing without ``create``.
        OSError: it cannot be read or created.
    """
    return read_token(path, create=create, by_coordinator=True)


def create_app(
    config: ClusterConfig, state_dir: str | Path, *, token: str | None = None, clock: Callable[[], float] = time.time
) -> web.Application:
    """Build the coordinator application.

    Args:
        config: the validated cluster configuration.
        state_dir: where the database lives (created if missing).
        token: the cluster token agents (and trusted TCP readers) must present; default: read ``config.token_file``,
            or a fresh random token when the config names none (only an in-process agent
            can use it then).
        clock: unix-seconds clock.

    Returns:
        The application; run it with ``web.AppRunner`` or aiohttp's test client.
    """
    limits = config.limits
    guard = ConnectionGuard(
        ConnectionLimits(
            max_connections=limits.max_connections,
            max_connections_per_peer=limits.max_connections_per_peer,
            header_timeout_s=limits.header_timeout_s,
            idle_timeout_s=limits.idle_timeout_s,
        ),
        on_refused=lambda peer, reason: log.warning("connection from %s %s %s", peer[0], peer[1], reason),
    )
    # a body over the spec limit is refused while it is read, not after it is held in memory
    app = web.Application(
        middlewares=[guard.middleware, error_middleware, tcp_auth_middleware],
        client_max_size=config.limits.max_spec_bytes,
    )
    app[keys.GUARD] = guard
    app[keys.CONFIG] = config
    app[keys.STATE_DIR] = Path(state_dir)
    if token is None:
        token = load_token(config.token_file) if config.token_file else secrets.token_urlsafe(32)
    app[keys.TOKEN] = token
    app[keys.READ_TOKEN] = load_token(config.read_token_file) if config.read_token_file else ""
    app[keys.AGENT_SOCKETS] = set()

    async def store_ctx(app: web.Application) -> AsyncIterator[None]:
        directory = paths.ensure_state_dir(app[keys.STATE_DIR])
        store = Store(paths.db_path(directory))
        app[keys.STORE] = store
        yield
        store.close()

    async def coordinator_ctx(app: web.Application) -> AsyncIterator[None]:
        coord = Coordinator(app[keys.CONFIG], app[keys.STORE], clock=clock)
        app[keys.COORDINATOR] = coord
        interval_s = coord.config.timer_interval_s
        loops = [
            asyncio.create_task(
                scheduling_loop(coord.kicks, coord.commits, coord.driver, coord.admissions, coord.store, coord.config),
                name="labgang-scheduling",
            ),
            asyncio.create_task(
                timer_loop(coord.node_events, coord.model, coord.commits, coord.kicks, coord.clock, interval_s),
                name="labgang-timers",
            ),
        ]
        coord.kick()
        yield
        for task in loops:
            task.cancel()
        await asyncio.gather(*loops, return_exceptions=True)
        await coord.close()
        await coord.store.durable()  # commit what is pending; no new agent commands at shutdown

    async def close_agent_sockets(app: web.Application) -> None:
        sockets = app[keys.AGENT_SOCKETS]
        for ws in list(sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"coordinator shutting down")

    app.cleanup_ctx.append(store_ctx)
    app.cleanup_ctx.append(coordinator_ctx)
    app.on_shutdown.append(close_agent_sockets)
    setup_routes(app)
    return app


async def _scheduler_metrics_ctx(app: web.Application) -> AsyncIterator[None]:
    """Let the scheduling loop report cycles, admissions and preemptions to /metrics."""
    app[keys.COORDINATOR].report_to(app[keys.METRICS].scheduler)
    yield


def _raise_nofile_limit() -> None:
    """Raise the soft open-files limit to the hard one (the unit sets ``LimitNOFILE``), so the
    connection caps of ``[limits]``, not the descriptor table, decide who is turned away."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError):
            log.debug("cannot raise the open-files limit from %d to %d", soft, hard)


def _prepare_socket_path(path: Path) -> None:
    """Remove a stale socket file; refuse when another coordinator answers there."""
    if not path.exists():
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        path.unlink()
        return
    finally:
        probe.close()
    raise RuntimeError(
        f"another labgang coordinator already listens on {path}; use it, stop it, "
        "or start this one with --state-dir DIR"
    )


async def _repeat_filter_ctx(app: web.Application) -> AsyncIterator[None]:
    """A flood of one error writes a few lines a minute, not megabytes (:mod:`.ratelog`), while the
    app runs; its end takes the filter off the root logger's handlers again."""
    with ratelog.installed():
        yield


async def serve(
    config: ClusterConfig,
    state_dir: str | Path | None,
    *,
    tcp_host: str | None = None,
    tcp_port: int | None = None,
    local_agent: Any = None,
    stop: asyncio.Event | None = None,
    ready: Callable[[dict[str, Any]], None] | None = None,
    shutdown_reason: str = "stopped: labgang shut down",
    config_source: str | None = None,
) -> dict[str, list[str]]:
    """Run the coordinator until SIGINT, SIGTERM or SIGHUP (or ``stop`` is set).

    When ``local_agent`` stops its ranks at exit (``stop_jobs_on_exit``), the coordinator
    first records that the jobs are stopped because labgang shuts down
    (:meth:`Coordinator.stop_jobs_for_shutdown`): they are requeued (or cancelled with
    ``requeue = false``), not failed, and run again at the next start.

    Args:
        config: the validated configuration.
        state_dir: state directory (None = :func:`labgang.agent.paths.default_state_dir`).
        tcp_host, tcp_port: where the agent link and the read-only API listen; default
            ``config.tcp_host``/``config.tcp_port``; with neither, ``127.0.0.1`` on a free
            port when ``local_agent`` is given, and no TCP listener otherwise.
        local_agent: an unstarted :class:`labgang.agent.service.AgentService` to run in this
            process (``labgang up``); it is pointed at the TCP listener with the token.
        stop: an event that ends the server when set (tests, embedding).
        ready: called once listening with ``{"socket": path, "tcp": (host, port) | None}``.
        shutdown_reason: the history reason of jobs stopped by the shutdown.
        config_source: the cluster.toml ``config`` was read from (None: the built-in default),
            recorded with it in the store for ``labgang plan replay`` (:mod:`labgang.launcher.config.record`).

    Returns:
        What became of the jobs that held devices at shutdown, by job id lists:
        ``{"requeued", "cancelled" (requeue = false), "user_cancelled" (cancelled by their
        owner or an admin before the shutdown), "unfinished" (still stopping: they finish at the
        next start), "unrecorded" (every rank ended, but the exits were not recorded before the
        shutdown: the next start reads them from the agent's journal), "left_running" (nobody stopped
        them), "pending", "succeeded" and "failed"
        (they ended as they stopped, decided by their ranks' exits, docs/queue-semantics.md §A3.6)}``.

    Raises:
        RuntimeError: another coordinator already listens on the socket.
        TokenError: the token file is readable by others.
    """
    bodylog.install()  # a body that does not decode: one line, not aiohttp's traceback
    _raise_nofile_limit()
    directory = paths.ensure_state_dir(paths.resolve_state_dir(state_dir))
    if os.geteuid() == 0:
        directory.chmod(0o755)  # users must reach the socket; the database stays 0600
    app = create_app(config, directory)
    add_pitfall_watch(app)  # one pitfall history for /v1/pitfalls, /metrics, top and show
    add_metrics_routes(app)  # GET /metrics on both listeners (outside create_app: docs/openapi.json is the user API)
    app.cleanup_ctx.append(_scheduler_metrics_ctx)
    app.cleanup_ctx.append(_repeat_filter_ctx)
    runner = web.AppRunner(
        app, handle_signals=False, shutdown_timeout=5.0, access_log=log if log.isEnabledFor(logging.DEBUG) else None
    )
    await runner.setup()
    try:  # for `labgang plan replay` without --config; the coordinator runs without it
        record_config(app[keys.STORE], config, config_source, time.time())
    except sqlite3.Error as exc:
        log.warning("cannot record the config in the store (plan replay will not find it): %s", exc)
    sock_path = paths.socket_path(directory)
    _prepare_socket_path(sock_path)
    unix_site = GuardedUnixSite(runner, str(sock_path), guard=app[keys.GUARD])
    await unix_site.start()
    os.chmod(sock_path, 0o666)  # noqa: S103 - anyone may connect; who they are comes from SO_PEERCRED
    _record_kept_jobs(directory, [])  # the jobs a `--keep-jobs` stop left are this coordinator's now
    host = tcp_host or config.tcp_host
    port = tcp_port if tcp_port is not None else config.tcp_port
    if port is None and local_agent is not None:
        host, port = host or "127.0.0.1", 0
    tcp_addr = None
    if port is not None:
        # loopback unless the config names a host: every request there needs a token (docs/security.md)
        tcp_site = GuardedTCPSite(runner, host or "127.0.0.1", port, guard=app[keys.GUARD])
        await tcp_site.start()
        tcp_addr = tcp_site.bound
    log.info("coordinator listening on %s%s", sock_path, f" and tcp {tcp_addr[0]}:{tcp_addr[1]}" if tcp_addr else "")

    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    installed = []
    # SIGHUP (the terminal of `labgang up` closed) stops like SIGTERM: by default it would end
    # the process at once and leave its ranks running with nobody watching them
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(signum, stop.set)  # the handler only records; the loop below acts
            installed.append(signum)
        except (RuntimeError, NotImplementedError, ValueError):
            pass
    agent_task = None
    agent_stop = asyncio.Event()  # set after the coordinator has recorded the shutdown
    summary: dict[str, list[str]] = {}
    try:
        if local_agent is not None and tcp_addr is not None:
            connect_host = "127.0.0.1" if tcp_addr[0] in ("0.0.0.0", "::") else tcp_addr[0]  # noqa: S104 - a comparison
            local_agent.set_coordinator(f"http://{connect_host}:{tcp_addr[1]}", app[keys.TOKEN])
            agent_task = asyncio.create_task(local_agent.run(agent_stop), name="labgang-local-agent")
        try:
            from labgang.agent import sdnotify

            sdnotify.ready(f"serving on {sock_path}")
        except ImportError:
            pass
        if ready is not None:
            ready({"socket": str(sock_path), "tcp": tcp_addr})
        waiters = [asyncio.ensure_future(stop.wait())]
        if agent_task is not None:
            waiters.append(agent_task)
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        stop.set()
        exit_stop = getattr(local_agent, "exit_stop", None)
        if exit_stop is not None:  # a second Ctrl-C or SIGTERM: no more grace
            for signum in (s for s in installed if s != signal.SIGHUP):
                loop.add_signal_handler(signum, exit_stop.kill_now)
        coord = app[keys.COORDINATOR]
        coord.node_events.begin_closing()  # an orderly stop: the agents' disconnects are no warning
        stopping_jobs = getattr(local_agent, "stop_jobs_on_exit", False) and not (
            agent_task is not None and agent_task.done()
        )
        if stopping_jobs:
            held = await coord.stop_jobs_for_shutdown(shutdown_reason)
        else:
            held = [j.id for j in coord.model.jobs.values() if j.status.state.holds_devices]
        agent_stop.set()
        if agent_task is not None:
            await asyncio.gather(agent_task, return_exceptions=True)
        live_runs = getattr(local_agent, "live_runs", None)
        alive = None if live_runs is None else {job.id for run in live_runs() if (job := coord.job_for_run(run))}
        summary = _shutdown_summary(coord.desk.get_job, coord.model.jobs.values(), held, stopping_jobs, alive)
        failure = agent_task.exception() if agent_task is not None and not agent_task.cancelled() else None
        if failure is not None:
            raise failure  # e.g. NVML unavailable: the caller reports it
        _record_kept_jobs(directory, summary["left_running"])  # before the socket file goes (below)
    finally:
        for signum in installed:
            loop.remove_signal_handler(signum)
        # The socket file goes first, before the listener closes: a socket file nobody answers on
        # then means a coordinator that went away without this orderly stop (kill -9, a crash),
        # which `labgang run` waits to come back (launcher/cli/follow.py, went_away_unstopped).
        try:
            sock_path.unlink()
        except FileNotFoundError:
            pass
        await runner.cleanup()
    return summary


def _record_kept_jobs(directory: Path, job_ids: list[str]) -> None:
    """Write ``<directory>/up.kept`` (:data:`~labgang.agent.paths.KEPT_JOBS_NAME`): the ids of the
    jobs an orderly stop leaves running, as a JSON list, readable where the socket is; with no ids,
    remove it. A failure to write is logged, not raised: the stop goes on (``labgang run`` then says
    what a stop without kept jobs says)."""
    path = directory / paths.KEPT_JOBS_NAME
    try:
        if not job_ids:
            path.unlink(missing_ok=True)
            return
        write_json(path, sorted(job_ids))
        path.chmod(0o644)  # every user's `labgang run` reads it, whatever this process's umask
    except OSError as exc:
        log.warning("cannot record the jobs left running in %s: %s", path, exc)


def _shutdown_summary(
    get_job: Callable[[str], JobRecord],
    active: Iterable[JobRecord],
    held: list[str],
    stopped: bool,
    alive: set[str] | None = None,
) -> dict[str, list[str]]:
    """:func:`serve`'s return value, from each held job as ``get_job`` finds it (``JobOperations.get_job``)
    and the lifecycle model's ``active`` jobs (those still pending); ``alive``: the jobs whose ranks
    the local agent still saw running as it stopped (None: no local agent to ask), so that a job the
    coordinator still counts as stopping but whose ranks all ended is "unrecorded", not "unfinished"."""
    out: dict[str, list[str]] = {
        "requeued": [],
        "cancelled": [],
        "user_cancelled": [],
        "unfinished": [],
        "unrecorded": [],
        "left_running": [],
        "pending": [],
        "succeeded": [],
        "failed": [],
    }
    for job_id in held:
        status = get_job(job_id).status
        state = status.state
        if not stopped:
            out["left_running"].append(job_id)
        elif state == JobState.PENDING:
            out["requeued"].append(job_id)
        elif state == JobState.CANCELLED and status.reason_code == EndReason.SHUTDOWN.value:
            out["cancelled"].append(job_id)  # requeue = false: the shutdown ended it
        elif state == JobState.CANCELLED:
            out["user_cancelled"].append(job_id)  # its owner or an admin cancelled it before the shutdown
        elif state.holds_devices and alive is not None and job_id not in alive:
            out["unrecorded"].append(job_id)  # its ranks ended, but their exits never reached the coordinator
        elif state.holds_devices:
            out["unfinished"].append(job_id)
        elif state.finished:  # its ranks ended on their own as it stopped: it never runs again
            out["succeeded" if state == JobState.SUCCEEDED else "failed"].append(job_id)  # timeout, node_fail: failed
    out["pending"] = [
        j.id for j in sorted(active, key=lambda j: j.seq) if j.status.state == JobState.PENDING and j.id not in held
    ]
    return out
