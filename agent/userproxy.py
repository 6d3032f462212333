"""The user API on a node's own Unix socket: requests forwarded to the coordinator over the link.

A user on a node runs ``labgang`` against ``<state_dir>/labgang.sock``; the agent learns the
caller's uid from ``SO_PEERCRED``, forwards the request over its authenticated link (vouching
for that uid) and hands back the coordinator's answer as it came.
"""

from __future__ import annotations

import logging
import os
import socket
import struct
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from aiohttp import web
from labgang.agent import paths
from labgang.agent.link import LinkDown

log = logging.getLogger("labgang.agent.userproxy")

_UCRED = struct.Struct("3i")

Forward = Callable[[int, str, str, Mapping[str, str], bytes], Awaitable[dict[str, Any]]]
"""``(uid, method, path, query, body)`` → ``{"status", "headers", "body"}`` (``CoordinatorLink.forward``)."""


def _error(status: int, message: str) -> web.Response:
    """An error in the user API's JSON error shape (``launcher/coordinator/errors.py``)."""
    return web.json_response({"error": {"message": message, "field": None, "allowed": None}}, status=status)


class UserSocketProxy:
    """Serves ``<state_dir>/labgang.sock`` (mode 0666: who calls comes from ``SO_PEERCRED``).

    Args:
        state_dir: the agent's state directory.
        node: this node's name (named in a "link down" answer).
        forward: sends one request to the coordinator for a uid; raises ``LinkDown`` while the
            link is down.
    """

    def __init__(self, state_dir: Path, node: str, forward: Forward) -> None:
        self.path = state_dir / paths.SOCKET_NAME
        self.node = node
        self._forward = forward
        self._runner: web.AppRunner | None = None

    async def start(self) -> bool:
        """Serve the socket; False (and a warning) when another live process already serves it."""
        app = web.Application(client_max_size=16 << 20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        # One access line per request (a `logs -f` polls five times a second) only when debugging.
        runner = web.AppRunner(app, handle_signals=False, access_log=log if log.isEnabledFor(logging.DEBUG) else None)
        await runner.setup()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.connect(str(self.path))
                probe.close()
                log.warning("%s is served by another process; this agent will not serve the user API", self.path)
                await runner.cleanup()
                return False
            except OSError:
                probe.close()
                self.path.unlink()
        site = web.UnixSite(runner, str(self.path))
        await site.start()
        os.chmod(self.path, 0o666)  # noqa: S103 - anyone may connect; who they are comes from SO_PEERCRED
        self._runner = runner
        return True

    async def close(self) -> None:
        """Stop serving and remove the socket (only if this proxy served it)."""
        if self._runner is None:
            return
        await self._runner.cleanup()
        self._runner = None
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        sock = request.transport.get_extra_info("socket") if request.transport else None
        if sock is None or sock.family != socket.AF_UNIX:
            return _error(400, "the user API is only served on the Unix socket")
        _pid, uid, _gid = _UCRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size))
        body = await request.read() if request.can_read_body else b""
        try:
            reply = await self._forward(uid, request.method, request.path, dict(request.query), body)
        except LinkDown as exc:
            return _error(503, f"{exc}; try again when the agent on {self.node} has reconnected")
        headers = {k: v for k, v in reply["headers"].items() if k.lower() != "content-type"}
        ctype = reply["headers"].get("Content-Type", "application/json")
        return web.Response(status=reply["status"], body=reply["body"], headers=headers, content_type=ctype)
