"""Job arrays in the coordinator: one submission becomes one job per task, in one commit; an
array id names all of its tasks for ``cancel`` (docs/arrays.md).

Task ``I`` of array ``A`` is the job ``"A_I"``; ``A`` is the sequence number of its first task,
so the next job submitted after an array of 100 gets an id 100 higher, as with Slurm. Which
pending tasks each scheduling cycle looks at is the lifecycle's rule
(``launcher/lifecycle/arrays.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from labgang.launcher.arrays import ArraySpec, fold, split_task_id, step_of, task_id
from labgang.launcher.coordinator.errors import NotFound
from labgang.launcher.lifecycle import events as ev
from labgang.launcher.lifecycle.dependency import Target, task_dependency
from labgang.launcher.lifecycle.records import ArrayTask, JobRecord, JobSpec, JobStatus

if TYPE_CHECKING:
    from labgang.launcher.coordinator.desk import JobDesk
    from labgang.launcher.coordinator.requests import Caller
    from labgang.launcher.coordinator.store import Store


def insert_tasks(
    store: Store,
    apply: Callable[[ev.Event], object],
    spec: JobSpec,
    array: ArraySpec,
    now: float,
    targets: tuple[Target, ...] = (),
) -> list[JobRecord]:
    """Record one pending job per index of ``array`` in ``store`` (buffered: the caller's next flush
    commits them all at once) and ``apply`` their submissions to the lifecycle model
    (``Commits.apply``). Every task carries the submission's ``--dependency`` and its finished
    ``targets`` (``ev.JobSubmitted``).

    Returns:
        The tasks in index order; the array id is ``tasks[0].spec.array.array_id``.
    """
    array_id = str(store.next_seq())
    indices = array.indices
    low, high, step = indices[0], indices[-1], step_of(indices)
    tasks: list[JobRecord] = []
    for index in indices:
        task = ArrayTask(array_id, index, len(indices), low, high, step, array.limit)
        status = JobStatus.submitted(now)
        own = replace(spec, array=task, dependency=task_dependency(spec.dependency, index))  # aftercorr: per task
        job = store.insert_job(own, status, job_id=task_id(array_id, index))
        apply(ev.JobSubmitted(now, job, targets))
        tasks.append(job)
    return tasks


def task_ids(store: Store, jobs: Mapping[str, JobRecord], array_id: str) -> list[str]:
    """Every task id of array ``array_id``, in memory (``jobs``: the coordinator's ``JobIndex``) or
    only in the store, in index order."""
    ids = set(store.array_task_ids(array_id))
    ids.update(job.id for job in jobs.values() if job.spec.array is not None and job.spec.array.array_id == array_id)
    return sorted(ids, key=lambda text: int(text.rpartition("_")[2]))


def no_job_message(store: Store, jobs: Mapping[str, JobRecord], job_id: str) -> str:
    """The 404 message for ``job_id``: ``no job 12``, naming the tasks when 12 is an array (or,
    for a task id such as ``12_99``, when 12 is an array without that task); ``store`` and ``jobs``
    as for :func:`task_ids`."""
    task = split_task_id(job_id)
    if task is not None:
        ids = task_ids(store, jobs, task[0])
        if not ids:
            return f"no job {job_id}"
        indices = fold(int(i.rpartition("_")[2]) for i in ids)
        return f"no job {job_id} (job array {task[0]} has tasks {task[0]}_[{indices}])"
    if not job_id.isdigit():
        return f"no job {job_id!r}"
    ids = task_ids(store, jobs, job_id)
    if not ids:
        return f"no job {job_id}"
    indices = fold(int(i.rpartition("_")[2]) for i in ids)
    return f"no job {job_id}: {job_id} is a job array with tasks {job_id}_[{indices}]; name one, as in {ids[0]}"


def array_tasks(store: Store, jobs: Mapping[str, JobRecord], array_id: str) -> list[JobRecord]:
    """Every task of array ``array_id`` (in memory, ``jobs``, or from the ``store`` once finished
    long ago), in index order.

    Raises:
        NotFound: ``array_id`` is no job array.
    """
    ids = task_ids(store, jobs, array_id) if array_id.isdigit() else []
    tasks = [job for i in ids if (job := jobs.get(i) or store.load_job(i)) is not None]
    if not tasks:
        raise NotFound(f"no job array {array_id}", field="id")
    return tasks


async def cancel_array(
    coord: JobDesk,
    store: Store,
    jobs: Mapping[str, JobRecord],
    active: Mapping[str, JobRecord],
    caller: Caller,
    array_id: str,
) -> tuple[list[JobRecord], int]:
    """Cancel every unfinished task of array ``array_id`` (pending ones at once, running ones
    with their grace), in one commit.

    Args:
        coord: where the cancellations are applied and committed.
        store / jobs: where the array's tasks are found: the database and the jobs in memory by id.
        active: the lifecycle model's jobs by id (the tasks not finished).

    Returns:
        (the tasks that were not finished, now cancelled or stopping; how many had already finished).

    Raises:
        NotFound: no such array. Forbidden: a task that is not the caller's, for a caller who
            is not an admin (nothing is cancelled then).
    """
    ids = task_ids(store, jobs, array_id) if array_id.isdigit() else []
    if not ids:
        raise NotFound(f"no job array {array_id}", field="id")
    unfinished = [job for i in ids if (job := active.get(i)) is not None]
    for job in unfinished:
        caller.check_may_act(job, "cancel it")
    now = coord.clock()
    for job in unfinished:
        coord.apply(ev.CancelRequested(now, job.id, caller.user))
    await coord.flush()
    return unfinished, len(ids) - len(unfinished)
