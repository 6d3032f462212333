"""``GET /v1/jobs`` without rebuilding 10,000 JobViews: each job's encoded view, kept until it changes.

``watch labgang queue`` asks for every job every few seconds, and nearly all of them (the
pending ones) have not changed since the last time. Building a JobView and encoding it costs
tens of microseconds per job; checking a job against its cached fingerprint costs a few tenths
of one. The fingerprint covers everything :func:`labgang.launcher.coordinator.views.job_view`
reads: the spec (by identity: it never changes after submission), the status and each rank (by
identity and their ``changes`` count, which every write of a new value to any of their fields
raises: ``launcher/lifecycle/records.py``, :class:`~labgang.launcher.lifecycle.records.CountsChanges`),
and the history list (by identity, length and last entry: it only grows, and its entries are
frozen). Nothing has to remember to invalidate the cache, so a lifecycle rule that changes a job
in a new way cannot leave a stale view behind.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from labgang.launcher.api import jsoncodec

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from labgang.launcher.coordinator.store import JobRecord, RankRecord

T = TypeVar("T")


def _ranks(ranks: dict[int, RankRecord]) -> tuple[Any, ...]:
    """Each rank's number, record and change count (empty for a job without ranks: a pending one)."""
    return tuple((k, r, r.changes) for k, r in ranks.items()) if ranks else ()


class _Entry(Generic[T]):
    """One cached value and the fingerprint of the job it was made from."""

    __slots__ = ("changes", "history", "job", "last", "length", "ranks", "spec", "status", "value")

    def __init__(self, job: JobRecord, value: T) -> None:
        history = job.history
        self.job, self.spec, self.status, self.changes = job, job.spec, job.status, job.status.changes
        self.history, self.length, self.last = history, len(history), history[-1] if history else None
        self.ranks = _ranks(job.ranks)
        self.value = value


def _unchanged(entry: _Entry[Any], job: JobRecord) -> bool:
    """True while ``job`` is the job ``entry`` was made from and nothing a view of it shows changed."""
    status, history, ranks = job.status, job.history, job.ranks
    return (
        entry.job is job
        and entry.status is status
        and entry.changes == status.changes
        and entry.spec is job.spec
        and entry.history is history
        and entry.length == len(history)
        and (entry.last is history[-1] if history else entry.last is None)
        and (entry.ranks == _ranks(ranks) if ranks else not entry.ranks)  # a pending job has none: no call
    )


class JobMemo(Generic[T]):
    """Values made from jobs (encoded JobViews, the pitfall detectors' job views), by job and
    variant, each kept with the fingerprint of the job it was made from and used only while
    that still matches.

    The fingerprint: the job, its spec, status (with its ``changes`` count), history list (with
    its length and last entry) and ranks (each with its ``changes`` count). ``variant`` tells
    apart values of one job made differently (views that differ by who asks or by shape).
    """

    def __init__(self) -> None:
        # variant -> job id -> entry: a page's loop looks a job up by its id alone (no key tuple
        # made, hashed and compared per job)
        self._entries: dict[Hashable, dict[str, _Entry[T]]] = {}

    def _of(self, variant: Hashable) -> dict[str, _Entry[T]]:
        """The entries of ``variant`` by job id (made empty on first use)."""
        entries = self._entries.get(variant)
        if entries is None:
            entries = self._entries[variant] = {}
        return entries

    def cached(self, job: JobRecord, variant: Hashable = None) -> T | None:
        """The value kept for ``job`` and ``variant`` when it is still the job's, else None."""
        entry = self._of(variant).get(job.id)
        return entry.value if entry is not None and _unchanged(entry, job) else None

    def keep(self, job: JobRecord, value: T, variant: Hashable = None) -> T:
        """Keep ``value`` (made from ``job`` as it is now; not None) for ``job`` and ``variant``; returns it."""
        self._of(variant)[job.id] = _Entry(job, value)
        return value

    def get(self, job: JobRecord, make: Callable[[JobRecord], T], variant: Hashable = None) -> T:
        """``make(job)`` (not None), made again only when the job changed since it was kept for this variant."""
        value = self.cached(job, variant)
        return self.keep(job, make(job), variant) if value is None else value

    def all(self, jobs: Iterable[JobRecord], make: Callable[[JobRecord], T], variant: Hashable = None) -> list[T]:
        """:meth:`get` of each of ``jobs``, in their order, in one loop."""
        entries, out = self._of(variant), []
        for job in jobs:
            entry = entries.get(job.id)
            out.append(
                entry.value if entry is not None and _unchanged(entry, job) else self.keep(job, make(job), variant)
            )
        return out

    def __len__(self) -> int:
        """The values kept, of every variant."""
        return sum(map(len, self._entries.values()))

    def trim(self, known: int, variants: int = 1) -> None:
        """Forget every entry once there are more than ``variants`` times ``known`` (the jobs the
        coordinator holds) plus 64: entries of jobs that are gone must not pile up. They are
        made again on use."""
        if len(self) > variants * known + 64:
            self._entries.clear()


class JobViewCache(JobMemo[bytes]):
    """Encoded JobViews (strict JSON bytes) by job and variant, each with the fingerprint of the
    job it was built from (:class:`JobMemo`). ``variant`` tells apart views of one job that differ
    by who asks (``argv`` hidden under ``private_data``) or by shape (the ``queue`` row).
    """

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
        data = self.cached(job, variant)
        return self.keep(job, jsoncodec.dumps(build(job)).encode(), variant) if data is None else data

    def page(
        self,
        jobs: Iterable[JobRecord],
        build: Callable[[JobRecord], dict[str, Any]],
        variant: bool | str | Callable[[JobRecord], bool],
        limit: int,
        budget: int,
    ) -> tuple[list[bytes], JobRecord | None, bool]:
        """One ``GET /v1/jobs`` page: the encoded views of ``jobs`` (in their order) up to ``limit``
        of them and about ``budget`` bytes (at least one job), as :meth:`encoded` gives them, in one loop.

        Args:
            jobs: the listed jobs, read only as far as the page goes.
            build: makes a job's view (a dict); called only on a miss.
            variant: the variant of every job's view, or a function of the job that says it (True:
                ``argv`` hidden from this caller).
            limit: at most this many jobs.
            budget: bytes of JSON; the job that goes over it ends the page (unless it is the first).

        Returns:
            ``(encoded views, the last job on the page or None, whether more jobs follow)``.

        Raises:
            ValueError: a view holds a non-finite number (:func:`labgang.launcher.api.jsoncodec.dumps`).
        """
        encoded: list[bytes] = []
        last: JobRecord | None = None
        choose = variant if callable(variant) else None
        fixed_variant: Hashable = False if callable(variant) else variant
        fixed = self._of(fixed_variant)
        hidden, shown = (self._of(True), self._of(False)) if choose is not None else (fixed, fixed)
        for job in jobs:
            if len(encoded) == limit:
                return encoded, last, True
            if choose is None:
                which, entries = fixed_variant, fixed
            else:
                which = choose(job)
                entries = hidden if which else shown
            entry = entries.get(job.id)
            if entry is not None and _unchanged(entry, job):
                data = entry.value
            else:
                data = self.keep(job, jsoncodec.dumps(build(job)).encode(), which)
            budget -= len(data)
            if budget < 0 and encoded:  # a page of big jobs ends early; one job always fits
                return encoded, last, True
            encoded.append(data)
            last = job
        return encoded, last, False

    def trim(self, known: int, variants: int = 3) -> None:
        """Forget every entry once there are more than three times ``known`` (the jobs the
        coordinator holds: a job has at most three variants, whole, without ``argv`` and its
        ``queue`` row) plus 64: entries of jobs that are gone must not pile up. They are rebuilt on use."""
        super().trim(known, variants)


PIECE_BYTES = 64 * 1024
"""About how many bytes of a ``GET /v1/jobs`` page go in one piece (:func:`page_pieces`): the
amount aiohttp's writer takes before it waits for the socket to drain, so that each piece goes
to the kernel as it is, without being copied into the transport's buffer."""


def page_pieces(encoded: list[bytes], next_cursor: str | None, piece_bytes: int = PIECE_BYTES) -> list[bytes]:
    """A ``GET /v1/jobs`` page, ``{"jobs": [...], "next_cursor": ...}``, from encoded JobViews, in
    pieces of about ``piece_bytes`` on average (an equal number of jobs each, at least one) to be
    sent one after the other; their concatenation is :func:`page_body`.

    A page is about a megabyte (``limits.max_page_bytes``). Joined at once and handed to the
    transport, it would be copied three more times (the head of the answer joined before it, the
    part the socket did not take sliced off and appended to the transport's buffer), each time
    into memory fresh from the kernel; pieces of 64 KiB go to the socket as they are. The pieces
    are joined in C (``bytes.join`` of a slice of jobs), with no Python step per job.
    """
    tail = b'], "next_cursor": ' + jsoncodec.dumps(next_cursor).encode() + b"}"
    count = len(encoded)
    if not count:
        return [b'{"jobs": [' + tail]
    step = max(1, count * piece_bytes // sum(map(len, encoded)))  # jobs a piece
    last = (count - 1) // step * step  # where the last piece starts
    pieces = []
    for start in range(0, count, step):
        head = b'{"jobs": [' if start == 0 else b", "
        pieces.append(b"".join((head, b", ".join(encoded[start : start + step]), tail if start == last else b"")))
    return pieces


def page_body(encoded: list[bytes], next_cursor: str | None) -> bytes:
    """A ``GET /v1/jobs`` page, ``{"jobs": [...], "next_cursor": ...}``, from encoded JobViews, in one piece."""
    return b"".join(page_pieces(encoded, next_cursor))
