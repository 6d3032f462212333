"""The coordinator's in-memory job index: active jobs (the lifecycle model's) and the newest
finished ones, as one read-only mapping; older finished jobs are read from the store."""

from __future__ import annotations

import bisect
import itertools
from collections import OrderedDict
from collections.abc import Iterator, Mapping, ValuesView
from operator import attrgetter

from labgang.launcher.lifecycle.records import JobRecord


class JobIndex(Mapping[str, JobRecord]):
    """The jobs in memory: the lifecycle model's active jobs, then the recently finished ones."""

    def __init__(self, active: dict[str, JobRecord], recent: OrderedDict[str, JobRecord]) -> None:
        self._active, self._recent = active, recent

    def __getitem__(self, job_id: str) -> JobRecord:
        job = self._active.get(job_id)
        return job if job is not None else self._recent[job_id]

    def get(self, job_id: str, default: JobRecord | None = None) -> JobRecord | None:  # type: ignore[override]
        """The job with ``job_id``, or ``default`` (two dict lookups, without Mapping's exception path)."""
        job = self._active.get(job_id)
        return job if job is not None else self._recent.get(job_id, default)

    def __iter__(self) -> Iterator[str]:
        yield from self._active
        yield from self._recent

    def __len__(self) -> int:
        return len(self._active) + len(self._recent)

    def parts(self) -> tuple[Mapping[str, JobRecord], Mapping[str, JobRecord]]:
        """The two dicts the index reads, by id: the active jobs and the recently finished ones
        (for a loop over many ids that looks each up in C, :meth:`SubmissionOrder.after`)."""
        return self._active, self._recent

    def values(self) -> ValuesView[JobRecord]:
        """The jobs, active ones first, read from the two dicts themselves (Mapping's own view looks
        each id up again: a pitfall sample's passes over 10,000 jobs spent ~1.3 ms each on that)."""
        return _JobValues(self, self._active, self._recent)


class _JobValues(ValuesView[JobRecord]):
    """:meth:`JobIndex.values`: the jobs of ``active`` then of ``recent``, without a lookup per id."""

    def __init__(self, index: JobIndex, active: dict[str, JobRecord], recent: OrderedDict[str, JobRecord]) -> None:
        super().__init__(index)
        self._parts = (active, recent)

    def __iter__(self) -> Iterator[JobRecord]:
        for part in self._parts:
            yield from part.values()


class SubmissionOrder:
    """The ids of the jobs in memory in submission order (by ``seq``), kept in step as jobs come
    and go, so a listing page costs its own length instead of a sort of every job.

    The coordinator tells it of each submitted job (:meth:`add`) and each finished job that leaves
    memory (:meth:`discard`). :meth:`after` checks the count against the :class:`JobIndex` it reads
    and rebuilds from it on any mismatch, so a change made some other way costs one sort, never a
    wrong listing.
    """

    def __init__(self) -> None:
        self._seqs: list[int] = []
        self._ids: list[str] = []

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, job: JobRecord) -> None:
        """Insert ``job`` at its place by ``seq``, after any job with the same ``seq`` (O(1) for the
        newest job, the usual case); a job already there is left as it is."""
        seqs, ids = self._seqs, self._ids
        if not seqs or job.seq > seqs[-1]:
            seqs.append(job.seq)
            ids.append(job.id)
            return
        at = self._find(job)
        if at < len(ids) and ids[at] == job.id:
            return  # already there
        seqs.insert(at, job.seq)
        ids.insert(at, job.id)

    def discard(self, job: JobRecord) -> None:
        """Remove ``job`` if it is there (O(log n) to find it, a memmove to close the gap)."""
        at = self._find(job)
        if at < len(self._ids) and self._ids[at] == job.id:
            del self._seqs[at], self._ids[at]

    def _find(self, job: JobRecord) -> int:
        """Where ``job`` is, or else the end of the run of jobs with its ``seq`` (where it goes)."""
        seqs, ids = self._seqs, self._ids
        at = bisect.bisect_left(seqs, job.seq)
        while at < len(seqs) and seqs[at] == job.seq and ids[at] != job.id:
            at += 1
        return at

    def rebuild(self, jobs: JobIndex) -> None:
        """Start again from every job in ``jobs`` (O(n log n))."""
        ordered = sorted(jobs.values(), key=attrgetter("seq"))
        self._seqs = [j.seq for j in ordered]
        self._ids = [j.id for j in ordered]

    def after(self, jobs: JobIndex, seq: int) -> Iterator[JobRecord]:
        """The jobs of ``jobs`` with a ``seq`` above ``seq`` (a page cursor; 0 = from the first), oldest first.

        Read lazily: a page that stops after 2,000 jobs looks at no more than those (plus the
        ones a caller's filter skips).
        """
        if len(self._ids) != len(jobs):
            self.rebuild(jobs)
        active, recent = jobs.parts()
        in_active, in_recent = active.get, recent.get
        given: JobRecord | None = None  # the last job yielded
        for job_id in itertools.islice(self._ids, bisect.bisect_right(self._seqs, seq), None):
            job = in_active(job_id)
            if job is None:
                job = in_recent(job_id)
                if job is None:  # a job left memory unannounced: rebuild, resume after the last one given
                    self.rebuild(jobs)
                    yield from self.after(jobs, seq if given is None else given.seq)
                    return
            given = job
            yield job


class JobMemory:
    """What the coordinator keeps of its jobs beside the lifecycle model's active ones: the newest
    finished jobs, every job in memory in submission order (``GET /v1/jobs`` pages), and the
    finished jobs counted per ``(queue, state)`` (/metrics).

    Args:
        finished_counts: the finished jobs per ``(queue, state value)`` in the store at start.

    Attributes:
        recent: the newest finished jobs by id, oldest first (at most ``keep`` of :meth:`finished`).
        order: the jobs in memory by ``seq`` (call ``order.rebuild`` once the active jobs are known).
        finished_counts: finished jobs per ``(queue, state value)``, counted at start and then as jobs finish.
    """

    def __init__(self, finished_counts: Mapping[tuple[str, str], int]) -> None:
        self.recent: OrderedDict[str, JobRecord] = OrderedDict()
        self.order = SubmissionOrder()
        self.finished_counts: dict[tuple[str, str], int] = dict(finished_counts)

    def submitted(self, job: JobRecord) -> None:
        """``job`` was just submitted: it takes its place in the submission order."""
        self.order.add(job)

    def finished(self, job: JobRecord, keep: int) -> None:
        """``job`` has finished: count it, and keep it among the ``keep`` newest finished jobs (the
        oldest one beyond that leaves memory and the submission order; the store still has it)."""
        self.recent[job.id] = job
        while len(self.recent) > keep:
            self.order.discard(self.recent.popitem(last=False)[1])
        key = (job.spec.queue, job.status.state.value)
        self.finished_counts[key] = self.finished_counts.get(key, 0) + 1
