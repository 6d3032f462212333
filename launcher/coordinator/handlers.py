"""The user API operations, written once and served two ways: as aiohttp routes (Unix
socket, read-only TCP) and as requests an agent forwards over its link.

Each operation takes the coordinator's parts it uses (the ``JobOperations`` desk, the
``JobViews``, the configuration, the store, the agent registry...), then the :class:`Caller`, the
path parameters, the query and the raw body, and returns a :class:`Reply`. :data:`ROUTES` says,
for each route, which parts of the :class:`~labgang.launcher.coordinator.core.Coordinator` its
operation is bound to (:meth:`Route.bind`): the one place where the parts are picked. Handlers
stay thin: the rules live in the parts.
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Protocol

from labgang.launcher import job_filters
from labgang.launcher.accounting import REPORT_GROUPS
from labgang.launcher.api import jsoncodec
from labgang.launcher.coordinator import arrays, detail_view, stdin_relay, terminal, verbs, views
from labgang.launcher.coordinator import drains as drain_ops
from labgang.launcher.coordinator.errors import BadRequest, NotFound, PayloadTooLarge
from labgang.launcher.coordinator.private_processes import hide_commands

if TYPE_CHECKING:
    from labgang.launcher.config.cluster import ClusterConfig
    from labgang.launcher.coordinator.agents import AgentRegistry
    from labgang.launcher.coordinator.core import Coordinator
    from labgang.launcher.coordinator.drains import NodeDrains
    from labgang.launcher.coordinator.job_operations import JobOperations
    from labgang.launcher.coordinator.job_views import JobViews
    from labgang.launcher.coordinator.pitfall_watch import PitfallWatch
    from labgang.launcher.coordinator.requests import Caller
    from labgang.launcher.coordinator.store import JobRecord, Store


@dataclass
class Reply:
    """An operation's answer: JSON (``payload``, or ``encoded`` when already encoded, or
    ``pieces`` when already encoded in pieces to be sent one after the other: a ``GET /v1/jobs``
    page), or bytes (``body``, text/plain), plus headers."""

    status: int = 200
    payload: Any = None
    body: bytes | None = None
    encoded: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    pieces: list[bytes] | None = None


Handler = Callable[["Caller", Mapping[str, str], Mapping[str, str], bytes], Awaitable[Reply]]
"""An operation bound to its parts: ``(caller, path parameters, query, body) -> Reply``."""

BoundRoutes = Mapping[tuple[str, str], Handler]
"""Every route's operation bound to its parts, by ``(method, path template)`` (e.g. ``("GET",
"/v1/jobs/{id}")``): :func:`bind_routes`, built once at startup; what the socket, TCP and
forwarded requests are served from."""


@dataclass(frozen=True)
class Route:
    """One user API route: ``method`` and ``path`` (aiohttp template, e.g. ``/v1/jobs/{id}``).

    ``operation`` is the function that serves it (its docstring documents the route); ``parts``
    binds it to the coordinator's parts it uses (a closure over ``Coordinator``'s read-only
    parts), so that its signature shows what it touches."""

    method: str
    path: str
    name: str
    operation: Callable[..., Awaitable[Reply]]
    parts: Callable[[Coordinator], Handler]
    writes: bool = False

    def bind(self, coord: Coordinator) -> Handler:
        """This route's operation bound to ``coord``'s parts it uses."""
        return self.parts(coord)

    @property
    def pattern(self) -> re.Pattern[str]:
        return re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", self.path) + "$")


def _flag(query: Mapping[str, str], name: str) -> bool:
    return query.get(name, "").lower() in ("1", "true", "yes")


def _int(query: Mapping[str, str], name: str, default: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(f"{name} must be an integer, got {raw!r}", field=name) from None


def _json_body(body: bytes) -> Any:
    if not body:
        raise BadRequest("the request body must be a JSON object")
    try:
        return jsoncodec.loads(body)
    except ValueError as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from None


async def submit(
    config: ClusterConfig,
    desk: JobOperations,
    job_views: JobViews,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/jobs``: submit a gang job (at most ``limits.max_spec_bytes`` of JSON). Answers 201
    ``{"job": JobView}`` (of an array's first task) and ``Location``: ``/v1/jobs/ID``, or an array's
    ``/v1/arrays/ID``, so that ``labgang submit`` prints the id without reading the JobView."""
    limit = config.limits.max_spec_bytes
    if len(body) > limit:
        raise PayloadTooLarge(
            f"the job spec is {len(body)} bytes; at most {limit} bytes are allowed (limits.max_spec_bytes)"
        )
    job = await desk.submit(caller, _json_body(body))
    view = job_views.job_view(caller, job)
    array_id = view.get("array_id")
    location = f"/v1/arrays/{array_id}" if array_id else f"/v1/jobs/{view['id']}"
    return Reply(201, {"job": view}, headers={"Location": location})


_VIEWS = ("full", "queue", "table", "text")


def _list_param(query: Mapping[str, str], name: str) -> tuple[str, ...]:
    """The items of a comma-separated query parameter (``user=a,b``); () when it is absent or ``""``.

    Raises:
        BadRequest: the parameter holds only commas and spaces.
    """
    raw = query.get(name) or ""
    if not raw:
        return ()
    try:
        return tuple(dict.fromkeys(job_filters.items(raw)))
    except ValueError as err:
        raise BadRequest(f"{name}: {err}", field=name) from None


def _job_filter(
    config: ClusterConfig, jobs: Mapping[str, JobRecord], query: Mapping[str, str]
) -> Callable[[JobRecord], bool] | None:
    """The ``queue=Q[,Q...]`` and ``state=S[,S...]`` filters of ``GET /v1/jobs`` as one test,
    or None when neither is given. A state is a JobState value or its Slurm code
    (:data:`labgang.launcher.job_filters.STATE_CODES`), any case.

    Raises:
        BadRequest: a queue that is neither in the configuration nor the queue of a job in memory
            (jobs stay in a queue removed from the configuration until they finish), or a state that
            is neither a JobState value nor a code (the message quotes it as sent).
    """
    queues = frozenset(_list_param(query, "queue"))
    configured = [q.name for q in config.queues]
    if not queues.issubset(configured):  # the jobs in memory (``jobs``) are read only then
        allowed = configured + sorted({job.spec.queue for job in jobs.values()} - set(configured))
        unknown = [name for name in _list_param(query, "queue") if name not in allowed]
        if unknown:
            raise BadRequest(f"no queue {unknown[0]!r}; allowed: {', '.join(allowed)}", field="queue", allowed=allowed)
    states = _states(query)
    if not queues and not states:
        return None
    return lambda job: (not queues or job.spec.queue in queues) and (not states or job.status.state.value in states)


def _states(query: Mapping[str, str]) -> frozenset[str]:
    """The states of ``state=S[,S...]`` (names or codes, any case); empty when not given.

    Raises:
        BadRequest: an item that is not a state.
    """
    try:
        return frozenset(job_filters.job_state(item) for item in _list_param(query, "state"))
    except ValueError as err:
        raise BadRequest(
            str(err), field="state", allowed=[*job_filters.STATE_NAMES, *job_filters.STATE_CODES]
        ) from None


class JobListing(Protocol):
    """``JobOperations.list_jobs``: the jobs in memory in submission order, the caller's own by default."""

    def __call__(
        self, caller: Caller, *, all_users: bool = False, user: str | None = None, after: int = 0
    ) -> Iterator[JobRecord]: ...


def _listed(list_jobs: JobListing, caller: Caller, query: Mapping[str, str], after: int = 0) -> Iterator[JobRecord]:
    """The jobs of ``user=NAME[,NAME...]`` (default: the caller's own; ``all=1``: everyone's),
    in submission order, submitted after sequence number ``after``."""
    users = _list_param(query, "user")
    if len(users) > 1:
        wanted = frozenset(users)
        return (job for job in list_jobs(caller, all_users=True, after=after) if job.spec.user in wanted)
    return iter(list_jobs(caller, all_users=_flag(query, "all"), user=users[0] if users else None, after=after))


async def list_jobs(
    config: ClusterConfig,
    desk: JobOperations,
    job_views: JobViews,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/jobs?all=1&user=U[,U]&queue=Q[,Q]&state=S[,S]&limit=N&cursor=C&view=full|queue|table``:
    the caller's jobs, those of the given users, or all (only those of the given queues, only those
    in the given states: :func:`_job_filter`), in submission order, one page at a time.

    ``view=queue`` lists each job as :func:`labgang.launcher.coordinator.views.queue_row` (the
    fields ``labgang queue``'s table reads, no ``argv``: the same to every caller); the default,
    ``full``, as whole JobViews. ``view=table`` answers ``{"table": TEXT, "jobs": N}``: the
    ``labgang queue`` table of the N jobs that are not finished, in submission order
    (:mod:`labgang.launcher.coordinator.table_view`), rendered here so that the command only
    prints it (docs/cli-startup.md); it is one answer, without ``limit`` or ``cursor``.
    ``view=text`` is the same table as the body itself (``text/plain``, UTF-8) and N in the
    ``X-Jobs-Listed`` header: what ``labgang queue`` asks for, so that it prints the text without
    reading a JSON string of 1,000 lines first.

    A page holds at most ``limit`` jobs (default and maximum: ``limits.page_size``) and
    about ``limits.max_page_bytes`` of JSON (at least one job);
    ``next_cursor`` is given when more jobs follow: pass it as ``cursor`` for the next page
    (it is the last job's submission sequence number, so jobs submitted meanwhile are not
    skipped and none is seen twice).

    Raises:
        BadRequest: a bad ``view``, ``limit``, ``cursor``, ``queue`` or ``state``.
    """
    page_size = config.limits.page_size
    shape = query.get("view") or "full"
    if shape not in _VIEWS:
        raise BadRequest(f"view must be one of {', '.join(_VIEWS)}; got {shape!r}", field="view", allowed=list(_VIEWS))
    keep = _job_filter(config, desk.jobs, query)
    if shape in ("table", "text"):
        for name in ("limit", "cursor"):
            if query.get(name):
                raise BadRequest(f"view={shape} lists every job in one answer; {name} is not taken with it", field=name)
        text, count = job_views.table(_listed(desk.list_jobs, caller, query), desk.clock(), keep, len(desk.jobs))
        if shape == "text":
            return Reply(200, body=text.encode(), headers={"X-Jobs-Listed": str(count)})
        return Reply(200, {"table": text, "jobs": count})
    limit = _int(query, "limit", page_size)
    if not 1 <= limit <= page_size:
        raise BadRequest(f"limit must be from 1 to {page_size} (limits.page_size), got {limit}", field="limit")
    after = _int(query, "cursor", 0)
    jobs = _listed(desk.list_jobs, caller, query, after)
    if keep is not None:
        jobs = (job for job in jobs if keep(job))
    # Each job's view is encoded once and reused until the job changes (job_views.py, view_cache.py).
    page_shape: Literal["full", "queue"] = "queue" if shape == "queue" else "full"
    pieces = job_views.page(caller, jobs, page_shape, limit, config.limits.max_page_bytes, len(desk.jobs))
    return Reply(200, pieces=pieces)


_JOB_VIEWS = ("full", "queue", "text")
"""The shapes ``GET /v1/jobs/{id}`` answers in (``view=``)."""


async def get_job(
    desk: JobOperations,
    job_views: JobViews,
    watch: PitfallWatch | None,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/jobs/{id}[?view=full|queue|text&tz=TZ]``: ``{"job": JobView}``.

    ``view=queue``: the job as ``GET /v1/jobs?view=queue`` lists it (a row of ``labgang queue``'s
    table, :func:`labgang.launcher.coordinator.views.queue_row`), what ``labgang cancel`` reads to
    tell a finished job from one to cancel.

    ``view=text`` answers the ``labgang show`` text itself (``text/plain``, UTF-8; a lone surrogate,
    which submissions refuse but an older store may hold, as ``surrogatepass`` writes it), rendered
    here with the job's pitfall findings and its ranks' start errors
    (:mod:`labgang.launcher.coordinator.detail_view`), so that the command only prints it; ``tz`` is
    the command's ``TZ`` variable (empty: unset), and where it is not the coordinator's (rank
    START/END are local times) the answer is the JobView, as for ``view=full``.

    Raises:
        BadRequest: a ``view`` other than ``full``, ``queue`` or ``text``. NotFound: no such job.
    """
    shape = query.get("view") or "full"
    if shape not in _JOB_VIEWS:
        raise BadRequest(
            f"view must be one of {', '.join(_JOB_VIEWS)}; got {shape!r}", field="view", allowed=list(_JOB_VIEWS)
        )
    job = desk.get_job(params["id"])
    if shape == "queue":
        return Reply(200, {"job": views.queue_row(job)})
    view = job_views.job_view(caller, job)
    if shape == "text" and detail_view.same_zone(query.get("tz", "")):
        text = await detail_view.job_text(desk, watch, caller, view, desk.clock())
        return Reply(200, body=text.encode("utf-8", "surrogatepass"))
    return Reply(200, {"job": view})


async def cancel_job(
    desk: JobOperations,
    job_views: JobViews,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/jobs/{id}/cancel``: own jobs; admins any."""
    job = await desk.cancel(caller, params["id"])
    return Reply(200, {"job": job_views.job_view(caller, job)})


async def hold_job(
    desk: JobOperations,
    job_views: JobViews,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/jobs/{id}/hold``: hold a pending job (own jobs; admins any); answers its JobView."""
    job = await verbs.hold(desk, caller, params["id"])
    return Reply(200, {"job": job_views.job_view(caller, job)})


async def release_job(
    desk: JobOperations,
    job_views: JobViews,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/jobs/{id}/release``: release a held job (an admin hold: admins only)."""
    job = await verbs.release(desk, caller, params["id"])
    return Reply(200, {"job": job_views.job_view(caller, job)})


async def requeue_job(
    desk: JobOperations,
    job_views: JobViews,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/jobs/{id}/requeue`` (body ``{"hold": bool}``, optional): stop an admitted or
    running job with its grace and put it back in its queue."""
    job = await verbs.requeue(desk, caller, params["id"], _json_body(body) if body else None)
    return Reply(200, {"job": job_views.job_view(caller, job)})


async def update_job(
    config: ClusterConfig,
    store: Store,
    desk: JobOperations,
    job_views: JobViews,
    active: Mapping[str, JobRecord],
    recent: Mapping[str, JobRecord],
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/jobs/{id}/update`` (body: any of ``priority``, ``time_limit_s``, ``name``,
    ``dependency``, ``queue``): change a job as ``scontrol update`` does; answers its JobView."""
    job = await verbs.update(
        desk,
        caller,
        params["id"],
        _json_body(body),
        config=config,
        store=store,
        active=active,
        recent=recent,
        check_moved=desk.check_moved,
    )
    return Reply(200, {"job": job_views.job_view(caller, job)})


async def pty_input(
    agents: AgentRegistry,
    desk: JobOperations,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/jobs/{id}/pty`` (body ``{"data": base64, "rows", "cols"}``): terminal input for rank 0
    of a ``--pty`` job (``labgang run --pty``); answers ``{"taken": bool}``."""
    return Reply(200, await terminal.pty_input(agents, desk.get_job, caller, params["id"], _json_body(body)))


async def stdin_input(
    agents: AgentRegistry,
    desk: JobOperations,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/jobs/{id}/stdin`` (body ``{"data": base64, "eof": bool}``): the next bytes of rank 0's
    standard input (``labgang run``'s, streamed); answers ``{"taken", "eof", "open"}``."""
    return Reply(200, await stdin_relay.stdin_input(agents, desk.get_job, caller, params["id"], _json_body(body)))


async def cancel_array(
    desk: JobOperations,
    job_views: JobViews,
    store: Store,
    active: Mapping[str, JobRecord],
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/arrays/{id}/cancel``: cancel every unfinished task of a job array (docs/arrays.md).

    Answers ``{"array": ID, "jobs": [JobView of each task that was not finished], "finished": N}``
    (N tasks had already finished)."""
    jobs, finished = await arrays.cancel_array(desk, store, desk.jobs, active, caller, params["id"])
    return Reply(
        200, {"array": params["id"], "jobs": [job_views.job_view(caller, job) for job in jobs], "finished": finished}
    )


async def get_array(
    store: Store,
    jobs: Mapping[str, JobRecord],
    job_views: JobViews,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/arrays/{id}``: every task of a job array, in index order (docs/arrays.md).

    Answers ``{"array": ID, "jobs": [JobView of each task]}``; 404 when ``id`` is no array."""
    tasks = arrays.array_tasks(store, jobs, params["id"])
    return Reply(200, {"array": params["id"], "jobs": [job_views.job_view(caller, job) for job in tasks]})


async def job_logs(
    desk: JobOperations,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/jobs/{id}/logs?rank=R&offset=N[&attempt=A][&stream=stdout|stderr][&follower=F]``: bytes
    from the agent that holds the log; ``stream`` keeps one of the rank's streams (offsets stay the whole
    log's, logical across its rotation); ``follower=F``: ``labgang run`` follows it live and has still to
    read it from offset F (the log's rotation waits for it). Headers: ``X-Next-Offset``, ``X-Attempt``
    (the attempt whose log was read), ``X-Lost-Bytes`` (bytes from ``offset`` on that rotation discarded
    unread, when not 0), ``X-Job-Finished: 1`` at the end."""
    attempt = query.get("attempt")
    stream = query.get("stream") or None
    if stream not in (None, "stdout", "stderr"):
        allowed = ["stdout", "stderr"]
        raise BadRequest(f"stream must be stdout or stderr, got {stream!r}", field="stream", allowed=allowed)
    data, next_offset, finished, read, lost = await desk.read_log_of_attempt(
        caller,
        params["id"],
        _int(query, "rank", 0),
        _int(query, "offset", 0),
        None if attempt in (None, "") else _int(query, "attempt", 0),
        stream=stream,
        follower=_int(query, "follower", 0) if query.get("follower") else None,
    )
    headers = {"X-Next-Offset": str(next_offset), "X-Attempt": str(read)}
    if lost:
        headers["X-Lost-Bytes"] = str(lost)
    if finished:
        headers["X-Job-Finished"] = "1"
    return Reply(200, body=data, headers=headers)


def _seconds(query: Mapping[str, str], name: str) -> float | None:
    raw = query.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = float(raw)
    except ValueError:
        raise BadRequest(f"{name} must be unix seconds, got {raw!r}", field=name) from None
    if not math.isfinite(value):
        raise BadRequest(f"{name} must be a finite number of unix seconds, got {raw!r}", field=name)
    return value


_HISTORY_ID = re.compile(r"[0-9]{1,18}(_[0-9]{1,9})?")
"""A job id ``GET /v1/history``'s ``jobs`` takes: a job or array (``12``) or an array task (``12_3``)."""


async def history(
    desk: JobOperations,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/history?user=NAME|all&queue=Q&state=S,S&since=T&until=T&limit=N&attempts=1&jobs=ID,ID``:
    finished and current jobs from the store, oldest first (without ``user``: every user's for an
    admin, else the caller's own; any caller may name another user or ``all``); ``jobs`` keeps
    those jobs only, an array id naming its tasks (``sacct -j``); a state is a
    JobState value or its Slurm code, any case (:func:`_states`). Totals come from the jobs'
    attempt records; ``attempts=1`` also lists each attempt. ``user`` in the answer is the user
    filter in force: a name, or "all"."""
    states = tuple(sorted(_states(query), key=job_filters.STATE_NAMES.index))
    limit = _int(query, "limit", 1000)
    if not 1 <= limit <= 100_000:
        raise BadRequest(f"limit must be 1..100000, got {limit}", field="limit")
    asked_user = query.get("user") or None
    ids = tuple(dict.fromkeys(i.strip() for i in (query.get("jobs") or "").split(",") if i.strip()))
    bad = next((i for i in ids if not _HISTORY_ID.fullmatch(i)), None)
    if bad is not None:
        raise BadRequest(f"jobs: {bad!r} is not a job id; allowed: 12, 12_3 (a job or an array task)", field="jobs")
    jobs = await desk.history(
        caller,
        user=asked_user,
        queue=query.get("queue") or None,
        states=states,
        since=_seconds(query, "since"),
        until=_seconds(query, "until"),
        limit=limit,
        ids=ids,
    )
    now = desk.clock()
    per_attempt = _flag(query, "attempts")
    records = await desk.attempts_of(jobs)
    whose = caller.history_user(asked_user)  # what desk.history applied (it raised if refused)
    return Reply(
        200,
        {
            "jobs": [views.history_view(j, now, records.get(j.id, []), per_attempt=per_attempt) for j in jobs],
            "user": "all" if whose is None else whose,
        },
    )


async def report(
    desk: JobOperations,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/report?by=user|queue|team&since=T&until=T``: GPU-hours allocated and used per
    user, queue or team over the window, from the attempt records (``labgang report``). Every
    caller may read it: it names users and sums, never commands or environments."""
    group = query.get("by") or "user"
    if group not in REPORT_GROUPS:
        raise BadRequest(
            f"by must be one of {', '.join(REPORT_GROUPS)}, got {group!r}", field="by", allowed=list(REPORT_GROUPS)
        )
    since, until = _seconds(query, "since"), _seconds(query, "until")
    if since is not None and until is not None and since > until:
        raise BadRequest("since must not be later than until", field="since")
    return Reply(200, await desk.report(group=group, since=since, until=until))


async def list_queues(
    config: ClusterConfig,
    queue_views: Callable[[], list[dict[str, Any]]],
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/queues``: nominal, used, borrowed, lent per queue; ``caller_may_submit``: whether the
    caller may submit to it (``submitters``, or an admin)."""
    queues = []
    for view in queue_views():
        queue = config.queue(view["name"])
        allowed = queue is not None and config.may_use_queue(queue, caller.user, caller.groups)
        queues.append({**view, "caller_may_submit": allowed})
    return Reply(200, {"queues": queues})


async def list_nodes(
    config: ClusterConfig,
    node_views: Callable[[], list[dict[str, Any]]],
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/nodes``: nodes with inventory and per-device state; with ``private_data``, the
    command lines of other users' device processes are null unless the caller is an admin."""
    nodes = node_views()
    if config.private_data and not caller.admin:
        nodes = [hide_commands(n, caller.user) for n in nodes]
    return Reply(200, {"nodes": nodes})


async def drain_node(
    drains: NodeDrains,
    agents: AgentRegistry,
    clock: Callable[[], float],
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/nodes/{node}/drain`` with ``{"reason": str}`` (admins): no new job is placed on the
    node, its running jobs run on; answers ``{"node", "drain": {reason, by, since}}``."""
    doc = _json_body(body)
    if not isinstance(doc, dict) or set(doc) - {"reason"}:
        raise BadRequest('the request body must be {"reason": TEXT}', field="reason", allowed=["reason"])
    drain = await drain_ops.drain_node(drains, agents.nodes, caller, params["node"], doc.get("reason"), clock())
    return Reply(200, {"node": params["node"], "drain": drain.to_dict()})


async def resume_node(
    drains: NodeDrains,
    agents: AgentRegistry,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``POST /v1/nodes/{node}/resume`` (admins): the drained node is offered to jobs again;
    answers ``{"node", "drain": null, "ended": {reason, by, since}}`` (the drain that ended)."""
    ended = await drain_ops.resume_node(drains, agents.nodes, caller, params["node"])
    return Reply(200, {"node": params["node"], "drain": None, "ended": ended.to_dict()})


async def get_version(
    version: str,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/version``: the coordinator's version and who the caller is."""
    return Reply(200, {"version": version, "api": "v1", "user": caller.user, "uid": caller.uid, "admin": caller.admin})


async def list_pitfalls(
    watch: PitfallWatch | None,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/pitfalls[?job=ID]``: the pitfall watch's current findings, allocation rate and thresholds."""
    if watch is None:
        return Reply(200, {"findings": [], "allocation_rate_pct": None, "sampled_at": None, "thresholds": {}})
    return Reply(200, watch.view(query.get("job") or None))


async def device_series(
    watch: PitfallWatch | None,
    caller: Caller,
    params: Mapping[str, str],
    query: Mapping[str, str],
    body: bytes,
) -> Reply:
    """``GET /v1/series[?seconds=S&device=UUID[,UUID]]``: each device's recent utilization, SM activity and
    memory (the pitfall watch's samples, every 2 s) and when pitfalls fired, for ``labgang top``'s graphs."""
    raw = query.get("seconds") or None
    try:
        seconds = None if raw is None else float(raw)
    except ValueError:
        seconds = math.nan
    if seconds is not None and not 0 < seconds <= 86400:  # also refuses nan
        raise BadRequest(f"seconds must be a number of seconds in (0, 86400], got {raw!r}", field="seconds")
    uuids = [u for u in (query.get("device") or "").split(",") if u] or None
    if watch is None:
        return Reply(200, {"window_s": 0.0, "devices": [], "markers": []})
    return Reply(200, watch.series.view(seconds, uuids).to_dict())


ROUTES: tuple[Route, ...] = (
    Route("POST", "/v1/jobs", "submit", submit, lambda c: partial(submit, c.config, c.desk, c.views), writes=True),
    Route("GET", "/v1/jobs", "list_jobs", list_jobs, lambda c: partial(list_jobs, c.config, c.desk, c.views)),
    Route("GET", "/v1/jobs/{id}", "get_job", get_job, lambda c: partial(get_job, c.desk, c.views, c.pitfalls)),
    Route(
        "POST",
        "/v1/jobs/{id}/cancel",
        "cancel_job",
        cancel_job,
        lambda c: partial(cancel_job, c.desk, c.views),
        writes=True,
    ),
    Route(
        "POST", "/v1/jobs/{id}/hold", "hold_job", hold_job, lambda c: partial(hold_job, c.desk, c.views), writes=True
    ),
    Route(
        "POST",
        "/v1/jobs/{id}/release",
        "release_job",
        release_job,
        lambda c: partial(release_job, c.desk, c.views),
        writes=True,
    ),
    Route(
        "POST",
        "/v1/jobs/{id}/requeue",
        "requeue_job",
        requeue_job,
        lambda c: partial(requeue_job, c.desk, c.views),
        writes=True,
    ),
    Route(
        "POST",
        "/v1/jobs/{id}/update",
        "update_job",
        update_job,
        lambda c: partial(update_job, c.config, c.store, c.desk, c.views, c.model.jobs, c.recent),
        writes=True,
    ),
    Route(
        "POST", "/v1/jobs/{id}/pty", "pty_input", pty_input, lambda c: partial(pty_input, c.agents, c.desk), writes=True
    ),
    Route(
        "POST",
        "/v1/jobs/{id}/stdin",
        "stdin_input",
        stdin_input,
        lambda c: partial(stdin_input, c.agents, c.desk),
        writes=True,
    ),
    Route("GET", "/v1/jobs/{id}/logs", "job_logs", job_logs, lambda c: partial(job_logs, c.desk)),
    Route("GET", "/v1/arrays/{id}", "get_array", get_array, lambda c: partial(get_array, c.store, c.jobs, c.views)),
    Route(
        "POST",
        "/v1/arrays/{id}/cancel",
        "cancel_array",
        cancel_array,
        lambda c: partial(cancel_array, c.desk, c.views, c.store, c.model.jobs),
        writes=True,
    ),
    Route("GET", "/v1/history", "history", history, lambda c: partial(history, c.desk)),
    Route("GET", "/v1/report", "report", report, lambda c: partial(report, c.desk)),
    Route("GET", "/v1/queues", "list_queues", list_queues, lambda c: partial(list_queues, c.config, c.queue_views)),
    Route("GET", "/v1/nodes", "list_nodes", list_nodes, lambda c: partial(list_nodes, c.config, c.node_views)),
    Route(
        "POST",
        "/v1/nodes/{node}/drain",
        "drain_node",
        drain_node,
        lambda c: partial(drain_node, c.drains, c.agents, c.clock),
        writes=True,
    ),
    Route(
        "POST",
        "/v1/nodes/{node}/resume",
        "resume_node",
        resume_node,
        lambda c: partial(resume_node, c.drains, c.agents),
        writes=True,
    ),
    Route("GET", "/v1/version", "get_version", get_version, lambda c: partial(get_version, c.version)),
    Route("GET", "/v1/pitfalls", "list_pitfalls", list_pitfalls, lambda c: partial(list_pitfalls, c.pitfalls)),
    Route("GET", "/v1/series", "device_series", device_series, lambda c: partial(device_series, c.pitfalls)),
)


def bind_routes(coord: Coordinator) -> dict[tuple[str, str], Handler]:
    """Each route of :data:`ROUTES` bound to ``coord``'s parts (:meth:`Route.bind`), by ``(method,
    path template)``: the :data:`BoundRoutes` the application builds once, when it has started and
    every part is attached (the pitfall watch), so that serving a request never sees the coordinator."""
    return {(route.method, route.path): route.bind(coord) for route in ROUTES}


def match(method: str, path: str) -> tuple[Route, dict[str, str]]:
    """Find the route for a forwarded request.

    Raises:
        NotFound: no route has this method and path.
    """
    for route in ROUTES:
        m = route.pattern.match(path)
        if m and route.method == method.upper():
            return route, m.groupdict()
    raise NotFound(f"no route {method.upper()} {path}", allowed=[f"{r.method} {r.path}" for r in ROUTES])
