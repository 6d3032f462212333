"""``GET /v1/jobs?view=table``: the ``labgang queue`` table, rendered by the coordinator.

``labgang queue`` is typed in shells and kept open under ``watch``; rendering its table in the
coordinator, whose code is warm, instead of in a fresh interpreter that would first decode every
job, is what brings the command near the interpreter's floor (docs/cli-startup.md). Each job's
row facts (:func:`labgang.launcher.jobtable.row_facts` of its :func:`views.queue_row`) are kept
until something the row shows changes: its state, submit time, pending reason or nodes
(:meth:`RowCache.facts` compares them on every call, so no lifecycle rule has to remember to
invalidate anything). What changes with the clock, AGE, and what depends on other jobs, the
folding of an array's pending tasks, are computed on every call (:func:`jobtable.render`).
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from labgang.launcher import jobtable
from labgang.launcher.coordinator import views

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from labgang.launcher.jobtable import RowFacts
    from labgang.launcher.store import JobRecord


def _mark(job: JobRecord) -> tuple[Any, ...]:
    """Everything mutable that :func:`views.queue_row` reads (the spec never changes)."""
    st, ranks = job.status, job.ranks
    nodes = tuple([(r, rank.node) for r, rank in ranks.items()]) if ranks else ()
    return (st.state, st.submit_time, st.reason_code, st.reason_message, nodes)


class RowCache:
    """Each job's row facts, with the mark (:func:`_mark`) they were built from."""

    def __init__(self) -> None:
        self._rows: dict[str, tuple[JobRecord, tuple[Any, ...], RowFacts]] = {}

    def facts(self, job: JobRecord) -> RowFacts:
        """``row_facts(queue_row(job))``, rebuilt only when the job's mark changed."""
        mark = _mark(job)
        entry = self._rows.get(job.id)
        if entry is not None and entry[0] is job and entry[1] == mark:
            return entry[2]
        facts = jobtable.row_facts(views.queue_row(job))
        self._rows[job.id] = (job, mark, facts)
        return facts

    def trim(self, known: int) -> None:
        """Forget every row once there are more than twice ``known`` (the jobs the coordinator
        holds) plus 64, so that rows of jobs gone from memory do not pile up."""
        if len(self._rows) > 2 * known + 64:
            self._rows.clear()


_CACHES: weakref.WeakKeyDictionary[object, RowCache] = weakref.WeakKeyDictionary()


def table(
    owner: object, jobs: Iterable[JobRecord], now: float, keep: Callable[[JobRecord], bool] | None, known: int
) -> tuple[str, int]:
    """The ``labgang queue`` table of the jobs of ``jobs`` that are not finished (and pass ``keep``).

    Args:
        owner: the coordinator (its row cache goes away with it).
        jobs: in submission order, as ``Coordinator.list_jobs`` yields them.
        now: the coordinator's clock, unix seconds (for AGE).
        keep: the ``queue``/``state`` filter, or None.
        known: how many jobs the coordinator holds (bounds the cache).

    Returns:
        ``(table text, number of jobs listed)``.
    """
    cache = _CACHES.get(owner)
    if cache is None:
        cache = _CACHES[owner] = RowCache()
    rows = [cache.facts(job) for job in jobs if not job.status.state.finished and (keep is None or keep(job))]
    cache.trim(known)
    return jobtable.render(rows, now), len(rows)
