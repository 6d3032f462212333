"""What every job command shares: exit statuses, API errors as one line naming the flag at
fault, the ``--state-dir`` / ``--json`` options and the ``JOB`` argument."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
from labgang.launcher import job_filters
from labgang.launcher.api.client import ApiError, CoordinatorUnavailable
from labgang.launcher.arrays import BadArraySpec
from labgang.launcher.cli import follow
from labgang.launcher.cli.errors import CommandFailed
from labgang.launcher.cli.job_facts import normal_job_id, several_tasks, split_job_list, task_list_ids

# Which flag sets each field of the submission body, for error messages.
FIELD_FLAGS: dict[str, str] = {
    "name": "--name",
    "queue": "-q/--queue",
    "workers": "-n/--workers",
    "gpus_per_worker": "-g/--gpus-per-worker",
    "mig": "--mig",
    "priority": "-p/--priority",
    "nodes": "-N/--nodes",
    "gpu_model": "--gpu-model",
    "topology": "--topology",
    "cpus_per_task": "-c/--cpus-per-task",
    "mem": "--mem",
    "mem_per_gpu": "--mem-per-gpu",
    "exclusive": "--exclusive",
    "shards": "--shards",
    "mps": "--mps",
    "gpu_mem": "--gpu-mem",
    "min_workers": "--min-workers",
    "cpu_bind": "--cpu-bind",
    "grace_s": "--grace",
    "time_limit_s": "-t/--time",
    "requeue": "--no-requeue",
    "signal": "--signal",
    "array": "--array",
    "dependency": "-d/--dependency",
    "begin_time": "-b/--begin",
    "output": "-o/--output",
    "error": "-e/--error",
    "mail_type": "--mail-type",
    "mail_user": "--mail-user",
    "success_policy": "--success-policy",
    "failure_policy": "--failure-policy",
    "max_restarts": "--max-restarts",
    "startup_order": "--startup-order",
    "colocate": "--colocate",
    "argv": "CMD",
    "env": "the environment",
    "cwd": "the working directory",
    "rank": "--rank",
    "user": "--user",
    "state": "--state",  # queue's -t/--state and history's -s/--state
}


EXIT_INTERRUPTED = follow.EXIT_INTERRUPTED


# Body fields in seconds, set by duration flags: their errors say how to write a duration.
DURATION_FIELDS = frozenset({"grace_s", "time_limit_s"})


DURATION_EXAMPLE = "(e.g. 30s, 5m, 2h)"


# API field names that are not plain words, rewritten to their flags wherever a message names them.
_FIELD_NAME_RE = re.compile(
    r"\b(" + "|".join(sorted((f for f in FIELD_FLAGS if "_" in f), key=len, reverse=True)) + r")\b"
)


_GROUP_FIELD_RE = re.compile(r"^groups\.(\d+)\.(\w+)")
_ARGV_FIELD_RE = re.compile(r"^argv\.(\d+)$")
"""A field of one group of a job of groups (``groups.1.min_workers``): its index and key."""


def flag_message(message: str, field: str | None, *, example: bool = True) -> str:
    """Rewrite a coordinator message about body ``field`` in the CLI's terms.

    ``"time_limit_s: must be > 0 seconds"`` becomes ``"-t/--time: must be > 0 seconds (e.g. 30s,
    5m, 2h)"``: the leading field name becomes its flag, every other API field name with an
    underscore becomes its flag, and duration fields get an example of the syntax (unless
    ``example`` is False: a well-formed value refused, whose example would suggest it again).
    """
    word = _ARGV_FIELD_RE.match(field or "")
    if word and not message.startswith("argv: "):  # a word of the command after --, as the user counts
        return f"the command's word {int(word.group(1)) + 1}: {message.removeprefix(f'{field}: ')}"
    group = _GROUP_FIELD_RE.match(field or "")
    if group and message.startswith(f"{field}: "):  # a job of groups: name the group and its flag
        index, key = group.groups()
        flag = "--group" if key == "name" else FIELD_FLAGS.get(key, key)  # a group's name is its --group
        return f"group {index} {flag}: {message[len(field or '') + 2 :]}"
    if field and message.startswith(f"{field}: "):
        message = message[len(field) + 2 :]
    message = _FIELD_NAME_RE.sub(lambda m: FIELD_FLAGS[m.group(1)], message)
    if field in FIELD_FLAGS:
        flag = FIELD_FLAGS[field]
        if not message.startswith(flag):
            message = f"{flag}: {message}"
    if example and field in DURATION_FIELDS and DURATION_EXAMPLE not in message:
        message = f"{message} {DURATION_EXAMPLE}"
    return message


def describe_api_error(err: ApiError) -> CommandFailed:
    """Turn a refusal into a one-line error naming the flag and what it allows.

    A 400 (a field is invalid) is a usage error, exit 2; 403/404/409 are refusals, exit 1.
    Fields that are not flags (``uid``, ``id``) are not prefixed: the message says what it is about.
    """
    message = flag_message(err.message, err.field, example=err.status == 400)  # a syntax example for a bad value only
    if err.allowed not in (None, "", [], {}):
        items = list(err.allowed) if isinstance(err.allowed, (list, tuple)) else [err.allowed]
        allowed = ", ".join(map(str, items))
        # the coordinator's message may already list them (e.g. "one of ['batch', 'high']")
        if allowed not in message and not all(str(item) in message for item in items):
            message = f"{message} (allowed: {allowed})"
    return CommandFailed(message, 2 if err.status == 400 else 1, field=err.field, allowed=err.allowed)


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
        help="State directory of the labgang instance to talk to (its socket is labgang.sock there) "
        "[default: this machine's system instance when it runs, else your own].",
    )(func)


def json_option(what: str | Callable[..., Any]) -> Any:
    """The ``--json`` flag, with the command's own help: ``@json_option("Print the job as JSON
    (its JobView) instead of text.")``. Bare (``@json_option``), its help is a general one."""
    if callable(what):
        return json_option("Print the coordinator's answer as JSON.")(what)
    return click.option("--json", "as_json", is_flag=True, help=what)


STATE_HELP = "names or squeue codes, any case: " + ", ".join(job_filters.ALLOWED_STATES)
"""The states ``-t``/``-s`` take, in words for a help text."""


class ItemsType(click.ParamType):
    """A comma-separated filter value (``-u alice,bob``; with ``multiple=True`` the flag may also be
    repeated): its items as ``split`` gives them (:func:`labgang.launcher.job_filters.items`, or
    :func:`~labgang.launcher.job_filters.state_items`), a tuple.

    Refuses as a usage error what ``split`` refuses: a value without any item (``''``, ``,,``:
    ``-u/--user: must not be empty``), a state that is none (quoted as typed).
    """

    name = "LIST"

    def __init__(self, split: Callable[[str], tuple[str, ...]]) -> None:
        self.split = split

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> tuple[str, ...]:
        if isinstance(value, tuple):
            return value
        try:
            return self.split(str(value))
        except ValueError as err:
            self.fail(str(err), param, ctx)


ITEMS = ItemsType(job_filters.items)
STATE_ITEMS = ItemsType(job_filters.state_items)
"""``queue -t`` and ``history -s``: states by name or squeue code, any case, comma-separated."""


stdout_bytes = follow.stdout_bytes


def fail(message: str, code: int) -> NoReturn:
    """Stop the command with ``message`` on stderr and exit status ``code``.

    Raises:
        CommandFailed: always.
    """
    raise CommandFailed(message, code)


class JobIdType(click.ParamType):
    """A job id as the coordinator gives them: a decimal sequence number (``12``), or a task of a
    job array (``12_7``; for ``cancel``, the array id ``12`` names all of its tasks).

    Refuses anything else as a usage error (exit 2) before any request is sent.
    """

    name = "JOB"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        job_id = normal_job_id(str(value))
        if job_id is not None:
            return job_id
        several = several_tasks(str(value))
        if several is not None:
            self.fail(several, param, ctx)
        self.fail(
            f"{value!r} is not a job id; allowed: a job number such as 12, or an array task such as 12_7 "
            "(see `labgang queue`)",
            param,
            ctx,
        )


JOB_ID = JobIdType()


class JobIdsType(JobIdType):
    """``cancel``'s JOB: a job id as :class:`JobIdType` takes it, or tasks of a job array in the
    form ``queue`` prints (``12_[1-3,7]``, ``--array``'s list syntax); the value is a list of ids.
    """

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, list):
            return value
        ids: list[str] = []
        for item in split_job_list(str(value)):  # scancel's list: `cancel 4,3`
            try:
                tasks = task_list_ids(item)
            except BadArraySpec as err:
                hint = "" if "allowed" in str(err) else "; allowed: tasks such as 12_[1-3,7]"
                self.fail(f"{item!r} is not a job id: in its task list, {err}{hint}", param, ctx)
            ids += tasks if tasks is not None else [JobIdType.convert(self, item, param, ctx)]
        return ids


JOB_IDS = JobIdsType()


def flat_ids(job_ids: tuple[list[str], ...]) -> list[str]:
    """The ids of a ``JOB...`` argument of type :data:`JOB_IDS`, in order (it gives a list per word:
    ``12_[1-3]`` is three ids)."""
    return [job_id for group in job_ids for job_id in group]


class JobListType(JobIdsType):
    """``queue -j LIST``: job ids as ``cancel`` takes them (a job, an array id, a task, tasks in
    brackets), comma-separated; the value is a tuple of ids. An item that is none of these (``abc``)
    is a usage error naming it (exit 2), as squeue refuses it, rather than a filter matching nothing."""

    name = "LIST"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, tuple):
            return value
        return tuple(super().convert(value, param, ctx))


JOB_LIST = JobListType()


"""The ``JOB`` argument of ``cancel``, ``logs`` and ``show``."""
