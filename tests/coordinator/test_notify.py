"""Job notifications (--mail-type) from a coordinator on a fake clock with a real SQLite store, to a
real aiohttp webhook on loopback and a real sendmail stand-in program: which events are sent,
what the JSON says, retries with backoff, and that a slow webhook never holds up the lifecycle."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.config.errors import ConfigError
from labgang.launcher.config.notify import notification_kind, parse_mail_types, subject
from labgang.launcher.coordinator.core import Coordinator
from labgang.launcher.coordinator.errors import BadRequest
from labgang.launcher.coordinator.requests import Caller
from labgang.launcher.coordinator.store import Store
from labgang.launcher.model import JobState
from lifecycle_driver import Clock, event, start

ALICE = Caller(uid=1000, user="alice")


class Hook:
    """A webhook on 127.0.0.1: records each JSON body; answers ``statuses`` in turn (then 200);
    holds every answer while ``gate`` is clear."""

    def __init__(self) -> None:
        self.bodies: list[dict] = []
        self.statuses: list[int] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.arrived = asyncio.Event()
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.arrived.set()
        await self.gate.wait()
        status = self.statuses.pop(0) if self.statuses else 200
        if status == 200:
            self.bodies.append(body)
        return web.Response(status=status)

    async def wait_for(self, n: int) -> list[dict]:
        for _ in range(500):
            if len(self.bodies) >= n:
                return self.bodies
            await asyncio.sleep(0.01)
        raise AssertionError(f"the webhook got {len(self.bodies)} of {n} notifications: {self.bodies}")


@pytest.fixture
async def hook() -> AsyncIterator[Hook]:
    h = Hook()
    app = web.Application()
    app.router.add_post("/hook", h.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    h.url = f"http://127.0.0.1:{port}/hook"
    yield h
    await runner.cleanup()


def coordinator(tmp_path: Path, notify: dict) -> Coordinator:
    config = parse_config(
        {"startup_timeout_s": 30, "queues": [{"name": "default", "nominal": {"gpu": 8}}], "notify": notify}
    )
    c = Coordinator(config, Store(tmp_path / "db"), clock=Clock())
    for node in ("n1", "n2"):
        c.agents.join(node, c.clock())
    return c


async def submit(c: Coordinator, **fields) -> str:
    job = await c.desk.submit(ALICE, {"argv": ["train"], "workers": 2, "gpus_per_worker": 4, **fields})
    return job.id


def test_mail_types_and_which_event_is_which() -> None:
    assert parse_mail_types(["begin,END", "fail"]) == ("BEGIN", "END", "FAIL")
    assert parse_mail_types(["ALL"]) == ("BEGIN", "END", "FAIL", "REQUEUE")
    assert parse_mail_types(["ALL", "NONE"]) == ()
    with pytest.raises(ValueError, match="'TIME_LIMIT_90' is not a mail type; allowed: BEGIN, END, FAIL"):
        parse_mail_types(["TIME_LIMIT_90"])
    assert notification_kind("failed", ("END",)) == "END"
    assert notification_kind("failed", ("END", "FAIL")) == "FAIL"
    assert notification_kind("cancelled", ("FAIL",)) is None
    assert notification_kind("admitted", ("BEGIN", "END")) is None


async def test_begin_and_fail_reach_the_webhook_with_the_jobs_facts(tmp_path: Path, hook: Hook) -> None:
    c = coordinator(tmp_path, {"webhook": hook.url, "sendmail": "", "backoff_s": 0.01})
    try:
        quiet = await submit(c)  # asked for nothing: never posted
        job_id = await submit(c, mail_type=["BEGIN", "FAIL"], name="train")
        start(c, quiet)
        start(c, job_id)
        (begin,) = await hook.wait_for(1)
        assert (begin["event"], begin["job_id"], begin["name"], begin["user"]) == ("BEGIN", job_id, "train", "alice")
        assert begin["state"] == "running" and begin["mail_user"] == "alice"
        event(c, "n1", job_id, 0, "exited", 3)
        event(c, "n1", job_id, 0, "gone", 3)
        event(c, "n2", job_id, 1, "gone", 143)
        assert c.jobs[job_id].status.state == JobState.FAILED
        _, fail = await hook.wait_for(2)
        assert (fail["event"], fail["state"], fail["exit_status"]) == ("FAIL", "failed", 3)
        assert "rank 0 on n1 exited with status 3" in fail["message"]
        assert subject(fail).startswith(f"labgang Job_id={job_id} Name=train Failed, Run time 00:00:00, FAILED")
        assert all(b["job_id"] == job_id for b in hook.bodies)
    finally:
        await c.close()
        c.store.close()


async def test_a_failing_webhook_is_retried_with_backoff(tmp_path: Path, hook: Hook) -> None:
    hook.statuses = [500, 503]
    c = coordinator(tmp_path, {"webhook": hook.url, "sendmail": "", "backoff_s": 0.01, "retries": 3})
    try:
        job_id = await submit(c, mail_type=["END"])
        await c.desk.cancel(ALICE, job_id)
        (end,) = await hook.wait_for(1)
        assert (end["event"], end["state"]) == ("END", "cancelled")
        assert hook.statuses == [] and c.notifier.delivered == 1
    finally:
        await c.close()
        c.store.close()


async def test_a_slow_webhook_never_holds_up_the_lifecycle(tmp_path: Path, hook: Hook) -> None:
    hook.gate.clear()  # the webhook takes the request and does not answer
    c = coordinator(tmp_path, {"webhook": hook.url, "sendmail": "", "timeout_s": 60})
    try:
        job_id = await submit(c, mail_type=["ALL"])
        start(c, job_id)
        await asyncio.wait_for(hook.arrived.wait(), 5)  # BEGIN is in flight, unanswered
        for node, rank in (("n1", 0), ("n2", 1)):
            event(c, node, job_id, rank, "exited", 0)
            event(c, node, job_id, rank, "gone", 0)
        assert c.jobs[job_id].status.state == JobState.SUCCEEDED  # the lifecycle went on meanwhile
        assert hook.bodies == []
        hook.gate.set()
        assert [b["event"] for b in await hook.wait_for(2)] == ["BEGIN", "END"]  # in order
    finally:
        await c.close()
        c.store.close()


async def test_mail_goes_through_sendmail(tmp_path: Path) -> None:
    outbox = tmp_path / "outbox"
    sendmail = tmp_path / "sendmail"
    sendmail.write_text(f'#!/bin/sh\necho "$@" >> {outbox}.args\ncat >> {outbox}\n')
    sendmail.chmod(sendmail.stat().st_mode | stat.S_IXUSR)
    c = coordinator(tmp_path, {"sendmail": str(sendmail), "mail_from": "gpu-lab"})
    try:
        job_id = await submit(c, mail_type=["END"], mail_user="alice@example.org", name="train")
        await c.desk.cancel(ALICE, job_id)
        for _ in range(500):
            if outbox.exists() and "Subject:" in outbox.read_text():
                break
            await asyncio.sleep(0.01)
        text = outbox.read_text()
        assert (tmp_path / "outbox.args").read_text().split() == ["-t", "-oi"]
        assert "To: alice@example.org\nFrom: gpu-lab\n" in text
        assert f"Subject: labgang Job_id={job_id} Name=train Ended, Run time 00:00:00, CANCELLED, ExitCode -" in text
    finally:
        await c.close()
        c.store.close()


async def test_a_bad_mail_type_is_refused_naming_the_allowed_ones(tmp_path: Path) -> None:
    c = coordinator(tmp_path, {"sendmail": ""})
    try:
        with pytest.raises(BadRequest, match="allowed: BEGIN, END, FAIL, REQUEUE, ALL, NONE") as info:
            await submit(c, mail_type=["BEGINS"])
        assert info.value.field == "mail_type" and len(c.jobs) == 0
    finally:
        await c.close()
        c.store.close()


def test_a_bad_notify_table_is_one_line_per_key() -> None:
    queues = [{"name": "default", "nominal": {"gpu": 1}}]
    with pytest.raises(ConfigError) as info:
        parse_config({"queues": queues, "notify": {"webhook": "ftp://x", "retry": 2}})
    text = str(info.value)
    assert "notify.webhook" in text and "'ftp://x' is not an http:// or https:// URL" in text
    assert "notify.retry" in text


def test_the_submit_flags_build_the_body() -> None:
    from labgang.launcher.cli.job_request import build_submission

    body = build_submission(argv=["x"], mail_type="begin, END", mail_user="a@example.org", env={}, cwd="/")
    assert (body["mail_type"], body["mail_user"]) == (["begin", "END"], "a@example.org")
    assert "mail_type" not in build_submission(argv=["x"], env={}, cwd="/")
