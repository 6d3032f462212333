"""``GET /v1/jobs/{id}/logs?stream=``: the coordinator asks the rank's agent for one stream, and an
agent from before streams (its answer does not say ``stream``) never has its bytes shown twice: all
of them count as stdout, none as stderr (real SQLite store; the agent's answers given here)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest
from labgang.launcher.coordinator.core import Coordinator
from lifecycle_driver import ROOT, make_coord, start, submit


@pytest.fixture
def coord(tmp_path: Path):
    yield from make_coord(tmp_path)


def answering(coord: Coordinator, answer: dict[str, Any]) -> list[dict[str, Any]]:
    """Make the agents answer ``read_log`` with ``answer``; the arguments they were sent."""
    sent: list[dict[str, Any]] = []

    async def call(node: str, command: str, args: dict[str, Any], timeout: float = 0.0) -> dict[str, Any]:
        assert command == "read_log"
        sent.append(args)
        return answer

    coord.desk._agents.call = call  # type: ignore[method-assign,assignment]
    return sent


async def test_the_stream_asked_goes_to_the_agent_and_its_bytes_come_back(coord: Coordinator) -> None:
    job_id = await submit(coord)
    start(coord, job_id)
    data = base64.b64encode(b"err\n").decode()
    sent = answering(coord, {"data": data, "next_offset": 9, "size": 9, "stream": "stderr"})
    assert await coord.desk.read_log(ROOT, job_id, 0, 0, stream="stderr") == (b"err\n", 9, False)
    assert sent[-1]["stream"] == "stderr"
    await coord.desk.read_log(ROOT, job_id, 0, 0)
    assert "stream" not in sent[-1]


async def test_an_agent_without_streams_shows_everything_once_as_stdout(coord: Coordinator) -> None:
    job_id = await submit(coord)
    start(coord, job_id)
    answering(coord, {"data": base64.b64encode(b"out\nerr\n").decode(), "next_offset": 8, "size": 8})
    assert await coord.desk.read_log(ROOT, job_id, 0, 0, stream="stdout") == (b"out\nerr\n", 8, False)
    assert await coord.desk.read_log(ROOT, job_id, 0, 0, stream="stderr") == (b"", 8, False)


async def test_a_stream_that_is_none_is_refused_naming_the_field(coord: Coordinator) -> None:
    from labgang.launcher.coordinator.errors import BadRequest
    from labgang.launcher.coordinator.handlers import job_logs

    job_id = await submit(coord)
    start(coord, job_id)
    sent = answering(coord, {"data": "", "next_offset": 0, "size": 0})
    with pytest.raises(BadRequest) as err:
        await job_logs(coord.desk, ROOT, {"id": job_id}, {"stream": "both"}, b"")
    assert err.value.field == "stream" and "stdout or stderr" in str(err.value)
    assert sent == []
