"""The coordinator client against a real aiohttp server on a real Unix socket."""

from __future__ import annotations

import socket

import pytest
from labgang.launcher.api.async_client import AsyncClient
from labgang.launcher.api.client import (
    STARTING_MARKER,
    ApiError,
    Client,
    CoordinatorUnavailable,
    socket_for,
    starting_pid,
)
from unanswered_hint import agent_hint


def test_socket_follows_state_dir_and_env(monkeypatch, short_dir):
    assert socket_for(short_dir) == short_dir / "labgang.sock"
    monkeypatch.setenv("LABGANG_STATE_DIR", str(short_dir / "other"))
    assert socket_for(None) == short_dir / "other" / "labgang.sock"


def test_no_socket_file_names_the_socket_and_labgang_up(short_dir):
    with pytest.raises(CoordinatorUnavailable) as info:
        Client(short_dir / "labgang.sock").jobs()
    assert str(info.value) == (
        f"no labgang coordinator at {short_dir / 'labgang.sock'}; start one with `labgang up`{agent_hint()}"
    )


def test_stale_socket_file_is_no_coordinator(short_dir):
    path = short_dir / "labgang.sock"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # the file stays, nobody listens: connect() gets ECONNREFUSED
    with pytest.raises(CoordinatorUnavailable, match="start one with `labgang up`"):
        Client(path).jobs()


def test_too_long_socket_path_is_explained(short_dir):
    path = short_dir / ("x" * 120) / "labgang.sock"
    with pytest.raises(CoordinatorUnavailable, match="longer than 107 bytes"):
        Client(path).jobs()


def test_submit_sends_the_body_and_returns_the_job(fake):
    with Client(fake.socket_path) as client:
        job = client.submit({"workers": 4, "gpus_per_worker": 2, "argv": ["true"]})
        assert job["id"] == "1" and job["workers"] == 4
        assert client.jobs(all_users=True, user="ann") == [{"id": "1"}]
    assert fake.received[0] == ("POST", "/v1/jobs", {"workers": 4, "gpus_per_worker": 2, "argv": ["true"]})
    assert fake.received[1][:2] == ("GET", "/v1/jobs?all=1&user=ann")


def test_error_body_becomes_api_error_with_field_and_allowed(fake):
    with pytest.raises(ApiError) as info:
        Client(fake.socket_path).submit({"queue": "nope"})
    err = info.value
    assert (err.status, err.message, err.field, err.allowed) == (400, "unknown queue 'nope'", "queue", ["default"])
    with pytest.raises(ApiError) as info:
        Client(fake.socket_path).job("9")
    assert info.value.status == 404 and info.value.field is None


def test_non_json_error_keeps_the_status(fake):
    with pytest.raises(ApiError) as info:
        Client(fake.socket_path).version()
    assert info.value.status == 500 and "HTTP 500" in info.value.message


def test_logs_read_offsets_and_finished_header(fake):
    client = Client(fake.socket_path)
    first = client.logs("1", rank=0, offset=0)
    assert (first.data, first.next_offset, first.finished) == (b"hello\nworld\n", 12, True)
    rest = client.logs("1", rank=0, offset=6)
    assert rest.data == b"world\n" and rest.next_offset == 12
    assert fake.received[-1][1] == "/v1/jobs/1/logs?rank=0&offset=6"


async def test_async_client_same_answers(fake):
    async with AsyncClient(fake.socket_path) as client:
        assert (await client.job("1"))["state"] == "succeeded"
        chunk = await client.logs("1", offset=6)
        assert chunk.data == b"world\n" and chunk.finished
        with pytest.raises(ApiError) as info:
            await client.submit({"queue": "nope"})
        assert info.value.field == "queue"


async def test_async_client_without_coordinator(short_dir):
    async with AsyncClient(short_dir / "labgang.sock") as client:
        with pytest.raises(CoordinatorUnavailable, match="no labgang coordinator at"):
            await client.jobs()


def test_a_starting_labgang_up_is_waited_for(short_dir, fake_factory):
    """`labgang up &` and at once `labgang run`: the command waits until up is ready, i.e.
    until its socket answers and it has removed its marker (its agent has joined)."""
    import os
    import threading
    import time

    marker = short_dir / STARTING_MARKER
    marker.write_text(f"{os.getpid()}\n")  # a live pid: this test plays the starting `labgang up`
    assert starting_pid(short_dir / "labgang.sock") == os.getpid()
    servers = []
    ready_at = []

    def start_up():
        servers.append(fake_factory(short_dir / "labgang.sock"))
        time.sleep(0.3)  # listening, but the agent has not joined yet
        ready_at.append(time.monotonic())
        marker.unlink()

    timer = threading.Timer(0.3, start_up)
    timer.start()
    try:
        assert Client(short_dir / "labgang.sock").jobs() == [{"id": "1"}]
        answered_at = time.monotonic()
    finally:
        timer.join()
        for server in servers:
            server.stop()
    assert ready_at and answered_at >= ready_at[0]
    assert servers[0].received == [("GET", "/v1/jobs", None)]


def test_a_crashed_start_is_not_waited_for(short_dir):
    (short_dir / STARTING_MARKER).write_text("999999999\n")  # no such process
    assert starting_pid(short_dir / "labgang.sock") is None
    with pytest.raises(CoordinatorUnavailable, match="start one with `labgang up`"):
        Client(short_dir / "labgang.sock").jobs()
