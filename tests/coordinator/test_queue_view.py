"""``GET /v1/jobs?view=queue``: the few fields ``labgang queue``'s table reads, page by page as the
whole JobViews are, for every caller the same (no argv under ``private_data``); ``view=table``: the
table itself, rendered by the coordinator; the ``queue`` and ``state`` filters."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from aiohttp import web
from labgang.launcher.cli.job_facts import active_jobs
from labgang.launcher.config.cluster import parse_config
from labgang.launcher.coordinator import keys
from labgang.launcher.coordinator.app import create_app
from labgang.launcher.coordinator.routes import forwarded
from labgang.launcher.coordinator.views import QUEUE_VIEW_FIELDS
from labgang.launcher.jobtable import job_table

NOBODY, DAEMON = 65534, 1


NOW = 2_000_000_000.0


async def start() -> web.AppRunner:
    base = Path(tempfile.mkdtemp(prefix="lgq-", dir="/tmp"))
    config = parse_config(
        {
            "private_data": True,
            "limits": {"page_size": 3},
            "queues": [{"name": "default", "nominal": {"gpu": 8, "mig-1g.10gb": 4}}],
        }
    )
    runner = web.AppRunner(create_app(config, base / "state", token="t", clock=lambda: NOW))
    await runner.setup()
    return runner


async def as_uid(app: web.Application, uid: int, method: str, path: str, query: dict[str, str], body: Any = None):
    raw = json.dumps(body).encode() if body is not None else b""
    status, _, data = await forwarded(app[keys.ROUTES], app[keys.CONFIG], uid, method, path, query, raw)
    return status, json.loads(data)


async def pages(app: web.Application, uid: int, query: dict[str, str]) -> tuple[list[dict[str, Any]], list[Any]]:
    """Every job of ``GET /v1/jobs`` following ``next_cursor``, and the cursors seen."""
    jobs: list[dict[str, Any]] = []
    cursors: list[Any] = []
    while True:
        status, page = await as_uid(app, uid, "GET", "/v1/jobs", query)
        assert status == 200, page
        jobs += page["jobs"]
        cursors.append(page["next_cursor"])
        if page["next_cursor"] is None:
            return jobs, cursors
        query = {**query, "cursor": page["next_cursor"]}


async def test_the_queue_view_is_the_table_fields_of_each_job_page_by_page_for_every_caller() -> None:
    runner = await start()
    try:
        app = runner.app
        for uid, body in (
            (NOBODY, {"argv": ["cat", "secret.txt"], "name": "one", "workers": 2}),
            (NOBODY, {"argv": ["true"], "name": "sweep", "array": "0-6%2"}),
            (DAEMON, {"argv": ["sleep", "1"], "mig": "1g.10gb", "priority": 0}),
            (DAEMON, {"argv": ["true"], "dependency": "afterok:1"}),
        ):
            status, reply = await as_uid(app, uid, "POST", "/v1/jobs", {}, body)
            assert status == 201, reply
        await as_uid(app, NOBODY, "POST", "/v1/jobs/2_3/cancel", {})
        for uid in (NOBODY, DAEMON):
            full, full_cursors = await pages(app, uid, {"all": "1"})
            rows, row_cursors = await pages(app, uid, {"all": "1", "view": "queue"})
            assert len(full) == 1 + 7 + 2 and len(full_cursors) == 4  # pages of 3
            assert row_cursors == full_cursors
            assert rows == [{name: view[name] for name in QUEUE_VIEW_FIELDS} for view in full]
            assert all(list(row) == list(QUEUE_VIEW_FIELDS) for row in rows)
            assert [view["argv"] for view in full if view["user"] != ("nobody" if uid == NOBODY else "daemon")] == [
                None
            ] * (2 if uid == NOBODY else 8)  # private_data still hides others' argv in the full views
            now = 1e10
            assert job_table(active_jobs(rows), now) == job_table(active_jobs(full), now)
            assert "2_[0-2,4-6%2]" in job_table(active_jobs(rows), now)  # the folded array, without task 3
            mine, _ = await pages(app, uid, {"view": "queue"})
            assert {row["user"] for row in mine} == {"nobody" if uid == NOBODY else "daemon"}
    finally:
        await runner.cleanup()


async def submit_four(app: web.Application) -> None:
    for uid, body in (
        (NOBODY, {"argv": ["true"], "name": "one", "workers": 2}),
        (NOBODY, {"argv": ["true"], "name": "sweep", "array": "0-6%2"}),
        (DAEMON, {"argv": ["true"], "mig": "1g.10gb"}),
        (DAEMON, {"argv": ["true"], "name": "训练", "dependency": "afterok:1"}),
    ):
        status, reply = await as_uid(app, uid, "POST", "/v1/jobs", {}, body)
        assert status == 201, reply
    status, reply = await as_uid(app, NOBODY, "POST", "/v1/jobs/2_3/cancel", {})
    assert status == 200, reply


async def test_the_table_view_is_the_queue_table_of_the_active_jobs_on_the_coordinators_clock() -> None:
    runner = await start()
    try:
        app = runner.app
        await submit_four(app)
        for uid, query in ((NOBODY, {"all": "1"}), (DAEMON, {}), (NOBODY, {"user": "daemon"})):
            full, _ = await pages(app, uid, query)
            status, answer = await as_uid(app, uid, "GET", "/v1/jobs", {**query, "view": "table"})
            assert status == 200, answer
            active = active_jobs(full)
            assert answer == {"table": job_table(active, NOW), "jobs": len(active)}
        status, answer = await as_uid(app, NOBODY, "GET", "/v1/jobs", {"all": "1", "view": "table"})
        lines = answer["table"].splitlines()
        assert answer["jobs"] == 1 + 6 + 2 and len(lines) == 1 + 1 + 1 + 2  # header, 1, 2_[...] folded, 3, 4
        assert lines[2].split()[0] == "2_[0-2,4-6%2]" and "3_" not in answer["table"]
        status, answer = await as_uid(app, NOBODY, "GET", "/v1/jobs", {"view": "table", "cursor": "3"})
        assert status == 400 and answer["error"]["field"] == "cursor"
    finally:
        await runner.cleanup()


async def test_the_text_view_is_the_table_view_as_the_body_with_its_count_in_a_header() -> None:
    runner = await start()
    try:
        app = runner.app
        await submit_four(app)
        routes, config = app[keys.ROUTES], app[keys.CONFIG]
        for uid, query in (
            (NOBODY, {"all": "1"}),
            (DAEMON, {}),
            (NOBODY, {"user": "daemon"}),
            (NOBODY, {"all": "1", "state": "running"}),
        ):
            _, table = await as_uid(app, uid, "GET", "/v1/jobs", {**query, "view": "table"})
            status, headers, body = await forwarded(
                routes, config, uid, "GET", "/v1/jobs", {**query, "view": "text"}, b""
            )
            assert status == 200 and headers["Content-Type"] == "text/plain", body
            assert body.decode("utf-8") == table["table"] and headers["X-Jobs-Listed"] == str(table["jobs"])
        _, headers, body = await forwarded(routes, config, DAEMON, "GET", "/v1/jobs", {"view": "text"}, b"")
        assert "训练".encode() in body and headers["X-Jobs-Listed"] == "2"
        for refused in ({"view": "text", "cursor": "3"}, {"view": "text", "queue": "nosuch"}):
            status, headers, body = await forwarded(routes, config, NOBODY, "GET", "/v1/jobs", refused, b"")
            assert status == 400 and headers["Content-Type"] == "application/json", body
            assert json.loads(body)["error"]["field"] in ("cursor", "queue") and "X-Jobs-Listed" not in headers
    finally:
        await runner.cleanup()


async def test_jobs_are_filtered_by_queue_and_state_in_every_view_and_bad_filters_are_refused() -> None:
    runner = await start()
    try:
        app = runner.app
        await submit_four(app)
        every, _ = await pages(app, NOBODY, {"all": "1"})
        assert {job["state"] for job in every} == {"pending", "cancelled"}
        for view in ("full", "queue"):
            pending, _ = await pages(app, NOBODY, {"all": "1", "state": "PENDING", "view": view})
            assert [j["id"] for j in pending] == [j["id"] for j in every if j["state"] == "pending"]
            both, _ = await pages(app, NOBODY, {"all": "1", "state": "cancelled,pending", "view": view})
            assert [j["id"] for j in both] == [j["id"] for j in every]
            none, _ = await pages(app, NOBODY, {"all": "1", "state": "running", "view": view})
            assert none == []
            same, _ = await pages(app, NOBODY, {"all": "1", "queue": "default", "view": view})
            assert [j["id"] for j in same] == [j["id"] for j in every]
        status, answer = await as_uid(app, NOBODY, "GET", "/v1/jobs", {"all": "1", "state": "running", "view": "table"})
        assert answer == {"table": job_table([], NOW), "jobs": 0}
        status, answer = await as_uid(app, NOBODY, "GET", "/v1/jobs", {"queue": "nosuch", "view": "table"})
        assert status == 400 and (answer["error"]["field"], answer["error"]["allowed"]) == ("queue", ["default"])
        status, answer = await as_uid(app, NOBODY, "GET", "/v1/jobs", {"state": "pending,done"})
        assert status == 400 and answer["error"]["field"] == "state" and "'done'" in answer["error"]["message"]
        assert "running" in answer["error"]["allowed"] and "\n" not in answer["error"]["message"]
    finally:
        await runner.cleanup()


async def test_an_unknown_view_is_refused_naming_the_field_and_the_allowed_values() -> None:
    runner = await start()
    try:
        status, reply = await as_uid(runner.app, NOBODY, "GET", "/v1/jobs", {"view": "compact"})
        assert status == 400
        assert (reply["error"]["field"], reply["error"]["allowed"]) == ("view", ["full", "queue", "table", "text"])
        assert "\n" not in reply["error"]["message"] and "compact" in reply["error"]["message"]
    finally:
        await runner.cleanup()


def test_openapi_documents_the_queue_rows_as_the_coordinator_builds_them() -> None:
    spec = json.loads((Path(__file__).resolve().parents[2] / "docs" / "openapi.json").read_text())
    row = spec["components"]["schemas"]["JobRow"]
    # every row has the queue fields; a job of groups' row also has its groups (docs/job-groups.md)
    assert list(row["properties"]) == [*row["required"], "groups"]
    assert list(row["required"]) == list(QUEUE_VIEW_FIELDS)
    [view] = [p for p in spec["paths"]["/v1/jobs"]["get"]["parameters"] if p["name"] == "view"]
    assert view["schema"]["enum"] == ["full", "queue", "table", "text"]
