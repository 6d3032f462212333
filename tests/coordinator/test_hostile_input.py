"""Inputs that used to be accepted and then fail later (or fail with a traceback) are refused at
the door with one line naming the field: the real application on a real Unix socket."""

from __future__ import annotations

import gzip
import json
import math
import tempfile
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from labgang.launcher.api import jsoncodec
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator.app import create_app


@pytest.fixture
async def sock():
    base = Path(tempfile.mkdtemp(prefix="lgh-", dir="/tmp"))
    config = parse_config({"default_grace_s": 0.5, "queues": [{"name": "default", "nominal": {"gpu": 8}}]})
    runner = web.AppRunner(create_app(config, base, token="t"))
    await runner.setup()
    path = base / "labgang.sock"
    await web.UnixSite(runner, str(path)).start()
    try:
        yield path
    finally:
        await runner.cleanup()


async def raw(sock: Path, method: str, path: str, data: bytes = b"", headers: dict | None = None) -> tuple[int, dict]:
    async with (
        aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(sock))) as s,
        s.request(method, "http://labgang" + path, data=data, headers=headers or {}) as r,
    ):
        text = await r.text()
        return r.status, json.loads(text)


def one_line(reply: dict) -> str:
    message = reply["error"]["message"]
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize(
    "text, field",
    [
        ('{"argv": ["x"], "time_limit_s": 1e999}', "time_limit_s"),
        ('{"argv": ["x"], "time_limit_s": NaN}', "time_limit_s"),
        ('{"argv": ["x"], "grace_s": NaN}', "grace_s"),
        ('{"argv": ["x"], "signal": "USR1@inf"}', "signal"),
        ('{"argv": ["x"], "signal": "USR1@nan"}', "signal"),
        ('{"argv": ["x", "a\\u0000b"]}', "argv.1"),
        ('{"argv": ["x\\ud800"]}', "argv.0"),
        ('{"argv": ["", "x"]}', "argv.0"),
        ('{"argv": ["x"], "env": {"A": "b\\u0000"}}', "env.A"),
        ('{"argv": ["x"], "env": {"A\\udc80": "b"}}', "env"),
        ('{"argv": ["x"], "name": "n\\u0000"}', "name"),
        ('{"argv": ["x"], "cwd": "/tmp/\\ud800"}', "cwd"),
        ('{"argv": ["x"], "cwd": "/tmp\\u0000"}', "cwd"),
    ],
    ids=[
        "time-limit-inf",
        "time-limit-nan",
        "grace-nan",
        "signal-inf",
        "signal-nan",
        "argv-nul",
        "argv-surrogate",
        "argv-empty-command",
        "env-value-nul",
        "env-key-surrogate",
        "name-nul",
        "cwd-surrogate",
        "cwd-nul",
    ],
)
async def test_values_that_would_fail_at_launch_are_refused_at_submission(sock: Path, text: str, field: str) -> None:
    status, reply = await raw(sock, "POST", "/v1/jobs", text.encode(), {"Content-Type": "application/json"})
    assert status == 400, reply
    assert reply["error"]["field"] == field, reply
    one_line(reply)
    status, listing = await raw(sock, "GET", "/v1/jobs?all=1")
    assert status == 200 and listing["jobs"] == []


async def test_json_nested_a_thousand_deep_is_a_400(sock: Path) -> None:
    body = b'{"argv": ' + b"[" * 1000 + b"]" * 1000 + b"}"
    status, reply = await raw(sock, "POST", "/v1/jobs", body, {"Content-Type": "application/json"})
    assert status == 400, reply
    assert "nested" in one_line(reply)


async def test_a_malformed_gzip_body_is_a_400(sock: Path) -> None:
    good = gzip.compress(b'{"argv": ["true"]}')
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip"}
    status, reply = await raw(sock, "POST", "/v1/jobs", good[:10] + b"\x00garbage" + good[10:], headers)
    assert status == 400, reply
    one_line(reply)


def test_the_json_encoder_refuses_non_finite_numbers() -> None:
    assert json.loads(jsoncodec.dumps({"a": 1.5})) == {"a": 1.5}
    for bad in (math.inf, -math.inf, math.nan):
        with pytest.raises(ValueError):
            jsoncodec.dumps({"time_limit_s": bad})


def test_a_job_stored_with_an_infinite_time_limit_still_lists() -> None:
    """A job accepted before ``1e999`` was refused: its listing is still valid JSON for everyone."""
    from labgang.launcher.coordinator.job_views import JobViews
    from labgang.launcher.coordinator.requests import Caller, build_spec
    from labgang.launcher.coordinator.store import JobRecord, JobStatus
    from labgang.launcher.model import JobState

    config = parse_config({"queues": [{"name": "default", "nominal": {"gpu": 8}}]})
    caller = Caller(uid=1000, user="alice")
    spec = build_spec({"argv": ["x"]}, caller, config)
    spec.time_limit_s = math.inf
    job = JobRecord(id="1", seq=1, spec=spec, status=JobStatus(state=JobState.PENDING))
    view = JobViews(config.private_data).job_view(caller, job)
    assert view["time_limit_s"] is None
    json.loads(jsoncodec.dumps(view))
