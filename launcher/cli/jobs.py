"""The job commands that read and cancel: ``queue``, ``cancel``, ``logs``, ``show``, ``queues``
(``submit`` and ``run``: :mod:`.submission`; shared options and errors: :mod:`.plumbing`).

Each command is a thin layer over :mod:`labgang.launcher.api.client` (the coordinator's
user API on ``<state_dir>/labgang.sock``). Exit statuses: 0 success; 1 the request was
refused, the coordinator is not there, or the job failed; 2 a usage error (a bad flag,
or a field the coordinator rejected as invalid, named by its flag). ``run`` exits with
the job's own status.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import click
from labgang.launcher.api.client import ApiError, Client, CoordinatorUnavailable
from labgang.launcher.cli.bulk_cancel import FILTER_FLAGS, selected_jobs
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.follow import JobFollower, NoOutputYet, copy_log, not_started
from labgang.launcher.cli.format import job_detail, queue_table, to_json
from labgang.launcher.cli.job_facts import (
    add_pitfalls,
    add_start_errors,
    array_logs_note,
    cancel_jobs,
    job_or_array,
    queue_jobs,
    queue_listing,
    unlisted_ids,
)
from labgang.launcher.cli.plumbing import (
    EXIT_INTERRUPTED,
    ITEMS,
    JOB_ID,
    JOB_IDS,
    JOB_LIST,
    STATE_ITEMS,
    describe_api_error,
    flat_ids,
    json_option,
    state_dir_option,
    stdout_bytes,
    talks_to_coordinator,
)
from labgang.launcher.job_filters import flatten


@click.command()
@click.option("--all", "all_users", is_flag=True, help="Everyone's jobs, not only yours.")
@click.option(
    "-u",
    "--user",
    multiple=True,
    type=ITEMS,
    help="Only these users' jobs (names or uids; comma-separated or repeated; all: every user's, as --all).",
)
@click.option("--me", is_flag=True, help="Only your own jobs, as squeue --me (-u with your name).")
@click.option(
    "-q",
    "--queue",
    "-p",
    "--partition",
    "queue",
    multiple=True,
    type=ITEMS,
    help="Only these queues' jobs (comma-separated or repeated; -p/--partition as squeue's).",
)
@click.option(
    "-t",
    "--state",
    "states",
    multiple=True,
    type=STATE_ITEMS,
    help="Only jobs in these states (pending PD, admitted CF, running R, terminating CG; any case; "
    "comma-separated or repeated).",
)
@click.option(
    "-j",
    "--jobs",
    "job_list",
    multiple=True,
    type=JOB_LIST,
    help="Only these jobs (ids; an array id names all of its tasks; comma-separated or repeated), as squeue -j.",
)
@click.option(
    "-n",
    "--name",
    "names",
    multiple=True,
    type=ITEMS,
    help="Only jobs of these names (comma-separated or repeated), as squeue -n.",
)
@click.option(
    "-o",
    "--format",
    "fmt",
    default=None,
    metavar="FORMAT",
    help="squeue's -o format, e.g. '%.10i %.9P %.20j %.8u %.8T %.10M %.9l %.6D %R' (fields: %i %j %u %T %t "
    "%M %l %D %R %N %r %b %P %q %p %V %S %e %C %o %E; `labgang queue --help` and docs/slurm-views.md).",
)
@click.option("-l", "--long", "long_form", is_flag=True, help="squeue -l's columns (with TIME and TIME_LIMIT).")
@json_option("Print the jobs as JSON (whole JobViews) instead of a table.")
@state_dir_option
@talks_to_coordinator
def queue(
    state_dir: Path | None,
    all_users: bool,
    user: tuple[tuple[str, ...], ...],
    me: bool,
    queue: tuple[tuple[str, ...], ...],
    states: tuple[tuple[str, ...], ...],
    job_list: tuple[tuple[str, ...], ...],
    names: tuple[tuple[str, ...], ...],
    fmt: str | None,
    long_form: bool,
    as_json: bool,
) -> None:
    """List pending and running jobs, like squeue.

    NODES(REASON) shows where a job runs, or why it waits, with numbers.
    Finished jobs are not listed; see them with `labgang history` (or `labgang show JOB`).
    -j, -n, -o and -l work as squeue's (-o fields: %i id, %j name, %u user, %T state, %t state code,
    %M time used, %l time limit, %D nodes, %R nodes or reason, %N nodes, %r reason code, %b
    devices per rank, %P and %q queue, %p priority, %V submit, %S start, %e end, %C ranks,
    %o command, %E dependency; %.10i right-aligns in 10 columns, %-20j left-aligns in 20).
    """
    if me:  # who the kernel says runs this, not $USER (which `su` without `-` leaves as it was)
        user = (*user, (str(os.geteuid()),))
    if job_list or names or fmt is not None or long_form:
        _squeue_view(
            state_dir, all_users, user, queue, states, flatten(job_list), flatten(names), fmt, long_form, as_json
        )
        return
    with Client.for_state_dir(state_dir) as client:
        text, notes = queue_listing(
            client,
            all_users=all_users,
            users=flatten(user),
            queues=flatten(queue),
            states=flatten(states),
            as_json=as_json,
        )
    click.echo(text)
    for note in notes:
        click.echo(f"labgang queue: note: {note}", err=True)


def _squeue_view(
    state_dir: Path | None,
    all_users: bool,
    user: tuple[tuple[str, ...], ...],
    queue: tuple[tuple[str, ...], ...],
    states: tuple[tuple[str, ...], ...],
    job_list: tuple[str, ...],
    names: tuple[str, ...],
    fmt: str | None,
    long_form: bool,
    as_json: bool,
) -> None:
    """``queue`` with -j, -n, -o or -l: rendered here from whole JobViews (the default table is the
    coordinator's, on the fast path). ``names`` keeps the jobs whose name is one of them (squeue -n),
    among those the other filters list."""
    from labgang.launcher.cli.squeue_format import LONG_FORMAT, BadFormat, format_jobs, parse_format, select_ids

    if fmt is not None and long_form:
        raise click.UsageError("-o/--format and -l/--long are two formats; give one")
    if as_json and (fmt is not None or long_form):
        # squeue --json ignores -o without a word; refused here, so that a script reading -o's fields learns it
        flag = "-o/--format" if fmt is not None else "-l/--long"
        raise click.UsageError(
            f"--json and {flag} exclude each other: --json prints whole JobViews, {flag} a table; give one "
            "(pick fields from the JSON with jq)"
        )
    text = LONG_FORMAT if long_form else fmt
    if text is not None:
        try:
            parse_format(text)
        except BadFormat as exc:
            raise click.UsageError(f"-o/--format: {exc}") from None
    notes: list[str] = []
    with Client.for_state_dir(state_dir) as client:
        jobs = queue_jobs(
            client,
            all_users=all_users or bool(job_list),  # squeue -j shows the jobs named, whoever owns them
            users=flatten(user),
            queues=flatten(queue),
            states=flatten(states),
        )
        if job_list:
            jobs = select_ids(jobs, job_list)
            unknown, notes = unlisted_ids(client, job_list, jobs)
            if unknown and len(unknown) == len(set(job_list)):  # as squeue: "Invalid job id specified", exit 1
                raise CommandFailed(
                    f"-j/--jobs: invalid job id specified: labgang has no job {', '.join(unknown)}",
                    1,
                    field="job_list",
                    allowed="ids of jobs labgang has (`labgang history` lists finished ones)",
                )
            notes += [f"no job {job_id}: invalid job id" for job_id in unknown]
        if names:
            wanted = set(names)
            jobs = [job for job in jobs if job.get("name") in wanted]
            if not jobs:
                notes.append(
                    f"no active job named {', '.join(dict.fromkeys(names))}"
                    + ("" if all_users or job_list or user else " among yours (--all: everyone's)")
                    + "; finished jobs are in `labgang history`"
                )
    for note in notes:
        click.echo(f"labgang queue: note: {note}", err=True)
    if as_json:
        click.echo(to_json({"jobs": jobs}))
        return
    click.echo(format_jobs(jobs, text or "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R", time.time()))


@click.command()
@click.argument("job_ids", nargs=-1, metavar="JOB...", type=JOB_IDS)
@click.option(
    "-u", "--user", multiple=True, type=ITEMS, help="Only these users' jobs (names or uids; a list; all: every user's)."
)
@click.option("-q", "--queue", multiple=True, type=ITEMS, help="Only jobs of these queues (a list).")
@click.option(
    "-t", "--state", "states", multiple=True, type=STATE_ITEMS, help="Only jobs in these states (as queue -t)."
)
@click.option("--name", "names", multiple=True, type=ITEMS, help="Only jobs with these names (a list).")
@state_dir_option
def cancel(
    state_dir: Path | None,
    job_ids: tuple[list[str], ...],
    user: tuple[tuple[str, ...], ...],
    queue: tuple[tuple[str, ...], ...],
    states: tuple[tuple[str, ...], ...],
    names: tuple[tuple[str, ...], ...],
) -> None:
    """Cancel jobs: pending ones leave their queue, running ones get SIGTERM, then SIGKILL after their grace.

    JOB is a job id (12), an array (12: all of its tasks), a task (12_7) or tasks as `queue`
    prints them (12_[1-3,7]). Like scancel, the filters -u, -q, -t and --name select active jobs
    instead (your own unless -u names others; with JOBs, only those among them), every filter
    given must match; each list is comma-separated or repeated. One line per job.
    """
    ids = flat_ids(job_ids)
    filters = {"users": flatten(user), "queues": flatten(queue), "states": flatten(states), "names": flatten(names)}
    if not ids and not any(filters.values()):
        raise click.UsageError(f"give a JOB or a filter ({FILTER_FLAGS}); see `labgang cancel --help`")
    worst = 0
    with Client.for_state_dir(state_dir) as client:
        try:
            if any(filters.values()):
                ids, notes = selected_jobs(client, job_ids=tuple(ids), **filters)
                for note in notes:
                    click.echo(f"labgang cancel: note: {note}", err=True)
            for line, status in cancel_jobs(client, ids):
                if status:
                    worst = max(worst, status)
                    click.echo(f"labgang cancel: {line}", err=True)
                else:
                    click.echo(line)
        except ApiError as err:
            raise describe_api_error(err) from err
        except CoordinatorUnavailable as err:
            raise CommandFailed(str(err), 1) from err
    if worst:
        sys.exit(worst)


@click.command()
@click.argument("job_id", metavar="JOB", type=JOB_ID)
@click.option("--rank", "-r", type=click.IntRange(min=0), default=0, show_default=True, help="Which rank's output.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing as the rank writes, until the job ends.")
@click.option(
    "--attempt",
    "-a",
    type=click.IntRange(min=0),
    default=None,
    help="An earlier start attempt's output (0 = the first; each requeue starts a new one). Default: the latest.",
)
@state_dir_option
@talks_to_coordinator
def logs(state_dir: Path | None, job_id: str, rank: int, follow: bool, attempt: int | None) -> None:
    """Print a rank's output (stdout and stderr as the rank wrote them).

    A job that has not run yet has no output: that is said on stderr ("job 4 has not
    started (PENDING: <reason>)"), exit 0; with -f it is said once, then the output
    follows when the job starts. --attempt N prints what attempt N wrote (the output of
    every attempt is kept across requeues).

    JOB may be a task of a job array by its own number (its SLURM_JOB_ID); for an array's id,
    the first task's output is printed, after a line on stderr naming the others.
    """
    with Client.for_state_dir(state_dir) as client:
        job, array = job_or_array(client, job_id)
        if array is not None:
            click.echo(f"labgang logs: {array_logs_note(job_id, array['jobs'])}", err=True)
            job = array["jobs"][0]
        assert job is not None
        job_id = str(job["id"])
        if rank >= int(job.get("workers") or 1):
            raise CommandFailed(f"--rank: job {job_id} has ranks 0..{int(job.get('workers') or 1) - 1}, not {rank}", 2)
        out = stdout_bytes()
        if attempt is not None:
            if follow:
                raise CommandFailed("--attempt and --follow: an earlier attempt's output does not grow", 2)
            _print_log(client, job_id, rank, attempt, out)
            return
        if follow:
            if not_started(job):
                check_may_read_logs(client, job_id, rank)  # another user's pending job: refused now, not at its start
                click.echo(f"labgang logs: {not_started(job)}", err=True)
            try:
                final = JobFollower(client, job_id, (rank,), out, None).follow()
            except KeyboardInterrupt:
                sys.exit(EXIT_INTERRUPTED)
            if not_started(final) and not_started(final) != not_started(job):
                click.echo(f"labgang logs: {not_started(final)}", err=True)
            return
        try:
            offset = copy_log(client, job_id, rank, out)
        except NoOutputYet as no_output:
            raise CommandFailed(f"job {job_id} rank {rank} has no output yet ({job['state']})", 1) from no_output.error
        if offset == 0 and not_started(job):
            click.echo(f"labgang logs: {not_started(job)}", err=True)


def check_may_read_logs(client: Client, job_id: str, rank: int) -> None:
    """Ask the coordinator for ``rank``'s log once, so a caller who may not read it (another user's
    job, not an admin) is refused as ``labgang logs JOB`` is, before ``-f`` waits for the job to start.

    Raises:
        ApiError: the refusal (403: ``job 90 belongs to alice; only its owner or an admin may read
            its logs``); a 404 (no log yet) is no refusal and is ignored.
    """
    try:
        client.logs(job_id, rank=rank, offset=0)
    except ApiError as err:
        if err.status != 404:
            raise


def _print_log(client: Client, job_id: str, rank: int, attempt: int, out: Any) -> None:
    """Write one attempt's whole output of ``rank`` to ``out``."""
    try:
        copy_log(client, job_id, rank, out, attempt)
    except NoOutputYet as no_output:
        raise no_output.error from None


@click.command()
@click.argument("job_id", metavar="JOB", type=JOB_ID)
@json_option("Print the job as JSON (its JobView) instead of text.")
@state_dir_option
@talks_to_coordinator
def show(state_dir: Path | None, job_id: str, as_json: bool) -> None:
    """Show one job: its request, command, directory, state, ranks with their devices, and its
    history with reasons.

    JOB may be a task of a job array by its own number (its SLURM_JOB_ID); an array's id shows its
    tasks summarised by state.
    """
    with Client.for_state_dir(state_dir) as client:
        job, array = job_or_array(client, job_id)
        if array is not None:
            from labgang.launcher.cli.array_view import array_detail, array_summary_json

            click.echo(to_json(array_summary_json(array)) if as_json else array_detail(array))
            return
        assert job is not None
        add_start_errors(client, job)
        add_pitfalls(client, job)
    click.echo(to_json({"job": job}) if as_json else job_detail(job, time.time()))


@click.command()
@json_option("Print the queues as JSON instead of a table.")
@state_dir_option
@talks_to_coordinator
def queues(state_dir: Path | None, as_json: bool) -> None:
    """List queues: nominal quota, what is used, borrowed from and lent to the cohort, and job counts."""
    with Client.for_state_dir(state_dir) as client:
        items = client.queues()
    click.echo(to_json({"queues": items}) if as_json else queue_table(items))
