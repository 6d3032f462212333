"""scontrol's daily verbs: ``labgang hold``, ``release``, ``requeue`` and ``update``.

Each acts on the jobs named (the owner or an admin, as ``cancel``), prints one line per job on
standard output (``job 12: held``), or the refusal on standard error naming the job; the exit
status is the worst refusal's (1 refused, 2 a bad value). The rules (who may raise a priority,
which states a verb takes) are the coordinator's: ``launcher/lifecycle/verbs.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import click
from labgang.launcher.api.client import ApiError, Client, CoordinatorUnavailable
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.outcomes import Outcomes
from labgang.launcher.cli.plumbing import (
    JOB_ID,
    JOB_IDS,
    describe_api_error,
    flat_ids,
    json_option,
    state_dir_option,
)

UPDATE_KEYS: dict[str, str] = {
    "priority": "priority",
    "timelimit": "time_limit_s",
    "time_limit": "time_limit_s",
    "time": "time_limit_s",
    "name": "name",
    "jobname": "name",
    "dependency": "dependency",
    "partition": "queue",
    "queue": "queue",
}
"""``update``'s KEY (any case; scontrol's ``TimeLimit``, ``JobName``, ``Dependency`` and ``Partition``
among them) → the API field it sets."""


UPDATE_FLAG_KEYS = (
    ("-t/--time: ", "TimeLimit: "),
    ("-q/--queue: ", "Partition: "),
    ("-p/--priority: ", "Priority: "),
    ("-d/--dependency: ", "Dependency: "),
    ("--name: ", "Name: "),
)
"""A refusal of ``update`` names the KEY typed (scontrol's), not the submit flag the coordinator's field
is written as elsewhere (:func:`labgang.launcher.cli.plumbing.flag_message`)."""


def parse_assignments(pairs: Iterable[str]) -> dict[str, Any]:
    """``["priority=5", "TimeLimit=1h"]`` → ``{"priority": "5", "time_limit_s": 3600.0}``: the
    ``POST /v1/jobs/{id}/update`` body (a time limit takes ``--time``'s forms, ``0`` and
    ``UNLIMITED`` a null that lifts it; a priority stays text, an integer or a priority class
    name, for the coordinator to resolve).

    Raises:
        click.UsageError: a pair without ``=``, an unknown key (the allowed ones are listed), a key
            given twice, or a time limit that does not parse.
    """
    from labgang.launcher.cli.params import JOB_TIME_LIMIT

    body: dict[str, Any] = {}
    allowed = "Priority, TimeLimit, Name (JobName), Dependency, Partition (Queue)"
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.UsageError(f"{pair!r} is not KEY=VALUE; allowed keys: {allowed}")
        field = UPDATE_KEYS.get(key.strip().lower())
        if field is None:
            raise click.UsageError(f"unknown key {key!r} in {pair!r}; allowed keys: {allowed}")
        if field in body:
            raise click.UsageError(f"{key} is given twice")
        if field == "time_limit_s":
            try:
                body[field] = JOB_TIME_LIMIT.convert(value, None, None)  # None (0, UNLIMITED): lift it
            except click.BadParameter as exc:
                raise click.UsageError(f"{key}: {exc.message}") from None
        elif field == "priority":
            body[field] = int(value) if value.strip().lstrip("-").isdigit() else value
        else:
            body[field] = value
    if not body:
        raise click.UsageError(f"give at least one KEY=VALUE; allowed keys: {allowed}")
    return body


_ARRAY_TASKS = {
    "hold": ("pending tasks", lambda j: j.get("state") == "pending" and not j.get("hold")),
    "release": ("held tasks", lambda j: bool(j.get("hold"))),
    "requeue": ("admitted or running tasks", lambda j: j.get("state") in ("admitted", "running")),
    "update": ("unfinished tasks", lambda j: j.get("state") in ("pending", "admitted", "running", "terminating")),
}
"""What a verb on an array id acts on: (those tasks in words, which tasks), as scontrol on an array."""


def _array_tasks(client: Client, verb: str, array_id: str) -> list[str] | None:
    """The ids of the tasks of array ``array_id`` that ``verb`` acts on (in task order); None when
    ``array_id`` names no array the coordinator holds in memory."""
    tasks = [j for j in client.jobs(all_users=True) if str(j.get("array_id")) == array_id]
    if not tasks:
        return None
    takes = _ARRAY_TASKS[verb][1]
    return [str(j["id"]) for j in sorted(tasks, key=lambda j: j.get("array_index") or 0) if takes(j)]


def _each(
    verb: str,
    job_ids: Iterable[str],
    state_dir: Path | None,
    as_json: bool,
    act: Callable[[Client, str], Any],
    summary: Callable[[dict[str, Any]], str] | None = None,
    one_object: bool = False,
) -> None:
    """Run ``act`` on each job once, in order; one line per job (or a JSON list of JobViews). An
    array id (``12``) acts on those of its tasks the verb takes (:data:`_ARRAY_TASKS`).

    Each job is acted on or refused on its own, as ``scontrol hold 31 999`` holds 31: a refusal is
    one stderr line and exit 1 (2 for a bad value) at the end. With ``as_json`` the list holds the
    jobs acted on; when none was, stdout gets the first refusal's error object instead
    (:mod:`labgang.launcher.cli.json_error`), as every ``--json`` command answers a refusal.
    ``summary`` words a job's line (default: the verb's); ``one_object`` prints a single job
    named by its own id as its JobView rather than a list of one (``update``'s answer)."""
    out = Outcomes(verb, as_json)
    asked = list(dict.fromkeys(job_ids))
    with Client.for_state_dir(state_dir) as client:
        todo = list(asked)
        while todo:
            job_id = todo.pop(0)
            try:
                job = act(client, job_id)
            except ApiError as err:
                if err.status == 404 and job_id.isdigit():
                    tasks = _array_tasks(client, verb, job_id)
                    if tasks:
                        todo[:0] = [t for t in tasks if t not in todo]
                        continue
                    if tasks is not None:
                        out.refused(f"job array {job_id} has no {_ARRAY_TASKS[verb][0]}", 1, "job_id")
                        continue
                failure = describe_api_error(err)
                text = failure.message
                if verb == "update":  # update's keys, not submit's flags
                    for flag, key in UPDATE_FLAG_KEYS:
                        if text.startswith(flag):
                            rest = text[len(flag) :]  # a refusal that names the job or the key itself
                            named = rest.startswith(f"job {job_id} ") or rest.lower().startswith(key[:-2].lower())
                            text = rest if named else key + rest
                if not text.startswith((f"job {job_id} ", f"job {job_id}:", f"no job {job_id}")):
                    text = f"job {job_id}: {text}"
                out.refused(text, failure.exit_code, failure.field, failure.allowed)
                continue
            except CoordinatorUnavailable as err:
                raise CommandFailed(str(err), 1) from err
            out.done(job, f"job {job['id']}: {summary(job) if summary else _summary(verb, job)}")
    # a single job named by its own id answers as its JobView (update's answer), not a list of one
    out.finish(single=one_object and len(out.answers) == 1 and [str(out.answers[0]["id"])] == asked)


def _summary(verb: str, job: dict[str, Any]) -> str:
    if verb == "hold":
        return "held"
    if verb == "release":
        return "released"
    return f"requeue requested ({job['state']}{', held' if job.get('hold') else ''})"


def _update_summary(body: dict[str, Any], job: dict[str, Any]) -> str:
    """``update``'s confirmation: every field the update gave, with the job's value now
    (``updated (time limit 1:00:00, name b)``)."""
    from labgang.launcher.cli.squeue_format import slurm_duration

    shown = {
        "priority": lambda: f"priority {job.get('priority')}",
        "time_limit_s": lambda: f"time limit {slurm_duration(job.get('time_limit_s'))}",
        "name": lambda: f"name {job.get('name')}",
        "dependency": lambda: f"dependency {job.get('dependency') or 'none'}",
        "queue": lambda: f"queue {job.get('queue')}",
    }
    return f"updated ({', '.join(shown[field]() for field in body if field in shown)})"


@click.command()
@click.argument("job_ids", nargs=-1, required=True, type=JOB_IDS, metavar="JOB...")
@json_option("Print the jobs' JobViews as a JSON list.")
@state_dir_option
def hold(state_dir: Path | None, as_json: bool, job_ids: tuple[list[str], ...]) -> None:
    """Hold pending jobs, as scontrol hold: they stay pending (reason held) until `labgang release`.

    JOB is a job id, an array (its pending tasks), a task (12_7) or tasks as `queue` prints them
    (12_[1-3,7]).

    Your own jobs; admins any (an admin's hold on another user's job only an admin releases).
    A running job is not held: `labgang requeue --hold` stops it and holds it.
    """
    _each("hold", flat_ids(job_ids), state_dir, as_json, lambda client, job_id: client.hold(job_id))


@click.command()
@click.argument("job_ids", nargs=-1, required=True, type=JOB_IDS, metavar="JOB...")
@json_option("Print the jobs' JobViews as a JSON list.")
@state_dir_option
def release(state_dir: Path | None, as_json: bool, job_ids: tuple[list[str], ...]) -> None:
    """Release held jobs, as scontrol release: they may be scheduled again.

    JOB is a job id, an array (its held tasks), a task (12_7) or tasks as `queue` prints them (12_[1-3,7]).
    """
    _each("release", flat_ids(job_ids), state_dir, as_json, lambda client, job_id: client.release(job_id))


@click.command()
@click.option("--hold", "and_hold", is_flag=True, help="Also hold each job once it is pending (scontrol requeuehold).")
@click.argument("job_ids", nargs=-1, required=True, type=JOB_IDS, metavar="JOB...")
@json_option("Print the jobs' JobViews as a JSON list.")
@state_dir_option
def requeue(state_dir: Path | None, as_json: bool, and_hold: bool, job_ids: tuple[list[str], ...]) -> None:
    """Requeue running jobs, as scontrol requeue: each rank gets SIGTERM, SIGKILL after the job's
    grace, then the job is pending again as a new attempt (its restart count + 1).

    A job submitted with --no-requeue is requeued too (you asked by name); one whose ranks all
    exit 0 on their own meanwhile has finished instead.
    """
    ids = flat_ids(job_ids)
    _each("requeue", ids, state_dir, as_json, lambda client, job_id: client.requeue(job_id, hold=and_hold))


@click.command()
@click.argument("job_id", type=JOB_ID, metavar="JOB")
@click.argument("assignments", nargs=-1, required=True, metavar="KEY=VALUE...")
@json_option("Print the job's JobView as JSON.")
@state_dir_option
def update(state_dir: Path | None, as_json: bool, job_id: str, assignments: tuple[str, ...]) -> None:
    """Change a job, as scontrol update: Priority=N (or a priority class; you may only lower it,
    admins set any), TimeLimit=DURATION (as --time; you may only shorten it, admins set any,
    0 or UNLIMITED lifts it),
    Name=TEXT, Dependency=LIST (as --dependency, while the job is pending; empty removes it),
    Partition=QUEUE (or Queue=QUEUE: moves a pending job to a queue you may submit to, where it
    could start; not a share of a GPU).

    Keys are any case (time, time_limit, jobname also work). Each change is in `labgang show`'s
    history. An array id (12) updates each of its unfinished tasks, as scontrol does (--json: a
    list of their JobViews).
    """
    body = parse_assignments(assignments)
    _each(
        "update",
        (job_id,),
        state_dir,
        as_json,
        lambda client, one: client.update(one, body),
        summary=lambda job: _update_summary(body, job),
        one_object=True,
    )
