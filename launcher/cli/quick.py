"""The ``labgang`` entry point, with a fast path for the commands typed in shell loops.

``labgang submit`` and ``labgang queue`` run in sweeps and under ``watch``: a process that
spends 100 ms importing click is 25x ``sbatch``. :func:`main` parses ``submit``, ``run``,
``queue``, ``queues``, ``cancel``, ``show``, ``logs`` (without ``-f`` or ``--attempt``) and
``history`` here, with the same flags as their click commands (:mod:`labgang.launcher.cli.submission`,
:mod:`labgang.launcher.cli.jobs`, :mod:`labgang.launcher.cli.history`), and talks to the
coordinator through the stdlib client, importing neither click nor anything the request does
not need. ``labgang --help`` is written by :mod:`labgang.launcher.cli.commands`.

Each command's flags are one table (option string -> destination and converter), so a new flag
is one line in the table (and its click option in the click command).

The fast path only takes the well-formed case. Anything it does not recognise (a command's
``--help``, an unknown or malformed flag, a value out of range) goes to the click command, which parses
the same argv again and prints the help or the one-line usage error exactly as before;
refusals from the coordinator are described by the click commands' own helpers
(:func:`labgang.launcher.cli.plumbing.describe_api_error`), imported only then. So the click
commands stay the one definition of flags, help and errors; this module must accept a subset
of what they accept and build the same request (tests/cli/test_quick.py compares both).
"""

import os
import sys

from labgang.launcher.cli.quick_argv import NotFast, Repeated, normal_job_id, parse

# ``typing`` is for the type checker only: importing it costs a shell command ~2 ms
# (bench/cli_latency.py). Annotations that name what it imports are strings, and there is no
# ``from __future__ import annotations``: the module ``__future__`` costs a hot command 0.4M
# instructions (docs/cli-startup.md); tests/cli/test_quick.py checks that none loads it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any, NoReturn

    from labgang.launcher.api.client import Client
    from labgang.launcher.cli.quick_argv import Converter

__all__ = ["FAST_COMMANDS", "NotFast", "Repeated", "escape_unencodable", "main", "parse"]


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise ValueError(text)
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError(text)
    return value


def _model_choice(name: str) -> "Callable[[str], str]":
    """A converter that accepts the values of ``labgang.launcher.model.<name>`` (imported on use)."""

    def convert(text: str) -> str:
        from labgang.launcher import model

        if text not in getattr(model, name):
            raise ValueError(text)
        return text

    return convert


def _failure_policy(text: str) -> str:
    from labgang.launcher.lifecycle.group_policy import FAILURE_POLICIES

    if text not in FAILURE_POLICIES:
        raise ValueError(text)
    return text


def _max_restarts(text: str) -> int:
    from labgang.launcher.lifecycle.group_policy import MAX_RESTARTS_LIMIT

    value = int(text)
    if not 0 <= value <= MAX_RESTARTS_LIMIT:
        raise ValueError(text)
    return value


def _duration(text: str) -> float:
    from labgang.launcher.cli.format import parse_duration

    return parse_duration(text)


def _time_limit(text: str) -> "float | None":
    from labgang.launcher.durations import parse_job_time_limit

    return parse_job_time_limit(text)


def _begin(text: str) -> float:
    import time

    from labgang.launcher.begin_time import parse_begin

    return parse_begin(text, time.time())


def _signal_spec(text: str) -> str:
    from labgang.launcher.cli.format import parse_signal_spec

    return parse_signal_spec(text)


def _items(text: str) -> "tuple[str, ...]":
    """A comma-separated filter value (``-u a,b``, ``-t PD,R``): its items
    (:func:`labgang.launcher.job_filters.items`; an empty one is click's to refuse)."""
    from labgang.launcher.job_filters import items

    return items(text)


def _state_items(text: str) -> "tuple[str, ...]":
    """A ``-t``/``-s`` value: the states it names (:func:`labgang.launcher.job_filters.state_items`;
    an empty value or a state that is none is click's to refuse)."""
    from labgang.launcher.job_filters import state_items

    return state_items(text)


def _time_arg(text: str) -> float:
    """``--since``/``--until``: a date, a date and time, or an age, in unix seconds
    (:func:`labgang.launcher.cli.history_table.parse_when`)."""
    import time

    from labgang.launcher.cli.history_table import parse_when

    return parse_when(text, time.time())


def _limit(text: str) -> int:
    value = int(text)
    if not 1 <= value <= 100_000:
        raise ValueError(text)
    return value


def _job_id(text: str) -> str:
    job_id = normal_job_id(text)
    if job_id is None:
        raise ValueError(text)
    return job_id


def _submit_flags() -> "dict[str, tuple[str, Converter]]":
    """``submit``'s flags (:func:`labgang.launcher.cli.submission._submit_options`), plus ``--json``."""
    return {
        "-n": ("workers", _positive),
        "--workers": ("workers", _positive),
        "--ntasks": ("workers", _positive),
        "-g": ("gpus_per_worker", _non_negative),
        "--gpus-per-worker": ("gpus_per_worker", _non_negative),
        "--gpus-per-task": ("gpus_per_worker", _non_negative),
        "--mig": ("mig", str),
        "-q": ("queue", str),
        "--queue": ("queue", str),
        "--partition": ("queue", str),
        "-p": ("priority", str),
        "--priority": ("priority", str),
        "--qos": ("priority", str),
        "-N": ("nodes", _positive),
        "--nodes": ("nodes", _positive),
        "--gpu-model": ("gpu_model", str),
        "--min-workers": ("min_workers", _positive),
        "-c": ("cpus_per_task", _positive),
        "--cpus-per-task": ("cpus_per_task", _positive),
        "--mem": ("mem", str),
        "--mem-per-gpu": ("mem_per_gpu", str),
        "--exclusive": ("exclusive", None),
        "--shards": ("shards", _positive),
        "--mps": ("mps", _positive),
        "--gpu-mem": ("gpu_mem", str),
        "--topology": ("topology", _model_choice("TOPOLOGY_LEVELS")),
        "--cpu-bind": ("cpu_bind", _model_choice("CPU_BIND")),
        "--grace": ("grace", _duration),
        "--time": ("time_limit", _time_limit),
        "-t": ("time_limit", _time_limit),
        "-o": ("output", str),
        "--output": ("output", str),
        "-e": ("error", str),
        "--error": ("error", str),
        "-b": ("begin_time", _begin),
        "--begin": ("begin_time", _begin),
        "--name": ("name", str),
        "-J": ("name", str),
        "--job-name": ("name", str),
        "--no-requeue": ("no_requeue", None),
        "--requeue": ("requeue", None),
        "--signal": ("signal_spec", _signal_spec),
        "--array": ("array", str),
        "-d": ("dependency", str),
        "--dependency": ("dependency", str),
        "--error-on-unknown-sbatch": ("error_on_unknown_sbatch", None),
        "-H": ("hold", None),
        "--hold": ("hold", None),
        "--mail-type": ("mail_type", str),
        "--mail-user": ("mail_user", str),
        "--success-policy": ("success_policy", str),
        "--failure-policy": ("failure_policy", _failure_policy),
        "--max-restarts": ("max_restarts", _max_restarts),
        "--startup-order": ("startup_order", str),
        "-f": ("job_file", str),
        "--file": ("job_file", str),
        "--colocate": ("colocate", str),
        "--batch-srun": ("batch_script", None),
        "-D": ("chdir", str),
        "--chdir": ("chdir", str),
        "--json": ("as_json", None),
        "--wrap": ("wrap", str),
        "--state-dir": ("state_dir", str),
    }


def _run_flags() -> "dict[str, tuple[str, Converter]]":
    """``run``'s flags: ``submit``'s without ``--json`` and ``--wrap``, plus ``--all-ranks`` and ``-Q/--quiet``."""
    flags = _submit_flags()
    del flags["--json"], flags["--wrap"]
    flags["--all-ranks"] = ("all_ranks", None)
    flags["-Q"] = flags["--quiet"] = ("quiet", None)
    return flags


_QUEUE_FLAGS: "dict[str, tuple[str, Converter]]" = {
    "--all": ("all_users", None),
    "--user": ("user", Repeated(_items)),
    "-u": ("user", Repeated(_items)),
    "--queue": ("queue", Repeated(_items)),
    "-q": ("queue", Repeated(_items)),
    "--partition": ("queue", Repeated(_items)),  # squeue's name for it
    "-p": ("queue", Repeated(_items)),
    "--state": ("states", Repeated(_state_items)),
    "-t": ("states", Repeated(_state_items)),
    "--json": ("as_json", None),
    "--state-dir": ("state_dir", str),
}
_QUEUES_FLAGS: "dict[str, tuple[str, Converter]]" = {"--json": ("as_json", None), "--state-dir": ("state_dir", str)}
_HISTORY_FLAGS: "dict[str, tuple[str, Converter]]" = {
    "--user": ("user", str),
    "-u": ("user", str),
    "--queue": ("queue", str),
    "-q": ("queue", str),
    "--state": ("states", Repeated(_state_items)),
    "-s": ("states", Repeated(_state_items)),
    "--since": ("since", _time_arg),
    "--until": ("until", _time_arg),
    "--limit": ("limit", _limit),
    "--json": ("as_json", None),
    "--state-dir": ("state_dir", str),
}
_CANCEL_FLAGS: "dict[str, tuple[str, Converter]]" = {
    **{flag: _QUEUE_FLAGS[flag] for flag in ("-u", "--user", "-q", "--queue", "-t", "--state")},
    "--name": ("names", Repeated(_items)),
    "--state-dir": ("state_dir", str),
}
_SHOW_FLAGS: "dict[str, tuple[str, Converter]]" = {"--json": ("as_json", None), "--state-dir": ("state_dir", str)}
# `logs -f` and `logs --attempt N` are left to click (not listed here).
_LOGS_FLAGS: "dict[str, tuple[str, Converter]]" = {
    "--rank": ("rank", _non_negative),
    "-r": ("rank", _non_negative),
    "--state-dir": ("state_dir", str),
}


def _state_dir(options: "dict[str, Any]") -> "str | None":
    """``--state-dir``, else ``LABGANG_STATE_DIR`` (as click's envvar); one that is a file, or a directory
    this user cannot read (another user's 0700 one), is click's to refuse (one line, exit 2)."""
    state_dir = options.pop("state_dir", None) or os.environ.get("LABGANG_STATE_DIR") or None
    if (
        state_dir is not None
        and os.path.exists(state_dir)
        and (not os.path.isdir(state_dir) or not os.access(state_dir, os.R_OK))
    ):
        raise NotFast("--state-dir")
    return state_dir


def _filter(options: "dict[str, Any]", dest: str) -> "tuple[str, ...]":
    """A filter flag's items, each once (:func:`labgang.launcher.job_filters.flatten`); () when it was not
    given. Only the flag's converter loads job_filters: a plain ``queue`` or ``cancel JOB`` does not."""
    given = options.get(dest)
    if not given:
        return ()
    from labgang.launcher.job_filters import flatten

    return flatten(given)


def _fail(
    command: str, message: str, code: int, *, as_json: bool = False, field: "str | None" = None, allowed: "Any" = None
) -> int:
    """Print the one line ``labgang <command>: <message>`` on stderr (with ``as_json``, the error object
    on stdout first: :mod:`labgang.launcher.cli.json_error`); returns ``code``, the exit status."""
    if as_json:
        from labgang.launcher.cli.json_error import print_error_json

        print_error_json(message, field, allowed)
    print(f"labgang {command}: {message}", file=sys.stderr)
    return code


def _refusal(command: str, err: "Exception", as_json: bool = False) -> int:
    """Print a client error as the click command would (one line, its exit status; with ``as_json``
    the error object on stdout too)."""
    from labgang.launcher.api.client import ApiError

    if isinstance(err, ApiError):
        from labgang.launcher.cli.plumbing import describe_api_error  # click, only for a refusal

        failure = describe_api_error(err)
        return _fail(command, failure.message, failure.exit_code, as_json=as_json, field=err.field, allowed=err.allowed)
    return _fail(command, str(err), 1, as_json=as_json)


def _parse_submission(
    args: "list[str]", flags: "dict[str, tuple[str, Converter]]"
) -> "tuple[dict[str, Any], list[str]]":
    """``submit``/``run``'s options and command; a batch script's directives read in
    (:func:`labgang.launcher.cli.batch_script.script_form`) when it has neither a warning nor a
    problem (else the click command prints them).

    Raises:
        NotFast: what click must word, or say.
    """
    options, argv = parse(args, flags, interspersed=False)
    if (
        argv
        and "--" not in args[: len(args) - len(argv)]
        and (os.path.isfile(argv[0]) or argv[0] == "-" or "/" in argv[0] or "." in argv[0])
    ):
        from labgang.launcher.cli.batch_script import BadScript, script_form

        try:
            found = script_form(args, argv, strict=bool(options.get("error_on_unknown_sbatch")))
        except BadScript:
            raise NotFast("SCRIPT") from None
        if found is not None:
            if found[1]:
                raise NotFast("SCRIPT")  # warnings: the click command prints them
            options, argv = parse(found[0], flags, interspersed=False)
    options.pop("error_on_unknown_sbatch", None)
    return options, argv


def _submission(command: str, options: "dict[str, Any]", argv: "list[str]") -> "dict[str, Any]":
    """The ``POST /v1/jobs`` body of the submission flags (what the click command builds); a
    ``--gpu-mem`` without a unit gets its warning line on stderr, as from the click command.

    Raises:
        NotFast: flags the builder refuses (click words the error), or a unit-less ``--gpu-mem``
            that a batch script's directive set (the click command's warning names that line).
    """
    from labgang.launcher.cli import job_request

    try:
        body = job_request.build_submission(argv=argv, **options)
    except job_request.SubmissionError:
        raise NotFast("submission") from None
    warning = job_request.gpu_mem_without_unit(body, options.get("gpu_mem"))
    if warning is not None:
        if options.get("batch_script"):
            raise NotFast("SCRIPT")
        print(f"labgang {command}: warning: {warning}", file=sys.stderr, flush=True)
    return body


def _submit_refused(
    command: str, err: "Exception", options: "dict[str, Any]", args: "list[str]", *, as_json: bool = False
) -> int:
    """A refused submission, printed as the click command would: a refused default queue says so, and a
    value a batch script's directive set names its line (``args``: the command's arguments as typed);
    with ``as_json`` (``submit --json``) the error object on stdout too."""
    from labgang.launcher.api.client import ApiError

    field, allowed = getattr(err, "field", None), getattr(err, "allowed", None)

    if isinstance(err, ApiError) and options.get("batch_script"):
        from labgang.launcher.cli.batch_script import field_origins, origin_of

        flags = _run_flags() if command == "run" else _submit_flags()
        given, positional = parse(args, flags, interspersed=False)
        origins = field_origins(positional[0], flags, given) if positional else {}
        where = origin_of(origins, flags, field=err.field, message=err.message)
        if where is not None:
            from labgang.launcher.cli.plumbing import describe_api_error  # click, only for a refusal

            refused = describe_api_error(err)
            return _fail(
                command, f"{where}: {refused.message}", refused.exit_code, as_json=as_json, field=field, allowed=allowed
            )
    if isinstance(err, ApiError) and options.get("job_file") is not None:  # worded in the job file's keys
        from labgang.launcher.cli.job_groups import file_refusal

        worded = file_refusal(options["job_file"], err.field, err.message, err.allowed, options)
        if worded is not None:
            return _fail(command, worded, 2 if err.status == 400 else 1, as_json=as_json, field=field, allowed=allowed)
    if isinstance(err, ApiError) and options.get("queue") is None and err.field == "queue" and err.status == 403:
        from labgang.launcher.cli.submission import default_queue_refused

        refused = default_queue_refused(err)
        return _fail(command, refused.message, refused.exit_code, as_json=as_json, field=field, allowed=allowed)
    return _refusal(command, err, as_json)


def submit(args: "list[str]") -> int:
    """``labgang submit``: see :func:`labgang.launcher.cli.submission.submit`."""
    from labgang.launcher.api.client import Client, ClientError

    options, argv = _parse_submission(args, _submit_flags())
    state_dir = _state_dir(options)
    as_json = options.pop("as_json", False)
    body = _submission("submit", options, argv)
    try:
        with Client.for_state_dir(state_dir) as client:
            if not as_json:
                print(client.submit_id(body))  # an array: its id (the JobView is its first task's)
                return 0
            job = client.submit(body)
            array_id = job.get("array_id")  # an array: its id and every task, not its first task alone
            reply = None if array_id is None else client.array(str(array_id))
    except ClientError as err:
        return _submit_refused("submit", err, options, args, as_json=as_json)
    from labgang.launcher.cli.array_view import submitted_json
    from labgang.launcher.cli.format import to_json

    print(to_json(submitted_json(job, reply)))
    return 0


def run_requeue(options: "dict[str, Any]") -> "dict[str, Any]":
    """``run``'s options with requeue off unless ``--requeue`` was given: an attached job is not
    requeued when labgang stops or its node is lost (nobody would be attached to its rerun; Slurm
    does not requeue an srun either), it ends with its ``run``."""
    return options if options.get("requeue") else {**options, "no_requeue": True, "attached": True}


def run(args: "list[str]") -> int:
    """``labgang run``: submit, then follow the job with the click command's own code
    (:func:`labgang.launcher.cli.follow.follow_to_the_end`); see :func:`labgang.launcher.cli.submission.run`."""
    from labgang.launcher.api.client import Client, ClientError
    from labgang.launcher.cli.follow import FollowStopped, follow_to_the_end, stderr_bytes, stdout_bytes

    options, argv = _parse_submission(args, _run_flags())
    if "array" in options:
        raise NotFast("--array")  # waiting for every task of an array is the click command's (array_follow.py)
    state_dir = _state_dir(options)
    all_ranks = options.pop("all_ranks", False)
    quiet = options.pop("quiet", False)
    from labgang.launcher.stdin_forward import StdinStreamer, streams_stdin

    stream = streams_stdin()  # rank 0's standard input, when ours is a pipe or a file: streamed
    body = _submission("run", {**run_requeue(options), "stdin_stream": stream}, argv)
    requeued = bool(options.get("requeue"))  # run --requeue: a shutdown requeues it (follow.labgang_stopped)
    try:
        with Client.for_state_dir(state_dir) as client:
            try:
                job = client.submit(body)
            except ClientError as err:
                return _submit_refused("run", err, options, args)
            job_id = job["id"]
            if not quiet:
                print(f"labgang: submitted job {job_id}", file=sys.stderr, flush=True)
            ranks = range(job.get("workers") or options.get("workers", 1)) if all_ranks else (0,)
            streams = (stdout_bytes(), sys.stderr, stderr_bytes())
            try:
                if stream:
                    with StdinStreamer(state_dir, job_id):
                        return follow_to_the_end(client, job_id, ranks, *streams, quiet=quiet, requeued=requeued)
                return follow_to_the_end(client, job_id, ranks, *streams, quiet=quiet, requeued=requeued)
            except FollowStopped as stop:
                return _fail("run", stop.message, stop.exit_code)
    except ClientError as err:
        return _refusal("run", err)


def queue(args: "list[str]") -> int:
    """``labgang queue``: see :func:`labgang.launcher.cli.jobs.queue`."""
    from labgang.launcher.api.client import Client, ClientError
    from labgang.launcher.cli.job_facts import queue_listing

    options, positional = parse(args, _QUEUE_FLAGS, interspersed=True)
    if positional:
        raise NotFast(positional[0])
    state_dir = _state_dir(options)
    try:
        with Client.for_state_dir(state_dir) as client:
            text, notes = queue_listing(
                client,
                all_users=options.get("all_users", False),
                users=_filter(options, "user"),
                queues=_filter(options, "queue"),
                states=_filter(options, "states"),
                as_json=options.get("as_json", False),
            )
    except ClientError as err:
        return _refusal("queue", err, bool(options.get("as_json")))
    print(text)
    for note in notes:
        print(f"labgang queue: note: {note}", file=sys.stderr)
    return 0


def cancel(args: "list[str]") -> int:
    """``labgang cancel JOB...`` (or by filters): see :func:`labgang.launcher.cli.jobs.cancel`."""
    from labgang.launcher.api.client import Client, ClientError
    from labgang.launcher.cli.job_facts import cancel_jobs, split_job_list, task_list_ids

    options, positional = parse(args, _CANCEL_FLAGS, interspersed=True)
    job_ids: list[str] = []
    try:
        for text in (item for arg in positional for item in split_job_list(arg)):  # scancel 4,3
            job_ids += task_list_ids(text) or [_job_id(text)]
    except ValueError:  # BadArraySpec is one: click words it
        raise NotFast("JOB") from None
    state_dir = _state_dir(options)
    filters = {key: _filter(options, dest) for key, dest in _CANCEL_FILTERS.items()}
    if not job_ids and not any(filters.values()):
        raise NotFast("JOB")
    worst = 0
    try:
        with Client.for_state_dir(state_dir) as client:
            if any(filters.values()):
                from labgang.launcher.cli.bulk_cancel import selected_jobs

                job_ids, notes = selected_jobs(client, job_ids=tuple(job_ids), **filters)
                for note in notes:
                    _fail("cancel", f"note: {note}", 0)
            for line, status in cancel_jobs(client, job_ids):
                if status:
                    worst = max(worst, status)
                    _fail("cancel", line, 0)
                else:
                    print(line, flush=True)
    except ClientError as err:
        return _refusal("cancel", err)
    return worst


_CANCEL_FILTERS = {"users": "user", "queues": "queue", "states": "states", "names": "names"}
"""``selected_jobs``' arguments -> ``cancel``'s option destinations."""


def _single_job(positional: "list[str]") -> str:
    """The one JOB argument of ``show`` and ``logs``; anything else is click's to refuse."""
    if len(positional) != 1:
        raise NotFast("JOB")
    try:
        return _job_id(positional[0])
    except ValueError:
        raise NotFast("JOB") from None


def show(args: "list[str]") -> int:
    """``labgang show JOB``: see :func:`labgang.launcher.cli.jobs.show`. The text is the coordinator's
    (:meth:`~labgang.launcher.api.client.Client.job_text`: nothing to read or lay out here); from a
    coordinator that sends the JobView instead, an array's id, and ``--json``, the click command's way."""
    from labgang.launcher.api.client import ApiError, Client, ClientError

    options, positional = parse(args, _SHOW_FLAGS, interspersed=True)
    job_id = _single_job(positional)
    state_dir = _state_dir(options)
    as_json = bool(options.get("as_json"))
    try:
        with Client.for_state_dir(state_dir) as client:
            job = None
            if not as_json:
                try:
                    shown = client.job_text(job_id)
                except ApiError as err:
                    if err.status != 404 or not job_id.isdigit():
                        raise
                    shown = None  # an array's id, or no job: job_or_array says which
                if isinstance(shown, str):
                    print(shown)
                    return 0
                job = shown
            return _show_here(client, job_id, job, as_json)
    except ClientError as err:
        return _refusal("show", err, as_json)


def _show_here(client: "Client", job_id: str, job: "dict[str, Any] | None", as_json: bool) -> int:
    """``show``'s text or ``--json`` written here, as the click command writes them, from ``job`` (its
    JobView) or, when None, from what ``job_id`` names (a job, or an array's tasks)."""
    import time

    from labgang.launcher.cli.format import job_detail, to_json
    from labgang.launcher.cli.job_facts import add_pitfalls, add_start_errors, job_or_array

    if job is None:
        job, array = job_or_array(client, job_id)
        if array is not None:
            from labgang.launcher.cli.array_view import array_detail, array_summary_json

            print(to_json(array_summary_json(array)) if as_json else array_detail(array))
            return 0
    assert job is not None
    add_start_errors(client, job)
    add_pitfalls(client, job)
    print(to_json({"job": job}) if as_json else job_detail(job, time.time()))
    return 0


def queues(args: "list[str]") -> int:
    """``labgang queues``: see :func:`labgang.launcher.cli.jobs.queues`."""
    from labgang.launcher.api.client import Client, ClientError
    from labgang.launcher.cli.format import queue_table, to_json

    options, positional = parse(args, _QUEUES_FLAGS, interspersed=True)
    if positional:
        raise NotFast(positional[0])
    state_dir = _state_dir(options)
    try:
        with Client.for_state_dir(state_dir) as client:
            items = client.queues()
    except ClientError as err:
        return _refusal("queues", err, bool(options.get("as_json")))
    print(to_json({"queues": items}) if options.get("as_json") else queue_table(items))
    return 0


def history(args: "list[str]") -> int:
    """``labgang history``: see :func:`labgang.launcher.cli.history.history` (which, when no coordinator
    answers, reads the store file itself)."""
    from labgang.launcher.api.client import Client, ClientError, CoordinatorUnavailable
    from labgang.launcher.cli.format import to_json
    from labgang.launcher.cli.history_table import (
        attempts_note,
        history_json,
        history_rows,
        history_table,
        limit_note,
    )
    from labgang.launcher.job_filters import flatten

    options, positional = parse(args, _HISTORY_FLAGS, interspersed=True)
    if positional:
        raise NotFast(positional[0])
    since, until = options.get("since"), options.get("until")
    if since is not None and until is not None and since > until:
        raise NotFast("--since")  # click words the error
    state_dir = _state_dir(options)
    limit = options.get("limit", 1000)
    try:
        with Client.for_state_dir(state_dir) as client:
            rows, notes = history_rows(
                client,
                user=options.get("user"),
                queue=options.get("queue"),
                states=flatten(options.get("states", ())),
                since=since,
                until=until,
                limit=limit,
            )
        for note in notes:
            print(f"labgang history: note: {note}", file=sys.stderr)
    except CoordinatorUnavailable:
        raise NotFast("no coordinator") from None  # the click command reads the store itself
    except ClientError as err:
        if options.get("as_json"):
            raise NotFast("--json refusal") from None  # the click command prints it as a JSON error object too
        return _refusal("history", err)
    if options.get("as_json"):
        print(to_json(history_json(rows, limit)))
        return 0
    print(history_table(rows))
    spans = attempts_note(rows)
    if spans is not None:
        print(spans, file=sys.stderr)
    cut = limit_note(rows, limit)
    if cut is not None:
        print(cut, file=sys.stderr)
    return 0


def logs(args: "list[str]") -> int:
    """``labgang logs JOB [-r RANK]`` (not ``-f``, not ``--attempt``): see :func:`labgang.launcher.cli.jobs.logs`."""
    from labgang.launcher.api.client import Client, ClientError
    from labgang.launcher.cli.job_facts import array_logs_note, job_or_array

    options, positional = parse(args, _LOGS_FLAGS, interspersed=True)
    job_id = _single_job(positional)
    rank = options.get("rank", 0)
    state_dir = _state_dir(options)
    from labgang.launcher.cli.follow import NoOutputYet, copy_log, not_started

    try:
        with Client.for_state_dir(state_dir) as client:
            job, array = job_or_array(client, job_id)
            if array is not None:
                print(f"labgang logs: {array_logs_note(job_id, array['jobs'])}", file=sys.stderr, flush=True)
                job = array["jobs"][0]
            assert job is not None
            job_id = str(job["id"])
            workers = int(job.get("workers") or 1)
            if rank >= workers:
                return _fail("logs", f"--rank: job {job_id} has ranks 0..{workers - 1}, not {rank}", 2)
            try:
                offset = copy_log(client, job_id, rank, sys.stdout.buffer)
            except NoOutputYet:
                return _fail("logs", f"job {job_id} rank {rank} has no output yet ({job['state']})", 1)
    except ClientError as err:
        return _refusal("logs", err)
    if offset == 0:
        why = not_started(job)
        if why:
            print(f"labgang logs: {why}", file=sys.stderr)
    return 0


def top_help(args: "list[str]") -> int:
    """``labgang --help``: written without click (:func:`labgang.launcher.cli.commands.top_help`), as click would."""
    if args:
        raise NotFast(args[0])  # `--help CMD`, `-h --version`: click's to order
    from labgang.launcher.cli.commands import top_help

    sys.stdout.write(top_help())
    return 0


FAST_COMMANDS: "dict[str, Callable[[list[str]], int]]" = {
    "--help": top_help,
    "-h": top_help,
    "submit": submit,
    "run": run,
    "queue": queue,
    "queues": queues,
    "cancel": cancel,
    "show": show,
    "logs": logs,
    "history": history,
}


class ExitHandlerCount:
    """How many exit handlers were registered since :meth:`watch`: ``atexit.register`` wrapped to count.

    Only the launcher without ``site`` watches (:mod:`labgang.launcher.cli.quick_launch`): there nothing
    ran before this module but the interpreter's own start, so a count of 0 means no exit handler exists
    and the process may end without teardown. Elsewhere (``site`` ran ``.pth`` files, a test harness
    holds handlers) nobody knows the count, and a fast command ends by ``SystemExit``.
    """

    watching = False
    registered = 0

    @classmethod
    def watch(cls) -> None:
        """Count every ``atexit.register`` call from now on (the handler is still registered)."""
        import atexit  # built into the interpreter: no file to read

        register = atexit.register

        def counted(func: "Callable[..., object]", /, *args: object, **kwargs: object) -> "Callable[..., object]":
            cls.registered += 1
            return register(func, *args, **kwargs)

        atexit.register = counted  # type: ignore[assignment]
        cls.watching = True


def _leave(code: int) -> "NoReturn":
    """End the process with ``code`` once a fast command is done and its output flushed: without
    teardown (``os._exit``, ~1 ms less, bench/cli_latency.py) when :class:`ExitHandlerCount` watched
    from the start and saw no exit handler registered, else by ``SystemExit`` (handlers run)."""
    if ExitHandlerCount.watching and ExitHandlerCount.registered == 0:
        os._exit(code)
    sys.exit(code)


def escape_unencodable() -> None:
    """Let the standard streams escape what their encoding cannot write (``PYTHONIOENCODING=ascii``
    and a job named ``café``: ``caf\\xe9``), for both paths, rather than end in a
    ``UnicodeEncodeError`` traceback. A stream with its own error handler is left as it is."""
    for stream in (sys.stdout, sys.stderr):
        if getattr(stream, "errors", None) == "strict" and hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="backslashreplace")


def main(full: "Callable[[], object] | None" = None) -> None:
    """Console-script entry point: the fast path when it applies (and ``labgang --help``), else the click group.

    Args:
        full: called instead of importing the click group when the fast path does not apply, before
            anything was read or written (the launcher ``labgang install`` writes passes one that
            restarts the interpreter with ``site``: :mod:`labgang.launcher.cli.quick_launch`); None runs
            the click group in this process.
    """
    escape_unencodable()
    args = sys.argv[1:]
    if not args:  # bare `labgang`: the help, as click's group prints it then (stderr, status 2)
        from labgang.launcher.cli.commands import top_help

        sys.stderr.write(top_help())
        sys.stderr.flush()
        _leave(2)
    if args[0] in FAST_COMMANDS:
        try:
            code = FAST_COMMANDS[args[0]](args[1:])
            sys.stdout.flush()
            sys.stderr.flush()
        except NotFast:
            pass
        except KeyboardInterrupt:  # as click ends a command interrupted outside its own handling
            print("\nAborted!", file=sys.stderr)
            sys.exit(1)
        except BrokenPipeError:  # `labgang queue | head`: quietly, exit status 1, as click does
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # nothing left to flush at exit
            sys.exit(1)
        else:
            _leave(code)
    if full is not None:
        full()
    from labgang.launcher.cli.main import main as click_main

    click_main()
