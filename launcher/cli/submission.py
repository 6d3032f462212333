"""``labgang submit`` and ``labgang run``: the submission flags, the request body they build,
a refused default queue explained, and ``run`` following its job (``follow.follow_to_the_end``:
cancelled on Ctrl-C, SIGTERM or SIGHUP)."""

from __future__ import annotations

import os
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from labgang.launcher.api.client import ApiError, Client, CoordinatorUnavailable
from labgang.launcher.cli import job_request
from labgang.launcher.cli.array_follow import ArrayFollower, array_exit_status
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.follow import (
    EXIT_INTERRUPTED,
    FollowStopped,
    StopSignal,
    array_stopped,
    await_return,
    away_line,
    follow_to_the_end,
    gone_how,
    stderr_bytes,
    stop_signals_interrupt,
)
from labgang.launcher.cli.format import (
    BEGIN,
    DURATION,
    SIGNAL_SPEC,
    to_json,
)
from labgang.launcher.cli.params import JOB_TIME_LIMIT, NODE_COUNT
from labgang.launcher.cli.plumbing import (
    fail,
    json_option,
    state_dir_option,
    stdout_bytes,
    talks_to_coordinator,
)
from labgang.launcher.lifecycle.group_policy import FAILURE_POLICIES, MAX_RESTARTS_LIMIT
from labgang.launcher.model import CPU_BIND, TOPOLOGY_LEVELS

# The environment rules and the body itself live in job_request.py, without click, so that the
# fast path of `labgang submit` (quick.py) sends exactly what this command sends.
RANK_ENV = job_request.RANK_ENV
LABGANG_ENV_PREFIX = job_request.LABGANG_ENV_PREFIX


SCRIPT_ORIGINS = "labgang.script_origins"
"""``ctx.meta`` key: for a batch script, each submit field its directives set (and the command line does
not) -> the line (``train.sh:3: #SBATCH --partition=gpu``), so a refused value names it
(:func:`labgang.launcher.cli.batch_script.field_origins`). Absent for a plain command."""


def _script_origins() -> dict[str, str] | None:
    """The batch script's :data:`SCRIPT_ORIGINS` of the running command, or None when it runs no script."""
    ctx = click.get_current_context(silent=True)
    return None if ctx is None else ctx.meta.get(SCRIPT_ORIGINS)


def _origin(field: str | None = None, message: str = "") -> str | None:
    """The directive line that set the refused value (by the coordinator's ``field``, else by the flag
    ``message`` starts with), or None when no directive did (or no script runs)."""
    origins = _script_origins()
    if not origins:
        return None
    from labgang.launcher.cli import batch_script, quick

    return batch_script.origin_of(origins, quick._submit_flags(), field=field, message=message)


class ScriptCommand(click.Command):
    """``submit``/``run``: a batch script as the first argument (``labgang submit train.sbatch [ARGS]``)
    is read for its ``#LABGANG``/``#SBATCH`` lines before the flags are parsed (:mod:`.batch_script`);
    each ignored ``#SBATCH`` option gets one warning line on stderr, and a value of a directive that
    a flag's type refuses (``#SBATCH -N x``) names the directive's line before the flag's own error."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        from labgang.launcher.cli import batch_script, quick

        table = quick._submit_flags() if self.name == "submit" else quick._run_flags()
        try:
            options, positional = quick.parse(args, table, interspersed=False)
        except quick.NotFast:
            return self._parse_naming_the_group(ctx, args)  # malformed flags: click words the error
        try:
            found = batch_script.script_form(args, positional, strict=bool(options.get("error_on_unknown_sbatch")))
        except batch_script.BadScript as exc:
            raise click.UsageError(str(exc), ctx) from None
        if found is None:
            return self._parse_naming_the_group(ctx, args)
        args, warnings = found
        for line in warnings:
            click.echo(f"labgang {self.name}: warning: {line}", err=True)
        origins = ctx.meta[SCRIPT_ORIGINS] = batch_script.field_origins(positional[0], table, options)
        try:
            return self._parse_naming_the_group(ctx, args)
        except click.BadParameter as exc:  # a directive's value click refuses (-N x): name its line first
            where = None if exc.param is None or exc.param.name is None else origins.get(exc.param.name)
            if where is None:
                raise
            from labgang.launcher.cli.errors import command_path, usage_line

            line = usage_line(exc).removeprefix(command_path(ctx) + ": ")
            raise click.UsageError(f"{where}: {line}", ctx) from None

    def _parse_naming_the_group(self, ctx: click.Context, args: list[str]) -> list[str]:
        """click's parse; in a job of groups (``CMD : OPTIONS -- CMD``) a bad value of a shape option
        before the first ``--`` is the first group's, and its line names that group (``--group NAME``,
        else ``g0``): ``group g0: -n/--workers: 0 is not in the range x>=1; allowed: ...``."""
        given = list(args)  # click's parser consumes the list it is given
        try:
            return super().parse_args(ctx, args)
        except click.BadParameter as exc:
            if exc.param is None or exc.param.name not in _GROUP_SHAPE:
                raise
            from labgang.launcher.cli import job_groups
            from labgang.launcher.cli.errors import command_path, usage_line

            if len(job_groups.split_components(given)) == 1:
                raise
            head = given[: given.index("--")] if "--" in given else given
            name = next((head[i + 1] for i in range(len(head) - 1) if head[i] == "--group"), "g0")
            line = usage_line(exc).removeprefix(command_path(ctx) + ": ")
            raise click.UsageError(f"group {name}: {line}", ctx) from None


_GROUP_SHAPE = frozenset(
    {"workers", "gpus_per_worker", "nodes", "min_workers", "cpus_per_task", "mig", "gpu_model", "topology"}
)
"""The options before the first ``--`` that are the first group's shape in a job of groups."""


def _submit_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "-n",
            "--workers",
            "--ntasks",
            type=click.IntRange(min=1),
            default=1,
            show_default=True,
            help="Ranks in the gang; all start together or none does.",
        ),
        click.option(
            "-g",
            "--gpus-per-worker",
            "--gpus-per-task",
            type=click.IntRange(min=0),
            default=None,
            help="Full GPUs per rank (default 1; 0 only for a group of a job of groups, such as an MPI launcher).",
        ),
        click.option(
            "--mig",
            metavar="PROFILE",
            default=None,
            help="One MIG device of this profile per rank instead of full GPUs (e.g. 1g.10gb).",
        ),
        click.option(
            "-q",
            "--queue",
            "--partition",
            default=None,
            help="Queue to submit to (default: your default queue); --partition is Slurm's name for it.",
        ),
        click.option(
            "-p",
            "--priority",
            "--qos",
            default=None,
            help="Priority: an integer from -2147483648 to 2147483647 (signed 32-bit; higher goes "
            "first) or a priority class name from the cluster config.",
        ),
        click.option(
            "-N",
            "--nodes",
            type=NODE_COUNT,
            default=None,
            help="Spread the ranks over exactly this many nodes (default: as few as fit).",
        ),
        click.option(
            "--gpu-model",
            default=None,
            metavar="MODEL",
            help="Only GPUs whose name contains MODEL (case-insensitive), e.g. H100; an empty or blank MODEL "
            "is refused (leave the option out for any model).",
        ),
        click.option(
            "--min-workers",
            type=click.IntRange(min=1),
            default=None,
            help="Elastic gang: start with as many ranks as can be placed now, never fewer than this "
            "(WORLD_SIZE is the size it got); it never grows and never preempts to grow.",
        ),
        click.option(
            "-c",
            "--cpus-per-task",
            type=click.IntRange(min=1),
            default=None,
            help="Host CPUs per rank, as Slurm's -c: counted per node against what its agent reports "
            "(docs/host-resources.md) and enforced with cpu.max where the agent can.",
        ),
        click.option(
            "--mem",
            metavar="SIZE",
            default=None,
            help="Host memory per node, as Slurm's --mem: 16G, 512M, 8000 (MiB by default); counted per node "
            "and enforced with memory.max where the agent can.",
        ),
        click.option(
            "--mem-per-gpu",
            metavar="SIZE",
            default=None,
            help="Host memory per GPU of each rank, as Slurm's --mem-per-gpu (excludes --mem).",
        ),
        click.option(
            "--exclusive",
            is_flag=True,
            help="Take whole nodes, as Slurm's --exclusive: start only on nodes no job uses, and no other job "
            "starts on them while this one runs.",
        ),
        click.option(
            "--shards",
            type=click.IntRange(min=1),
            default=None,
            help="A share of one GPU: N time-sliced shards of a card (Slurm's --gres=shard:N), for one rank; "
            "needs [sharing] shards_per_gpu and a queue with share_gpus (docs/sharing.md).",
        ),
        click.option(
            "--mps",
            type=click.IntRange(min=1, max=100),
            default=None,
            metavar="PCT",
            help="A share of one GPU through MPS: PCT % of its SMs (Slurm's --gres=mps:PCT), for one rank; "
            "needs [sharing] mps = true.",
        ),
        click.option(
            "--gpu-mem",
            metavar="SIZE",
            default=None,
            help="Device-memory budget of a share (--shards/--mps): 20G, 512M; MPS enforces it, shards are watched.",
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
            "-t",
            "--time",
            "time_limit",
            type=JOB_TIME_LIMIT,
            default=None,
            help="Time limit, as Slurm reads it: a bare number is minutes (90), or MM:SS, HH:MM:SS, "
            "D-HH[:MM[:SS]]; or with a unit (90s, 30m, 2h; at most 365d); 0 or UNLIMITED for none (Slurm's). "
            "The job fails when it runs longer.",
        ),
        click.option(
            "-b",
            "--begin",
            "begin_time",
            type=BEGIN,
            default=None,
            help="Do not start before this time, as Slurm's --begin: now+1hour, 2026-12-03T16:00, 16:00 "
            "(tomorrow once past), noon, tomorrow, or a delay (30m, 2h). Until then the job waits with "
            "reason begin_time.",
        ),
        click.option(
            "-o",
            "--output",
            default=None,
            metavar="PATTERN",
            help="Also write rank 0's output to this file, as Slurm's --output: %j job number, %A array "
            "id, %a task index, %x name, %u user, %N node, %t rank (then one file per rank), %%; relative "
            "to this directory. `labgang logs` still has it.",
        ),
        click.option(
            "-e",
            "--error",
            default=None,
            metavar="PATTERN",
            help="Write stderr to this file instead of --output's (same escapes).",
        ),
        click.option(
            "-D",
            "--chdir",
            default=None,
            metavar="DIR",
            help="The ranks' working directory, as Slurm's -D/--chdir (default: this directory); a relative "
            "DIR is relative to this directory, and --output/--error paths are relative to DIR.",
        ),
        click.option(
            "-J",
            "--name",
            "--job-name",
            default=None,
            help="Job name (default: the script or command's file name).",
        ),
        click.option(
            "--no-requeue",
            is_flag=True,
            help="Fail instead of going back to the queue when preempted or its node is lost.",
        ),
        click.option(
            "--requeue",
            is_flag=True,
            help="Go back to the queue when preempted, its node is lost or labgang stops: the default "
            "of submit; `labgang run`'s job is not requeued without it (nobody is attached to a rerun).",
        ),
        click.option(
            "--signal",
            "signal_spec",
            type=SIGNAL_SPEC,
            default=None,
            help="Send SIG this long before the time limit (SIGTERM follows at the limit) and "
            "before a preemption or cancel stop, like Slurm's --signal (e.g. USR1@60): to each rank's "
            "process group; B:USR1@60 to each rank's own process (a script's shell) alone.",
        ),
        click.option(
            "--array",
            metavar="SPEC",
            default=None,
            help="A job array, as Slurm's --array: one job per index, ID_INDEX, with "
            "LABGANG_ARRAY_TASK_ID and SLURM_ARRAY_TASK_ID set (0-99, 1,3,5-9, 0-20:4; %N runs at most "
            "N at once, e.g. 0-99%8).",
        ),
        click.option(
            "--mail-type",
            default=None,
            metavar="LIST",
            help="Notify on these events, as Slurm's --mail-type: BEGIN, END, FAIL, REQUEUE, ALL, NONE "
            "(comma-separated): a mail through the host's sendmail and the cluster's [notify] webhook.",
        ),
        click.option(
            "--mail-user",
            default=None,
            metavar="ADDRESS",
            help="Whom the mails go to (default: you).",
        ),
        click.option(
            "-H",
            "--hold",
            is_flag=True,
            help="Submit the job held, as Slurm's -H: it waits (reason held) until `labgang release JOB`.",
        ),
        click.option(
            "-d",
            "--dependency",
            default=None,
            metavar="LIST",
            help="Start only after other jobs, as Slurm's --dependency: afterok:ID[:ID...], afternotok, "
            "afterany, after (started), singleton; ',' = all of, '?' = any of (docs/dependencies.md).",
        ),
        click.option(
            "--success-policy",
            default=None,
            metavar="POLICY",
            help="When a job of groups has succeeded: all (default: every rank exited 0), any (every rank of "
            "some group), group:NAME (every rank of group NAME, e.g. an MPI launcher); the ranks still "
            "running are then stopped with their grace and the job is COMPLETED (docs/group-lifecycle.md).",
        ),
        click.option(
            "--failure-policy",
            type=click.Choice(FAILURE_POLICIES),
            default=None,
            help="A rank exiting non-zero: fail (default) the job, or restart it whole (every rank stopped "
            "and started again), at most --max-restarts times.",
        ),
        click.option(
            "--max-restarts",
            type=click.IntRange(min=0, max=MAX_RESTARTS_LIMIT),
            default=None,
            help="How many times --failure-policy restart starts the job again (default 0).",
        ),
        click.option(
            "--startup-order",
            default=None,
            metavar="GROUPS",
            help="Launch the groups in this order, beginning with the first group: a group's ranks start "
            "only once every rank of the groups before it started (e.g. launcher,workers); still one admission.",
        ),
        click.option(
            "--error-on-unknown-sbatch",
            is_flag=True,
            help="With a batch script: refuse it when an #SBATCH line has an option labgang lacks "
            "(default: one warning line naming it, and it is ignored).",
        ),
        click.option(
            "-f",
            "--file",
            "job_file",
            default=None,
            metavar="JOB.TOML",
            help="A job of groups from a file: one [[group]] table per group (name, ranks, command, env, "
            "resources; docs/job-groups.md). Then no CMD and no -n/-g on the command line.",
        ),
        click.option(
            "--group",
            "group_name",
            default=None,
            metavar="NAME",
            help="Name the first group of a job of groups (CMD : OPTIONS -- CMD; default g0); each group "
            "after ':' takes its own --group.",
        ),
        click.option(
            "--colocate",
            default=None,
            metavar="G0,G1",
            help="Put these groups of a job of groups on one node (';' between several sets).",
        ),
        click.option(
            "--batch-srun",
            "batch_script",
            is_flag=True,
            hidden=True,
            help="Set by a batch script (submit SCRIPT): labgang's srun first on the ranks' PATH.",
        ),
        click.argument("argv", nargs=-1, required=False, metavar="-- CMD [ARGS]..."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def build_submission(**flags: Any) -> dict[str, Any]:
    """The ``POST /v1/jobs`` body from the submit flags (:func:`labgang.launcher.cli.job_request.build_submission`).

    Raises:
        click.UsageError: conflicting or malformed flags (the message names the flag).
    """
    flags.pop("error_on_unknown_sbatch", None)  # read with the script (ScriptCommand)
    ctx = click.get_current_context(silent=True)
    if not flags.get("argv") and flags.get("job_file") is None and flags.get("wrap") is None and ctx is not None:
        # CMD is optional only with -f: without it, click's own "missing argument" line
        param = next(p for p in ctx.command.params if p.name == "argv")
        raise click.MissingParameter(ctx=ctx, param=param)
    try:
        body = job_request.build_submission(**flags)
    except job_request.SubmissionError as exc:
        where = _origin(message=str(exc))
        raise click.UsageError(str(exc) if where is None else f"{where}: {exc}") from None
    warning = job_request.gpu_mem_without_unit(body, flags.get("gpu_mem"))
    if warning is not None:  # read as MiB, as Slurm's --mem; said once, on stderr (--json stays clean)
        where = _origin(message="--gpu-mem: ")
        command = ctx.command.name if ctx is not None else "submit"
        click.echo(f"labgang {command}: warning: {warning if where is None else f'{where}: {warning}'}", err=True)
    return body


def submitted_id(job: dict[str, Any]) -> str:
    """What ``submit`` prints: the job id, or for a job array (the reply is its first task) the array id."""
    return str(job.get("array_id") or job["id"])


_REFUSED_QUEUE_RE = re.compile(r"user '(?P<user>[^']*)' may not submit to queue '(?P<queue>[^']*)'")


def _submit(client: Client, **flags: Any) -> dict[str, Any]:
    """Submit; a refusal of the queue the user did not pick (no ``-q``) says it was the default, and
    of a value a batch script's directive set names that line (``train.sh:3: #SBATCH --partition=gpu: ...``)."""
    try:
        return client.submit(build_submission(**flags))
    except ApiError as err:
        where = _origin(field=err.field, message=err.message)
        if where is not None:  # the value came from a directive: name its line
            from labgang.launcher.cli.plumbing import describe_api_error

            refused = describe_api_error(err)
            raise CommandFailed(f"{where}: {refused.message}", refused.exit_code) from err
        if flags.get("job_file") is not None:  # a refusal of what the job file gave names its key
            from labgang.launcher.cli.job_groups import file_refusal

            worded = file_refusal(flags["job_file"], err.field, err.message, err.allowed, flags)
            if worded is not None:
                raise CommandFailed(worded, 2 if err.status == 400 else 1) from err
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


@click.command(cls=ScriptCommand, context_settings={"allow_interspersed_args": False})
@_submit_options
@click.option(
    "--wrap",
    default=None,
    metavar="CMD",
    help='Submit CMD as a one-line /bin/sh script, as sbatch --wrap (no SCRIPT or -- CMD then; named "wrap").',
)
@json_option("Print the submitted job as JSON (its JobView) instead of its id.")
@state_dir_option
@talks_to_coordinator
def submit(state_dir: Path | None, as_json: bool, **flags: Any) -> None:
    """Submit a gang job and print its id.

    Everything after the options (or after --) is the command each rank runs, in this
    directory, with your environment plus RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
    LOCAL_RANK, NODE_RANK and CUDA_VISIBLE_DEVICES (device UUIDs) set per rank.

    With --array, submits a job array (one job per index, ID_INDEX) and prints its id (--json: the
    first task as "job", and the array's id and tasks as `show --json ARRAY` gives them).

    A batch script as the first argument (no -- before it; the words after it are its arguments,
    as sbatch's) runs with bash, or its #! interpreter, and its #LABGANG lines (labgang's flags)
    and #SBATCH lines (Slurm's) at the top are read as flags; the command line wins (docs/slurm.md).

    A job of groups (docs/job-groups.md): ':' between groups, each with its own -n/-g/... and
    command, all admitted together (labgang submit -n 1 -g 0 -- mpirun.sh : -n 4 -g 2 -- python
    worker.py), or -f job.toml.

    Example: labgang submit -n 4 -g 2 -q vision -- python train.py --epochs 3
    """
    with Client.for_state_dir(state_dir) as client:
        job = _submit(client, **flags)
        if not as_json:
            click.echo(submitted_id(job))
            return
        from labgang.launcher.cli.array_view import submitted_json

        array_id = job.get("array_id")  # an array: its id and every task, not its first task alone
        reply = None if array_id is None else client.array(str(array_id))
    click.echo(to_json(submitted_json(job, reply)))


@click.command(cls=ScriptCommand, context_settings={"allow_interspersed_args": False})
@_submit_options
@click.option("--all-ranks", is_flag=True, help="Stream every rank's output, each line prefixed with its rank.")
@click.option(
    "--pty",
    is_flag=True,
    help="Run rank 0 on a pseudo-terminal driven by this terminal, as srun --pty (e.g. `labgang run --pty -- bash`).",
)
@click.option(
    "-Q",
    "--quiet",
    is_flag=True,
    help="Print no 'submitted', 'running on' or pending-reason lines, as srun -Q (errors are still printed).",
)
@state_dir_option
@talks_to_coordinator
def run(state_dir: Path | None, all_ranks: bool, quiet: bool, **flags: Any) -> None:
    """Submit a gang job, stream rank 0's output, and exit with the job's status.

    The rank's stdout comes out on stdout and its stderr on stderr, as with srun (`labgang logs`
    has both, as they arrived). -D DIR starts the ranks in DIR.

    While it waits, the pending reason is printed to stderr. Ctrl-C cancels the job
    (its ranks get SIGTERM, then SIGKILL after the grace period) and keeps printing
    until it has stopped; a second Ctrl-C stops waiting. SIGTERM and SIGHUP (a closed
    terminal, a batch system stopping this command) cancel the job the same way, and
    the exit status is then 128 + the signal's number (143 for SIGTERM).

    With --array, waits for every task of the job array instead (one line per task on stderr
    as it ends; each task's output is in `labgang logs ID_INDEX`) and exits with the first failed
    task's status; Ctrl-C cancels the whole array.

    Standard input, when it is a pipe or a file, is streamed to rank 0 as its standard input as the
    rank reads it, whatever its size (`yes | head -c 10M | labgang run -- wc -c`); its end is the
    rank's end-of-file. Not with --array. With --pty and no terminal on standard input
    (`echo cmd | labgang run --pty -- bash`) a warning line says --pty is disregarded and the input is
    streamed the same way, as srun does.

    When its output is closed (`labgang run -- CMD | head -1`), the job is cancelled, as srun does,
    with one line on stderr, and the exit status is 141 (128 + SIGPIPE).

    The job is not requeued, as srun's is not: when labgang stops, its node is lost or it is
    preempted, it ends (nobody would be attached to a rerun); --requeue requeues it as submit's.

    Example: labgang run -n 4 -g 2 -- python examples/ddp_allreduce.py
    """
    if flags.get("pty"):
        if flags.get("array") is not None:
            raise click.UsageError("--pty and --array exclude each other: one terminal drives one job")
        if not os.isatty(0):
            # `echo cmd | labgang run --pty -- bash`: as srun, say --pty is disregarded and run with the
            # pipe (or file) as rank 0's standard input
            click.echo(
                "labgang run: warning: --pty: standard input is not a terminal; running without a pseudo-terminal",
                err=True,
            )
            flags["pty"] = False
    if not flags.get("pty") and flags.get("array") is None:
        from labgang.launcher.stdin_forward import streams_stdin

        flags["stdin_stream"] = streams_stdin()  # ours is a pipe or a file: streamed to rank 0
    from labgang.launcher.cli.quick import run_requeue

    flags = run_requeue(flags)
    requeued = bool(flags.get("requeue"))  # run --requeue: a shutdown requeues it (follow.labgang_stopped)
    with Client.for_state_dir(state_dir) as client:
        job = _submit(client, **flags)
        if job.get("array_id") is not None:
            sys.exit(_run_array(client, job))
        job_id = job["id"]
        if not quiet:
            click.echo(f"labgang: submitted job {job_id}", err=True)
        ranks = range(job.get("workers") or flags["workers"]) if all_ranks else (0,)
        streams = (stdout_bytes(), sys.stderr, stderr_bytes())
        try:
            if flags.get("pty"):
                from labgang.launcher.cli.pty_session import PtySession

                with PtySession(state_dir, job_id):
                    code = follow_to_the_end(client, job_id, ranks, *streams, quiet=quiet, requeued=requeued)
            elif flags.get("stdin_stream"):
                from labgang.launcher.stdin_forward import StdinStreamer

                with StdinStreamer(state_dir, job_id):
                    code = follow_to_the_end(client, job_id, ranks, *streams, quiet=quiet, requeued=requeued)
            else:
                code = follow_to_the_end(client, job_id, ranks, *streams, quiet=quiet, requeued=requeued)
        except FollowStopped as stop:
            fail(stop.message, stop.exit_code)
    sys.exit(code)


def _run_array(client: Client, first: dict[str, Any]) -> int:
    """``run --array``: wait for every task (one line per task as it ends); Ctrl-C, SIGTERM or
    SIGHUP cancel the whole array, a second one stops waiting. Returns the exit status."""
    array_id = str(first["array_id"])
    click.echo(f"labgang: submitted job array {array_id}", err=True)
    follower = ArrayFollower(client, array_id, sys.stderr, first=first)
    stopped_by: int | None = None
    away: float | None = None  # time.monotonic() when labgang went away (kill -9) or stopped keeping its tasks
    with stop_signals_interrupt():
        while True:
            try:
                if away is not None:
                    await_return(client, array_id, away, False, sys.stderr, tasks=follower.task_ids())
                    away = None
                tasks = follower.follow()
                break
            except FollowStopped as stop:
                fail(stop.message, stop.exit_code)
            except CoordinatorUnavailable:
                client.close()  # a request may have been cut in half
                how = gone_how(client.socket_path, follower.task_ids())
                if how is None:
                    fail(array_stopped(array_id), 1)
                if away is None:  # its tasks run on, for a `labgang up` started again
                    away = time.monotonic()
                    click.echo(away_line(f"job array {array_id}", how == "kept"), err=True)
            except KeyboardInterrupt as exc:
                client.close()
                code = exc.args[1] if isinstance(exc, StopSignal) else EXIT_INTERRUPTED
                if away is not None:  # nobody to ask to cancel it
                    fail(
                        f"stopped waiting for labgang to come back; job array {array_id} was not cancelled "
                        "(`labgang queue` once labgang is back)",
                        code,
                    )
                if stopped_by is not None:
                    fail(f"stopped waiting; job array {array_id} is still stopping (see `labgang queue`)", code)
                stopped_by = code
                what = exc.args[0] if isinstance(exc, StopSignal) else "Ctrl-C"
                click.echo(f"labgang: {what}: cancelling job array {array_id} ({what} again to stop waiting)", err=True)
                client.cancel_array(array_id)
    return stopped_by if stopped_by is not None else array_exit_status(tasks)
