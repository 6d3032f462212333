"""``labgang top --web``: the same Textual app served to browsers with textual-serve.

textual-serve runs the app as a subprocess per browser connection (its stdin/stdout carry the
terminal over the page's websocket) and stops it when the page goes away, so a viewer that
disconnects costs nothing. This module decides *which* command each viewer's subprocess runs,
and so what it may do:

* **control**: the viewer presented the cluster token (``?token=...`` once; a cookie then names
  the session). The app runs as ``labgang top`` does, and may cancel jobs, as the user who runs
  ``top --web`` (the coordinator still refuses another user's job unless that user is an admin).
* **read**: every other viewer allowed in. The app runs with ``--read-only``: cancel is refused
  in the app, whatever keys the browser sends, because the choice is made here, in the server,
  before the subprocess starts, not by anything the page says afterwards.

Who is let in: on a loopback address (the default, 127.0.0.1) anyone who can reach the port
(the machine's users) reads; on any other address a viewer must present the read token or the
cluster token, and ``top --web`` refuses to start without a read token (docs/security.md).
A websocket whose ``Origin`` is another site is refused, so a page elsewhere cannot drive a
viewer's session.
"""

from __future__ import annotations

import asyncio
import errno
import hmac
import ipaddress
import logging
import secrets
import shlex
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp_jinja2
from aiohttp import web
from textual_serve.app_service import AppService
from textual_serve.server import Server, to_int

log = logging.getLogger("labgang.top.web")

COOKIE = "labgang_top"
CONTROL, READ = "control", "read"
APP_QUIT_S = 5.0
"""How long a viewer's app has to quit once its page has gone before its input is hung up (on
which the app ends itself: ``LabgangTop._watch_terminal``)."""


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class WebTopError(ValueError):
    """``top --web`` cannot serve as asked (the message names the option and what it needs)."""


class WebTop(Server):
    """A textual-serve :class:`~textual_serve.server.Server` with labgang's access rule.

    Args:
        app_argv: the command of a viewer's app (``labgang top`` with the view's options); a
            read-only viewer's gets ``--read-only`` appended.
        host, port: where to listen (TCP).
        cluster_token: the token that gives control (None: nobody may cancel from a browser).
        read_token: the token that lets a viewer in on a non-loopback address.

    Raises:
        WebTopError: a non-loopback ``host`` without ``read_token``.
    """

    def __init__(
        self,
        app_argv: Sequence[str],
        *,
        host: str = "127.0.0.1",
        port: int = 8000,
        cluster_token: str | None = None,
        read_token: str | None = None,
    ) -> None:
        if not is_loopback(host) and not read_token:
            raise WebTopError(
                f"--host {host}: serving beyond loopback needs a read token (--read-token-file, the "
                "cluster's read_token_file; docs/security.md)"
            )
        super().__init__(
            "exec " + shlex.join(app_argv),
            host=host,
            port=port,
            title="labgang top",
            templates_path=Path(__file__).resolve().parent / "web_page",
        )
        self.app_argv = list(app_argv)
        self.loopback = is_loopback(host)
        self.cluster_token = cluster_token or None
        self.read_token = read_token or None
        self._sessions: dict[str, str] = {}
        self.viewers: dict[str, int] = {CONTROL: 0, READ: 0}

    # -- who may do what ---------------------------------------------------------------

    def command_for(self, level: str) -> str:
        """The shell command of a viewer's app at access ``level`` (:data:`CONTROL` or :data:`READ`).

        The shell ``exec``s the app, so the process textual-serve starts is the app itself: no
        shell is left behind when the app ends, and the app's parent is this server."""
        argv = self.app_argv if level == CONTROL else [*self.app_argv, "--read-only"]
        return "exec " + shlex.join(argv)

    def level_of_token(self, token: str) -> str | None:
        """:data:`CONTROL` for the cluster token, :data:`READ` for the read token, None otherwise."""
        if self.cluster_token and hmac.compare_digest(token.encode(), self.cluster_token.encode()):
            return CONTROL
        if self.read_token and hmac.compare_digest(token.encode(), self.read_token.encode()):
            return READ
        return None

    def level_of(self, request: web.Request) -> str | None:
        """The access of a request: its session cookie's, else :data:`READ` on loopback, else None."""
        level = self._sessions.get(request.cookies.get(COOKIE, ""))
        if level is not None:
            return level
        return READ if self.loopback else None

    # -- routes ------------------------------------------------------------------------

    async def _make_app(self) -> web.Application:
        app = await super()._make_app()
        app.middlewares.append(self._gate)
        return app

    @web.middleware
    async def _gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith("/static/"):
            return await handler(request)  # the page's script and fonts: nothing of the cluster
        token = request.query.get("token")
        if token is not None and request.path == "/":
            level = self.level_of_token(token)
            if level is None:
                log.warning("refused a viewer from %s: wrong token", request.remote)
                raise web.HTTPUnauthorized(text="labgang top --web: wrong token\n")
            session = secrets.token_urlsafe(24)
            self._sessions[session] = level
            query = {k: v for k, v in request.query.items() if k != "token"}
            response = web.HTTPSeeOther(request.rel_url.with_query(query).path_qs)
            response.set_cookie(COOKIE, session, httponly=True, samesite="Strict")
            raise response
        if self.level_of(request) is None:
            raise web.HTTPUnauthorized(
                text="labgang top --web: open this page with ?token=<read token or cluster token>\n"
            )
        return await handler(request)

    def _public_url(self, request: web.Request) -> str:
        """The URL the browser used (so the page's websocket URL works from any address)."""
        return f"{request.scheme}://{request.host}"

    @aiohttp_jinja2.template("app_index.html")
    async def handle_index(self, request: web.Request) -> dict[str, Any]:
        base = self._public_url(request)
        ws = ("wss:" if base.startswith("https") else "ws:") + base.split(":", 1)[1]
        return {
            "font_size": to_int(request.query.get("fontsize", "16"), 16),
            "app_websocket_url": f"{ws}{request.app.router['websocket'].url_for()}",
            "config": {
                "static": {"url": f"{base}{request.app.router['static'].url_for(filename='/')}".rstrip("/") + "/"}
            },
            "application": {"name": self.title},
        }

    async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
        """One viewer: start its app at the viewer's access level and pipe the terminal both ways."""
        origin = request.headers.get("Origin")
        if origin is not None and urlsplit(origin).netloc != request.host:
            log.warning("refused a websocket from origin %s (page served as %s)", origin, request.host)
            raise web.HTTPForbidden(text="labgang top --web: websocket from another site\n")
        level = self.level_of(request) or READ
        websocket = web.WebSocketResponse(heartbeat=15)
        width = to_int(request.query.get("width", "80"), 80)
        height = to_int(request.query.get("height", "24"), 24)
        service: AppService | None = None
        self.viewers[level] += 1
        try:
            await websocket.prepare(request)
            service = AppService(
                self.command_for(level),
                write_bytes=websocket.send_bytes,
                write_str=websocket.send_str,
                close=lambda: self._close(websocket),
                download_manager=self.download_manager,
                debug=self.debug,
            )
            await service.start(width, height)
            await self._process_messages(websocket, service)
        except asyncio.CancelledError:
            await websocket.close()
        except Exception:
            log.exception("viewer session failed")
        finally:
            self.viewers[level] -= 1
            if service is not None:
                await self._end_app(service)  # the viewer's app process ends with its page
        return websocket

    @staticmethod
    async def _end_app(service: AppService) -> None:
        """Ask a viewer's app to quit and wait until it has; if it has not within
        :data:`APP_QUIT_S`, hang up its standard input, on which the app ends itself within its
        terminal grace (tui/app.py). A wedged app never outlives its page."""
        stopping = asyncio.ensure_future(service.stop())
        try:
            await asyncio.wait_for(asyncio.shield(stopping), APP_QUIT_S)
        except TimeoutError:
            log.warning("a viewer's app did not quit within %gs of its page closing: hanging up its input", APP_QUIT_S)
            service.stdin.close()
            await stopping

    @staticmethod
    async def _close(websocket: web.WebSocketResponse) -> None:
        await websocket.close()

    async def on_startup(self, app: web.Application) -> None:
        control = "with the cluster token" if self.cluster_token else "nobody (no --token-file)"
        log.info(
            "labgang top --web on http://%s:%d/ (viewers read%s; cancel: %s)",
            self.host,
            self.port,
            "" if self.loopback else " with the read token",
            control,
        )

    def serve(self, debug: bool = False) -> None:
        """Serve until SIGINT or SIGTERM (textual-serve's loop).

        Raises:
            WebTopError: the address cannot be listened on (the port in use, the host not this
                machine's), said before anything is served.
        """
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as aiohttp listens
            try:
                probe.bind((self.host, self.port))
            except OSError as exc:
                hint = " (another labgang top --web?); choose another --port" if exc.errno == errno.EADDRINUSE else ""
                raise WebTopError(
                    f"--port {self.port}: cannot listen on {self.host}:{self.port}: {exc.strerror}{hint}"
                ) from None
        super().serve(debug)

    def initialize_logging(self) -> None:
        """Plain log lines on stderr (not textual-serve's banner)."""
        logging.basicConfig(level=logging.DEBUG if self.debug else logging.INFO, format="%(message)s")


__all__ = ["CONTROL", "COOKIE", "READ", "WebTop", "WebTopError", "is_loopback"]
