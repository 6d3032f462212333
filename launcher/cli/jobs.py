"""The everyday job commands: ``submit``, ``run``, ``queue``, ``cancel``, ``logs``, ``show``, ``queues``.

Each command is a thin layer over :mod:`labgang.launcher.cli.client` (the coordinator's
user API on ``<state_dir>/labgang.sock``). Exit statuses: 0 success; 1 the request was
refused, the coordinator is not there, or the job failed; 2 a usage error (a bad flag,
or a field the coordinator rejected as invalid, named by its flag). ``run`` exits with
the job's own status.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NoReturn, TextIO

import click
from labgang.launcher.cli.client import ApiError, Client, CoordinatorUnavailable
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.format import (
    DURATION,
    SIGNAL_SPEC,
    job_detail,
    job_table,
    queue_table,
    to_json,
)
from labgang.launcher.model import CPU_BIND, MIG_PREFIX, MIG_PROFILE_RE, TOPOLOGY_LEVELS
from labgang.launcher.text import control_characters

# Which flag sets each field of the submission body, for error messages.
FIELD_FLAGS: dict[str, str] = {
    "name": "--name",
    "queue": "-q/--queue",
    "workers": "-n/--workers",
    "gpus_per_worker": "-g/--gpus-per-worker",
    "mig": "--mig",
    "priority": "-p/--priority",
    "nodes": "--nodes",
    "gpu_model": "--gpu-model",
    "topology": "--topology",
    "min_workers": "--min-workers",
    "cpu_bind": "--cpu-bind",
    "grace_s": "--grace",
    "time_limit_s": "--time",
    "requeue": "--no-requeue",
    "signal": "--signal",
    "argv": "CMD",
    "env": "the environment",
    "cwd": "the working directory",
    "rank": "--rank",
    "user": "--user",
}

# Variables labgang sets for each rank; a value inherited from the submitting shell
# (say, from inside another job) must not leak into the new gang.
RANK_ENV = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "MASTER_ADDR",
        "MASTER_PORT",
        "WORLD_SIZE",
        "RANK",
        "LOCAL_RANK",
        "LOCAL_WORLD_SIZE",
        "NODE_RANK",
        "GROUP_RANK",
        "ROLE_RANK",
        "TORCHELASTIC_RUN_ID",
    }
)
# labgang's own settings (LABGANG_STATE_DIR...) configure this CLI, not the job; labgang sets
# LABGANG_JOB_ID and LABGANG_RESTART_COUNT for each rank itself.
LABGANG_ENV_PREFIX = "LABGANG_"
FINISHED_STATES = frozenset({"succeeded", "failed", "cancelled"})
POLL_S = 0.2
# Once a job has ended, how many polls to wait for its logs to report complete.
LOG_SETTLE_POLLS = 10
EXIT_INTERRUPTED = 130


# Body fields in seconds, set by duration flags: their errors say how to write a duration.
DURATION_FIELDS = frozenset({"grace_s", "time_limit_s"})
DURATION_EXAMPLE = "(e.g. 30s, 5m, 2h)"
# API field names that are not plain words, rewritten to their flags wherever a message names them.
_FIELD_NAME_RE = re.compile(
    r"\b(" + "|".join(sorted((f for f in FIELD_FLAGS if "_" in f), key=len, reverse=True)) + r")\b"
)


def flag_message(message: str, field: str | None) -> str:
    """Rewrite a coordinator message about body ``field`` in the CLI's terms.

    ``"time_limit_s: must be > 0 seconds"`` becomes ``"--time: must be > 0 seconds (e.g. 30s,
    5m, 2h)"``: the leading field name becomes its flag, every other API field name with an
    underscore becomes its flag, and duration fields get an example of the syntax.
    """
    if field and message.startswith(f"{field}: "):
        message = message[len(field) + 2 :]
    message = _FIELD_NAME_RE.sub(lambda m: FIELD_FLAGS[m.group(1)], message)
    if field in FIELD_FLAGS:
        flag = FIELD_FLAGS[field]
        if not message.startswith(flag):
            message = f"{flag}: {message}"
    if field in DURATION_FIELDS and DURATION_EXAMPLE not in message:
        message = f"{message} {DURATION_EXAMPLE}"
    return message


def describe_api_error(err: ApiError) -> CommandFailed:
    """Turn a refusal into a one-line error naming the flag and what it allows.

    A 400 (a field is invalid) is a usage error, exit 2; 403/404/409 are refusals, exit 1.
    Fields that are not flags (``uid``, ``id``) are not prefixed: the message says what it is about.
    """
    message = flag_message(err.message, err.field)
    if err.allowed not in (None, "", [], {}):
        items = list(err.allowed) if isinstance(err.allowed, (list, tuple)) else [err.allowed]
        allowed = ", ".join(map(str, items))
        # the coordinator's message may already list them (e.g. "one of ['batch', 'high']")
        if allowed not in message and not all(str(item) in message for item in items):
            message = f"{message} (allowed: {allowed})"
    return CommandFailed(message, 2 if err.status == 400 else 1)


def talks_to_coordinator(func: Callable[..., Any]) -> Callable[..., Any]:
    """Decorate a command body: map client errors to :class:`CommandFailed` with the right status."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except ApiError as err:
            raise describe_api_error(err) from err
        except CoordinatorUnavailable as err:
            raise CommandFailed(str(err), 1) from err

    return wrapper


def state_dir_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--state-dir`` option every client command takes (``LABGANG_STATE_DIR``)."""
    return click.option(
        "--state-dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="LABGANG_STATE_DIR",
        show_envvar=True,
        default=None,
        help="State directory of the labgang instance to talk to (its socket is labgang.sock there).",
    )(func)


def json_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """The ``--json`` flag: print the coordinator's JSON instead of a table."""
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(func)


def _submit_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "-n",
            "--workers",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Ranks in the gang; all start together or none does.",
        ),
        click.option(
            "-g", "--gpus-per-worker", type=click.IntRange(min=1), default=None, help="Full GPUs per rank (default 1)."
        ),
        click.option(
            "--mig",
            metavar="PROFILE",
            default=None,
            help="One MIG device of this profile per rank instead of full GPUs (e.g. 1g.10gb).",
        ),
        click.option("-q", "--queue", default=None, help="Queue to submit to (default: your default queue)."),
        click.option(
            "-p",
            "--priority",
            default=None,
            help="Priority: an integer from -2147483648 to 2147483647 (signed 32-bit; higher goes "
            "first) or a priority class name from the cluster config.",
        ),
        click.option(
            "--nodes",
            type=click.IntRange(min=1),
            default=None,
            help="Spread the ranks over exactly this many nodes (default: as few as fit).",
        ),
        click.option(
            "--gpu-model",
            default=None,
            metavar="MODEL",
            help="Only GPUs whose name contains MODEL (case-insensitive), e.g. H100.",
        ),
        click.option(
            "--min-workers",
            type=click.IntRange(min=1),
            default=None,
            help="Elastic gang: start with as many ranks as can be placed now, never fewer than this "
            "(WORLD_SIZE is the size it got); it never grows and never preempts to grow.",
        ),
        click.option(
            "--topology",
            type=click.Choice(TOPOLOGY_LEVELS),
            default=None,
            help="Require the whole gang's GPUs this close, on one node: nvlink (every pair joined by "
            "NVLink), pcie-switch, numa (one NUMA node) or node. Without it the closest free GPUs are "
            "preferred, not required.",
        ),
        click.option(
            "--cpu-bind",
            type=click.Choice(CPU_BIND),
            default=None,
            help="numa (default): pin each rank to the CPUs of its GPUs' NUMA node(s); none: do not pin.",
        ),
        click.option(
            "--grace",
            type=DURATION,
            default=None,
            help="Time between SIGTERM and SIGKILL when the job is stopped (30s, 5m...).",
        ),
        click.option(
            "--time",
            "time_limit",
            type=DURATION,
            default=None,
            help="Time limit (30m, 2h...); the job fails when it runs longer.",
        ),
        click.option("--name", default=None, help="Job name (default: the script or command's file name)."),
        click.option(
            "--no-requeue",
            is_flag=True,
            help="Fail instead of going back to the queue when preempted or its node is lost.",
        ),
        click.option(
            "--signal",
            "signal_spec",
            type=SIGNAL_SPEC,
            default=None,
            help="Send SIG this long before the time limit (SIGTERM follows at the limit) and "
            "before a preemption or cancel stop, like Slurm's --signal (e.g. USR1@60).",
        ),
        click.argument("argv", nargs=-1, required=True, metavar="-- CMD [ARGS]..."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def build_submission(
    *,
    argv: Iterable[str],
    workers: int = 1,
    gpus_per_worker: int | None = None,
    mig: str | None = None,
    queue: str | None = None,
    priority: str | None = None,
    nodes: int | None = None,
    gpu_model: str | None = None,
    topology: str | None = None,
    cpu_bind: str | None = None,
    min_workers: int | None = None,
    grace: float | None = None,
    time_limit: float | None = None,
    name: str | None = None,
    no_requeue: bool = False,
    signal_spec: str | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
) -> dict[str, Any]:
    """Build the ``POST /v1/jobs`` body from the submit flags.

    Optional fields left unset are omitted so the coordinator applies its defaults
    (the user's default queue, the queue's grace...). The environment is the caller's
    (like ``sbatch --export=ALL``) minus the variables labgang sets per rank and
    ``LABGANG_*`` (this CLI's own settings).

    Args:
        argv: the command and its arguments (non-empty).
        workers: ranks in the gang (>= 1).
        gpus_per_worker: full GPUs per rank (>= 1); None means 1, or MIG with ``mig``.
        mig: a MIG profile such as ``"1g.10gb"`` (``"mig-1g.10gb"`` accepted).
        queue, priority, nodes, gpu_model, topology, cpu_bind, min_workers: as the flags.
        name: the job name; None lets the coordinator derive it from ``argv``.
        grace, time_limit: seconds.
        no_requeue: True to fail rather than requeue.
        signal_spec: canonical ``"SIGUSR1@60"``.
        env, cwd: defaults ``os.environ`` and ``os.getcwd()``.

    Raises:
        click.UsageError: conflicting or malformed flags (the message names the flag).
    """
    argv = list(argv)
    if not argv:
        raise click.UsageError("missing CMD: give the command to run after --")
    if mig is not None and gpus_per_worker is not None:
        raise click.UsageError(
            "-g/--gpus-per-worker and --mig exclude each other: a rank gets full GPUs or one MIG device"
        )
    if mig is not None:
        profile = mig[len(MIG_PREFIX) :] if mig.startswith(MIG_PREFIX) else mig
        if not MIG_PROFILE_RE.match(profile):
            raise click.UsageError(
                f"--mig: {mig!r} is not a MIG profile; allowed: a profile name as nvidia-smi shows it, "
                "e.g. 1g.10gb, 3g.40gb, 1g.18gb+me"
            )
        mig = profile
    if name is not None and not name.strip():
        raise click.UsageError("--name: must not be empty")
    if name is not None and control_characters(name):
        raise click.UsageError(
            f"--name: {name!r} contains control characters ({', '.join(control_characters(name))}); "
            "allowed: printable characters"
        )
    if queue is not None and not queue.strip():
        raise click.UsageError("-q/--queue: must not be empty; allowed: a queue name (see `labgang queues`)")
    body: dict[str, Any] = {
        "workers": workers,
        "gpus_per_worker": 1 if gpus_per_worker is None else gpus_per_worker,
        "mig": mig,
        "requeue": not no_requeue,
        "argv": argv,
        "env": {
            k: v
            for k, v in (os.environ if env is None else env).items()
            if k not in RANK_ENV and not k.startswith(LABGANG_ENV_PREFIX)
        },
        "cwd": _current_directory() if cwd is None else cwd,
    }
    optional = {
        "name": name,
        "queue": queue,
        "priority": _priority_value(priority),
        "nodes": nodes,
        "gpu_model": gpu_model,
        "topology": topology,
        "cpu_bind": cpu_bind,
        "min_workers": min_workers,
        "grace_s": grace,
        "time_limit_s": time_limit,
        "signal": signal_spec,
    }
    body.update({k: v for k, v in optional.items() if v is not None})
    return body


def _current_directory() -> str:
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise click.UsageError(
            "the current directory no longer exists; ranks start in it, so cd somewhere that does"
        ) from None


def _priority_value(priority: str | None) -> int | str | None:
    if priority is None:
        return None
    text = priority.strip()
    try:
        return int(text)
    except ValueError:
        pass
    if not text or not text.replace("-", "").replace("_", "").isalnum():
        raise click.UsageError(f"-p/--priority: {priority!r} is neither an integer nor a priority class name")
    return text


_REFUSED_QUEUE_RE = re.compile(r"user '(?P<user>[^']*)' may not submit to queue '(?P<queue>[^']*)'")


def _submit(client: Client, **flags: Any) -> dict[str, Any]:
    """Submit; a refusal of the queue the user did not pick (no ``-q``) says it was the default."""
    try:
        return client.submit(build_submission(**flags))
    except ApiError as err:
        if flags.get("queue") is not None or err.field != "queue" or err.status != 403:
            raise
        raise default_queue_refused(err) from err


def default_queue_refused(err: ApiError) -> CommandFailed:
    """The error for a submission without ``-q`` whose default queue the user may not use.

    Args:
        err: the coordinator's 403 on field ``queue`` (``allowed`` = the queues the user may use).

    Returns:
        A :class:`CommandFailed` (exit 1) such as ``default queue 'team-a' (from cluster.toml
        default_queue) is not open to user 'bob'; use -q to pick one of: shared, b``.
    """
    m = _REFUSED_QUEUE_RE.search(err.message)
    if m:
        what = f"default queue {m['queue']!r} (from cluster.toml default_queue) is not open to user {m['user']!r}"
    else:
        what = f"the default queue (from cluster.toml default_queue) was refused: {err.message}"
    usable = [str(q) for q in err.allowed] if isinstance(err.allowed, (list, tuple)) else []
    hint = f"use -q to pick one of: {', '.join(usable)}" if usable else "no queue is open to you; ask a labgang admin"
    return CommandFailed(f"{what}; {hint}", 1)


@click.command(context_settings={"allow_interspersed_args": False})
@_submit_options
@json_option
@state_dir_option
@talks_to_coordinator
def submit(state_dir: Path | None, as_json: bool, **flags: Any) -> None:
    """Submit a gang job and print its id.

    Everything after the options (or after --) is the command each rank runs, in this
    directory, with your environment plus RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
    LOCAL_RANK, NODE_RANK and CUDA_VISIBLE_DEVICES (device UUIDs) set per rank.

    Example: labgang submit -n 4 -g 2 -q vision -- python train.py --epochs 3
    """
    with Client.for_state_dir(state_dir) as client:
        job = _submit(client, **flags)
    click.echo(to_json({"job": job}) if as_json else job["id"])


class JobFollower:
    """Follow one job: report its state changes and copy its ranks' output until it ends.

    Resumable: :meth:`follow` may be interrupted (Ctrl-C) and called again; it
    continues from the byte offsets already written.

    Args:
        client: the coordinator client.
        job_id: the job to follow.
        ranks: the ranks whose logs to copy; with more than one, each line is prefixed
            with ``"<rank>: "`` (like ``srun --label``).
        out: where output bytes go (a binary stream).
        err: where state changes go (text), or None for silence.
        poll_s: seconds between polls.
    """

    def __init__(
        self,
        client: Client,
        job_id: str,
        ranks: Iterable[int],
        out: Any,
        err: TextIO | None,
        poll_s: float = POLL_S,
    ) -> None:
        self.client = client
        self.job_id = job_id
        self.ranks = tuple(ranks)
        self.out = out
        self.err = err
        self.poll_s = poll_s
        self.offsets = {r: 0 for r in self.ranks}
        self.partial = {r: b"" for r in self.ranks}
        self.complete: set[int] = set()
        self._last_report: tuple[Any, ...] | None = None
        self._settle = 0

    def follow(self) -> dict[str, Any]:
        """Poll until the job has ended and its logs are complete; return the final JobView."""
        while True:
            job = self.client.job(self.job_id)
            started = job.get("started_workers")
            if started is not None and any(r >= started for r in self.ranks):
                self.ranks = tuple(r for r in self.ranks if r < started)  # an elastic gang started smaller
            finished = job["state"] in FINISHED_STATES
            if not finished:
                self._report(job)
            if job["state"] != "pending" or finished:
                for rank in self.ranks:
                    if rank not in self.complete:
                        self._drain(rank, finished)
            if len(self.complete) == len(self.ranks):
                break
            if finished:
                self._settle += 1
                if self._settle > LOG_SETTLE_POLLS:
                    break
            time.sleep(self.poll_s)
        self._flush_partial()
        # The logs can be complete (every rank gone) a moment before the job's own state says
        # it ended: wait for that state, so the caller never sees "running" for a finished job.
        while job["state"] not in FINISHED_STATES:
            time.sleep(self.poll_s)
            job = self.client.job(self.job_id)
        self._report(job)  # the final line comes after all of the output
        return job

    def _drain(self, rank: int, job_finished: bool) -> None:
        while True:
            try:
                chunk = self.client.logs(self.job_id, rank=rank, offset=self.offsets[rank])
            except ApiError as exc:
                if exc.status == 404 and job_finished:
                    self.complete.add(rank)  # the rank never started: there is no log
                if exc.status == 404:
                    return
                raise
            self._write(rank, chunk.data)
            self.offsets[rank] = chunk.next_offset
            if chunk.finished and not chunk.data:
                self.complete.add(rank)
                return
            if not chunk.data:
                return

    def _write(self, rank: int, data: bytes) -> None:
        if not data:
            return
        if len(self.ranks) == 1:
            self.out.write(data)
        else:
            lines = (self.partial[rank] + data).split(b"\n")
            self.partial[rank] = lines.pop()
            for line in lines:
                self.out.write(b"%d: %s\n" % (rank, line))
        self.out.flush()

    def _flush_partial(self) -> None:
        for rank in self.ranks:
            if self.partial[rank]:
                self.out.write(b"%d: %s\n" % (rank, self.partial[rank]))
                self.partial[rank] = b""
        self.out.flush()

    def _report(self, job: dict[str, Any]) -> None:
        if self.err is None:
            return
        reason = job.get("reason") or {}
        key = (job["state"], reason.get("code"), reason.get("message"))
        if key == self._last_report:
            return
        self._last_report = key
        state = job["state"]
        if state == "admitted" or (state == "pending" and not reason):
            return  # passing states: a scheduling cycle or the ranks' start is under way
        if state == "pending":
            why = reason.get("message") or reason.get("code")
            line = f"job {self.job_id} pending in queue {job.get('queue')}: {why}"
        elif state == "running":
            line = f"job {self.job_id} {state} on {','.join(job.get('nodes') or []) or '?'}"
        elif state == "terminating":
            line = f"job {self.job_id} terminating" + (f": {reason.get('message')}" if reason.get("message") else "")
        else:
            status = job.get("exit_status")
            line = f"job {self.job_id} {state}" + (f" (exit status {status})" if status is not None else "")
            if reason.get("message"):
                line += f": {reason['message']}"
        print(f"labgang: {line}", file=self.err, flush=True)


def exit_status_of(job: dict[str, Any]) -> int:
    """The shell exit status for a finished job: 0 succeeded; a failed job's rank status
    (1..255, signals as 128+N), or 1 when it has none; 1 for a cancelled job."""
    if job["state"] == "succeeded":
        return 0
    status = job.get("exit_status")
    if job["state"] == "failed" and isinstance(status, int) and 0 < status < 256:
        return status
    return 1


@click.command(context_settings={"allow_interspersed_args": False})
@_submit_options
@click.option("--all-ranks", is_flag=True, help="Stream every rank's output, each line prefixed with its rank.")
@state_dir_option
@talks_to_coordinator
def run(state_dir: Path | None, all_ranks: bool, **flags: Any) -> None:
    """Submit a gang job, stream rank 0's output, and exit with the job's status.

    While it waits, the pending reason is printed to stderr. Ctrl-C cancels the job
    (its ranks get SIGTERM, then SIGKILL after the grace period) and keeps printing
    until it has stopped; a second Ctrl-C stops waiting. SIGTERM and SIGHUP (a closed
    terminal, a batch system stopping this command) cancel the job the same way, and
    the exit status is then 128 + the signal's number (143 for SIGTERM).

    Example: labgang run -n 4 -g 2 -- python examples/ddp_allreduce.py
    """
    with Client.for_state_dir(state_dir) as client:
        job = _submit(client, **flags)
        job_id = job["id"]
        click.echo(f"labgang: submitted job {job_id}", err=True)
        ranks = range(job.get("workers") or flags["workers"]) if all_ranks else (0,)
        follower = JobFollower(client, job_id, ranks, _stdout_bytes(), sys.stderr)
        stopped_by: str | None = None  # "Ctrl-C", "SIGTERM" or "SIGHUP" once the job was cancelled
        code = EXIT_INTERRUPTED
        with _stop_signals_interrupt():
            while True:
                try:
                    final = follower.follow()
                    break
                except CoordinatorUnavailable:
                    # labgang stopped under us (Ctrl-C on `labgang up`): the job is not lost; it
                    # is requeued or still recorded, and the next start shows what became of it.
                    _fail(
                        f"labgang stopped while following job {job_id}; see `labgang show {job_id}` "
                        "once it is back (jobs stopped by a shutdown run again at the next start)",
                        1,
                    )
                except KeyboardInterrupt as exc:
                    client.close()  # a request may have been cut in half
                    what = exc.args[0] if isinstance(exc, StopSignal) else "Ctrl-C"
                    if stopped_by is not None:
                        _fail(f"stopped waiting; job {job_id} is still stopping (see `labgang show {job_id}`)", code)
                    stopped_by = what
                    code = exc.args[1] if isinstance(exc, StopSignal) else EXIT_INTERRUPTED
                    if what == "Ctrl-C":
                        note = f"labgang: cancelling job {job_id} (Ctrl-C again to stop waiting)"
                    else:
                        note = f"labgang: {what}: cancelling job {job_id} ({what} or Ctrl-C again to stop waiting)"
                    click.echo(note, err=True)
                    client.cancel(job_id)
    sys.exit(code if stopped_by is not None else exit_status_of(final))


class StopSignal(KeyboardInterrupt):
    """SIGTERM or SIGHUP while ``labgang run`` follows its job: handled like Ctrl-C.

    ``args`` = (signal name, exit status 128 + N), e.g. ``("SIGTERM", 143)``.
    """


@contextlib.contextmanager
def _stop_signals_interrupt() -> Iterator[None]:
    """While inside, SIGTERM and SIGHUP raise :class:`StopSignal` (as SIGINT raises KeyboardInterrupt),
    so ``labgang run`` cancels its job the way Slurm's ``srun`` forwards them, instead of dying and
    leaving the job behind."""

    def handler(signum: int, frame: Any) -> None:
        raise StopSignal(signal.Signals(signum).name, 128 + signum)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _stdout_bytes() -> Any:
    return getattr(sys.stdout, "buffer", sys.stdout)


def _fail(message: str, code: int) -> NoReturn:
    raise CommandFailed(message, code)


@click.command()
@click.option("--all", "all_users", is_flag=True, help="Everyone's jobs, not only yours.")
@click.option("--user", "-u", default=None, help="Only this user's jobs.")
@json_option
@state_dir_option
@talks_to_coordinator
def queue(state_dir: Path | None, all_users: bool, user: str | None, as_json: bool) -> None:
    """List pending and running jobs, like squeue.

    NODES(REASON) shows where a job runs, or why it waits, with numbers.
    Finished jobs are not listed; see them with `labgang show JOB`.
    """
    with Client.for_state_dir(state_dir) as client:
        jobs = client.jobs(all_users=all_users, user=user)
    active = sorted(
        (j for j in jobs if j.get("state") not in FINISHED_STATES),
        key=lambda j: (j.get("submit_time") or 0.0, _id_key(j.get("id"))),
    )
    click.echo(to_json({"jobs": active}) if as_json else job_table(active, time.time()))


class JobIdType(click.ParamType):
    """A job id as the coordinator gives them: a decimal sequence number (``12``).

    Refuses anything else as a usage error (exit 2) before any request is sent.
    """

    name = "JOB"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip()
        if text.isascii() and text.isdigit() and int(text) > 0:
            return str(int(text))
        self.fail(f"{value!r} is not a job id; allowed: a job number such as 12 (see `labgang queue`)", param, ctx)


JOB_ID = JobIdType()
"""The ``JOB`` argument of ``cancel``, ``logs`` and ``show``."""


def _id_key(job_id: Any) -> tuple[int, Any]:
    text = str(job_id)
    return (0, int(text)) if text.isdigit() else (1, text)


@click.command()
@click.argument("job_ids", nargs=-1, required=True, metavar="JOB...", type=JOB_ID)
@state_dir_option
def cancel(state_dir: Path | None, job_ids: tuple[str, ...]) -> None:
    """Cancel jobs: pending ones leave their queue, running ones get SIGTERM, then SIGKILL after their grace."""
    failures: list[CommandFailed] = []
    with Client.for_state_dir(state_dir) as client:
        for job_id in dict.fromkeys(job_ids):  # `cancel 17 17` cancels and reports job 17 once
            try:
                before = client.job(job_id)
                job = before if before["state"] in FINISHED_STATES else client.cancel(job_id)
            except ApiError as err:
                failure = describe_api_error(err)
                failures.append(failure)
                # Name the job once: "job 3 belongs to root", not "job 3: job 3 belongs to root".
                text = failure.message
                if not text.startswith(f"job {job_id} ") and not text.startswith(f"job {job_id}:"):
                    text = f"job {job_id}: {text}"
                click.echo(f"labgang cancel: {text}", err=True)
                continue
            except CoordinatorUnavailable as err:
                raise CommandFailed(str(err), 1) from err
            if job is before:
                click.echo(f"job {job['id']}: already {job['state']}")
            else:
                click.echo(f"job {job['id']}: {job['state']}")
    if failures:
        sys.exit(max(f.exit_code for f in failures))


@click.command()
@click.argument("job_id", metavar="JOB", type=JOB_ID)
@click.option("--rank", "-r", type=click.IntRange(min=0), default=0, show_default=True, help="Which rank's output.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing as the rank writes, until the job ends.")
@state_dir_option
@talks_to_coordinator
def logs(state_dir: Path | None, job_id: str, rank: int, follow: bool) -> None:
    """Print a rank's output (stdout and stderr as the rank wrote them).

    A job that has not run yet has no output: that is said on stderr ("job 4 has not
    started (PENDING: <reason>)"), exit 0; with -f it is said once, then the output
    follows when the job starts.
    """
    with Client.for_state_dir(state_dir) as client:
        job = client.job(job_id)
        if rank >= int(job.get("workers") or 1):
            raise CommandFailed(f"--rank: job {job_id} has ranks 0..{int(job.get('workers') or 1) - 1}, not {rank}", 2)
        out = _stdout_bytes()
        if follow:
            if not_started(job):
                click.echo(f"labgang logs: {not_started(job)}", err=True)
            try:
                final = JobFollower(client, job_id, (rank,), out, None).follow()
            except KeyboardInterrupt:
                sys.exit(EXIT_INTERRUPTED)
            if not_started(final) and not_started(final) != not_started(job):
                click.echo(f"labgang logs: {not_started(final)}", err=True)
            return
        offset = 0
        while True:
            try:
                chunk = client.logs(job_id, rank=rank, offset=offset)
            except ApiError as err:
                if err.status == 404 and offset == 0:
                    raise CommandFailed(f"job {job_id} rank {rank} has no output yet ({job['state']})", 1) from err
                raise
            if not chunk.data:
                break
            out.write(chunk.data)
            offset = chunk.next_offset
        out.flush()
        if offset == 0 and not_started(job):
            click.echo(f"labgang logs: {not_started(job)}", err=True)


def never_ran(job: dict[str, Any]) -> bool:
    """True when no attempt of the job ever had all its ranks started (so no rank output is expected)."""
    return job.get("start_time") is None and not job.get("restart_count")


def not_started(job: dict[str, Any]) -> str | None:
    """Why a job has no output yet, in one line, or None when it ran (or is running).

    ``job 4 has not started (PENDING: <reason>)``, ``job 4 has not started (ADMITTED: its
    ranks are starting)``, ``job 2 was cancelled before it ran``, ``job 2 failed before it
    ran: <reason>``.
    """
    if not never_ran(job):
        return None
    state = str(job.get("state"))
    reason = (job.get("reason") or {}).get("message") or (job.get("reason") or {}).get("code")
    if state == "pending":
        return f"job {job['id']} has not started ({state.upper()}: {reason or 'waiting for a scheduling cycle'})"
    if state == "admitted":
        return f"job {job['id']} has not started ({state.upper()}: its ranks are starting)"
    if state == "cancelled":
        return f"job {job['id']} was cancelled before it ran"
    if state == "failed":
        return f"job {job['id']} failed before it ran" + (f": {reason}" if reason else "")
    return None


@click.command()
@click.argument("job_id", metavar="JOB", type=JOB_ID)
@json_option
@state_dir_option
@talks_to_coordinator
def show(state_dir: Path | None, job_id: str, as_json: bool) -> None:
    """Show one job: its request, state, ranks with their devices, and its history with reasons."""
    with Client.for_state_dir(state_dir) as client:
        job = client.job(job_id)
        add_start_errors(client, job)
        add_pitfalls(client, job)
    click.echo(to_json({"job": job}) if as_json else job_detail(job, time.time()))


def add_pitfalls(client: Client, job: dict[str, Any]) -> None:
    """Set ``pitfalls`` on ``job``: the coordinator's current pitfall findings about it
    (``GET /v1/pitfalls?job=ID``, the same ones `labgang top` and /metrics show); left unset
    when the coordinator is too old to have them."""
    try:
        job["pitfalls"] = client.pitfalls(str(job["id"])).get("findings", [])
    except ApiError as err:
        if err.status != 404:
            raise


# The exit statuses a rank gets when its command could not be executed (as a shell gives them),
# and the line the rank's small parent then writes first in the rank's log (agent/supervisor/shim.py).
START_FAILURE_STATUSES = frozenset({126, 127})
START_FAILURE_PREFIX = b"[labgang] cannot start "


def add_start_errors(client: Client, job: dict[str, Any]) -> None:
    """Set ``start_error`` on each rank of ``job`` whose command could not be executed.

    Such a rank exits 127 (no such file) or 126 (not executable) and its log holds only the reason;
    ``show`` reads that first line so the user sees it without `logs`.

    Args:
        client: the coordinator client.
        job: a JobView dict; its ``ranks`` entries gain ``start_error`` (``"cannot start 'x': No such
            file or directory"``).
    """
    for rank in job.get("ranks") or []:
        if rank.get("exit_status") not in START_FAILURE_STATUSES or not isinstance(rank.get("rank"), int):
            continue
        try:
            head = client.logs(str(job["id"]), rank=rank["rank"], offset=0).data[:4096]
        except ApiError:
            continue
        if head.startswith(START_FAILURE_PREFIX):
            line = head.split(b"\n", 1)[0].removeprefix(b"[labgang] ")
            rank["start_error"] = line.decode(errors="replace")


@click.command()
@json_option
@state_dir_option
@talks_to_coordinator
def queues(state_dir: Path | None, as_json: bool) -> None:
    """List queues: nominal quota, what is used, borrowed from and lent to the cohort, and job counts."""
    with Client.for_state_dir(state_dir) as client:
        items = client.queues()
    click.echo(to_json({"queues": items}) if as_json else queue_table(items))


__all__ = [
    "CommandFailed",
    "JobFollower",
    "build_submission",
    "cancel",
    "describe_api_error",
    "exit_status_of",
    "logs",
    "queue",
    "queues",
    "run",
    "show",
    "submit",
]
