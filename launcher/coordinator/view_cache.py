"""``GET /v1/jobs`` without rebuilding 10,000 JobViews: each job's encoded view, kept until it changes.

``watch labgang queue`` asks for every job every few seconds, and nearly all of them (the
pending ones) have not changed since the last time. Building a JobView and encoding it costs
tens of microseconds per job; comparing a job against its cached fingerprint costs about one.
The fingerprint is everything :func:`labgang.launcher.coordinator.views.job_view` reads: the
spec (by identity: it never changes after submission), every status field, the ranks' fields, and the history's
length and last entry (the history only grows). Nothing has to remember to invalidate the
cache, so a lifecycle rule that changes a job in a new way cannot leave a stale view behind.
"""

from __future__ import annotations

import json
import weakref
from typing import TYPE_CHECKING, Any

from labgang.launcher.coordinator import views

if TYPE_CHECKING:
    from collections.abc import Iterable

    from labgang.launcher.store import JobRecord


def _ranks(job: JobRecord) -> tuple[Any, ...]:
    ranks = job.ranks
    return tuple((k, tuple(vars(r).values())) for k, r in ranks.items()) if ranks else ()


class JobViewCache:
    """Encoded JobViews (``json.dumps`` bytes) by job, each with the fingerprint it was built from.

    An entry holds the job, its spec, a copy of its status fields, its history's length and last
    entry, and its ranks' fields; it is used only while all of them still match (the objects by
    identity, the fields by value).
    """

    def __init__(self) -> None:
        self._entries: dict[str, tuple[JobRecord, Any, dict[str, Any], int, Any, tuple[Any, ...], bytes]] = {}

    def encoded(self, job: JobRecord) -> bytes:
        """The JSON bytes of ``views.job_view(job)``, rebuilt only when the job changed."""
        history = job.history
        last = history[-1] if history else None
        entry = self._entries.get(job.id)
        if (
            entry is not None
            and entry[0] is job
            and entry[1] is job.spec
            and entry[3] == len(history)
            and entry[4] is last
            and entry[2] == vars(job.status)
            and entry[5] == _ranks(job)
        ):
            return entry[6]
        data = json.dumps(views.job_view(job)).encode()
        self._entries[job.id] = (job, job.spec, dict(vars(job.status)), len(history), last, _ranks(job), data)
        return data

    def jobs_body(self, jobs: Iterable[JobRecord], known: int) -> bytes:
        """The whole ``{"jobs": [...]}`` answer for ``jobs``.

        Args:
            jobs: the jobs to list, in order.
            known: how many jobs the coordinator holds; entries beyond twice that are dropped
                (jobs that no longer exist), so the cache never outgrows the job table.
        """
        body = b'{"jobs": [' + b", ".join(self.encoded(job) for job in jobs) + b"]}"
        if len(self._entries) > 2 * known + 64:
            self.prune()
        return body

    def prune(self) -> None:
        """Forget every entry (they are rebuilt on the next listing)."""
        self._entries.clear()


_CACHES: weakref.WeakKeyDictionary[object, JobViewCache] = weakref.WeakKeyDictionary()


def cache_for(owner: object) -> JobViewCache:
    """The cache of one coordinator (``owner``); it goes away with it."""
    cache = _CACHES.get(owner)
    if cache is None:
        cache = _CACHES[owner] = JobViewCache()
    return cache
