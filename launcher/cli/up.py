"""``labgang up``: a coordinator and this machine's agent in one foreground process.

The embedded default for one workstation. No configuration: the coordinator gets one
queue ``default`` whose nominal quota covers every allocatable device the agent sees
(:meth:`labgang.launcher.config.cluster.ClusterConfig.default_for`); the agent runs in the same
event loop and joins over loopback with a token that never leaves the process
(:func:`labgang.launcher.coordinator.app.serve` with ``local_agent``). Everything lives
under the state directory, so several instances can run side by side.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import shutil
import socket
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click
from labgang.agent import paths
from labgang.launcher.api import discovery
from labgang.launcher.api.client import STARTING_MARKER, Client, ClientError
from labgang.launcher.arrays import fold_ids
from labgang.launcher.cli.format import format_resources
from labgang.launcher.text import printable

if TYPE_CHECKING:
    from collections.abc import Callable

    from labgang.launcher.coordinator.store import Store

T = TypeVar("T")

AGENT_JOIN_S = 30.0
KEEP_JOBS_HELP = (
    "Leave running ranks alive when labgang up stops; the next `labgang up` with the same state "
    "directory re-adopts them and records their exits. By default Ctrl-C stops every job's ranks "
    "(SIGTERM, then SIGKILL after the job's grace) before exiting, because once labgang up is gone "
    "nothing would watch them, and unwatched processes keep holding GPUs nobody can see in the queue; "
    "those jobs go back to their queue (restart count + 1, same submit time; cancelled if submitted "
    "with --no-requeue) and run again at the next `labgang up`, except a job whose every rank exits 0 "
    "as it stops: that job has succeeded (a job that saves a checkpoint on SIGTERM and must resume "
    "exits non-zero, as the default SIGTERM handler and torchrun do; docs/queue-semantics.md A3.6)."
)
SHUTDOWN_REASON = "stopped: labgang up shut down"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def shutdown_message(summary: dict[str, list[str]]) -> str:
    """One line saying what ``labgang up`` did with the jobs as it stopped.

    Args:
        summary: :func:`labgang.launcher.coordinator.app.serve`'s return value (job id lists
            under "requeued", "cancelled", "user_cancelled", "unrecorded", "unfinished", "left_running", "pending",
            "succeeded", "failed").
    """

    def ids(key: str) -> str:
        return ", ".join(fold_ids(summary.get(key) or []))  # a job array's tasks as queue shows them

    parts = []
    if summary.get("requeued"):
        n = len(summary["requeued"])
        parts.append(
            f"stopped {_plural(n, 'job')} ({ids('requeued')}); "
            f"{'it' if n == 1 else 'they'} will run again at the next `labgang up`"
        )
    if summary.get("cancelled"):
        parts.append(f"stopped and cancelled {ids('cancelled')} (submitted with --no-requeue or by `labgang run`)")
    if summary.get("user_cancelled"):
        parts.append(f"stopped {ids('user_cancelled')} (cancelled by the user before the shutdown)")
    for ended in ("succeeded", "failed"):  # every rank ended on its own as it stopped: never run again
        if summary.get(ended):
            n = len(summary[ended])
            parts.append(f"{ids(ended)} finished as {'it' if n == 1 else 'they'} stopped ({ended})")
    if summary.get("unrecorded"):
        n = len(summary["unrecorded"])
        parts.append(
            f"{ids('unrecorded')} ended as {'it' if n == 1 else 'they'} stopped, before labgang up recorded how; "
            "the next `labgang up` reads the exits from the agent's journal (all ranks 0: succeeded, "
            "else run again)"
        )
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


def queue_lines(config: Any, config_file: Path | None) -> list[str]:
    """The banner's queue lines: each queue with its nominal quota, cohort and preemption policy.

    Args:
        config: the :class:`labgang.launcher.config.cluster.ClusterConfig` in force.
        config_file: where it came from (None: the built-in default).
    """
    lines = [f"  config:    {config_file}"] if config_file is not None else []
    for q in config.queues:
        quota = format_resources(q.nominal) if q.nominal else "no quota"
        extras = [f"cohort {q.cohort}"] if q.cohort else []
        if q.within_queue.value != "never":
            extras.append(f"within queue: {q.within_queue.value}")
        if q.reclaim_within_cohort.value != "never":
            extras.append(f"reclaim: {q.reclaim_within_cohort.value}")
        if q.starvation_after:
            extras.append(f"starvation after {q.starvation_after:g} s")
        label = "queue:" if len(config.queues) == 1 else "queues:" if q is config.queues[0] else ""
        lines.append(f"  {label:<10} {q.name} ({quota}" + "".join(f"; {e}" for e in extras) + ")")
    if config.priority_classes:
        classes = ", ".join(f"{k}={v}" for k, v in sorted(config.priority_classes.items(), key=lambda kv: kv[1]))
        lines.append(f"  priority:  {classes}")
    return lines


def stranded_line(counts: dict[tuple[str, str], int], config: Any) -> str | None:
    """The banner's warning about jobs that wait in queues ``config`` does not define.

    Such jobs (e.g. requeued by a ``labgang up`` that ran without ``--config``, in queue
    ``default``) would stay PENDING forever: no queue of this config admits them.

    Args:
        counts: jobs per ``(queue, state)`` in the store
            (:meth:`labgang.launcher.coordinator.store.Store.job_counts`); states are JobState values.
        config: the :class:`labgang.launcher.config.cluster.ClusterConfig` in force.

    Returns:
        One line naming how many jobs wait, and how many run, in which unknown queues, or None
        when there are none.
    """
    from labgang.launcher.model import JobState

    known = {q.name for q in config.queues}
    per_queue: Counter[str] = Counter()  # pending: they never start
    running: Counter[str] = Counter()  # admitted, running, stopping (--keep-jobs): they run to their end
    for (queue, state), n in counts.items():
        if queue not in known and not JobState(state).finished and n > 0:
            (per_queue if JobState(state) is JobState.PENDING else running)[queue] += n
    parts = []
    if per_queue:
        total, where = _in_queues(per_queue)
        verb, them = ("waits", "it") if total == 1 else ("wait", "them")
        parts.append(
            f"{where[0]} {verb} in queues this config does not define: {where[1]}; "
            f"cancel {them} (`labgang cancel JOB`), move {them} to a queue it defines (`labgang update JOB "
            f"Partition=QUEUE`), or run `labgang up` with a config that defines "
            f"{'that queue' if len(per_queue) == 1 else 'those queues'}"
        )
    if running:
        total, where = _in_queues(running)
        verb, they = ("runs", "it holds") if total == 1 else ("run", "they hold")
        parts.append(
            f"{where[0]} {verb} in queues this config does not define: {where[1]}; "
            f"{'it runs' if total == 1 else 'they run'} to the end, and the devices {they} count in no queue's quota"
        )
    return "  warning: " + "; ".join(parts) if parts else None


def _in_queues(per_queue: Counter[str]) -> tuple[int, tuple[str, str]]:
    """``(total, ("3 jobs", "a (1), b (2)"))`` of jobs counted per queue, for :func:`stranded_line`."""
    total = sum(per_queue.values())
    return total, (_plural(total, "job"), ", ".join(f"{queue} ({n})" for queue, n in sorted(per_queue.items())))


def _read_store(directory: Path, read: Callable[[Store], T], empty: T) -> T:
    """``read`` of the state directory's store, opened for it and closed after; ``empty`` when the
    directory has no store yet."""
    from labgang.launcher.coordinator.store import Store

    db = paths.db_path(directory)
    if not db.exists():
        return empty
    store = Store(db)
    try:
        return read(store)
    finally:
        store.close()


def stored_job_counts(directory: Path) -> dict[tuple[str, str], int]:
    """Jobs per ``(queue, state)`` in the state directory's store; empty when it has none yet."""
    return _read_store(directory, lambda store: store.job_counts(), {})


def drained_lines(directory: Path) -> list[str]:
    """The banner's line for each node drained in the state directory's store (``labgang drain``,
    kept across restarts): no new job starts there, so the ``try:`` command would wait."""
    from labgang.launcher.coordinator.drains import Drain, NodeDrains

    none: dict[str, Drain] = {}
    drained = _read_store(directory, lambda store: dict(NodeDrains(store, lambda: None).drained), none)
    return [
        f"  warning: node {name} is drained (by {d.by}: {printable(d.reason)}): no new job starts there until "
        f"`labgang resume {name}`"
        for name, d in sorted(drained.items())
    ]


def _gang_shape(devices: int, resource: str) -> str:
    """``-n``/``-g`` (or ``--mig``) flags for a gang of at most ``devices`` devices of ``resource``."""
    if resource != "gpu":
        return f"-n {devices} --mig {resource.removeprefix('mig-')}"
    if devices >= 8:
        return "-n 4 -g 2"
    if devices >= 6:
        return "-n 3 -g 2"
    return f"-n {devices} -g 1"


EXAMPLE_SCRIPT = "examples/ddp_allreduce.py"
"""The training script ``up``'s banner suggests, relative to a checkout (``share/labgang/`` in a regular install)."""
SIM_MACHINE = "config/sim/h100x8.toml"
"""The simulated machine ``up``'s refusal suggests, relative to a checkout (``share/labgang/`` in a regular install)."""


def shipped_path(relative: str, checkout: Path | None = None, data: Path | None = None) -> str | None:
    """Where a file labgang ships (``config/…``, ``examples/…``) is for the labgang now running.

    From a source checkout (an editable install) ``relative`` itself when the current directory is
    the checkout, as the README's examples run from it, else the checkout's absolute path of it (a
    user of a shared editable install types the command in another directory); from a regular
    install (``labgang install --venv DIR``, a ``pip install``) the absolute path of the copy the
    install carries, ``<data>/share/labgang/<relative>`` (setup.py's data files); None when
    neither has it.

    Args:
        relative: the file's path in a checkout, e.g. :data:`SIM_MACHINE`.
        checkout: the checkout's root; None: the one above this package, if it is one.
        data: the install's data prefix; None: this interpreter's (``sysconfig``'s ``data`` path).
    """
    import sysconfig

    import labgang.launcher

    root = checkout if checkout is not None else Path(labgang.launcher.__file__).resolve().parent.parent
    if (root / relative).is_file():
        try:
            here = Path.cwd().resolve() == root
        except OSError:  # the current directory was removed
            here = False
        return relative if here else str(root / relative)
    installed = (data if data is not None else Path(sysconfig.get_path("data"))) / "share" / "labgang" / relative
    return str(installed) if installed.is_file() else None


def example_command() -> tuple[str, str | None]:
    """How to run :data:`EXAMPLE_SCRIPT` as a job from any directory, and what it still needs.

    From a source checkout (an editable install): ``python examples/ddp_allreduce.py``, as the
    README's examples run it from the checkout. From a regular install (``labgang install --venv
    DIR``, a ``pip install``): this interpreter and the copy the install carries
    (``<prefix>/share/labgang/examples/ddp_allreduce.py``, absolute paths), with what it needs when
    this interpreter has no torch.

    Returns:
        (the command, a note of what it needs or None).
    """
    import importlib.util

    found = shipped_path(EXAMPLE_SCRIPT)
    if found == EXAMPLE_SCRIPT:
        return f"python {EXAMPLE_SCRIPT}", None
    if found is None:
        return f"python {EXAMPLE_SCRIPT}", f"{EXAMPLE_SCRIPT} is in labgang's source checkout; run it from there"
    command = f"{shlex.quote(sys.executable)} {shlex.quote(found)}"
    if importlib.util.find_spec("torch") is None:
        return (
            command,
            f"the example needs torch, which {sys.prefix} does not have: {sys.executable} -m pip install torch",
        )
    return command, None


def try_hint(inventory: Any, config: Any = None, example: str = f"python {EXAMPLE_SCRIPT}") -> str:
    """The command to try first on this machine: a gang its queue accepts and its devices hold.

    The gang goes to ``config.default_queue`` (where ``labgang run`` goes without ``-q``) and
    is no larger than that queue could ever hold (its nominal quota plus what it may borrow
    within its cohort, :meth:`labgang.launcher.scheduler.quota.QuotaBook.potential`), than its
    ``max_gpus_per_user`` nor than the machine's allocatable devices. When the default queue
    holds nothing, the first queue that does is named with ``-q``.

    Args:
        inventory: the agent's :class:`labgang.agent.inventory.NodeInventory`.
        config: the :class:`labgang.launcher.config.cluster.ClusterConfig` in force; None: the
            built-in default (one queue over every allocatable device).
        example: the job's command (:func:`example_command`'s).

    Returns:
        ``labgang run -n 4 -g 2 -- python examples/ddp_allreduce.py`` on an 8-GPU machine whose
        queue may use all 8; a smaller gang (or one MIG device per rank) where the queue or the
        machine holds fewer.
    """
    from labgang.launcher.config.cluster import ClusterConfig
    from labgang.launcher.scheduler.quota import QuotaBook

    counts = Counter(device.resource for device in inventory.allocatable())
    if config is None:
        config = ClusterConfig.default_for(inventory)
    book = QuotaBook(config.queue_specs())
    names = [config.default_queue] + [q.name for q in config.queues if q.name != config.default_queue]
    for name in names:
        if name not in book.queues:
            continue
        room = {res: min(n, book.potential(name, res)) for res, n in counts.items()}
        per_user = config.queue(name).max_gpus_per_user  # a gang above it is refused at submission
        if per_user is not None:
            room = {res: min(n, per_user) for res, n in room.items()}
        if room.get("gpu", 0) >= 1:
            resource = "gpu"
        else:
            usable = sorted((res, n) for res, n in room.items() if n >= 1)
            if not usable:
                continue
            resource = max(usable, key=lambda item: item[1])[0]
        flag = "" if name == config.default_queue else f"-q {name} "
        return f"labgang run {flag}{_gang_shape(room[resource], resource)} -- {example}"
    return f"labgang run -n 1 -g 1 -- {example}"


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


def _fail(message: str, code: int) -> NoReturn:
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
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    metavar="FILE",
    help="A cluster config (queues per team with quotas, cohorts, priority classes, preemption, "
    "[pitfalls] thresholds) for this machine, e.g. config/workstation.toml; check it with "
    "`labgang config check FILE`. Default: one queue covering every device.",
)
@click.option(
    "--tcp-host",
    default=None,
    help="Address of the agent link, read-only API and /metrics [config tcp_host, else 127.0.0.1].",
)
@click.option(
    "--tcp-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="Port of the agent link, read-only API and /metrics [config tcp_port, else a free port].",
)
@click.option("--keep-jobs", is_flag=True, help=KEEP_JOBS_HELP)
@click.option("-v", "--verbose", count=True, help="Log what the coordinator and agent do (-vv: debug).")
@click.pass_context
def up(
    ctx: click.Context,
    simulate: Path | None,
    nvml: bool,
    state_dir: Path | None,
    config_file: Path | None,
    tcp_host: str | None,
    tcp_port: int | None,
    keep_jobs: bool,
    verbose: int,
) -> None:
    """Run a coordinator and this machine's agent in the foreground (one workstation).

    Without --config, one queue `default` covers every GPU (and MIG device) of the machine;
    a higher -p preempts lower-priority jobs there, and a gang waiting 5 minutes gets devices
    reserved. With --config FILE, FILE's queues, cohorts and priority classes apply. Other shells
    find it without flags (every user's, when root runs it); with --state-dir, export
    LABGANG_STATE_DIR there too. Where root's labgang already serves this machine's GPUs, a
    user's labgang up is refused unless it simulates a machine (--simulate) or names its own
    --state-dir. Ctrl-C stops both cleanly, and by default stops the jobs' ranks with
    their grace (see --keep-jobs). Jobs stopped that way are not failures: they go
    back to their queue (restart count + 1, same submit time; cancelled if submitted
    with --no-requeue) and run again at the next `labgang up`, except a job whose every
    rank exits 0 as it stops, which has succeeded (to resume after saving a checkpoint on
    SIGTERM, exit non-zero); on exit it prints what it did with them.

    Example: labgang up --simulate config/sim/h100x8.toml --config config/workstation.toml
    """
    if simulate is not None and nvml:
        raise click.UsageError("--simulate and --nvml exclude each other: simulate a machine file, or use the driver")
    _supervisor_settings()  # a bad LABGANG_LOG_MAX_BYTES ends it here, before anything is made
    if tcp_host is not None:
        _check_tcp_host(tcp_host)  # and a --tcp-host this machine cannot listen on
    chosen = ctx.get_parameter_source("state_dir") in (
        click.core.ParameterSource.COMMANDLINE,
        click.core.ParameterSource.ENVIRONMENT,
    )
    try:
        system = discovery.system_instance_serving()  # None for root: root's default dir is the system's
    except discovery.SystemConfigInvalid as exc:
        _fail(str(exc), 2)
    if system is not None and simulate is None and not chosen:
        _fail(
            f"this machine's GPUs are served by its labgang at {system}; use that one "
            "(labgang submit, labgang queue and labgang top find it without settings), "
            "or try labgang on a simulated machine of your own: labgang up --simulate "
            + shlex.quote(shipped_path(SIM_MACHINE) or SIM_MACHINE),
            1,
        )
    try:
        directory = paths.resolve_state_dir(state_dir)
    except ValueError as exc:  # root's default: a broken /etc/labgang/system.toml, named in one line
        _fail(str(exc), 2)
    _refuse_a_second_up(directory, chosen)
    created = _first_missing(directory)  # what a failed start removes again, so it leaves no trace
    try:
        paths.ensure_state_dir(directory)
        marker = directory / STARTING_MARKER
        marker.write_text(f"{os.getpid()}\n")
    except OSError as exc:
        _fail(f"--state-dir: {directory}: {exc}", 2)
    started: list[bool] = []
    try:
        _up(ctx, simulate, directory, keep_jobs, verbose, marker, started, config_file, (tcp_host, tcp_port))
    except SystemExit as exc:
        if created is not None and not started and exc.code not in (0, None):
            shutil.rmtree(created, ignore_errors=True)
        raise
    finally:
        marker.unlink(missing_ok=True)


LOG_MAX_BYTES_ENV = "LABGANG_LOG_MAX_BYTES"
"""The agent's rank log cap for ``labgang up`` (``[supervisor] log_max_bytes`` of a cluster's agent.toml)."""


def _check_tcp_host(host: str) -> None:
    """End ``labgang up`` (exit 2, one line naming ``--tcp-host``) where ``host`` names no address this
    machine can listen on: a name that does not resolve (``999.1.1.1``) or an address of another
    machine (bind: EADDRNOTAVAIL). Each resolved address is bound to a free port and closed again."""
    allowed = "allowed: an address or host name of this machine, such as 127.0.0.1, 0.0.0.0 or its own IP"
    try:
        found = socket.getaddrinfo(host, 0, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        _fail(f"--tcp-host: {host!r} does not resolve ({exc}); {allowed}", 2)
    for family, kind, proto, _, address in found:
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.bind(address)
        except OSError as exc:
            _fail(f"--tcp-host: {host!r}: this machine cannot listen on {address[0]} ({exc.strerror}); {allowed}", 2)


def _supervisor_settings() -> dict[str, Any]:
    """The ``[supervisor]`` settings of ``labgang up``'s agent: root may run jobs as root (one
    workstation, one person) and :data:`LOG_MAX_BYTES_ENV`, when set, caps each rank log file.
    A bad value ends the command (exit 2) before anything starts."""
    settings: dict[str, Any] = {"allow_root": os.geteuid() == 0}
    raw = os.environ.get(LOG_MAX_BYTES_ENV)
    if raw:
        from labgang.agent.supervisor.config import SupervisorConfig

        try:
            settings["log_max_bytes"] = SupervisorConfig(log_max_bytes=int(raw)).log_max_bytes
        except ValueError:
            _fail(f"{LOG_MAX_BYTES_ENV}: {raw!r} is not a log size (allowed: integer bytes >= 1024)", 2)
    return settings


def _refuse_a_second_up(directory: Path, chosen: bool) -> None:
    """Refuse (exit 1) when a labgang already serves, or is starting in, ``directory``: its error says
    what to do instead (use that one, stop it, or pass ``--state-dir``). ``chosen``: the state dir
    was given by --state-dir or LABGANG_STATE_DIR (other shells then need it too)."""
    from labgang.launcher.api.client import starting_pid

    socket_file = paths.socket_file(directory)
    pid = discovery.serving_pid(socket_file)
    if pid is None and not discovery.answers(socket_file):
        pid = starting_pid(socket_file)
        if pid is None:
            return
    who = f" (pid {pid})" if pid is not None else ""
    where = f" with {paths.STATE_DIR_ENV}={directory}" if chosen else ""
    down = f"{paths.STATE_DIR_ENV}={directory} labgang down" if chosen else "labgang down"
    stop = (
        f"{down}, Ctrl-C in its terminal, or kill -INT {pid}"
        if pid is not None
        else "Ctrl-C in its terminal, or systemctl stop labgang-coordinator"
    )
    _fail(
        f"a labgang already serves {directory}{who}; use it (labgang queue, labgang submit{where} in any "
        f"shell), stop it ({stop}), or start another one with --state-dir DIR",
        1,
    )


def _first_missing(directory: Path) -> Path | None:
    """The outermost directory of ``directory``'s path that does not exist yet (None when it exists)."""
    missing = None
    for candidate in (directory, *directory.parents):
        if candidate.exists():
            break
        missing = candidate
    return missing


def _up(
    ctx: click.Context,
    simulate: Path | None,
    directory: Path,
    keep_jobs: bool,
    verbose: int,
    marker: Path,
    started: list[bool],
    config_file: Path | None = None,
    tcp: tuple[str | None, int | None] = (None, None),
) -> None:
    """Open the backend, build the config and serve until stopped; ``started`` gets True once the
    coordinator is about to run (from then on the state dir holds a database worth keeping)."""
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
    except FileNotFoundError as exc:
        # worded like the other commands' missing files (click's "file 'X' does not exist")
        missing = simulate if simulate is not None and not simulate.exists() else exc.filename
        _fail(f"--simulate: file '{missing}' does not exist" if missing else f"--simulate: {exc}", 2)
    except ValueError as exc:
        _fail(f"--simulate: {exc}", 2)

    from labgang.agent.config import AgentConfig
    from labgang.agent.service import AgentService
    from labgang.agent.token import TokenError
    from labgang.launcher.config.cluster import ClusterConfig, ConfigError, load_config
    from labgang.launcher.coordinator.app import serve

    node = socket.gethostname()
    inventory = read_inventory(backend, hostname=node)
    if config_file is None:
        config = ClusterConfig.default_for(inventory)
    else:
        try:
            config = load_config(config_file)
        except ConfigError as exc:
            backend.nvmlShutdown()
            # one line per problem, each naming the file and the key, as `labgang config check` prints them
            *first, last = exc.problems or ["not a valid config"]
            for problem in first:
                click.echo(f"labgang up: --config: {exc.source}: {problem}", err=True)
            _fail(f"--config: {exc.source}: {last}", 2)
    explicit_dir = ctx.get_parameter_source("state_dir") is click.core.ParameterSource.COMMANDLINE
    # A user's simulated instance beside the system one: other shells find the system one first.
    shadowed = discovery.system_instance_serving() is not None
    agent = AgentService(
        AgentConfig(
            node=node,
            address="127.0.0.1",  # every rank runs here: rendezvous over loopback
            state_dir=str(directory),
            user_socket=False,  # the coordinator itself serves <state_dir>/labgang.sock
            simulate=str(simulate) if simulate else None,
            # One workstation, one person: whoever started `labgang up` may run jobs as
            # themselves, root included (a shared cluster's agent keeps root jobs off).
            supervisor=_supervisor_settings(),
        ),
        backend=backend,
        stop_jobs_on_exit=not keep_jobs,
        coordinator_stops_too=True,  # ranks kept (--keep-jobs) wait unfenced for the next `labgang up`
    )
    agent.exit_stop.on_wait = lambda jobs, grace_s: click.echo(
        f"labgang up: stopping {_plural(jobs, 'job')}: waiting up to {grace_s:g} s for their grace periods; "
        "Ctrl-C again to kill them now"
    )
    agent.exit_stop.on_kill = lambda jobs: click.echo(
        f"labgang up: killing the ranks of {_plural(jobs, 'job')} now (SIGKILL)"
    )
    source = f"simulated from {simulate}" if simulate else f"NVML, driver {inventory.driver_version}"
    stranded = stranded_line(stored_job_counts(directory), config)
    drained = drained_lines(directory)
    beyond: list[str] = []
    if config_file is not None:  # the built-in default's quota is this machine's devices
        from labgang.launcher.config.quota_beyond import device_totals, quota_beyond_cluster

        beyond = quota_beyond_cluster(config.queues, config.cohorts, device_totals(inventory.allocatable()), 1)

    def banner(socket_path: str, tcp_addr: tuple[str, int] | None, joined: bool) -> str:
        lines = [
            f"labgang up: coordinator and agent for node {node} ({_describe_devices(inventory)}; {source})",
            f"  state dir: {directory}",
            f"  socket:    {socket_path}",
        ]
        if discovery.is_system_socket(socket_path):  # discovery finds it first for every user (api/discovery.py)
            lines.append(
                "  this machine's instance: every user's labgang commands here reach it without setting anything"
            )
        if tcp_addr is not None:
            host = f"[{tcp_addr[0]}]" if ":" in tcp_addr[0] else tcp_addr[0]
            lines += [
                f"  tcp:       {host}:{tcp_addr[1]} (agent link and read-only API)",
                f"  metrics:   http://{host}:{tcp_addr[1]}/metrics",
            ]
        lines += [
            *queue_lines(config, config_file),
            "  Ctrl-C stops labgang "
            + (
                "and leaves running jobs alive (--keep-jobs)"
                if keep_jobs
                else "and its jobs (each with its grace period; they run again at the next `labgang up`)"
            ),
        ]
        if explicit_dir or shadowed:
            lines.append(f"  in other shells: export {paths.STATE_DIR_ENV}={directory}")
        if stranded is not None:
            lines.append(stranded)
        lines += [f"  warning: {line}" for line in beyond]
        lines += drained
        if not joined:
            lines.append(
                f"  warning: the local agent has not joined within {AGENT_JOIN_S:g} s (run with -v to see why)"
            )
        example, needs = example_command()
        hint = try_hint(inventory, config, example)
        if explicit_dir or shadowed:  # plain `labgang` finds another instance first: the line says where
            hint = f"{paths.STATE_DIR_ENV}={shlex.quote(str(directory))} {hint}"
        lines.append(f"try: {hint}")
        if needs is not None:
            lines.append(f"  ({needs})")
        return "\n".join(lines)

    def announce(socket_path: str, tcp_addr: tuple[str, int] | None) -> None:
        # Commands wait while the marker exists: remove it once the agent has joined, so the
        # first job sees the machine's devices rather than an empty cluster.
        joined = wait_for_node(Path(socket_path), node, AGENT_JOIN_S)
        click.echo(banner(socket_path, tcp_addr, joined))
        sys.stdout.flush()  # (click.get_text_stream is deprecated in click 8.5)
        marker.unlink(missing_ok=True)

    def ready(info: dict[str, Any]) -> None:
        tcp_addr = tuple(info["tcp"]) if info.get("tcp") else None
        threading.Thread(
            target=announce, args=(info["socket"], tcp_addr), name="labgang-up-announce", daemon=True
        ).start()

    started.append(True)
    try:
        summary = asyncio.run(
            serve(
                config,
                directory,
                tcp_host=tcp[0],
                tcp_port=tcp[1],
                local_agent=agent,
                ready=ready,
                shutdown_reason=SHUTDOWN_REASON,
                config_source=str(config_file.resolve()) if config_file is not None else None,
            )
        )
    except (RuntimeError, TokenError) as exc:
        _fail(str(exc), 1)
    except OSError as exc:
        _fail(f"{directory}: {exc}", 1)
    click.echo(shutdown_message(summary or {}))
