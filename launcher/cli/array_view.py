"""What ``labgang show ARRAY`` prints: a job array's tasks summarised by state (docs/arrays.md).

Pure (no I/O): the input is ``GET /v1/arrays/{id}``'s answer, ``{"array": ID, "jobs": [JobView...]}``.
"""

from __future__ import annotations

from labgang.launcher.arrays import fold
from labgang.launcher.text import printable, render_table

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

STATE_ORDER = ("running", "terminating", "admitted", "pending", "succeeded", "failed", "cancelled")
"""The order of the summary's lines: what is active first."""


def _state_rank(state: str) -> tuple[int, str]:
    return (STATE_ORDER.index(state), state) if state in STATE_ORDER else (len(STATE_ORDER), state)


def array_states(reply: Mapping[str, Any]) -> dict[str, list[int]]:
    """The array's task indices by state (lower-case API names), states in :data:`STATE_ORDER`."""
    by_state: dict[str, list[int]] = {}
    for job in reply.get("jobs") or []:
        by_state.setdefault(str(job.get("state")), []).append(int(job.get("array_index") or 0))
    return {state: sorted(by_state[state]) for state in sorted(by_state, key=_state_rank)}


def array_summary_json(reply: Mapping[str, Any]) -> dict[str, Any]:
    """``show --json ARRAY``: ``{"array": ID, "tasks": N, "states": {state: count}, "jobs": [JobView...]}``."""
    states = array_states(reply)
    return {
        "array": str(reply.get("array")),
        "tasks": len(reply.get("jobs") or []),
        "states": {state: len(indices) for state, indices in states.items()},
        "jobs": list(reply.get("jobs") or []),
    }


def submitted_json(job: Mapping[str, Any], reply: Mapping[str, Any] | None) -> dict[str, Any]:
    """What ``submit --json`` prints: ``{"job": JobView}``; for a job array (``job`` is its first task,
    ``reply`` the array's ``GET /v1/arrays/{id}`` answer) also the array as ``show --json ARRAY`` gives it:
    ``{"job": ..., "array": ID, "tasks": N, "states": {state: count}, "jobs": [JobView of each task]}``."""
    return {"job": job} if reply is None else {"job": job, **array_summary_json(reply)}


def _queues(array_id: str, jobs: list[Mapping[str, Any]]) -> str:
    """The first task's queue, then each other queue a task was moved to with its tasks
    (``vision (12_2 in scratch)``, after ``update 12_2 Partition=scratch``)."""
    first = str(jobs[0].get("queue"))
    others: dict[str, list[int]] = {}
    for j in jobs:
        if str(j.get("queue")) != first:
            others.setdefault(str(j.get("queue")), []).append(int(j.get("array_index") or 0))
    if not others:
        return first
    moved = "; ".join(
        f"{array_id}_[{fold(idx)}] in {q}" if len(idx) > 1 else f"{array_id}_{idx[0]} in {q}"
        for q, idx in others.items()
    )
    return f"{first} ({moved})"


def array_detail(reply: Mapping[str, Any]) -> str:
    """The ``show ARRAY`` text: the array's name, user and queue (of its first task, and where tasks
    were moved to another), then one line
    per state with the count and the tasks (``12_[0-7]``), and how to name one task."""
    array_id = str(reply.get("array"))
    jobs = list(reply.get("jobs") or [])
    if not jobs:
        return f"Job array {array_id}: no tasks"
    first = jobs[0]
    indices = fold(int(j.get("array_index") or 0) for j in jobs)
    limit = first.get("array_limit")
    head = [
        f"Job array: {array_id}  {printable(str(first.get('name') or ''))}".rstrip(),
        f"User:      {first.get('user')} (uid {first.get('uid')})",
        f"Queue:     {_queues(array_id, jobs)}",
        f"Tasks:     {len(jobs)} ({array_id}_[{indices}]" + (f", at most {limit} at once" if limit else "") + ")",
    ]
    numbers = sorted(int(j["numeric_id"]) for j in jobs if j.get("numeric_id") is not None)
    if numbers:
        head.append(f"Numbers:   {fold(numbers)} (each task's own id, its SLURM_JOB_ID)")
    rows = [
        (state.upper(), len(idx), f"{array_id}_[{fold(idx)}]" if len(idx) > 1 else f"{array_id}_{idx[0]}")
        for state, idx in array_states(reply).items()
    ]
    return "\n".join(
        [*head, "", render_table(("STATE", "TASKS", "WHICH"), rows), "", f"One task: labgang show {jobs[0]['id']}"]
    )
