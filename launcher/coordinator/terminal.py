"""``labgang run --pty``'s input: ``POST /v1/jobs/{id}/pty`` relays the caller's keystrokes (and its
terminal's size) to the agent of rank 0's node (command ``pty_input``), which hands them to the
rank's shim; the rank runs on a pseudo-terminal there, as its user. Its output comes back the
way every rank's does: its log, which ``run`` follows.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from labgang.launcher.coordinator.agents import AgentCallError, AgentRegistry
from labgang.launcher.coordinator.errors import BadRequest, Conflict, ServiceUnavailable
from labgang.launcher.lifecycle.rules import ranks_in_order
from labgang.launcher.lifecycle.states import RankPhase
from pydantic import BaseModel, ConfigDict, Field, ValidationError

if TYPE_CHECKING:
    from labgang.launcher.coordinator.requests import Caller
    from labgang.launcher.lifecycle.records import JobRecord

MAX_INPUT_BYTES = 64 * 1024
"""The most terminal input one request carries (decoded)."""


class PtyBody(BaseModel):
    """``{"data": base64 keystrokes, "rows": N, "cols": N}``, each optional (docs/openapi.json ``PtyInput``).

    A size of 0 (a terminal that does not know its size, as under ``script``) means unknown: no
    size is sent, the input still is."""

    model_config = ConfigDict(extra="forbid")

    data: str = Field(default="", max_length=4 * MAX_INPUT_BYTES // 3 + 4)
    rows: int | None = Field(default=None, ge=0, le=10000)
    cols: int | None = Field(default=None, ge=0, le=10000)


async def pty_input(
    agents: AgentRegistry, get_job: Callable[[str], JobRecord], caller: Caller, job_id: str, body: Any
) -> dict[str, Any]:
    """Give rank 0 of ``job_id`` (a ``--pty`` job) terminal input and/or a new terminal size.

    Args:
        agents: the connected agents (the input goes to rank 0's node).
        get_job: the job of an id, raising ``NotFound`` (``JobOperations.get_job``).
        caller: who asks. job_id: the job. body: the request's JSON body (``PtyBody``).

    Returns:
        ``{"taken": bool}``: False when rank 0's shim no longer reads (the rank ended).

    Raises:
        BadRequest: a malformed body. NotFound: no such job. Forbidden: not the owner and not an
        admin. Conflict: not a ``--pty`` job, or rank 0 is not running (yet, or any more; field
        ``state``). ServiceUnavailable: rank 0's node does not answer.
    """
    try:
        req = PtyBody.model_validate(body if isinstance(body, dict) else {})
        data = base64.b64decode(req.data, validate=True)
    except (ValidationError, ValueError) as exc:
        raise BadRequest(f"pty: {exc}".splitlines()[0], field="data") from None
    job = get_job(job_id)
    caller.check_may_act(job, "type into its terminal")
    if not job.spec.pty:
        raise Conflict(f"job {job.id} has no terminal: it was not submitted with --pty", field="pty")
    rank = next(iter(ranks_in_order(job)), None)
    if not job.status.state.holds_devices or rank is None or rank.state != RankPhase.RUNNING:
        where = job.status.state.value if rank is None else f"{job.status.state.value}, rank 0 {rank.state.value}"
        raise Conflict(f"job {job.id}'s terminal is not there: rank 0 is not running ({where})", field="state")
    rows, cols = (req.rows, req.cols) if req.rows and req.cols else (None, None)
    args = {"job_id": job.run_id, "rank": 0, "data": req.data, "rows": rows, "cols": cols}
    if not data and rows is None:
        return {"taken": True}
    try:
        taken = await agents.call(rank.node, "pty_input", args)
    except AgentCallError as exc:
        raise ServiceUnavailable(f"rank 0's node {rank.node} did not take the input: {exc}") from None
    return {"taken": bool(taken)}
