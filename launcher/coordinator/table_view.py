"""``GET /v1/jobs?view=table``: the ``labgang queue`` table, rendered by the coordinator.

``labgang queue`` is typed in shells and kept open under ``watch``; rendering its table in the
coordinator, whose code is warm, instead of in a fresh interpreter that would first decode every
job, is what brings the command near the interpreter's floor (docs/cli-startup.md). Each job's
row facts (:func:`row`) are kept in a :class:`~labgang.launcher.coordinator.view_cache.JobMemo`,
the memo the JobView cache uses, until the job changes (its records count their changes, so no
lifecycle rule has to remember to invalidate anything). What changes with the clock, AGE, and
what depends on other jobs, the folding of an array's pending tasks, are computed on every call
(:func:`jobtable.render`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from labgang.launcher import jobtable
from labgang.launcher.coordinator import views
from labgang.launcher.coordinator.view_cache import JobMemo

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from labgang.launcher.coordinator.store import JobRecord
    from labgang.launcher.jobtable import RowFacts


def row(job: JobRecord) -> RowFacts:
    """One job's row facts: :func:`jobtable.row_facts` of its :func:`views.queue_row`."""
    return jobtable.row_facts(views.queue_row(job))


def table(
    memo: JobMemo[RowFacts],
    jobs: Iterable[JobRecord],
    now: float,
    keep: Callable[[JobRecord], bool] | None,
    known: int,
) -> tuple[str, int]:
    """The ``labgang queue`` table of the jobs of ``jobs`` that are not finished (and pass ``keep``).

    Args:
        memo: the coordinator's row facts by job, kept while each job is unchanged.
        jobs: in submission order, as ``JobOperations.list_jobs`` yields them.
        now: the coordinator's clock, unix seconds (for AGE).
        keep: the ``queue``/``state`` filter, or None.
        known: how many jobs the coordinator holds (bounds the memo).

    Returns:
        ``(table text, number of jobs listed)``.
    """
    listed = (job for job in jobs if not job.status.state.finished and (keep is None or keep(job)))
    rows = memo.all(listed, row)
    memo.trim(known)
    return jobtable.render(rows, now), len(rows)
