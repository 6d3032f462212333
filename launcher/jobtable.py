"""The ``labgang queue`` table: squeue's columns, one row per job, pending array tasks folded.

Pure (no I/O, no clock reads: ``now`` is passed in) and free of click and of the coordinator's
classes, because two sides use it: the coordinator renders the table for
``GET /v1/jobs?view=table`` (what ``labgang queue`` prints, docs/cli-startup.md), keeping each
job's :func:`row_facts` until the job changes, and any client may render the dicts of
``GET /v1/jobs?view=queue`` with :func:`job_table`.

A row is built in two steps: :func:`row_facts` (one job alone: every cell but AGE, escaped) and
:func:`render` (all rows together: AGE from ``now``, the folding of an array's pending tasks into
one row, the column widths).
"""

from __future__ import annotations

from labgang.launcher.durations import format_duration
from labgang.launcher.text import align, clip, printable

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable, Mapping, Sequence
    from typing import Any

    # (cells: JOBID NAME USER QUEUE STATE GANG PRIO NODES(REASON), submit time or None,
    #  array id or None, array index or None, the array's %N cap or None, pending?)
    RowFacts = tuple[tuple[str, ...], float | None, str | None, int | None, int | None, bool]
    # a pending array task's (its row's position, fold key, array id, index, the array's %N cap or
    # None): fold_pending_tasks
    PendingTask = tuple[int, Hashable, str, int, int | None]

HEADERS = ("JOBID", "NAME", "USER", "QUEUE", "STATE", "GANG", "PRIO", "AGE", "NODES(REASON)")
"""The table's columns, squeue's with a GANG (ranks x devices per rank) column."""

_AGE = HEADERS.index("AGE")


def row_facts(job: Mapping[str, Any]) -> RowFacts:
    """What one job's row needs apart from the clock and the other jobs.

    Args:
        job: a JobView dict or a ``view=queue`` row (only ``QUEUE_VIEW_FIELDS`` are read).

    Returns:
        ``(cells, submit_time, array_id, array_index, array_limit, pending)``: ``cells`` are the
        row's printable strings but AGE (JOBID, NAME clipped to 20, USER, QUEUE, STATE, GANG,
        PRIO, NODES(REASON)); the rest is what :func:`render` folds and ages by.
    """
    array_id = job.get("array_id")
    state = str(job.get("state", "?"))
    cells = (
        printable(str(job.get("id", "?"))),
        printable(clip(str(job.get("name") or "-"), 20)),
        printable(str(job.get("user", "?"))),
        printable(str(job.get("queue", "?"))),
        printable(state.upper()),
        printable(gang_shape(job)),
        str(job.get("priority", 0)),
        printable(where_or_why(job)),
    )
    return (
        cells,
        job.get("submit_time") or None,
        None if array_id is None else str(array_id),
        job.get("array_index"),
        job.get("array_limit"),
        state == "pending",
    )


def render(rows: Sequence[RowFacts], now: float) -> str:
    """The table of ``rows`` (in the order given) at ``now`` (unix seconds, for AGE).

    The pending tasks of each job array are folded into the row of the first one, as squeue
    shows them: its JOBID becomes ``12_[5-99%8]`` (every pending task's index, then the array's
    ``%N`` cap when it has one). Only tasks whose rows are the same but for JOBID fold together
    (a task moved to another queue, renamed, reprioritised or waiting for another reason keeps
    a row of its own). Other jobs, and tasks that are not pending, keep their own rows.

    Returns:
        The header line and one line per row, joined with newlines, no trailing newline.
    """
    # tasks fold while their rows say the same but the id: one task updated alone (its queue, name,
    # priority) or held alone keeps its own row, as squeue splits such a task off its array's record
    folded = fold_pending_tasks(
        [  # by index, not unpacking all six facts of every row: most rows are no pending array task
            (i, (row[2], row[0][1:]), row[2], row[3], row[4])  # (position, key, array id, index, cap)
            for i, row in enumerate(rows)
            if row[5] and row[2] is not None and row[3] is not None  # pending, of an array, with an index
        ]
    )
    lines = []
    for i, (cells, submitted, _, _, _, _) in enumerate(rows):
        if folded and i in folded:
            shown_id = folded[i]
            if shown_id is None:
                continue  # folded into the array's first pending task
            cells = (shown_id, *cells[1:])
        age = "-" if submitted is None else format_duration(now - submitted)
        lines.append((*cells[:_AGE], age, *cells[_AGE:]))
    return align(HEADERS, lines)


def fold_pending_tasks(tasks: Iterable[PendingTask]) -> dict[int, str | None]:
    """squeue's folding of a job array's pending tasks into one row, the one rule of every table that
    shows jobs (``labgang queue``'s :func:`render`, ``labgang top``'s jobs view, ``tui/rows.py``).

    Args:
        tasks: each pending task of a job array among the rows, in the order the rows are shown, as
            :data:`PendingTask`: ``(its row's position, fold key, array id, index, the array's %N cap
            or None)``; the key holds the array and all the row shows but its id, so that tasks fold
            only while their rows say the same.

    Returns:
        Row position -> the JOBID that row shows in place of its own (``12_[5-99%8]``,
        :func:`folded_id`, with that row's cap): the first row of each key with several tasks; or
        None for the key's later rows, which are left out (folded into the first). Rows not in the
        answer (other jobs, and a key of one task) keep their rows and ids.
    """
    first: dict[Hashable, tuple[int, str, list[int], int | None]] = {}
    folded: dict[int, str | None] = {}
    for position, key, array_id, index, cap in tasks:
        found = first.get(key)
        if found is None:
            first[key] = (position, array_id, [index], cap)
        else:
            found[2].append(index)
            folded[position] = None
    for position, array_id, indices, cap in first.values():
        if len(indices) > 1:
            folded[position] = folded_id(array_id, indices, cap)
    return folded


def job_table(jobs: Iterable[Mapping[str, Any]], now: float) -> str:
    """The ``labgang queue`` table of ``jobs`` (JobView dicts or ``view=queue`` rows, in the order
    given): :func:`render` of each one's :func:`row_facts`."""
    return render([row_facts(job) for job in jobs], now)


def folded_id(array_id: str, indices: Sequence[int], cap: int | None) -> str:
    """The JOBID of an array's folded pending tasks: ``12_[5-99%8]`` (:func:`labgang.launcher.arrays.fold`)."""
    from labgang.launcher.arrays import fold

    return f"{array_id}_[{fold(indices)}{'' if cap is None else f'%{cap}'}]"


def gang_shape(job: Mapping[str, Any]) -> str:
    """A job's size as ``ranks x devices per rank``: ``"4x2"`` for GPUs, ``"2x1 mig-1g.10gb"`` for MIG;
    a job of groups joins its groups' with ``+``: ``"1x0+4x2"`` (docs/job-groups.md); a share of one
    GPU shows what it takes of the card, as Slurm's gres names it: ``"1xshard:2"`` (``--shards 2``),
    ``"1xmps:25"`` (``--mps 25``; docs/sharing.md)."""
    shards, mps = job.get("shards") or 0, job.get("mps") or 0
    if shards or mps:
        return f"{job.get('workers', 1)}x{f'shard:{shards}' if shards else f'mps:{mps}'}"
    groups = job.get("groups")
    if groups:
        shape = "+".join(f"{g.get('workers', '?')}x{g.get('gpus_per_worker', '?')}" for g in groups)
    else:
        shape = f"{job.get('workers', '?')}x{job.get('gpus_per_worker', '?')}"
    resource = job.get("resource") or "gpu"
    return shape if resource == "gpu" else f"{shape} {resource}"


def where_or_why(job: Mapping[str, Any]) -> str:
    """squeue's NODELIST(REASON): the nodes a holding job runs on, else ``(reason)``; a job held and
    waiting for its dependency too, both in short: ``(held by alice; waits for afterok:22 (running))``
    (``labgang explain`` says how to release it)."""
    state = str(job.get("state", ""))
    nodes = job.get("nodes") or []
    if state in ("admitted", "running", "terminating") and nodes:
        return ",".join(nodes)
    reason = job.get("reason") or None
    if reason and reason.get("dependency"):
        held = str(reason.get("message") or "held").split(";", 1)[0]
        return f"({held}; {reason['dependency'].get('message') or reason['dependency'].get('code')})"
    if reason:
        return f"({reason.get('message') or reason.get('code')})"
    if state == "pending":
        return "(waiting for a scheduling cycle)"
    return ",".join(nodes) if nodes else "-"
