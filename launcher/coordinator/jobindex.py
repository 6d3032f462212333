"""The coordinator's in-memory job index: active jobs (the lifecycle model's) and the newest
finished ones, as one read-only mapping; older finished jobs are read from the store."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator, Mapping

from labgang.launcher.lifecycle.records import JobRecord


class JobIndex(Mapping[str, JobRecord]):
    """The jobs in memory: the lifecycle model's active jobs, then the recently finished ones."""

    def __init__(self, active: dict[str, JobRecord], recent: OrderedDict[str, JobRecord]) -> None:
        self._active, self._recent = active, recent

    def __getitem__(self, job_id: str) -> JobRecord:
        job = self._active.get(job_id)
        return job if job is not None else self._recent[job_id]

    def __iter__(self) -> Iterator[str]:
        yield from self._active
        yield from self._recent

    def __len__(self) -> int:
        return len(self._active) + len(self._recent)
