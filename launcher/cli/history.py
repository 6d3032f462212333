"""``labgang history``: finished and current jobs from the coordinator's store (Slurm's ``sacct``).

The time forms, the table and the user check live in :mod:`labgang.launcher.cli.history_table`
(no click), shared with the fast path (:mod:`labgang.launcher.cli.quick`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click
from labgang.launcher.api.client import ApiError, Client, CoordinatorUnavailable
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.format import to_json
from labgang.launcher.cli.history_table import (
    STATES,
    TIME_HELP,
    attempt_states,
    attempts_note,
    attempts_table,
    history_json,
    history_rows,
    history_state_items,
    history_table,
    keep_attempts,
    limit_note,
    parse_when,
)
from labgang.launcher.cli.plumbing import (
    STATE_HELP,
    ItemsType,
    describe_api_error,
    json_option,
    state_dir_option,
    talks_to_coordinator,
)
from labgang.launcher.job_filters import flatten

__all__ = ["STATES", "TIME_HELP", "WhenType", "history", "history_table", "parse_when"]


class WhenType(click.ParamType):
    """A click parameter type for :func:`parse_when` (value: unix seconds)."""

    name = "TIME"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        try:
            return parse_when(str(value), time.time())
        except ValueError as err:
            self.fail(str(err), param, ctx)


@click.command()
@click.option(
    "--user",
    "-u",
    help="Whose jobs: a user name or uid, or 'all'. Default: your own; every user's for root and admins.",
)
@click.option("--queue", "-q", help="Only this queue's jobs.")
@click.option(
    "-j",
    "--jobs",
    "job_ids",
    multiple=True,
    help="Only these jobs (comma-separated or repeated), as sacct -j; an array id (12) names its tasks. "
    "Whoever owns them, unless -u is given.",
)
@click.option(
    "-s",
    "--state",
    "states",
    multiple=True,
    type=ItemsType(history_state_items),
    help=f"Only jobs in these states ({STATE_HELP}; comma-separated or repeated); with --attempts, only attempts "
    "that ended so (R, CD, F, CA, TO, NF, PR preempted, RQ requeued).",
)
@click.option("--since", type=WhenType(), help=f"Jobs not ended before this time: {TIME_HELP}.")
@click.option("--until", type=WhenType(), help="Jobs submitted up to this time (same forms as --since).")
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True, help="At most this many.")
@click.option(
    "--attempts",
    "per_attempt",
    is_flag=True,
    help="One line per start attempt (requeues, preemptions) instead of per job; with --json, "
    "each job's attempt_records.",
)
@json_option("Print the rows as JSON (jobs, and whether --limit cut them) instead of a table.")
@click.option(
    "--export",
    "export_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the finished jobs submitted between --since and --until as a scenario file "
    "(docs/scenarios.md) for `labgang simulate` and `labgang plan replay`; reads the store, no coordinator needed.",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="With --export: the cluster.toml whose queue policy the file carries (default: the one the instance "
    "runs with, recorded in the store; else the built-in one).",
)
@state_dir_option
@talks_to_coordinator
def history(
    state_dir: Path | None,
    user: str | None,
    queue: str | None,
    states: tuple[tuple[str, ...], ...],
    since: float | None,
    until: float | None,
    limit: int,
    per_attempt: bool,
    as_json: bool,
    export_file: Path | None,
    config_file: Path | None,
    job_ids: tuple[str, ...],
) -> None:
    """List finished and current jobs from the coordinator's store, oldest first.

    Columns: submit, start and end time (the last attempt's), wait (time pending, summed over
    the pending periods), elapsed (time holding devices, over all attempts), GPU-hours (allocated,
    over all attempts, preempted and cancelled ones included), exit status, restarts (attempts
    that ran, minus one) and the final reason. --attempts prints one line per attempt. Finished
    jobs of any age are kept in the store; `labgang queue` shows only pending and running ones.
    With no coordinator answering (labgang up stopped), it reads the store file itself, read-only,
    and says so in one line on stderr.
    """
    if since is not None and until is not None and since > until:
        raise click.BadParameter("--since must not be later than --until", param_hint="--since")
    if export_file is not None:
        _export(export_file, state_dir, since, until, config_file, as_json)
        return
    if config_file is not None:
        raise click.UsageError("--config goes with --export")
    try:
        job_states, ends = attempt_states(flatten(states), per_attempt)
    except ValueError as err:
        raise CommandFailed(str(err), 2) from None
    jobs = _job_ids(job_ids)
    asked: dict[str, Any] = {
        "user": "all" if jobs and user is None else user,  # -j names the jobs, whoever owns them (sacct -j)
        "queue": queue,
        "states": job_states,
        "since": since,
        "until": until,
        "limit": limit,
        "jobs": jobs,
    }
    try:
        with Client.for_state_dir(state_dir) as client:
            rows, notes = history_rows(client, **asked, attempts=per_attempt)
    except CoordinatorUnavailable as err:
        rows, notes = _from_the_store(state_dir, err, asked, per_attempt)  # its refusal: JSON too with --json
    except ApiError as err:
        raise describe_api_error(err) from err  # with --json, also the error object on stdout
    if jobs and not rows:  # the other filters' notes would not say which jobs were asked for
        notes = [
            f"no job {', '.join(jobs)} in the store" + ("" if user is None else f" of user {user}") + _narrowed(asked)
        ]
    searched = rows  # what --limit cut, before -s keeps some attempts: its note reads these
    if ends:
        rows = keep_attempts(rows, ends)
        if not rows:
            notes = [f"no attempt of the jobs searched ended {','.join(ends)}"]
    for note in notes:
        click.echo(f"labgang history: note: {note}", err=True)
    if as_json:
        click.echo(to_json(history_json(rows, limit, len(searched))))
        return
    click.echo(attempts_table(rows) if per_attempt else history_table(rows))
    spans = None if per_attempt else attempts_note(rows)
    if spans is not None:
        click.echo(spans, err=True)
    cut = limit_note(searched, limit, sifted=bool(ends))
    if cut is not None:
        click.echo(cut, err=True)


def _narrowed(asked: dict[str, Any]) -> str:
    """`` with the other filters given`` (queue, states, a window) for an empty ``-j`` answer."""
    given = [f"-q {asked['queue']}"] if asked["queue"] else []
    given += [f"-s {','.join(asked['states'])}"] if asked["states"] else []
    given += ["--since/--until"] if asked["since"] is not None or asked["until"] is not None else []
    return f" with {' '.join(given)}" if given else ""


def _job_ids(given: tuple[str, ...]) -> tuple[str, ...]:
    """``-j``'s ids, each once, in order (comma-separated or repeated), as every verb reads a job
    id (:func:`~labgang.launcher.cli.quick_argv.normal_job_id`: ``012`` is ``12``).

    Raises:
        CommandFailed: an id that is neither a job or array id (``12``) nor a task (``12_3``).
    """
    from labgang.launcher.cli.quick_argv import normal_job_id

    ids: dict[str, None] = {}
    for text in given:
        for item in filter(None, (i.strip() for i in text.split(","))):
            job_id = normal_job_id(item)
            if job_id is None:
                raise CommandFailed(
                    f"-j/--jobs: {item!r} is not a job id; allowed: 12, 12_3 (a job or an array task)", 2
                )
            ids[job_id] = None
    return tuple(ids)


def _from_the_store(
    state_dir: Path | None, err: CoordinatorUnavailable, asked: dict[str, Any], per_attempt: bool
) -> tuple[list[dict[str, Any]], list[str]]:
    """The rows read from the store file itself, read-only, when no coordinator answers
    (:func:`labgang.launcher.cli.history_store.read_store_instead`); the notes of an empty answer
    as from the coordinator (but for the queue's name, which only it knows).

    Raises:
        CommandFailed: the store cannot be read either (one line with both reasons, exit 1).
    """
    from labgang.launcher.cli.history_store import read_store_instead, store_history_rows
    from labgang.launcher.cli.history_table import empty_history_notes
    from labgang.launcher.job_filters import user_name

    rows, whose = read_store_instead(
        "history", state_dir, err, lambda path: store_history_rows(path, **asked, attempts=per_attempt)
    )
    if rows:
        return rows, []
    user = None if asked["user"] is None else user_name(asked["user"])
    windowed = asked["since"] is not None or asked["until"] is not None
    return rows, empty_history_notes(None, user, asked["queue"], asked["states"], windowed=windowed, whose=whose)


def _export(
    path: Path, state_dir: Path | None, since: float | None, until: float | None, config: Path | None, as_json: bool
) -> None:
    """``history --export FILE``: the period's finished jobs as a scenario file (``launcher/plan/export.py``);
    with ``--json`` what was written as an object on stdout (``path``, ``jobs``: [[jobs]] tables,
    ``tasks``: finished jobs counting each array task, ``notes``).

    Raises:
        CommandFailed: the file cannot be written (its folder missing, not a folder, not
            writable): one line naming ``--export``, exit 2; nothing is written.
    """
    import tomli_w
    from labgang.launcher.cli.plan import store_scenario
    from labgang.launcher.plan.replay import history_queues

    data, notes, policy, _ = store_scenario(state_dir, since, until, config)
    configured = {q.name for q in policy.queues}
    retired = [q for q in history_queues(data) if q not in configured]
    if retired:  # launcher/plan/export.py: kept under their real names, defined as the default queue is
        notes.append(
            f"queue{'s' if len(retired) > 1 else ''} {', '.join(retired)} of the period "
            f"{'are' if len(retired) > 1 else 'is'} not in the queue policy now: the file keeps the jobs' queue "
            "and defines it with every GPU as its quota (as the built-in default queue); `labgang plan replay "
            "FILE --config cluster.toml --map-queues` replays them in that config's default queue instead"
        )
    try:
        path.write_text(tomli_w.dumps(data), encoding="utf-8")
    except OSError as exc:
        raise CommandFailed(f"--export {path}: cannot write it: {exc.strerror}", 2) from None
    jobs = data["jobs"]
    tasks = sum(len(j.get("durations", ())) or 1 for j in jobs)
    if as_json:
        click.echo(to_json({"path": str(path), "jobs": len(jobs), "tasks": tasks, "notes": notes}))
        return
    for note in notes:
        click.echo(f"labgang history: note: {note}", err=True)
    click.echo(f"labgang history: wrote {tasks} finished jobs ({len(jobs)} [[jobs]] tables) to {path}", err=True)
