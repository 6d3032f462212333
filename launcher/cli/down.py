"""``labgang down``: stop the ``labgang up`` of a state directory, as Ctrl-C in its terminal would.

``labgang up`` is one process: the coordinator and this machine's agent in one event loop
(``up.py``). ``down`` finds it through the state directory's socket (the kernel names the
process that serves it, ``discovery.serving_pid``; a ``labgang up`` still starting names
itself in ``up.starting``), checks that it is a ``labgang up`` (a ``labgang coordinator``
service is stopped as it was started), sends it SIGINT, and waits until it has exited. What
happens to the jobs is what Ctrl-C does: by default each job's ranks are stopped with their
grace and the jobs go back to their queue to run again at the next ``labgang up`` (one
submitted with ``--no-requeue`` ends cancelled); a ``labgang up --keep-jobs`` leaves them running
for the next one to re-adopt. ``down`` cancels nothing itself; it reports what the store holds
for the next ``labgang up`` once the process is gone.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import click
from labgang.agent import paths
from labgang.launcher.cli.errors import CommandFailed

POLL_S = 0.05


class DownRefused(Exception):
    """``labgang down`` cannot stop anything here; ``str()`` is the one line to print (exit 1).

    Attributes:
        not_up: what serves the directory is not a ``labgang up`` (a ``labgang coordinator`` service).
    """

    def __init__(self, message: str, *, not_up: bool = False) -> None:
        super().__init__(message)
        self.not_up = not_up


def up_pid(directory: Path) -> int:
    """The pid of the ``labgang up`` serving (or starting in) ``directory``.

    Raises:
        DownRefused: nothing serves the directory's socket, or what serves it is not a
            ``labgang up`` (its command line is named).
    """
    from labgang.launcher.api import discovery
    from labgang.launcher.api.client import starting_pid

    socket_file = paths.socket_file(directory)
    pid = discovery.serving_pid(socket_file) or starting_pid(socket_file)
    if pid is None:
        if os.path.exists(socket_file):  # an orderly stop removes it: this one went away (kill -9, a crash)
            raise DownRefused(
                f"no labgang up is running for {directory} (nothing to stop); the last one went away "
                "without stopping (killed?): its ranks run on unwatched until their node lease stops them "
                "(by default about 22 s after), unless `labgang up` is started again to re-adopt them"
            )
        raise DownRefused(f"no labgang up is running for {directory} (nothing to stop)")
    argv = _command_line(pid)
    if argv is not None and "up" not in argv[1:]:
        raise DownRefused(
            f"the labgang serving {directory} (pid {pid}) is not a `labgang up` but `{' '.join(argv)}`: "
            "stop it as it was started (systemctl stop labgang-coordinator, or Ctrl-C in its terminal)",
            not_up=True,
        )
    return pid


def instance_dir(state_dir: Path | None) -> Path:
    """The state directory of the instance ``down`` is to stop: ``state_dir`` (``--state-dir`` or
    ``LABGANG_STATE_DIR``) when given, else the one every other command finds, in the same order
    (:func:`labgang.launcher.api.discovery.find_socket_file`: this machine's system instance when it
    answers, then the user's own ``labgang up``).

    Raises:
        ValueError: the system config is unreadable or names no usable state directory (one line
            naming the file and the field).
    """
    from labgang.launcher.api import discovery

    if state_dir is not None and str(state_dir) != "":
        return paths.resolve_state_dir(state_dir)
    try:
        return Path(os.path.dirname(discovery.find_socket_file(None)))
    except discovery.SystemConfigInvalid as exc:
        raise ValueError(str(exc)) from exc


def _own_instead(directory: Path) -> str:
    """For a refusal to stop ``directory``'s instance (not the caller's): ``; your own labgang up runs
    in D: LABGANG_STATE_DIR=D labgang down`` when the caller's own instance (``~/.local/state/labgang``)
    is a different one and runs; else empty."""
    from labgang.launcher.api import discovery

    own = paths.user_state_dir_text()
    if os.path.normpath(own) == os.path.normpath(directory):
        return ""
    socket_file = os.path.join(own, paths.SOCKET_NAME)
    if not (discovery.starting(socket_file) or (os.path.exists(socket_file) and discovery.answers(socket_file))):
        return ""
    return f"; your own labgang up runs in {own}: `LABGANG_STATE_DIR={own} labgang down` stops it"


def _command_line(pid: int) -> list[str] | None:
    """The process's arguments (psutil, ``/proc/PID/cmdline``), or None when they cannot be read."""
    import psutil

    try:
        return psutil.Process(pid).cmdline() or None
    except psutil.Error:
        return None


def _alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a parent that has not reaped it yet)."""
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _nodes(directory: Path) -> list[str]:
    """The nodes whose agents are connected to the coordinator of ``directory`` (empty when it does
    not answer: a ``labgang up`` still starting)."""
    from labgang.launcher.api.client import Client, ClientError

    try:
        with Client(paths.socket_file(directory), timeout=5.0, wait_for_start=False) as client:
            return sorted(str(n.get("name")) for n in client.nodes() if n.get("connected"))
    except (ClientError, OSError):
        return []


def lease_seconds(directory: Path) -> float | None:
    """How long the ranks of ``directory``'s ``labgang up`` outlive it: ``LEASE_SHARE`` of the
    ``node_timeout_s`` its agent last confirmed (``agent/lease.json``); None when not recorded."""
    import json

    from labgang.agent.lease import LEASE_SHARE

    try:
        timeout = json.loads((directory / "agent" / "lease.json").read_text()).get("node_timeout_s")
    except (OSError, ValueError, AttributeError):
        return None
    return LEASE_SHARE * timeout if isinstance(timeout, (int, float)) and timeout > 0 else None


def job_states(directory: Path, ids: list[str] | None = None) -> dict[str, str]:
    """Job id → state (a JobState value) of the jobs in the store of ``directory`` that are not
    finished, or of the jobs ``ids`` whatever their state; in submission order. Read through a
    read-only connection, so it is safe while ``labgang up`` writes; empty when there is no
    store or it cannot be read."""
    import sqlite3

    from labgang.launcher.lifecycle.states import FINAL_STATES

    db = paths.db_path(directory)
    if not db.exists():
        return {}
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10.0)
    except sqlite3.Error:
        return {}
    try:
        if ids is None:
            marks = ",".join("?" * len(FINAL_STATES))
            sql = f"SELECT id, state FROM jobs WHERE state NOT IN ({marks}) ORDER BY seq"  # noqa: S608
            rows = conn.execute(sql, FINAL_STATES).fetchall()
        else:
            rows = []
            for at in range(0, len(ids), 500):
                chunk = ids[at : at + 500]
                sql = f"SELECT id, state FROM jobs WHERE id IN ({','.join('?' * len(chunk))}) ORDER BY seq"  # noqa: S608
                rows += conn.execute(sql, chunk).fetchall()
    except sqlite3.Error:
        return {}
    finally:
        conn.close()
    return {str(job_id): str(state) for job_id, state in rows}


def by_state(states: dict[str, str]) -> dict[str, list[str]]:
    """State → the job ids in it, in the order given."""
    out: dict[str, list[str]] = {}
    for job_id, state in states.items():
        out.setdefault(state, []).append(job_id)
    return out


def summary_line(
    pid: int,
    directory: Path,
    nodes: list[str],
    kept: dict[str, list[str]],
    ended: dict[str, list[str]],
    lease_s: float | None = None,
    here: str | None = None,
) -> str:
    """What ``down`` stopped, in one line: ``labgang down: stopped labgang up (pid 4242) of /s:
    its coordinator and the agent of node vm; 2 jobs wait for the next `labgang up` (1, 3)``.

    Args:
        pid: the ``labgang up`` stopped. directory: its state directory.
        nodes: the nodes whose agents were connected before the stop: this machine's is the
            agent ``labgang up`` ran; any other is an agent of its own that stays.
        kept: state → ids of the jobs the store keeps for the next ``labgang up``, after the stop.
        ended: state → ids of the jobs that were not finished before the stop and are now.
        lease_s: how long ranks left running outlive their coordinator (0.8 × ``node_timeout_s``,
            ``agent/lease.py``), or None when unknown.
        here: this machine's node name (default: its host name), the node of ``labgang up``'s agent.
    """
    from labgang.launcher.arrays import fold_ids

    def plural(ids: list[str], word: str) -> str:
        return f"{len(ids)} {word}{'s' if len(ids) != 1 else ''}"

    here = here or socket.gethostname()  # `labgang up` runs its agent as this machine's node
    agents = f"the agent of node {here}" if here in nodes else "its agent"
    parts = [f"labgang down: stopped labgang up (pid {pid}) of {directory}: its coordinator and {agents}"]
    others = [n for n in nodes if n != here]
    if others:  # agents started on their own (`labgang agent`) are their own processes: they stay
        parts.append(
            f"the agent{'s' if len(others) > 1 else ''} of node {', '.join(others)} "
            f"{'run' if len(others) > 1 else 'runs'} on and reconnect{'s' if len(others) == 1 else ''} "
            "to the next `labgang up`"
        )
    said = len(parts)  # what follows is of the jobs
    waiting = [job for state in ("pending", "admitted", "terminating") for job in kept.get(state, [])]
    if waiting:
        verb = "waits" if len(waiting) == 1 else "wait"
        parts.append(f"{plural(waiting, 'job')} {verb} for the next `labgang up` ({', '.join(fold_ids(waiting))})")
    if kept.get("running"):
        running = kept["running"]
        lease = f"if it starts within about {lease_s:.0f} s (the nodes' lease)" if lease_s else "if it starts in time"
        parts.append(
            f"{plural(running, 'job')} left running (--keep-jobs: {', '.join(fold_ids(running))}); "
            f"the next `labgang up` re-adopts them {lease}; after that each node stops its ranks and they run again"
        )
    if ended.get("cancelled"):
        parts.append(
            f"stopped and cancelled {', '.join(fold_ids(ended['cancelled']))} "
            "(submitted with --no-requeue or by `labgang run`)"
        )
    for state, ids in ended.items():
        if state != "cancelled":
            parts.append(f"{', '.join(fold_ids(ids))} ended as {'it' if len(ids) == 1 else 'they'} stopped ({state})")
    if len(parts) == said:
        parts.append("no jobs were waiting or running")
    return "; ".join(parts)


@click.command("down")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=paths.STATE_DIR_ENV,
    show_envvar=True,
    default=None,
    help="The state directory of the labgang up to stop [default: the instance every command finds: "
    "this machine's system instance when it answers, else ~/.local/state/labgang].",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print what was stopped, the jobs kept and those that ended, as JSON."
)
def down(state_dir: Path | None, as_json: bool) -> None:
    """Stop the labgang up of this state directory and wait until it has exited.

    The same as Ctrl-C in labgang up's terminal: by default each job's ranks are stopped with
    their grace period and the jobs wait in their queue for the next `labgang up` (a labgang up
    started with --keep-jobs leaves them running, to be re-adopted). Nothing is cancelled that
    Ctrl-C would not cancel: only a job submitted with --no-requeue ends cancelled. Exit status 1
    when no labgang up runs for the state directory. Without --state-dir it stops the instance
    `labgang queue` would talk to (this machine's system instance when it answers, else your own).
    """
    from labgang.launcher.cli.format import to_json

    try:
        directory = instance_dir(state_dir)
    except ValueError as exc:  # a broken system config (/etc/labgang/system.toml), named in one line
        raise CommandFailed(str(exc), 2, field="state_dir") from None
    try:
        pid = up_pid(directory)
    except DownRefused as exc:
        raise CommandFailed(str(exc) + (_own_instead(directory) if exc.not_up else ""), 1) from None
    nodes = _nodes(directory)
    before = list(job_states(directory))  # the jobs not finished yet: what the stop may end
    try:
        os.kill(pid, signal.SIGINT)
    except PermissionError:
        mine = f"the labgang up of {directory} (pid {pid}) is another user's: not yours to stop"
        raise CommandFailed(mine + _own_instead(directory), 1) from None
    except ProcessLookupError:
        raise CommandFailed(f"no labgang up is running for {directory} (pid {pid} has just exited)", 1) from None
    if not as_json:
        from labgang.launcher.api.discovery import is_system_socket

        which = " (this machine's system instance)" if is_system_socket(paths.socket_file(directory)) else ""
        click.echo(f"labgang down: stopping labgang up (pid {pid}) of {directory}{which}; waiting for it to exit")
    try:
        while _alive(pid):
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        click.echo(f"labgang down: stopped waiting; labgang up (pid {pid}) is still stopping its jobs", err=True)
        raise SystemExit(130) from None
    from labgang.launcher.lifecycle.states import FINAL_STATES

    after = job_states(directory, before) if before else {}
    kept = by_state(job_states(directory))
    ended = by_state({job_id: state for job_id, state in after.items() if state in FINAL_STATES})
    if as_json:
        out: dict[str, Any] = {"stopped": "labgang up", "pid": pid, "state_dir": str(directory), "nodes": nodes}
        out["jobs"] = kept
        out["ended"] = ended
        click.echo(to_json(out))
    else:
        click.echo(summary_line(pid, directory, nodes, kept, ended, lease_seconds(directory)))
