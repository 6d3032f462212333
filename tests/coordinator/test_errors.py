"""The one JSON error mapping, used by the socket routes and by requests forwarded by an agent."""

from __future__ import annotations

from aiohttp import web
from labgang.launcher.coordinator.errors import BadRequest, error_reply


def test_a_domain_error_keeps_its_status_and_fields() -> None:
    exc = BadRequest("unknown queue 'x'", field="queue", allowed=["default"])
    assert error_reply(exc, "POST", "/v1/jobs") == (
        400,
        {"error": {"message": "unknown queue 'x'", "field": "queue", "allowed": ["default"]}},
    )


def test_a_framework_error_names_the_request() -> None:
    status, body = error_reply(web.HTTPMethodNotAllowed("PUT", ["GET"]), "PUT", "/v1/jobs")
    assert (status, body["error"]["message"]) == (405, "Method Not Allowed: PUT /v1/jobs")


def test_anything_else_is_a_500_without_details() -> None:
    status, body = error_reply(KeyError("secret internals"), "GET", "/v1/jobs")
    assert status == 500 and "secret" not in body["error"]["message"]
    assert body == {"error": {"message": "internal coordinator error (see its log)", "field": None, "allowed": None}}
