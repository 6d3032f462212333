"""The coordinator's user API for asyncio callers (the TUI): :class:`AsyncClient`, the same
methods and errors as the synchronous :class:`labgang.launcher.api.client.Client`, on aiohttp's
``UnixConnector`` (imported only here: a shell command never pays for aiohttp)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from labgang.launcher.api.client import (
    DEFAULT_TIMEOUT_S,
    CoordinatorUnavailable,
    LogChunk,
    _job_path,
    _jobs_query,
    _json_body,
    _log_chunk,
    _next_cursor,
    socket_for,
)

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path


class AsyncClient:
    """The same API as :class:`Client` for asyncio callers, on aiohttp's ``UnixConnector``.

    Args:
        socket_path: the Unix socket (see :func:`socket_for`).
        timeout: seconds to wait for the coordinator on each request.

    Use ``async with AsyncClient(path) as c:`` or ``await c.close()``.
    """

    def __init__(self, socket_path: str | Path, timeout: float = DEFAULT_TIMEOUT_S) -> None:
        from pathlib import Path

        self.socket_path = Path(socket_path)
        self.timeout = timeout
        self._session: Any = None

    @classmethod
    def for_state_dir(cls, state_dir: str | Path | None = None, timeout: float = DEFAULT_TIMEOUT_S) -> AsyncClient:
        """A client for the coordinator of ``state_dir`` (None: found as the CLI finds it,
        :func:`labgang.launcher.api.client.socket_for`)."""
        return cls(socket_for(state_dir), timeout)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the underlying aiohttp session."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
    ) -> tuple[int, dict[str, str], bytes]:
        """Send one request and return ``(status, headers, body bytes)``.

        Raises:
            CoordinatorUnavailable: nothing listens at the socket.
        """
        import aiohttp

        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.UnixConnector(path=str(self.socket_path)),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )
        try:
            async with self._session.request(
                method, "http://localhost" + path, params=dict(query or {}), json=body
            ) as resp:
                data = await resp.read()
                return resp.status, {k.title(): v for k, v in resp.headers.items()}, data
        except aiohttp.ClientConnectorError as exc:
            os_error = getattr(exc, "os_error", None)
            if isinstance(os_error, PermissionError):
                raise CoordinatorUnavailable(self.socket_path, "permission denied") from exc
            raise CoordinatorUnavailable(self.socket_path) from exc
        except (aiohttp.ServerDisconnectedError, TimeoutError) as exc:
            raise CoordinatorUnavailable(self.socket_path, f"no usable answer ({exc!r})") from exc

    async def _json(self, method: str, path: str, **kw: Any) -> dict[str, Any]:
        status, _, body = await self.request(method, path, **kw)
        return _json_body(status, body)

    async def submit(self, spec: Mapping[str, Any]) -> dict[str, Any]:
        """See :meth:`Client.submit`."""
        return (await self._json("POST", "/v1/jobs", body=dict(spec)))["job"]

    async def jobs(
        self, *, all_users: bool = False, user: str | None = None, view: str = "full"
    ) -> list[dict[str, Any]]:
        """See :meth:`Client.jobs` (follows every page)."""
        query = _jobs_query(all_users, user)
        if view != "full":
            query["view"] = view
        out: list[dict[str, Any]] = []
        while True:
            page = await self._json("GET", "/v1/jobs", query=query)
            out.extend(page["jobs"])
            cursor = _next_cursor(page, query)
            if cursor is None:
                return out
            query = {**query, "cursor": cursor}

    async def job(self, job_id: str) -> dict[str, Any]:
        """See :meth:`Client.job`."""
        return (await self._json("GET", _job_path(job_id)))["job"]

    async def cancel(self, job_id: str) -> dict[str, Any]:
        """See :meth:`Client.cancel`."""
        return (await self._json("POST", _job_path(job_id, "/cancel")))["job"]

    async def logs(self, job_id: str, rank: int = 0, offset: int = 0) -> LogChunk:
        """See :meth:`Client.logs`."""
        query = {"rank": str(rank), "offset": str(offset)}
        status, headers, body = await self.request("GET", _job_path(job_id, "/logs"), query=query)
        return _log_chunk(status, headers, body, offset)

    async def queues(self) -> list[dict[str, Any]]:
        """See :meth:`Client.queues`."""
        return (await self._json("GET", "/v1/queues"))["queues"]

    async def nodes(self) -> list[dict[str, Any]]:
        """See :meth:`Client.nodes`."""
        return (await self._json("GET", "/v1/nodes"))["nodes"]

    async def pitfalls(self, job_id: str | None = None) -> dict[str, Any]:
        """See :meth:`Client.pitfalls`."""
        return await self._json("GET", "/v1/pitfalls", **({"query": {"job": job_id}} if job_id else {}))

    async def series(self, seconds: float | None = None) -> dict[str, Any]:
        """See :meth:`Client.series`."""
        return await self._json("GET", "/v1/series", **({"query": {"seconds": f"{seconds:g}"}} if seconds else {}))

    async def version(self) -> dict[str, Any]:
        """See :meth:`Client.version`."""
        return await self._json("GET", "/v1/version")
