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

import weakref
from typing import TYPE_CHECKING, Any

from labgang.launcher.api import jsoncodec

if TYPE_CHECKING:
    from collections.abc import Callable

    from labgang.launcher.store import JobRecord


def _ranks(job: JobRecord) -> tuple[Any, ...]:
    ranks = job.ranks
    return tuple((k, tuple(vars(r).values())) for k, r in ranks.items()) if ranks else ()


class JobViewCache:
    """Encoded JobViews (strict JSON bytes) by job and variant, each with the fingerprint it was built from.

    An entry holds the job, its spec, a copy of its status fields' values (in the dataclass's field
    order, which an instance never changes; a list compares three times faster than the dict), its
    history's length and last entry, and its ranks' fields; it is used only while all of them still
    match (the objects by identity, the fields by value). ``variant`` tells apart views of one job that differ by who
    asks (``argv`` hidden under ``private_data``) or by shape (the ``queue`` row).
    """

    def __init__(self) -> None:
        self._entries: dict[
            tuple[str, bool | str], tuple[JobRecord, Any, list[Any], int, Any, tuple[Any, ...], bytes]
        ] = {}

    def encoded(
        self, job: JobRecord, build: Callable[[JobRecord], dict[str, Any]], variant: bool | str = False
    ) -> bytes:
        """The JSON bytes of ``build(job)``, rebuilt only when the job changed.

        Args:
            job: the job.
            build: makes its JobView (a dict); called only on a miss.
            variant: which of the job's views ``build`` makes (part of the key): False for the
                whole JobView, True for it without ``argv`` (``private_data``), ``"queue"`` for the
                ``GET /v1/jobs?view=queue`` row.

        Raises:
            ValueError: the view holds a non-finite number (:func:`labgang.launcher.api.jsoncodec.dumps`).
        """
        history = job.history
        last = history[-1] if history else None
        key = (job.id, variant)
        entry = self._entries.get(key)
        if (
            entry is not None
            and entry[0] is job
            and entry[1] is job.spec
            and entry[3] == len(history)
            and entry[4] is last
            and entry[2] == list(vars(job.status).values())
            and entry[5] == _ranks(job)
        ):
            return entry[6]
        data = jsoncodec.dumps(build(job)).encode()
        status = list(vars(job.status).values())
        self._entries[key] = (job, job.spec, status, len(history), last, _ranks(job), data)
        return data

    def trim(self, known: int) -> None:
        """Forget every entry once there are more than three times ``known`` (the jobs the
        coordinator holds: a job has at most three variants, whole, without ``argv`` and its
        ``queue`` row) plus 64: entries of jobs that are gone must not pile up. They are rebuilt on use."""
        if len(self._entries) > 3 * known + 64:
            self._entries.clear()


def page_body(encoded: list[bytes], next_cursor: str | None) -> bytes:
    """A ``GET /v1/jobs`` page, ``{"jobs": [...], "next_cursor": ...}``, from encoded JobViews."""
    # One join copies the page once: a page is hundreds of kilobytes, and a nested join or ``+``
    # would copy all of it again.
    parts = [b'{"jobs": [']
    for data in encoded:
        parts += (data, b", ")
    if encoded:
        parts.pop()  # no comma after the last job
    parts.append(b'], "next_cursor": ' + jsoncodec.dumps(next_cursor).encode() + b"}")
    return b"".join(parts)


_CACHES: weakref.WeakKeyDictionary[object, JobViewCache] = weakref.WeakKeyDictionary()


def cache_for(owner: object) -> JobViewCache:
    """The cache of one coordinator (``owner``); it goes away with it."""
    cache = _CACHES.get(owner)
    if cache is None:
        cache = _CACHES[owner] = JobViewCache()
    return cache
