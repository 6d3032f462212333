"""Domain errors of the coordinator, each carrying the HTTP status the error middleware maps it to.

The JSON body is always ``{"error": {"message": str, "field": str | None, "allowed": list | None}}``.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web


class ApiError(Exception):
    """Base of every error the user API reports.

    Args:
        message: one sentence a person can act on.
        field: the request field at fault (``"queue"``, ``"priority"``), or None.
        allowed: the values that would have been accepted, or None.
    """

    status = 400

    def __init__(self, message: str, *, field: str | None = None, allowed: list[Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field
        self.allowed = allowed

    def body(self) -> dict[str, Any]:
        """The JSON error body."""
        return error_body(self.message, self.field, self.allowed)


def error_body(message: str, field: str | None = None, allowed: list[Any] | None = None) -> dict[str, Any]:
    """The one JSON error shape: ``{"error": {"message", "field", "allowed"}}``."""
    return {"error": {"message": message, "field": field, "allowed": allowed}}


INTERNAL = "internal coordinator error (see its log)"


def error_reply(exc: Exception, method: str, path: str) -> tuple[int, dict[str, Any]]:
    """(HTTP status, JSON body) for an exception raised while serving ``method path``: a domain
    error keeps its status and fields, an HTTP error of the framework (404/405) names the request,
    anything else is a 500 whose details stay in the coordinator's log."""
    if isinstance(exc, ApiError):
        return exc.status, exc.body()
    if isinstance(exc, web.HTTPException) and exc.status >= 400:
        return exc.status, error_body(f"{exc.reason}: {method} {path}")
    return 500, error_body(INTERNAL)


class BadRequest(ApiError):
    """A field of the request is malformed or out of range (400)."""

    status = 400


class RequestTimeout(ApiError):
    """The request body did not arrive within ``limits.body_timeout_s`` (408)."""

    status = 408


class PayloadTooLarge(ApiError):
    """The request body is over the configured limit (413)."""

    status = 413


class Unauthenticated(ApiError):
    """The request carries no valid credentials (401)."""

    status = 401


class Forbidden(ApiError):
    """The caller may not do this (403): another user's job, a queue not open to them, read-only port."""

    status = 403


class NotFound(ApiError):
    """No such job, rank or route (404)."""

    status = 404


class Conflict(ApiError):
    """The request can never be satisfied as asked: an unschedulable job (409)."""

    status = 409


class ServiceUnavailable(ApiError):
    """The node that holds what was asked for is not connected right now (503)."""

    status = 503


def no_attempt_message(job_id: str, attempt: int, last: int, rank: int) -> str:
    """Why ``attempt`` of job ``job_id`` has no log of ``rank``: the job never had that attempt
    (``no attempt 1: job 1 has attempt 0 only``, ``... has attempts 0 to 2``), or that attempt never placed
    the rank. ``last`` is the job's current attempt number (attempts count from 0)."""
    if 0 <= attempt <= last:
        return f"attempt {attempt} of job {job_id} never placed rank {rank}"
    return f"no attempt {attempt}: job {job_id} has " + ("attempt 0 only" if last == 0 else f"attempts 0 to {last}")
