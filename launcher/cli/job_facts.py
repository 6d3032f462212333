"""What ``labgang queue`` prints, what ``labgang show`` adds to a JobView before printing it
(pitfall findings, start errors), and what ``labgang cancel`` does for each job.

Without click, so that the fast paths (:mod:`labgang.launcher.cli.quick`) and the click
commands (:mod:`labgang.launcher.cli.jobs`) share one implementation.
"""

from labgang.launcher.api.client import ApiError, Client
from labgang.launcher.cli.quick_argv import normal_job_id  # there: `show JOB` reads its id without this module

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import Any

FINISHED_STATES = frozenset({"succeeded", "failed", "cancelled", "timeout", "node_fail"})
"""Job states from which a job never moves again (the API's lower-case names)."""

# The exit statuses a rank gets when its command could not be executed (as a shell gives them),
# and the line the rank's small parent then writes first in the rank's log (agent/supervisor/shim.py).
START_FAILURE_STATUSES = frozenset({126, 127})
START_FAILURE_PREFIX = b"[labgang] cannot start "


# The most task indices a ``cancel 12_[list]`` may name: the highest ``[limits] max_array_size``.
MAX_TASK_LIST = 1_000_001


def task_list_ids(text: str) -> "list[str] | None":
    """The task ids that ``"12_[1-3,7]"`` names (``queue``'s and scancel's form; the list takes
    ``--array``'s syntax, :func:`labgang.launcher.arrays.parse_array`): ``["12_1", "12_2", "12_3",
    "12_7"]``. A trailing ``%N`` cap (``12_[2-20%2]``, as ``queue`` folds a capped array) is
    ignored: it limits how many tasks run at once, not which tasks are named. None when ``text``
    is not ``ID_[...]``.

    Raises:
        BadArraySpec: the list in brackets does not parse; the message names the part.
    """
    head, sep, rest = text.strip().partition("_")
    array_id = normal_job_id(head) if sep and "_" not in head else None
    if array_id is None or len(rest) < 2 or rest[0] != "[" or rest[-1] != "]":
        return None
    from labgang.launcher.arrays import parse_array  # here: `cancel 12` has no list (two modules fewer to load)

    spec = parse_array(rest[1:-1], MAX_TASK_LIST)
    return [f"{array_id}_{index}" for index in spec.indices]


def split_job_list(text: str) -> "list[str]":
    """The items of a comma-separated job list as scancel and ``squeue -j`` take it
    (``"4,3"`` -> ``["4", "3"]``); a comma inside a task list's brackets stays (``"12_[1,3],7"`` ->
    ``["12_[1,3]", "7"]``). Items are stripped; empty ones are kept (as ``""``) for the caller to
    refuse, so ``"4,,3"`` is not silently read as two jobs."""
    items: list[str] = []
    depth, start = 0, 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
        elif char == "]":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return items


def several_tasks(text: str) -> "str | None":
    """For ``show`` and ``explain``, which take one job: the one-line refusal of a folded task list
    such as ``12_[2-20%2]`` (``"'12_[2-20%2]' is a list of tasks of array 12; give one task id,
    such as 12_2"``), or None when ``text`` is not one."""
    from labgang.launcher.arrays import BadArraySpec

    try:
        tasks = task_list_ids(text)
    except BadArraySpec:
        return None  # not a list `queue` prints: "not a job id" says what is allowed
    if not tasks:
        return None
    array_id = tasks[0].partition("_")[0]
    return f"{text!r} is a list of tasks of array {array_id}; give one task id, such as {tasks[0]}"


def queue_listing(
    client: "Client",
    *,
    all_users: bool = False,
    users: "tuple[str, ...]" = (),
    queues: "tuple[str, ...]" = (),
    states: "tuple[str, ...]" = (),
    as_json: bool = False,
) -> "tuple[str, list[str]]":
    """What ``labgang queue`` prints: the table the coordinator renders (``GET /v1/jobs?view=table``),
    or with ``as_json`` ``{"jobs": [JobView...]}`` of the active jobs in submission order; and the
    notes for standard error (when filters match nothing).

    Args:
        client: the coordinator client.
        all_users / users: everyone's jobs, or those of these users (names, or uids of this
            machine: :func:`labgang.launcher.job_filters.user_name`); default: the caller's own.
        queues / states: only jobs of these queues, only jobs in these states (JobState values:
            :func:`labgang.launcher.job_filters.state_items` of ``-t``). Each is the items of
            ``-u``/``-q``/``-t`` (:func:`labgang.launcher.job_filters.flatten`).

    Raises:
        ApiError: 400 an unknown queue or state (its message lists the allowed ones).
        CoordinatorUnavailable: no coordinator answers.
    """
    if users:  # a plain `labgang queue` loads no job_filters
        from labgang.launcher.job_filters import user_name, whose_jobs

        all_users, users = whose_jobs(all_users, users)
        users = tuple(dict.fromkeys(user_name(name) for name in users))
    user, queue = ",".join(users) or None, ",".join(queues) or None

    def listed(view: str) -> "list[dict[str, Any]]":
        return _listed(
            client.jobs(all_users=all_users, user=user, queue=queue, states=states, view=view), queues, states
        )

    if as_json:
        from labgang.launcher.cli.format import to_json

        return to_json({"jobs": listed("full")}), []
    try:
        table, count = client.job_table(all_users=all_users, user=user, queue=queue, states=states)
    except ApiError as err:
        if (err.status, err.field) != (400, "view"):
            raise
        # A coordinator from before view=table, e.g. still running after an upgrade of the
        # package: render its rows here (and filter them: it ignores queue= and state=).
        import time

        from labgang.launcher.jobtable import job_table

        rows = listed("queue")
        table, count = job_table(rows, time.time()), len(rows)
    return table, _empty_notes(users, queues, states) if count == 0 else []


def queue_jobs(
    client: "Client",
    *,
    all_users: bool = False,
    users: "tuple[str, ...]" = (),
    queues: "tuple[str, ...]" = (),
    states: "tuple[str, ...]" = (),
) -> "list[dict[str, Any]]":
    """The active jobs ``labgang queue`` lists with these filters (as :func:`queue_listing`), as
    whole JobViews in submission order: what ``queue -o/--long/-j`` render in the client.

    Raises:
        ApiError: 400 an unknown queue or state. CoordinatorUnavailable: no coordinator answers.
    """
    from labgang.launcher.job_filters import user_name, whose_jobs

    all_users, users = whose_jobs(all_users, users)
    users = tuple(dict.fromkeys(user_name(name) for name in users))
    user, queue = ",".join(users) or None, ",".join(queues) or None
    return _listed(client.jobs(all_users=all_users, user=user, queue=queue, states=states, view="full"), queues, states)


def unlisted_ids(
    client: "Client", wanted: "tuple[str, ...]", listed: "list[dict[str, Any]]"
) -> "tuple[list[str], list[str]]":
    """The ids ``queue -j LIST`` names that ``listed`` (its rows) does not show, asked of the coordinator
    one by one: ``(unknown, notes)``. ``unknown`` are the ids labgang has no job or array of (squeue's
    "Invalid job id specified"); ``notes`` one line each for a job that has finished
    (``job 5 has finished (succeeded); see `labgang show 5` or `labgang history` ``). A job that is
    active but filtered out (``-u``, ``-q``, ``-t``) gets neither.

    Raises:
        ApiError: a refusal other than 404. CoordinatorUnavailable: no coordinator answers.
    """
    shown = {str(j.get(key)) for j in listed for key in ("id", "array_id", "numeric_id") if j.get(key) is not None}
    unknown: list[str] = []
    notes: list[str] = []
    for job_id in dict.fromkeys(wanted):
        if job_id in shown:
            continue
        try:
            job, array = job_or_array(client, job_id)
        except ApiError as err:
            if err.status != 404:
                raise
            unknown.append(job_id)
            continue
        states = [str(j.get("state")) for j in ([job] if job is not None else (array or {}).get("jobs") or [])]
        if states and all(state in FINISHED_STATES for state in states):
            what = "has" if job is not None else f"is a job array whose {len(states)} tasks have all"
            ended = ", ".join(dict.fromkeys(states))
            notes.append(f"job {job_id} {what} finished ({ended}); see `labgang show {job_id}` or `labgang history`")
    return unknown, notes


def _listed(
    jobs: "list[dict[str, Any]]", queues: "tuple[str, ...]", states: "tuple[str, ...]"
) -> "list[dict[str, Any]]":
    """``jobs`` as ``queue`` lists them: :func:`active_jobs` of these queues and in these states only
    (the coordinator filters already; one from before the filters does not)."""
    return [
        j
        for j in active_jobs(jobs)
        if (not queues or j.get("queue") in queues) and (not states or j.get("state") in states)
    ]


def _empty_notes(users: "tuple[str, ...]", queues: "tuple[str, ...]", states: "tuple[str, ...]") -> "list[str]":
    """Why ``queue`` with filters lists nothing, and where to look instead (as one line each)."""
    if not (users or queues or states):
        return []  # an empty queue is an empty table, as in squeue
    filters = (("user", users), ("queue", queues), ("state", states))
    wanted = " and ".join(f"{name} {','.join(values)}" for name, values in filters if values)
    notes = [f"no active job matches {wanted}; finished jobs are in `labgang history`"]
    notes += [f"there is no user {user!r} on this machine" for user in users if not _known_user(user)]
    return notes


def _known_user(name: str) -> bool:
    import pwd  # built into the interpreter: no file to read

    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def add_pitfalls(client: "Client", job: "dict[str, Any]") -> None:
    """Set ``pitfalls`` on ``job``: the coordinator's current pitfall findings about it
    (``GET /v1/pitfalls?job=ID``, the same ones `labgang top` and /metrics show); left unset
    when the coordinator is too old to have them."""
    try:
        job["pitfalls"] = client.pitfalls(str(job["id"])).get("findings", [])
    except ApiError as err:
        if err.status != 404:
            raise


def start_failures(job: "dict[str, Any]") -> "list[dict[str, Any]]":
    """The ranks of the JobView ``job`` whose command could not be executed: exit status 126 (not
    executable) or 127 (no such file), whose log then holds only the reason (:func:`start_error`)."""
    return [
        rank
        for rank in job.get("ranks") or []
        if rank.get("exit_status") in START_FAILURE_STATUSES and isinstance(rank.get("rank"), int)
    ]


def start_error(head: bytes) -> "str | None":
    """The reason a rank could not start, from the first bytes of its log (``b"[labgang] cannot start
    'x': No such file or directory\\n"`` -> ``"cannot start 'x': No such file or directory"``), or
    None when the log does not begin with the line the rank's small parent writes then."""
    if not head.startswith(START_FAILURE_PREFIX):
        return None
    return head.split(b"\n", 1)[0].removeprefix(b"[labgang] ").decode(errors="replace")


def add_start_errors(client: "Client", job: "dict[str, Any]") -> None:
    """Set ``start_error`` on each rank of ``job`` whose command could not be executed.

    Such a rank exits 127 (no such file) or 126 (not executable) and its log holds only the reason;
    ``show`` reads that first line so the user sees it without `logs` (the coordinator's
    ``GET /v1/jobs/{id}?view=text`` does the same: launcher/coordinator/detail_view.py).

    Args:
        client: the coordinator client.
        job: a JobView dict; its ``ranks`` entries gain ``start_error`` (``"cannot start 'x': No such
            file or directory"``).
    """
    for rank in start_failures(job):
        try:
            head = client.logs(str(job["id"]), rank=rank["rank"], offset=0).data[:4096]
        except ApiError:
            continue
        found = start_error(head)
        if found is not None:
            rank["start_error"] = found


def active_jobs(jobs: "list[dict[str, Any]]") -> "list[dict[str, Any]]":
    """The jobs ``queue`` lists: not finished, in submission order (then by id)."""

    def key(job: "dict[str, Any]") -> "tuple[float, tuple[int, Any]]":
        text = str(job.get("id"))
        head, _, index = text.partition("_")  # an array's tasks in index order: 12_9 before 12_10
        if head.isdigit() and (not index or index.isdigit()):
            return (job.get("submit_time") or 0.0, (0, (int(head), int(index or -1))))
        return (job.get("submit_time") or 0.0, (1, text))

    return sorted((j for j in jobs if j.get("state") not in FINISHED_STATES), key=key)


def cancel_jobs(client: "Client", job_ids: "list[str] | tuple[str, ...]") -> "Iterator[tuple[str, int]]":
    """Cancel each of ``job_ids`` once (``cancel 17 17`` acts on job 17 once), in order.

    Yields:
        ``(line, status)`` per job: ``status`` 0 with a line for standard output
        (``"job 3: cancelled"``, ``"job 3: already succeeded"``), or the refusal's exit status
        (1 or 2) with a one-line message for standard error that names the job once.

    Raises:
        CoordinatorUnavailable: no coordinator answers (from the client).
    """
    asked = list(dict.fromkeys(job_ids))
    tasks_of: dict[str, int] = {}  # tasks asked for per array (a task list, 12_[0-9], names several)
    for job_id in asked:
        array_id, task, _ = job_id.partition("_")
        if task:
            tasks_of[array_id] = tasks_of.get(array_id, 0) + 1
    no_array: set[str] = set()  # arrays found not to exist: their other tasks named in one line already
    for job_id in asked:
        array_id, _, index = job_id.partition("_")
        if index and array_id in no_array:
            continue
        try:
            try:
                before = client.job(job_id, view="queue")  # its id and state: a row, a third of a JobView to read
            except ApiError as err:
                if err.status == 404 and index.isdigit() and array_id.isdigit() and tasks_of[array_id] > 1:
                    missing = _missing_array(client, array_id)
                    if missing is not None:  # `cancel 12_[0-2000]` of no array: one line, not 2,001
                        no_array.add(array_id)
                        yield missing, 1
                        continue
                if err.status != 404 or not job_id.isdigit():
                    raise
                yield _cancel_array(client, job_id, err), 0
                continue
            job = before if before["state"] in FINISHED_STATES else client.cancel(job_id)
        except ApiError as err:
            from labgang.launcher.cli.plumbing import describe_api_error  # only on refusals

            failure = describe_api_error(err)
            # Name the job once: "job 3 belongs to root", not "job 3: job 3 belongs to root".
            text = failure.message
            if not text.startswith((f"job {job_id} ", f"job {job_id}:", f"no job {job_id}", f"no job {job_id!r}")):
                text = f"job {job_id}: {text}"
            yield text, failure.exit_code
            continue
        yield f"job {job['id']}: {'already ' if job is before else ''}{job['state']}", 0


def _missing_array(client: "Client", array_id: str) -> "str | None":
    """For a task of ``array_id`` the coordinator does not know: the one line saying there is no such
    array (``no job array 12``, or ``job 19 is not a job array`` when 19 is a plain job), or None when
    the array exists (then only that task is missing, and is named on its own).

    Raises:
        ApiError: a refusal other than "not found".
    """
    try:
        client.array(array_id)
        return None
    except ApiError as err:
        if err.status != 404:
            raise
    try:
        client.job(array_id, view="queue")
    except ApiError as err:
        if err.status != 404:
            raise
        return f"no job array {array_id}"
    return f"job {array_id} is not a job array"


def _cancel_array(client: "Client", array_id: str, not_a_job: "ApiError") -> str:
    """Cancel every task of array ``array_id`` and summarise: ``array 12: 95 cancelled, 3
    terminating, 2 already finished``.

    Raises:
        ApiError: ``not_a_job`` when there is no such array either; a refusal of the cancel.
    """
    try:
        reply = client.cancel_array(array_id)
    except ApiError as err:
        raise not_a_job if err.status == 404 else err from None
    counts: dict[str, int] = {}
    for job in reply.get("jobs") or []:
        counts[str(job.get("state"))] = counts.get(str(job.get("state")), 0) + 1
    parts = [f"{n} {state}" for state, n in sorted(counts.items())]
    if reply.get("finished"):
        parts.append(f"{reply['finished']} already finished")
    return f"array {array_id}: {', '.join(parts) or 'no tasks'}"


def job_or_array(client: "Client", job_id: str) -> "tuple[dict[str, Any] | None, dict[str, Any] | None]":
    """What ``show JOB`` and ``logs JOB`` name: ``(JobView, None)`` for a job (a task of a job array
    also by its own numeric id), or ``(None, {"array": ID, "jobs": [task JobViews]})`` when ``job_id``
    is a job array's id.

    Raises:
        ApiError: the job's refusal (404 ``no job 12``) when it is neither a job nor an array.
    """
    try:
        return client.job(job_id), None
    except ApiError as err:
        if err.status != 404 or not job_id.isdigit():
            raise
        try:
            return None, client.array(job_id)
        except ApiError as array_err:
            raise err if array_err.status == 404 else array_err from None


def array_logs_note(array_id: str, tasks: "list[dict[str, Any]]") -> str:
    """What ``logs ARRAY`` says on stderr before printing its first task's output: ``12 is a job
    array with tasks 12_[0-9]; showing 12_0 (name a task, as in 12_1, for another's)``."""
    from labgang.launcher.arrays import fold

    indices = fold(int(t["array_index"]) for t in tasks if t.get("array_index") is not None)
    first = tasks[0]["id"]
    other = f", as in {tasks[1]['id']}," if len(tasks) > 1 else ""
    return (
        f"{array_id} is a job array with tasks {array_id}_[{indices}]; "
        f"showing {first} (name a task{other} for another's)"
    )
