"""The coordinator's read side of its jobs: :class:`JobViews`, each job's views built once and
kept while the job is unchanged (``view_cache.py``), and shown to each caller as they may see it.

One part holds what ``GET /v1/jobs`` (whole JobViews and ``queue`` rows, encoded), ``labgang
queue``'s table (row facts, ``table_view.py``) and the pitfall watch (each job's ``JobView`` for
the detectors, ``metrics.coordinator_snapshot``) keep per job, and the ``private_data`` rule that
hides another user's command line (docs/security.md). The handlers and the coordinator hand it the
jobs to show; it never reads the lifecycle model itself.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

from labgang.launcher.coordinator import table_view, views
from labgang.launcher.coordinator.view_cache import JobMemo, JobViewCache, page_pieces

if TYPE_CHECKING:
    from labgang.launcher.coordinator.requests import Caller
    from labgang.launcher.coordinator.store import JobRecord
    from labgang.launcher.jobtable import RowFacts
    from labgang.launcher.pitfalls.views import JobView


class JobViews:
    """Each job's views, kept while the job is unchanged, and who may see what of them.

    Args:
        private_data: the configuration's ``private_data`` (Slurm's ``PrivateData=jobs``): another
            user's ``argv``, ``cwd`` and output paths are hidden from callers who are not admins.
    """

    def __init__(self, private_data: bool) -> None:
        self._private_data = private_data
        self._encoded = JobViewCache()  # encoded JobViews and queue rows for GET /v1/jobs
        self._rows: JobMemo[RowFacts] = JobMemo()  # `labgang queue`'s row facts (table_view.py)
        self._pitfall_views: JobMemo[JobView] = JobMemo()

    @property
    def pitfall_views(self) -> JobMemo[JobView]:
        """The pitfall detectors' view of each job (``metrics.coordinator_snapshot`` fills and trims it)."""
        return self._pitfall_views

    def hides_argv(self, caller: Caller, job: JobRecord) -> bool:
        """Whether ``caller`` sees ``job`` without its ``argv`` (``private_data``, not the owner, not an admin)."""
        return bool(self._private_data and not (caller.admin or caller.owns(job.spec)))

    def job_view(self, caller: Caller, job: JobRecord) -> dict[str, Any]:
        """The JobView ``caller`` may see: with ``private_data``, another user's ``argv``, ``cwd``
        and output paths are null unless the caller is an admin (docs/security.md); a non-finite
        ``time_limit_s`` or ``grace_s`` (a job stored before inf was refused) is null."""
        view = views.job_view(job)
        if self.hides_argv(caller, job):
            view["argv"] = None
            view["cwd"] = None
            view["output"] = view["error"] = None
            for group in view.get("groups") or ():  # a job of groups: each group's command too
                group["argv"] = None
        for key in ("time_limit_s", "grace_s"):  # a job stored before inf was refused at submission
            value = view.get(key)
            if isinstance(value, float) and not math.isfinite(value):
                view[key] = None
        return view

    def page(
        self,
        caller: Caller,
        jobs: Iterable[JobRecord],
        shape: Literal["full", "queue"],
        limit: int,
        budget: int,
        known: int,
    ) -> list[bytes]:
        """One ``GET /v1/jobs`` page body, ``{"jobs": [...], "next_cursor": ...}``, in pieces of
        about 64 KiB to be sent one after the other (:func:`view_cache.page_pieces`): each job's
        view encoded once and reused until the job changes.

        Args:
            caller: who asks (``private_data`` may hide another user's ``argv``).
            jobs: the listed jobs in submission order, read only as far as the page goes.
            shape: ``"full"`` (JobViews as :meth:`job_view` gives them) or ``"queue"`` (``views.queue_row``,
                no ``argv``: the same to every caller).
            limit: at most this many jobs.
            budget: about this many bytes of JSON (at least one job).
            known: how many jobs the coordinator holds (bounds the cache).

        Raises:
            ValueError: a view holds a non-finite number (``jsoncodec.dumps``).
        """
        build: Callable[[JobRecord], dict[str, Any]] = functools.partial(self.job_view, caller)
        variant: bool | str | Callable[[JobRecord], bool] = False
        if shape == "queue":  # no argv in a row: one variant for every caller
            build, variant = views.queue_row, "queue"
        elif self._private_data and not caller.admin:  # argv hidden from some: hides_argv
            variant = functools.partial(self.hides_argv, caller)
        encoded, last, more = self._encoded.page(jobs, build, variant, limit, budget)
        self._encoded.trim(known)
        return page_pieces(encoded, str(last.seq) if more and last is not None else None)

    def table(
        self, jobs: Iterable[JobRecord], now: float, keep: Callable[[JobRecord], bool] | None, known: int
    ) -> tuple[str, int]:
        """The ``labgang queue`` table of the unfinished jobs of ``jobs`` (:func:`table_view.table`):
        ``(table text, number of jobs listed)``; ``now`` in unix seconds, ``known`` as in :meth:`page`."""
        return table_view.table(self._rows, jobs, now, keep, known)
