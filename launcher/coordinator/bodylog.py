"""A request body that cannot be read is one warning line in the coordinator's log, not a traceback.

aiohttp drains the unread part of a request's body after the reply (its "lingering close");
when that body does not decode (a ``Content-Encoding: gzip`` body that does not inflate, a
broken chunked stream) the drain raises, and aiohttp's ``aiohttp.server`` logger writes
"Unhandled exception" with three chained tracebacks for every such request, whatever the
handler answered (a 400 when it read the body, a 401/403 when it refused first). The request
was already answered and the connection is closed by aiohttp; only the log line is wrong.
:class:`UnreadableBodyFilter` rewrites exactly those records to one line naming the cause.
"""

from __future__ import annotations

import logging

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

SERVER_LOGGER = "aiohttp.server"
"""The logger aiohttp's request handler writes "Unhandled exception" to."""


def _body_error(exc: BaseException | None) -> BaseException | None:
    """The body-reading error at the root of ``exc`` (itself or a cause), or None."""
    seen = 0
    while exc is not None and seen < 5:
        if isinstance(exc, (web.RequestPayloadError, HttpProcessingError)):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


class UnreadableBodyFilter(logging.Filter):
    """Turn aiohttp's traceback for a request body that cannot be read into one WARNING line."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Always keep the record; rewrite it when its exception is a body-reading error."""
        exc = record.exc_info[1] if record.exc_info else None
        cause = _body_error(exc)
        if cause is None:
            return True
        text = " ".join(str(cause).split()) or type(cause).__name__
        record.msg = "a request body could not be read (%s); the request was answered and its connection closed"
        record.args = (text,)
        record.exc_info = None
        record.exc_text = None
        record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def install() -> UnreadableBodyFilter:
    """Put one :class:`UnreadableBodyFilter` on aiohttp's server logger (idempotent); returns it."""
    logger = logging.getLogger(SERVER_LOGGER)
    for existing in logger.filters:
        if isinstance(existing, UnreadableBodyFilter):
            return existing
    body_filter = UnreadableBodyFilter()
    logger.addFilter(body_filter)
    return body_filter
