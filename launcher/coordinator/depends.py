"""The coordinator's side of job dependencies: finding the jobs a ``--dependency`` names.

The lifecycle model (``launcher/lifecycle/dependents.py``) judges dependencies; it holds only
active jobs. A named job that already finished is in the coordinator's recent jobs or only in
SQLite: these functions read it from there, at submission (where a job id that names no job at
all is refused) and when the coordinator starts again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from labgang.launcher.coordinator.errors import NotFound
from labgang.launcher.coordinator.store import Store
from labgang.launcher.lifecycle.dependency import Target, matches, parse_dependency
from labgang.launcher.lifecycle.dependents import target
from labgang.launcher.lifecycle.records import JobRecord, JobSpec
from labgang.launcher.lifecycle.states import JobState


def finished_targets(store: Store, names: Iterable[str], memory: Iterable[JobRecord] = ()) -> list[Target]:
    """The finished jobs that dependencies on ``names`` cover: from ``memory`` (jobs the
    coordinator holds, newer than the store's committed rows) first, then from the store."""
    names = set(names)
    if not names:
        return []
    found: dict[str, Target] = {}
    for job in memory:
        if job.status.state.finished and any(matches(name, job.id) for name in names):
            found[job.id] = target(job)
    for job in store.finished_matching(sorted(names)):
        found.setdefault(job.id, target(job))
    return list(found.values())


def targets_at_start(store: Store, jobs: Iterable[JobRecord]) -> list[Target]:
    """The finished jobs named by the dependencies of ``jobs`` (the active jobs loaded at start)
    that have not held yet: what the lifecycle model needs besides ``jobs`` to judge them."""
    names: set[str] = set()
    for job in jobs:
        if job.spec.dependency and job.status.state == JobState.PENDING and not job.status.dependency_met:
            try:
                names.update(parse_dependency(job.spec.dependency).job_ids)
            except ValueError:
                continue  # the model treats a text that no longer parses as never holding
    return finished_targets(store, names)


def submission_targets(
    store: Store, active: Mapping[str, JobRecord], recent: Mapping[str, JobRecord], spec: JobSpec
) -> tuple[Target, ...]:
    """The finished jobs the new job's dependency names (the model knows the active ones).

    Args:
        store: the database, for finished jobs no longer in memory.
        active: the lifecycle model's jobs by id.
        recent: the recently finished jobs kept in memory, by id (``Coordinator.recent``).
        spec: the new job's (or the updated job's) spec.

    Raises:
        NotFound: a job id that names no job, active or finished (field "dependency"): a refusal
            (exit status 1 in the CLI), as ``cancel`` of an unknown id is; a malformed text is a
            ``BadRequest`` raised earlier, when the request is checked.
    """
    if not spec.dependency:
        return ()
    names = parse_dependency(spec.dependency).job_ids
    done = finished_targets(store, names, recent.values())
    for name in names:
        known = (
            name in active
            or name in recent
            or any(matches(name, t.id) for t in done)
            or any(matches(name, job_id) for job_id in active)
        )
        if not known:
            raise NotFound(f"dependency: no job {name} (in {spec.dependency})", field="dependency")
    return tuple(done)


def dependency_cycle(active: Iterable[JobRecord], job_id: str, dependency: str) -> list[str] | None:
    """Would giving ``job_id`` the dependency text ``dependency`` close a cycle among the pending
    jobs (``labgang update``: a new job can only name jobs that already exist, so only an update can)?

    Follows, from the jobs ``dependency`` names, each pending job's own dependency, over ``active``
    jobs only (a finished job waits for nothing).

    Returns:
        The chain of job ids from one ``job_id`` names back to ``job_id`` (``["12", "11"]``: 12
        waits for 11, which is ``job_id``), or None when there is no cycle.
    """
    waits: dict[str, list[str]] = {}
    for job in active:
        if job.status.state == JobState.PENDING and job.spec.dependency and job.id != job_id:
            try:
                waits[job.id] = list(parse_dependency(job.spec.dependency).job_ids)
            except ValueError:
                continue
    ids = list(waits)
    todo: list[tuple[str, list[str]]] = [(name, []) for name in parse_dependency(dependency).job_ids]
    seen: set[str] = set()
    while todo:
        name, path = todo.pop()
        if matches(name, job_id):
            return [*path, job_id]
        for other in ids:
            if other not in seen and matches(name, other):
                seen.add(other)
                todo.extend((nxt, [*path, other]) for nxt in waits[other])
    return None
