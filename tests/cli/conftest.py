"""Fixtures for the CLI tests.

``FakeCoordinator``: a tiny real aiohttp server on a Unix socket that speaks a slice of the Coordinator user API.

Used only to test the client's transport and error handling (status codes, the
``{"error": ...}`` body, log headers) before and independently of the real coordinator.
It runs in a thread with its own event loop; requests it received are recorded.
"""

from __future__ import annotations

import asyncio
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web


class FakeCoordinator:
    """Serve canned answers on ``socket_path`` until :meth:`stop`.

    Attributes:
        received: (method, path_qs, json body or None) for every request, in order.
        log: the bytes served as rank 0's log of job ``"1"``.
        validate: None, or a callable given each submit body; a coordinator ``ApiError`` it
            raises (e.g. from the real ``build_spec``) is sent back as the coordinator would.
    """

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self.received: list[tuple[str, str, Any]] = []
        self.log = b"hello\nworld\n"
        self.validate: Any = None  # optional: called with each submit body; its ApiError is the reply
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._runner: web.AppRunner | None = None

    def start(self) -> FakeCoordinator:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake coordinator did not start")
        return self

    def stop(self) -> None:
        async def _cleanup() -> None:
            assert self._runner is not None
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(_cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._serve())
        self._ready.set()
        self._loop.run_forever()
        self._loop.close()

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/jobs", self._submit)
        app.router.add_get("/v1/jobs", self._jobs)
        app.router.add_get("/v1/jobs/{id}", self._job)
        app.router.add_get("/v1/jobs/{id}/logs", self._logs)
        app.router.add_post("/v1/jobs/{id}/cancel", self._cancel)
        app.router.add_get("/v1/queues", self._queues)
        app.router.add_get("/v1/version", self._version)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.UnixSite(self._runner, str(self.socket_path)).start()

    async def _record(self, request: web.Request) -> Any:
        body = await request.json() if request.can_read_body else None
        self.received.append((request.method, request.path_qs, body))
        return body

    async def _submit(self, request: web.Request) -> web.Response:
        body = await self._record(request)
        if self.validate is not None:
            from labgang.launcher.coordinator.errors import ApiError

            try:
                self.validate(body)
            except ApiError as exc:  # the real coordinator's refusal, as it would send it
                return web.json_response(exc.body(), status=exc.status)
        if body.get("queue") == "nope":
            return web.json_response(
                {"error": {"message": "unknown queue 'nope'", "field": "queue", "allowed": ["default"]}},
                status=400,
            )
        return web.json_response({"job": {"id": "1", "state": "pending", **body}}, status=201)

    async def _jobs(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response({"jobs": [{"id": "1"}]})

    async def _job(self, request: web.Request) -> web.Response:
        await self._record(request)
        state = {"1": "succeeded", "2": "running", "3": "running"}.get(request.match_info["id"])
        if state is None:
            return web.json_response({"error": {"message": "no job 9", "field": None, "allowed": None}}, status=404)
        return web.json_response({"job": {"id": request.match_info["id"], "state": state}})

    async def _logs(self, request: web.Request) -> web.Response:
        await self._record(request)
        offset = int(request.query.get("offset", "0"))
        data = self.log[offset:]
        return web.Response(
            body=data,
            content_type="text/plain",
            headers={"X-Next-Offset": str(offset + len(data)), "X-Job-Finished": "1"},
        )

    async def _cancel(self, request: web.Request) -> web.Response:
        await self._record(request)
        if request.match_info["id"] == "2":
            return web.json_response({"error": {"message": "job 2 belongs to bob", "field": None}}, status=403)
        return web.json_response({"job": {"id": request.match_info["id"], "state": "cancelled"}})

    async def _queues(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.json_response(
            {
                "queues": [
                    {
                        "name": "default",
                        "cohort": None,
                        "nominal": {"gpu": 8},
                        "used": {"gpu": 2},
                        "borrowed": {},
                        "lent": {},
                        "pending": 1,
                        "running": 1,
                        "reclaim_time_s": 0.0,
                    }
                ]
            }
        )

    async def _version(self, request: web.Request) -> web.Response:
        await self._record(request)
        return web.Response(text="not json", status=500)


@pytest.fixture
def short_dir():
    """A fresh directory under /tmp with a short path (Unix socket paths are limited to 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="lgc", dir="/tmp") as d:
        yield Path(d)


@pytest.fixture
def fake(short_dir):
    """A running :class:`FakeCoordinator` on ``short_dir/labgang.sock``."""
    server = FakeCoordinator(short_dir / "labgang.sock").start()
    yield server
    server.stop()


@pytest.fixture
def fake_factory():
    """Start a :class:`FakeCoordinator` on a given socket path, later (the caller stops it)."""
    return lambda socket_path: FakeCoordinator(socket_path).start()
