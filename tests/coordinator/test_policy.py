"""Who may use what (launcher/coordinator/policy.py): per-queue priority classes, raw priorities for admins only,
per-user limits. Refusals are a 4xx with one line on every path (a forwarded socket request, the TCP
API with a read token, an array, a dependency) and change nothing in the store.

A real coordinator app with a real SQLite store; requests go the way an agent forwards a user's
socket request (uid vouched for: ``nobody`` and ``daemon`` are ordinary users, root is an admin).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from labgang.launcher.config.cluster import ConfigError, parse_config
from labgang.launcher.coordinator import keys
from labgang.launcher.coordinator.app import create_app
from labgang.launcher.coordinator.policy import check_priority_allowed
from labgang.launcher.coordinator.routes import forwarded

READ = "read-secret-0123456789"
NOBODY, DAEMON, ROOT = 65534, 1, 0
PORTS: dict[int, int] = {}  # id(app) -> its TCP port

CONFIG: dict[str, Any] = {
    "admins": ["root"],
    "default_queue": "vision",
    "priority_classes": {"low": -10, "normal": 0, "high": 100, "serving": 1000},
    "queues": [
        {
            "name": "vision",
            "nominal": {"gpu": 8},
            "priority_classes": ["low", "normal", "high"],
            "default_priority_class": "normal",
            "max_submitted_jobs_per_user": 3,
            "max_gpus_per_user": 4,
        },
        {
            "name": "serving",
            "nominal": {"gpu": 2},
            "priority_classes": ["serving"],
            "default_priority_class": "serving",
        },
        {"name": "open", "nominal": {"gpu": 2}},
        {"name": "private", "nominal": {"gpu": 2}, "users": ["daemon"]},
    ],
}


@pytest.fixture
async def app():
    base = Path(tempfile.mkdtemp(prefix="lgp-", dir="/tmp"))
    read_file = base / "read.token"
    read_file.write_text(READ + "\n")
    read_file.chmod(0o600)
    app = create_app(parse_config({**CONFIG, "read_token_file": str(read_file)}), base / "state", token="secret")
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    PORTS[id(app)] = tcp._server.sockets[0].getsockname()[1]
    try:
        yield app
    finally:
        await runner.cleanup()


async def as_uid(app: web.Application, uid: int, body: Any) -> tuple[int, Any]:
    status, _, data = await forwarded(
        app[keys.ROUTES], app[keys.CONFIG], uid, "POST", "/v1/jobs", {}, json.dumps(body).encode()
    )
    return status, json.loads(data)


def store_state(app: web.Application) -> tuple[int, int]:
    coord = app[keys.COORDINATOR]
    return coord.store.commits, len(coord.jobs)


REFUSALS = [
    pytest.param(
        {"argv": ["true"], "priority": 2000000},
        403,
        "priority: a number (-p 2000000) above the queue's default (0) is for admins only; user nobody may use "
        "queue vision's priority classes: "
        "name one of low (-10), normal (0), high (100), or a number up to 0",
        ["low", "normal", "high"],
        id="raw-number",
    ),
    pytest.param(
        {"argv": ["true"], "priority": "5"},
        403,
        "priority: a number (-p 5) above the queue's default (0) is for admins only",
        ["low", "normal", "high"],
        id="raw-number-as-text",
    ),
    pytest.param(
        {"argv": ["true"], "queue": "vision", "priority": "serving"},
        403,
        "priority: class 'serving' is not allowed in queue vision (its priority_classes); "
        "allowed: an integer up to 0 or one of low (-10), normal (0), high (100)",
        ["low", "normal", "high"],
        id="class-not-in-queue",
    ),
    pytest.param(
        {"argv": ["true"], "queue": "serving", "priority": "high"},
        403,
        "priority: class 'high' is not allowed in queue serving (its priority_classes); "
        "allowed: an integer up to 1000 or one of serving (1000)",
        ["serving"],
        id="class-not-in-other-queue",
    ),
    pytest.param(
        {"argv": ["true"], "queue": "private"},
        403,
        "user 'nobody' may not submit to queue 'private'",
        ["vision", "serving", "open"],
        id="queue",
    ),
    pytest.param(
        {"argv": ["true"], "priority": 500, "array": "0-9"},
        403,
        "priority: a number (-p 500) above the queue's default (0) is for admins only",
        ["low", "normal", "high"],
        id="array",
    ),
    pytest.param(
        {"argv": ["true"], "priority": 500, "dependency": "afterok:1"},
        403,
        "priority: a number (-p 500) above the queue's default (0) is for admins only",
        ["low", "normal", "high"],
        id="dependency",
    ),
    pytest.param(
        {"argv": ["true"], "priority": "urgent"},
        400,
        "unknown priority class 'urgent' in queue vision; allowed: an integer up to 0 "
        "or one of low (-10), normal (0), high (100)",
        ["low", "normal", "high"],
        id="unknown-class-is-a-bad-value",
    ),
    pytest.param(  # what this user may use in this queue: not every class of the cluster
        {"argv": ["true"], "queue": "serving", "priority": "urgent"},
        400,
        "unknown priority class 'urgent' in queue serving; allowed: an integer up to 1000 or one of serving (1000)",
        ["serving"],
        id="unknown-class-names-the-queues-own",
    ),
    pytest.param(  # a Slurm user's `-p serving` means the partition: the line says where a queue goes
        {"argv": ["true"], "priority": "open"},
        400,
        "unknown priority class 'open' in queue vision; allowed: an integer up to 0 or one of low (-10), "
        "normal (0), high (100); 'open' is a queue: Slurm's -p/--partition is -q/--queue (or --partition) "
        "here, -p the priority",
        ["low", "normal", "high"],
        id="a-queue-given-as-priority",
    ),
]


@pytest.mark.parametrize("body, status, message, allowed", REFUSALS)
async def test_a_refusal_is_one_line_and_changes_nothing(app, body, status, message, allowed) -> None:
    before = store_state(app)
    got, reply = await as_uid(app, NOBODY, body)
    assert got == status, reply
    error = reply["error"]
    assert error["message"].startswith(message), error["message"]
    assert "\n" not in error["message"]
    assert error["allowed"] == allowed
    assert store_state(app) == before


async def test_allowed_classes_and_the_queue_default(app) -> None:
    cases = [
        ({"argv": ["true"]}, 0),  # vision's default_priority_class normal
        ({"argv": ["true"], "priority": "high"}, 100),
        ({"argv": ["true"], "priority": "HIGH"}, 100),  # a class in any case, as Slurm's QOS names
        ({"argv": ["true"], "queue": "serving"}, 1000),  # serving's default class
        ({"argv": ["true"], "queue": "open", "priority": "serving"}, 1000),  # no list: every class
    ]
    for body, priority in cases:
        status, reply = await as_uid(app, DAEMON, body)
        assert status == 201, reply
        assert reply["job"]["priority"] == priority
    # the queue's list holds for a class in any case too: serving is not vision's
    status, reply = await as_uid(app, DAEMON, {"argv": ["true"], "priority": "Serving"})
    assert status == 403 and reply["error"]["field"] == "priority", reply


async def test_admins_may_give_numbers_and_any_class(app) -> None:
    for body, priority in [
        ({"argv": ["true"], "priority": 2000000}, 2000000),
        ({"argv": ["true"], "queue": "serving", "priority": "high"}, 100),
    ]:
        status, reply = await as_uid(app, ROOT, body)
        assert status == 201, reply
        assert reply["job"]["priority"] == priority


async def test_the_tcp_api_with_a_read_token_submits_nothing(app) -> None:
    before = store_state(app)
    headers = {"Authorization": f"Bearer {READ}"}
    url = f"http://127.0.0.1:{PORTS[id(app)]}/v1/jobs"
    async with aiohttp.ClientSession() as s, s.post(url, json={"argv": ["true"], "priority": 5}, headers=headers) as r:
        assert r.status == 403
        assert "read-only" in (await r.json())["error"]["message"]
    assert store_state(app) == before


async def test_submitted_jobs_per_user_limit(app) -> None:
    for _ in range(2):
        status, reply = await as_uid(app, NOBODY, {"argv": ["true"]})
        assert status == 201, reply
    before = store_state(app)
    status, reply = await as_uid(app, NOBODY, {"argv": ["true"], "array": "0-1"})  # 2 + 2 > 3: refused whole
    assert status == 403
    assert reply["error"]["message"] == (
        "user nobody has 2 of 3 unfinished jobs allowed in queue vision (max_submitted_jobs_per_user); "
        "refused 2 more jobs: cancel some or wait for them to end"
    )
    assert reply["error"]["field"] is None  # a limit reached, not a bad field (nor a refused default queue)
    assert store_state(app) == before
    status, reply = await as_uid(app, NOBODY, {"argv": ["true"]})  # the third fits
    assert status == 201, reply
    status, reply = await as_uid(app, NOBODY, {"argv": ["true"]})
    assert status == 403 and "has 3 of 3 unfinished jobs" in reply["error"]["message"]
    status, reply = await as_uid(app, DAEMON, {"argv": ["true"]})  # another user is not held
    assert status == 201, reply
    status, reply = await as_uid(app, NOBODY, {"argv": ["true"], "queue": "open"})  # nor another queue
    assert status == 201, reply
    coord = app[keys.COORDINATOR]
    job_id = next(j.id for j in coord.jobs.values() if j.spec.user == "nobody" and j.spec.queue == "vision")
    status, _, _ = await forwarded(
        app[keys.ROUTES], app[keys.CONFIG], NOBODY, "POST", f"/v1/jobs/{job_id}/cancel", {}, b""
    )
    assert status == 200
    status, reply = await as_uid(app, NOBODY, {"argv": ["true"]})  # a cancelled job no longer counts
    assert status == 201, reply


async def test_a_job_bigger_than_the_per_user_limit_is_refused_at_submission(app) -> None:
    before = store_state(app)
    status, reply = await as_uid(app, NOBODY, {"argv": ["true"], "workers": 3, "gpus_per_worker": 2})
    assert status == 409, reply
    assert reply["error"]["message"] == (
        "job can never start: job needs 6 gpu but queue vision allows 4 per user (max_gpus_per_user)"
    )
    assert reply["error"]["field"] == "workers"
    assert store_state(app) == before


def test_check_priority_allowed_is_the_one_check() -> None:
    cfg = parse_config(CONFIG)
    assert check_priority_allowed(cfg, "vision", "high", user="lab1", admin=False) is None
    assert check_priority_allowed(cfg, "vision", None, user="lab1", admin=False) is None
    assert check_priority_allowed(cfg, "vision", 7, user="lab1", admin=True) is None
    refused = check_priority_allowed(cfg, "vision", 7, user="lab1", admin=False)
    assert refused is not None and refused.field == "priority"
    refused = check_priority_allowed(cfg, "nosuch", "high", user="lab1", admin=False)
    assert refused is not None and refused.field == "queue"


def test_no_priority_classes_keeps_numbers_for_admins_only() -> None:
    cfg = parse_config({"queues": [{"name": "default"}]})
    refused = check_priority_allowed(cfg, "default", 5, user="lab1", admin=False)
    assert refused is not None
    assert refused.message == (
        "priority: a number (-p 5) above the queue's default (0) is for admins only; user lab1 may use queue "
        "default's priority classes: no -p (the queue's default priority), or a number up to 0"
    )
    assert refused.allowed is None  # no class to list (it was [], read as "nothing is allowed")
    # at or below the default (Slurm's --nice): a user may only lower their own job
    assert check_priority_allowed(cfg, "default", 0, user="lab1", admin=False) is None
    assert check_priority_allowed(cfg, "default", -5, user="lab1", admin=False) is None
    serving = parse_config(CONFIG)
    assert check_priority_allowed(serving, "serving", 999, user="lab1", admin=False) is None  # default 1000
    assert check_priority_allowed(serving, "serving", 1001, user="lab1", admin=False) is not None


CONFIG_PROBLEMS = [
    (
        {"priority_classes": {"high": 1}, "queues": [{"name": "default", "priority_classes": ["urgent"]}]},
        "queues[0].priority_classes[0]: 'urgent' is not a priority class; allowed: high",
    ),
    (
        {"queues": [{"name": "default", "priority_classes": ["high"]}]},
        "queues[0].priority_classes[0]: 'high' is not a priority class; allowed: none: define them in "
        "[priority_classes] first",
    ),
    (
        {"priority_classes": {"high": 1}, "queues": [{"name": "default", "priority_classes": ["high", "high"]}]},
        "queues[0].priority_classes[1]: 'high' is listed twice; allowed: once",
    ),
    (
        {
            "priority_classes": {"high": 1, "low": 0},
            "queues": [{"name": "default", "priority_classes": ["low"], "default_priority_class": "high"}],
        },
        "queues[0].default_priority_class: 'high' is not a class of queues[0].priority_classes; allowed: low",
    ),
    (
        {"priority_classes": {"high": 1}, "queues": [{"name": "default", "default_priority_class": "top"}]},
        "queues[0].default_priority_class: 'top' is not a class of [priority_classes]; allowed: high",
    ),
    ({"queues": [{"name": "default", "max_gpus_per_user": -1}]}, "queues[0].max_gpus_per_user:"),
    ({"queues": [{"name": "default", "max_running_jobs_per_user": 1.5}]}, "queues[0].max_running_jobs_per_user:"),
    ({"queues": [{"name": "default", "max_submitted_jobs_per_user": True}]}, "queues[0].max_submitted_jobs_per_user:"),
]


@pytest.mark.parametrize("data, expected", CONFIG_PROBLEMS)
def test_config_problems_name_the_key_and_what_is_allowed(data: dict, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    assert any(p.startswith(expected) for p in info.value.problems), info.value.problems


def test_config_check_refuses_a_bad_class_with_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('[priority_classes]\nhigh = 1\n[[queues]]\nname = "default"\npriority_classes = ["hgh"]\n')
    out = subprocess.run(
        [sys.executable, "-m", "labgang.launcher", "config", "check", str(bad)], capture_output=True, text=True
    )
    assert out.returncode == 2
    assert "queues[0].priority_classes[0]: 'hgh' is not a priority class; allowed: high" in out.stderr
