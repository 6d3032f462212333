"""Talk to the coordinator's user API: HTTP/JSON over the Unix socket ``<state_dir>/labgang.sock``.

Two clients with the same methods and errors:

- :class:`Client`, synchronous (HTTP/1.1 on an ``AF_UNIX`` socket, :mod:`labgang.launcher.api.wire`,
  one kept-alive connection): what every shell command uses; cheap to start (no ``http.client``,
  no event loop).
- :class:`labgang.launcher.api.async_client.AsyncClient`, on aiohttp's ``UnixConnector``: for
  async callers such as the TUI.

The coordinator learns who the caller is from the socket (``SO_PEERCRED``), so no
request carries a user. Errors come back as exceptions that the CLI turns into one
line: :class:`CoordinatorUnavailable` (nothing listens at the socket) and
:class:`ApiError` (the coordinator answered 4xx/5xx with ``{"error": {...}}``).
"""

import os
import sys
import time

from labgang.launcher.api.wire import RemoteClosed, UnixHTTPConnection, quote, urlencode

# Imported where used, not here (each module costs a fresh interpreter about 0.3M instructions,
# docs/cli-startup.md): launcher/api/jsontext.py, only for a JSON body (`show` and `queue` get text);
# agent/paths.py and launcher/api/discovery.py, only where no state directory is given.

# ``typing`` is for the type checker only: importing it costs a shell command ~2 ms
# (bench/cli_latency.py). Annotations that name what it imports are strings, and there is no
# ``from __future__ import annotations``: the module ``__future__`` costs a hot command 0.4M
# instructions (docs/cli-startup.md); tests/cli/test_quick.py checks that none loads it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path
    from typing import Any

DEFAULT_TIMEOUT_S = 30.0
# `labgang up` writes its pid here (beside the socket) while it starts, so that a command
# typed right after `labgang up &` waits for it instead of failing.
STARTING_MARKER = "up.starting"
STARTUP_WAIT_S = 60.0
MARKER_GRACE_S = 0.5
# labgang.agent.paths.SOCKET_NAME, here so that a command given its state directory does not load agent/paths.py
# (tests/cli/test_client_paths.py holds socket_file_for to paths.socket_file).
_SOCKET_NAME = "labgang.sock"
# sockaddr_un.sun_path is 108 bytes on Linux, one of them the terminating NUL.
_MAX_SOCKET_PATH = 107


class ClientError(Exception):
    """Base of the errors a coordinator client raises."""


class CoordinatorUnavailable(ClientError):
    """Nothing answers at the socket (no file, a stale file, or no permission).

    Attributes:
        socket_path: the socket that was tried.
    """

    def __init__(self, socket_path: "str | Path", detail: "str | None" = None) -> None:
        from labgang.launcher.api import discovery

        self.socket_path = socket_path
        if detail:
            message = f"cannot reach the labgang coordinator at {socket_path}: {detail}"
        else:  # what is true here: installed units, whose state directory (launcher/api/unanswered.py)
            from labgang.launcher.api.unanswered import unanswered_message

            message = unanswered_message(str(socket_path), system=discovery.is_system_socket(socket_path))
        super().__init__(message)


def never_delivered(err: CoordinatorUnavailable) -> bool:
    """True when the request that raised ``err`` never reached a coordinator: no socket file, a
    refused connection, or a write that failed (the peer was gone before the whole request was
    sent), so sending it again cannot act twice. False when the connection was cut after the request
    was sent (a POST may then have acted), and for any other cause."""
    return isinstance(err.__cause__, (FileNotFoundError, ConnectionRefusedError, BrokenPipeError))


class SystemConfigUnusable(CoordinatorUnavailable):
    """The system config (``/etc/labgang/system.toml``) cannot say where this machine's labgang is;
    the message is the problem, naming the file and the field."""

    def __init__(self, problem: str) -> None:
        from labgang.agent import paths

        ClientError.__init__(self, problem)
        self.socket_path = paths.SYSTEM_CONFIG


class ApiError(ClientError):
    """The coordinator refused a request.

    Attributes:
        status: the HTTP status (400 bad field, 403 not allowed, 404 unknown job,
            409 unschedulable; 5xx a coordinator fault).
        message: the coordinator's one-line explanation.
        field: the request field at fault (``"queue"``, ``"workers"``...), or None.
        allowed: what the field allows (a list, a range text, ...), or None.
    """

    # A plain class, not a dataclass: ``dataclasses`` imports ``inspect``, milliseconds that every
    # shell command would pay (bench/cli_latency.py).
    def __init__(self, status: int, message: str, field: "str | None" = None, allowed: "Any" = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.field = field
        self.allowed = allowed

    def __repr__(self) -> str:
        return f"ApiError({self.status!r}, {self.message!r}, {self.field!r}, {self.allowed!r})"

    def __str__(self) -> str:
        return self.message


class LogChunk:
    """A slice of one rank's output (equal to another with the same three values).

    Attributes:
        data: the bytes from the requested offset (may be empty).
        next_offset: the byte offset to ask for next.
        finished: True once the job has ended and the log is complete (no more bytes will come).
        attempt: the start attempt whose log this is (a requeue starts a new one, its log from
            offset 0), or None from a coordinator that does not say; not part of equality.
        lost: bytes from the requested offset on that the log's rotation discarded before they were
            read (``data`` starts that many bytes further on); 0 normally; not part of equality.
    """

    __slots__ = ("attempt", "data", "finished", "lost", "next_offset")

    def __init__(
        self, data: bytes, next_offset: int, finished: bool, attempt: "int | None" = None, lost: int = 0
    ) -> None:
        self.data = data
        self.next_offset = next_offset
        self.finished = finished
        self.attempt = attempt
        self.lost = lost

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LogChunk):
            return NotImplemented
        return (self.data, self.next_offset, self.finished) == (other.data, other.next_offset, other.finished)

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it replaced

    def __repr__(self) -> str:
        return f"LogChunk(data={self.data!r}, next_offset={self.next_offset!r}, finished={self.finished!r})"


def socket_for(state_dir: "str | Path | None" = None) -> "Path":
    """The user API socket for ``state_dir`` (None: ``LABGANG_STATE_DIR``, else the system instance,
    else the user's own: :func:`labgang.launcher.api.discovery.find_socket_file`).

    Raises:
        SystemConfigUnusable: the system config names no usable state directory.
    """
    from pathlib import Path

    return Path(socket_file_for(state_dir))


def socket_file_for(state_dir: "str | Path | None" = None) -> str:
    """:func:`socket_for` as text (no pathlib import).

    Raises:
        SystemConfigUnusable: the system config names no usable state directory.
    """
    if state_dir is not None and str(state_dir) != "":  # discovery's first rule, without loading it
        return os.path.join(os.path.expanduser(os.fspath(state_dir)), _SOCKET_NAME)  # = paths.socket_file
    from labgang.launcher.api import discovery

    try:
        return discovery.find_socket_file(state_dir)
    except discovery.SystemConfigInvalid as exc:
        raise SystemConfigUnusable(str(exc)) from exc


def starting_pid(socket_path: "str | Path") -> "int | None":
    """The pid of a ``labgang up`` that is still starting for this socket, or None.

    Reads ``<state_dir>/up.starting``; a marker whose process is gone (a crashed start), or one
    this user cannot read (another user's 0700 state dir: the connection then says why), counts
    as none.
    """
    try:
        with open(os.path.join(os.path.dirname(os.fspath(socket_path)), STARTING_MARKER)) as marker:
            pid = int(marker.read().strip())
    except (OSError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except PermissionError:
        return pid  # another user's `labgang up` (root's system instance): alive, not ours to signal
    except OSError:
        return None
    return pid


def _job_path(job_id: str, suffix: str = "") -> str:
    return f"/v1/jobs/{quote(str(job_id))}{suffix}"


def _next_cursor(page: "Mapping[str, Any]", query: "Mapping[str, str]") -> "str | None":
    """The cursor of the next page of ``GET /v1/jobs``, or None on the last page (or when a
    coordinator repeats the cursor it was given: stop rather than loop)."""
    cursor = page.get("next_cursor")
    if not cursor or cursor == query.get("cursor"):
        return None
    return str(cursor)


def _jobs_query(
    all_users: bool, user: "str | None", queue: "str | None" = None, states: "tuple[str, ...]" = ()
) -> "dict[str, str]":
    query: dict[str, str] = {}
    if all_users:
        query["all"] = "1"
    if user:
        query["user"] = user
    if queue:
        query["queue"] = queue
    if states:
        query["state"] = ",".join(states)
    return query


def decode_body(body: bytes) -> "Any":
    """The JSON value of an answer's body (UTF-8): read by :func:`labgang.launcher.api.jsontext.loads`
    when that is cheaper than importing :mod:`json` (:func:`~labgang.launcher.api.jsontext.worth_reading`:
    a JobView, a ``queue`` table), so that a hot command imports no :mod:`json` (and no ``re``); a
    large listing (``queue --json``, ``history``), or any body once :mod:`json` is imported anyway
    (the TUI, the click commands), by ``json.loads``, whose C scanner is faster.

    Raises:
        ValueError: not UTF-8 (UnicodeDecodeError) or not one JSON value.
    """
    text = body.decode("utf-8")
    from labgang.launcher.api import jsontext

    if "json" not in sys.modules and jsontext.worth_reading(body):  # a long-lived caller (the TUI) has json
        return jsontext.loads(text)
    import json  # only for a large body: it imports ``re`` (docs/cli-startup.md)

    return json.loads(text)


def _error_from(status: int, body: bytes) -> "ApiError":
    """Build an :class:`ApiError` from a non-2xx answer (``{"error": {"message","field","allowed"}}``)."""
    try:
        payload = decode_body(body or b"{}")
        err = payload.get("error") if isinstance(payload, dict) else None
    except ValueError:  # UnicodeDecodeError or json.JSONDecodeError
        err = None
    if isinstance(err, dict) and err.get("message"):
        return ApiError(status, str(err["message"]), err.get("field"), err.get("allowed"))
    text = body.decode("utf-8", "replace").strip().splitlines()
    return ApiError(status, f"coordinator answered HTTP {status}" + (f": {text[0]}" if text else ""))


def _json_body(status: int, body: bytes) -> "dict[str, Any]":
    if status >= 400:
        raise _error_from(status, body)
    try:
        payload = decode_body(body)
    except ValueError as exc:  # UnicodeDecodeError or not JSON
        raise ApiError(status, f"coordinator sent a body that is not JSON ({exc})") from exc
    if not isinstance(payload, dict):
        raise ApiError(status, "coordinator sent JSON that is not an object")
    return payload


def _log_chunk(status: int, headers: "Mapping[str, str]", body: bytes, offset: int) -> "LogChunk":
    if status >= 400:
        raise _error_from(status, body)
    next_offset = headers.get("X-Next-Offset")
    attempt = headers.get("X-Attempt", "")
    lost = headers.get("X-Lost-Bytes", "")
    return LogChunk(
        data=body,
        next_offset=int(next_offset) if next_offset else offset + len(body),
        finished=headers.get("X-Job-Finished", "") == "1",
        attempt=int(attempt) if attempt.isdigit() else None,
        lost=int(lost) if lost.isdigit() else 0,
    )


class Client:
    """Synchronous client of the coordinator's user API.

    Args:
        socket_path: the Unix socket (see :func:`socket_for`).
        timeout: seconds to wait for the coordinator on each request.
        wait_for_start: wait (up to ``STARTUP_WAIT_S``) while a ``labgang up`` for this
            socket is starting; False for ``labgang up``'s own readiness probe.

    Every method raises :class:`CoordinatorUnavailable` when nothing listens and
    :class:`ApiError` when the coordinator refuses. Use as a context manager, or call
    :meth:`close`.
    """

    def __init__(
        self, socket_path: "str | Path", timeout: float = DEFAULT_TIMEOUT_S, *, wait_for_start: bool = True
    ) -> None:
        self._socket_file = os.fspath(socket_path)
        self.timeout = timeout
        self.wait_for_start = wait_for_start
        self._conn: UnixHTTPConnection | None = None

    @classmethod
    def for_state_dir(cls, state_dir: "str | Path | None" = None, timeout: float = DEFAULT_TIMEOUT_S) -> "Client":
        """A client for the coordinator of ``state_dir`` (None: found by :func:`socket_file_for`).

        Raises:
            SystemConfigUnusable: the system config names no usable state directory.
        """
        return cls(socket_file_for(state_dir), timeout)

    @property
    def socket_path(self) -> "Path":
        """The Unix socket this client talks to."""
        from pathlib import Path

        return Path(self._socket_file)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the kept-alive connection (a later request opens a new one)."""
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- transport -----------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: "Mapping[str, str] | None" = None,
        body: "Any" = None,
    ) -> "tuple[int, dict[str, str], bytes]":
        """Send one request and return ``(status, headers, body bytes)``.

        A GET whose kept-alive connection turns out closed is retried once on a new
        connection; a POST never is (it could act twice). While a ``labgang up`` for this
        socket is starting (see :func:`starting_pid`), the connection waits for it.

        Raises:
            CoordinatorUnavailable: nothing listens at the socket.
        """
        if len(self._socket_file.encode()) > _MAX_SOCKET_PATH:
            raise CoordinatorUnavailable(
                self.socket_path, f"the socket path is longer than {_MAX_SOCKET_PATH} bytes; use a shorter --state-dir"
            )
        if query:
            path = f"{path}?{urlencode(query)}"
        url = path
        payload = None
        if body is not None:
            from labgang.launcher.api import jsontext

            payload = jsontext.dumps(body).encode()
        headers = {"Accept": "application/json"}
        if payload is not None:
            headers["Content-Type"] = "application/json"
        attempts = 2 if method == "GET" else 1
        for attempt in range(attempts):
            fresh = self._conn is None
            if self._conn is None:
                self._conn = self._connect()
            try:
                resp = self._conn.request(method, url, payload, headers)
                if resp.will_close:
                    self.close()
                return resp.status, resp.headers, resp.body
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                self.close()
                raise CoordinatorUnavailable(self.socket_path) from exc
            except PermissionError as exc:
                self.close()
                raise CoordinatorUnavailable(self.socket_path, "permission denied") from exc
            except (RemoteClosed, ConnectionResetError, BrokenPipeError) as exc:
                self.close()
                if fresh or attempt + 1 == attempts:
                    raise CoordinatorUnavailable(self.socket_path, f"the connection closed ({exc})") from exc
            except TimeoutError as exc:
                self.close()
                raise CoordinatorUnavailable(self.socket_path, f"no answer within {self.timeout:g} s") from exc
        raise AssertionError("unreachable: the loop returns or raises")

    def _connect(self) -> "UnixHTTPConnection":
        """Open a connection; while a ``labgang up`` for this socket is starting, wait for it.

        "Starting" lasts until its coordinator listens and its local agent has joined
        (``up.starting`` holds a live pid until then; see :func:`starting_pid`).

        Raises:
            CoordinatorUnavailable: nothing listens (and nothing is starting), or the start
                took longer than ``STARTUP_WAIT_S``.
        """
        deadline = time.monotonic() + STARTUP_WAIT_S
        rechecked = False
        while True:
            if self.wait_for_start and starting_pid(self._socket_file) is not None:
                if time.monotonic() > deadline:
                    raise CoordinatorUnavailable(
                        self.socket_path, f"labgang up is still starting after {STARTUP_WAIT_S:g} s"
                    )
                time.sleep(0.05)
                continue
            conn = UnixHTTPConnection(self._socket_file, self.timeout)
            try:
                conn.connect()
                return conn
            except (FileNotFoundError, ConnectionRefusedError) as exc:
                conn.close()
                if not self.wait_for_start or rechecked:
                    raise CoordinatorUnavailable(self.socket_path) from exc
                # `labgang up & labgang run ...`: both interpreters start at once, and up
                # may not have written its marker yet. Look once more, a moment later.
                rechecked = True
                time.sleep(MARKER_GRACE_S)
            except PermissionError as exc:
                conn.close()
                raise CoordinatorUnavailable(self.socket_path, "permission denied") from exc
            except NotADirectoryError as exc:  # --state-dir named the socket (or another file), not its folder
                conn.close()
                folder = os.path.dirname(self._socket_file)
                raise CoordinatorUnavailable(
                    self.socket_path,
                    f"{folder} is not a directory (--state-dir and LABGANG_STATE_DIR name the folder that "
                    "holds labgang.sock)",
                ) from exc
            except TimeoutError as exc:
                conn.close()
                raise CoordinatorUnavailable(self.socket_path, f"no answer within {self.timeout:g} s") from exc

    def _json(self, method: str, path: str, **kw: "Any") -> "dict[str, Any]":
        status, _, body = self.request(method, path, **kw)
        return _json_body(status, body)

    # -- the user API ----------------------------------------------------------------

    def submit(self, spec: "Mapping[str, Any]") -> "dict[str, Any]":
        """``POST /v1/jobs``: submit a job; returns its JobView (dict).

        Args:
            spec: the submission body (name, queue, workers, gpus_per_worker, mig, priority,
                nodes, gpu_model, grace_s, time_limit_s, requeue, signal, argv, env, cwd).

        Raises:
            ApiError: 400 bad field, 403 queue not allowed, 409 could never be scheduled.
        """
        return self._json("POST", "/v1/jobs", body=dict(spec))["job"]

    def submit_id(self, spec: "Mapping[str, Any]") -> str:
        """``POST /v1/jobs`` as :meth:`submit`, returning only the id ``labgang submit`` prints: the job's,
        or an array's own. Read from the answer's ``Location`` (``/v1/jobs/ID``, ``/v1/arrays/ID``) without
        reading the JobView; from a coordinator that sends none, from the JobView.

        Raises:
            ApiError: as :meth:`submit`.
        """
        status, headers, body = self.request("POST", "/v1/jobs", body=dict(spec))
        where, _, job_id = headers.get("Location", "").rpartition("/")
        if status < 400 and where in ("/v1/jobs", "/v1/arrays") and job_id:
            return job_id
        job = _json_body(status, body)["job"]
        return str(job.get("array_id") or job["id"])

    def jobs(
        self,
        *,
        all_users: bool = False,
        user: "str | None" = None,
        view: str = "full",
        queue: "str | None" = None,
        states: "tuple[str, ...]" = (),
    ) -> "list[dict[str, Any]]":
        """``GET /v1/jobs``: the caller's jobs, or everyone's with ``all_users``, or one user's; only
        ``queue``'s and only those in ``states`` (JobState values) when given; every page, followed by
        ``next_cursor``. ``view="queue"``: each job as the rows of ``labgang queue``'s table (half the
        bytes; docs/openapi.json ``JobRow``), not whole JobViews.

        Raises:
            ApiError: 400 an unknown queue or state (the message lists the allowed ones).
        """
        query = _jobs_query(all_users, user, queue, states)
        if view != "full":
            query["view"] = view
        out: list[dict[str, Any]] = []
        while True:
            page = self._json("GET", "/v1/jobs", query=query)
            out.extend(page["jobs"])
            cursor = _next_cursor(page, query)
            if cursor is None:
                return out
            query = {**query, "cursor": cursor}

    def job_table(
        self,
        *,
        all_users: bool = False,
        user: "str | None" = None,
        queue: "str | None" = None,
        states: "tuple[str, ...]" = (),
    ) -> "tuple[str, int]":
        """The ``labgang queue`` table as the coordinator renders it (launcher/jobtable.py), and how many
        jobs it lists; the filters are :meth:`jobs`'s.

        Asks for ``GET /v1/jobs?view=text`` (the table as the body, the count in ``X-Jobs-Listed``), so
        that nothing of a 1,000-line table is read as a JSON string (docs/cli-startup.md); a coordinator
        from before that view (400, field ``view``, or an answer without that header) is asked for
        ``view=table`` (``{"table", "jobs"}``).

        Raises:
            ApiError: 400 an unknown queue or state (the message lists the allowed ones), or a ``view``
                this coordinator knows neither of (from before ``view=table``).
        """
        query = _jobs_query(all_users, user, queue, states)
        status, headers, body = self.request("GET", "/v1/jobs", query={**query, "view": "text"})
        listed = headers.get("X-Jobs-Listed", "")
        if status < 400 and listed.isdigit():
            try:
                return body.decode("utf-8"), int(listed)
            except UnicodeDecodeError as exc:
                raise ApiError(status, f"coordinator sent a table that is not UTF-8 ({exc})") from exc
        if status >= 400:
            refused = _error_from(status, body)
            if (refused.status, refused.field) != (400, "view"):
                raise refused
        answer = self._json("GET", "/v1/jobs", query={**query, "view": "table"})
        return answer["table"], answer["jobs"]

    def job(self, job_id: str, view: str = "full") -> "dict[str, Any]":
        """``GET /v1/jobs/{id}``: one JobView; ``view="queue"``: the job as a row of ``labgang queue``'s
        table (docs/openapi.json ``JobRow``: id, state...; a coordinator from before that view sends the
        JobView, which has those fields too). Raises ApiError(404) for an unknown job."""
        return self._json("GET", _job_path(job_id), **({"query": {"view": view}} if view != "full" else {}))["job"]

    def job_text(self, job_id: str) -> "str | dict[str, Any]":
        """``GET /v1/jobs/{id}?view=text``: what ``labgang show JOB`` prints, as the coordinator renders it
        (launcher/coordinator/detail_view.py); or the JobView (dict), as :meth:`job` returns it, from a
        coordinator that renders none: one from before that view, or one whose local time zone is not
        this process's (``tz``: this process's ``TZ`` variable, empty when unset).

        Raises:
            ApiError: 404 no such job (an array's id is none: :meth:`array`).
        """
        query = {"view": "text", "tz": os.environ.get("TZ", "")}
        status, headers, body = self.request("GET", _job_path(job_id), query=query)
        if status < 400 and headers.get("Content-Type", "").startswith("text/plain"):
            return body.decode("utf-8", "surrogatepass")
        return _json_body(status, body)["job"]

    def cancel(self, job_id: str) -> "dict[str, Any]":
        """``POST /v1/jobs/{id}/cancel``: cancel a job; returns its JobView.

        Raises:
            ApiError: 403 not the caller's job (and not an admin), 404 unknown job.
        """
        return self._json("POST", _job_path(job_id, "/cancel"))["job"]

    def array(self, array_id: str) -> "dict[str, Any]":
        """``GET /v1/arrays/{id}``: every task of a job array.

        Returns:
            ``{"array": ID, "jobs": [JobView of each task, in index order]}``.

        Raises:
            ApiError: 404 no such array.
        """
        return self._json("GET", f"/v1/arrays/{quote(str(array_id))}")

    def hold(self, job_id: str) -> "dict[str, Any]":
        """``POST /v1/jobs/{id}/hold``: hold a pending job; returns its JobView.

        Raises:
            ApiError: 403 not the caller's job, 404 unknown job, 409 the job is not pending.
        """
        return self._json("POST", _job_path(job_id, "/hold"))["job"]

    def release(self, job_id: str) -> "dict[str, Any]":
        """``POST /v1/jobs/{id}/release``: release a held job; returns its JobView.

        Raises:
            ApiError: 403 not the caller's job or an admin hold, 404 unknown job, 409 not held.
        """
        return self._json("POST", _job_path(job_id, "/release"))["job"]

    def requeue(self, job_id: str, *, hold: bool = False) -> "dict[str, Any]":
        """``POST /v1/jobs/{id}/requeue``: stop an admitted or running job with its grace and put it
        back in its queue (``hold``: held there); returns its JobView.

        Raises:
            ApiError: 403 not the caller's job, 404 unknown job, 409 not admitted or running.
        """
        return self._json("POST", _job_path(job_id, "/requeue"), body={"hold": hold})["job"]

    def update(self, job_id: str, changes: "Mapping[str, Any]") -> "dict[str, Any]":
        """``POST /v1/jobs/{id}/update``: change ``priority``, ``time_limit_s``, ``name`` and/or
        ``dependency``; returns the JobView.

        Raises:
            ApiError: 400 a bad value, 403 a raise only an admin may make (or not the caller's job),
                404 unknown job, 409 a finished job or a dependency change once it left pending.
        """
        return self._json("POST", _job_path(job_id, "/update"), body=dict(changes))["job"]

    def pty_input(self, job_id: str, data: bytes = b"", size: "tuple[int, int] | None" = None) -> bool:
        """``POST /v1/jobs/{id}/pty``: keystrokes (and the terminal's (rows, cols)) for rank 0 of a
        ``--pty`` job; whether it took them.

        Raises:
            ApiError: 409 rank 0 is not running (field ``state``) or not a --pty job, 403, 404.
        """
        import base64

        body: dict[str, Any] = {"data": base64.b64encode(data).decode("ascii")}
        if size is not None:
            body["rows"], body["cols"] = size
        return bool(self._json("POST", _job_path(job_id, "/pty"), body=body)["taken"])

    def stdin_input(self, job_id: str, data: bytes = b"", eof: bool = False) -> "tuple[int, bool, bool]":
        """``POST /v1/jobs/{id}/stdin``: the next bytes of rank 0's streamed standard input (a job
        submitted with ``stdin_stream``), and with ``eof`` its end.

        Returns:
            ``(taken, eof_taken, open)``: the leading bytes taken (send the rest again later), whether
            the end was taken, and False for ``open`` once nothing reads it (stop sending).

        Raises:
            ApiError: 409 rank 0 is not running yet (field ``state``: send again later) or the job
                does not stream its input, 403, 404.
        """
        import base64

        body = {"data": base64.b64encode(data).decode("ascii"), "eof": eof}
        answer = self._json("POST", _job_path(job_id, "/stdin"), body=body)
        return int(answer["taken"]), bool(answer["eof"]), bool(answer["open"])

    def cancel_array(self, array_id: str) -> "dict[str, Any]":
        """``POST /v1/arrays/{id}/cancel``: cancel every unfinished task of a job array.

        Returns:
            ``{"array": ID, "jobs": [JobView of each task that was not finished], "finished": N}``.

        Raises:
            ApiError: 403 a task that is not the caller's (nothing cancelled), 404 no such array.
        """
        return self._json("POST", f"/v1/arrays/{quote(str(array_id))}/cancel")

    def logs(
        self,
        job_id: str,
        rank: int = 0,
        offset: int = 0,
        attempt: "int | None" = None,
        stream: "str | None" = None,
        follower: "int | None" = None,
    ) -> "LogChunk":
        """``GET /v1/jobs/{id}/logs``: rank ``rank``'s output from byte ``offset``; ``attempt``: an
        earlier start attempt's output (0 = the first), None = the current one; ``stream``: ``"stdout"``
        or ``"stderr"`` alone (offsets stay the whole log's, so ``next_offset`` may pass bytes of the
        other stream), None = both as they arrived; ``follower``: ``labgang run`` follows the log live and
        has still to read it from this offset (its lowest over the streams it follows), so the agent
        holds its rotation back until it has read the older file; None: an ordinary read."""
        query = {"rank": str(rank), "offset": str(offset)}
        if attempt is not None:
            query["attempt"] = str(attempt)
        if stream is not None:
            query["stream"] = stream
        if follower is not None:
            query["follower"] = str(follower)
        status, headers, body = self.request("GET", _job_path(job_id, "/logs"), query=query)
        return _log_chunk(status, headers, body, offset)

    def history(
        self,
        *,
        user: "str | None" = None,
        queue: "str | None" = None,
        states: "tuple[str, ...]" = (),
        since: "float | None" = None,
        until: "float | None" = None,
        limit: "int | None" = None,
        attempts: bool = False,
        jobs: "tuple[str, ...]" = (),
    ) -> "list[dict[str, Any]]":
        """``GET /v1/history``: finished and current jobs from the coordinator's store, oldest first.

        Args:
            user: a user name or "all" (admins); None = the default (every user's for an admin, else
                the caller's own jobs).
            states: job states to keep (() = any). since / until: unix seconds. limit: at most this many.
            attempts: also list each job's start attempts (``attempt_records``).
            jobs: only these job ids; an array id names its tasks (() = any).
        """
        return self.history_answer(
            user=user, queue=queue, states=states, since=since, until=until, limit=limit, attempts=attempts, jobs=jobs
        )["jobs"]

    def history_answer(
        self,
        *,
        user: "str | None" = None,
        queue: "str | None" = None,
        states: "tuple[str, ...]" = (),
        since: "float | None" = None,
        until: "float | None" = None,
        limit: "int | None" = None,
        attempts: bool = False,
        jobs: "tuple[str, ...]" = (),
    ) -> "dict[str, Any]":
        """``GET /v1/history``'s whole answer: ``jobs`` as :meth:`history` returns them and ``user``,
        the user filter in force (a name, or "all"; absent from a coordinator older than it).
        Arguments as :meth:`history`'s."""
        query = {
            name: str(value)
            for name, value in (("user", user), ("queue", queue), ("since", since), ("until", until), ("limit", limit))
            if value is not None
        }
        if states:
            query["state"] = ",".join(states)
        if attempts:
            query["attempts"] = "1"
        if jobs:
            query["jobs"] = ",".join(jobs)
        return self._json("GET", "/v1/history", query=query)

    def report(
        self, *, by: str = "user", since: "float | None" = None, until: "float | None" = None
    ) -> "dict[str, Any]":
        """``GET /v1/report``: GPU-hours allocated and used per user, queue or team (``by``) over
        [since, until] (unix seconds; None: unbounded): ``rows``, ``total`` and the window."""
        query = {"by": by}
        query.update({name: str(value) for name, value in (("since", since), ("until", until)) if value is not None})
        return self._json("GET", "/v1/report", query=query)

    def queues(self) -> "list[dict[str, Any]]":
        """``GET /v1/queues``: each queue's nominal, used, borrowed and lent quota and job counts."""
        return self._json("GET", "/v1/queues")["queues"]

    def nodes(self) -> "list[dict[str, Any]]":
        """``GET /v1/nodes``: each node with its inventory and per-device allocation state."""
        return self._json("GET", "/v1/nodes")["nodes"]

    def drain(self, node: str, reason: str) -> "dict[str, Any]":
        """``POST /v1/nodes/{node}/drain``: no new job on ``node``; returns ``{node, drain}``.

        Raises:
            ApiError: 403 not an admin, 404 unknown node, 400 a reason not 1-256 printable characters.
        """
        return self._json("POST", f"/v1/nodes/{quote(node)}/drain", body={"reason": reason})

    def resume(self, node: str) -> "dict[str, Any]":
        """``POST /v1/nodes/{node}/resume``: offer a drained node to jobs again; returns ``{node, drain, ended}``.

        Raises:
            ApiError: 403 not an admin, 404 unknown node, 409 not drained.
        """
        return self._json("POST", f"/v1/nodes/{quote(node)}/resume")

    def version(self) -> "dict[str, Any]":
        """``GET /v1/version``."""
        return self._json("GET", "/v1/version")

    def pitfalls(self, job_id: "str | None" = None) -> "dict[str, Any]":
        """``GET /v1/pitfalls``: the coordinator's current findings (of one job with ``job_id``),
        its allocation rate and the thresholds it applies."""
        return self._json("GET", "/v1/pitfalls", **({"query": {"job": job_id}} if job_id else {}))

    def series(self, seconds: "float | None" = None) -> "dict[str, Any]":
        """``GET /v1/series``: each device's recent utilization, SM activity and memory and the
        pitfall markers (``labgang.launcher.pitfalls.SeriesView.to_dict``); ``seconds`` back at most."""
        return self._json("GET", "/v1/series", **({"query": {"seconds": f"{seconds:g}"}} if seconds else {}))
