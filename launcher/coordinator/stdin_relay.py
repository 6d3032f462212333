"""``labgang run``'s standard input, streamed: ``POST /v1/jobs/{id}/stdin`` relays each chunk the
CLI sends to the agent of rank 0's node (command ``stdin_input``), which writes what fits into the
rank's input FIFO and says how much it took (``agent/supervisor/stdinrelay.py``): the CLI sends the
rest again later, so a slow reader slows the writer instead of filling memory anywhere.
"""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

from labgang.launcher.coordinator.agents import AgentCallError
from labgang.launcher.coordinator.errors import BadRequest, Conflict, ServiceUnavailable
from labgang.launcher.lifecycle.rules import ranks_in_order
from labgang.launcher.lifecycle.states import RankPhase
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

if TYPE_CHECKING:
    from collections.abc import Callable

    from labgang.launcher.coordinator.agents import AgentRegistry
    from labgang.launcher.coordinator.requests import Caller
    from labgang.launcher.lifecycle.records import JobRecord

MAX_CHUNK_BYTES = 256 * 1024
"""The most input one request carries (decoded)."""


class StdinBody(BaseModel):
    """``{"data": base64 bytes, "eof": bool}`` (docs/openapi.json ``StdinInput``)."""

    model_config = ConfigDict(extra="forbid")

    data: str = Field(default="", max_length=4 * ((MAX_CHUNK_BYTES + 2) // 3))
    eof: StrictBool = False


async def stdin_input(
    agents: AgentRegistry, get_job: Callable[[str], JobRecord], caller: Caller, job_id: str, body: Any
) -> dict[str, Any]:
    """Give rank 0 of ``job_id`` (submitted with ``stdin_stream``) the next bytes of its standard
    input, and with ``eof`` its end.

    Args:
        agents: the agent registry (rank 0's node takes the bytes).
        get_job: the job of an id (``JobOperations.get_job``; raises NotFound).

    Returns:
        ``{"taken": N, "eof": bool, "open": bool}``: the leading N bytes were taken (send the rest
        again); the end of input was taken; False for ``open`` once nothing reads it (rank 0 ended,
        or this attempt's rank 0 has no streamed input, as after a restart): stop sending.

    Raises:
        BadRequest: a malformed body. NotFound: no such job. Forbidden: not the owner and not an
        admin. Conflict: the job does not stream its input (field ``stdin_stream``), or rank 0 is
        not running yet (field ``state``: send again later). ServiceUnavailable: rank 0's node does
        not answer.
    """
    try:
        req = StdinBody.model_validate(body if isinstance(body, dict) else {})
        base64.b64decode(req.data, validate=True)
    except (ValidationError, ValueError) as exc:
        raise BadRequest(f"stdin: {exc}".splitlines()[0], field="data") from None
    job = get_job(job_id)
    caller.check_may_act(job, "write to its standard input")
    if not job.spec.stdin_stream:
        raise Conflict(f"job {job.id} does not stream its standard input (stdin_stream)", field="stdin_stream")
    if job.status.state.finished:
        return {"taken": 0, "eof": False, "open": False}
    rank = next(iter(ranks_in_order(job)), None)
    if rank is not None and rank.state.order > RankPhase.RUNNING.order:  # rank 0 has exited: nobody reads
        return {"taken": 0, "eof": False, "open": False}
    if not job.status.state.holds_devices or rank is None or rank.state != RankPhase.RUNNING:
        where = job.status.state.value if rank is None else f"{job.status.state.value}, rank 0 {rank.state.value}"
        raise Conflict(f"job {job.id}'s rank 0 is not running yet ({where})", field="state")
    args = {"job_id": job.run_id, "rank": 0, "data": req.data, "eof": req.eof}
    try:
        answer = await agents.call(rank.node, "stdin_input", args)
    except AgentCallError as exc:
        raise ServiceUnavailable(f"rank 0's node {rank.node} did not take the input: {exc}") from None
    if not isinstance(answer, dict):
        raise ServiceUnavailable(f"rank 0's node {rank.node} answered {answer!r} to stdin_input")
    return {"taken": int(answer.get("taken", 0)), "eof": bool(answer.get("eof")), "open": bool(answer.get("open"))}
