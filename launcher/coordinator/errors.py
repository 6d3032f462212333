"""Domain errors of the coordinator, each carrying the HTTP status the error middleware maps it to.

The JSON body is always ``{"error": {"message": str, "field": str | None, "allowed": list | None}}``.
"""

from __future__ import annotations

from typing import Any


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
        return {"error": {"message": self.message, "field": self.field, "allowed": self.allowed}}


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
