"""``labgang run --array``: wait for every task of a job array, reporting each task as it ends.

A task's output stays in its own log (``labgang logs 12_7``): ``run`` prints one line per
task to stderr as it ends and exits with the first failed task's status (docs/arrays.md).
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from labgang.launcher.api.client import ApiError, Client
from labgang.launcher.cli.follow import exit_status_of
from labgang.launcher.cli.job_facts import FINISHED_STATES

POLL_S = 0.05


class ArrayFollower:
    """Poll one job array until every task has finished.

    Resumable: :meth:`follow` may be interrupted (Ctrl-C) and called again.

    Args:
        client: the coordinator client.
        array_id: the array (its tasks are ``ARRAY_ID_INDEX``).
        err: where one line per finished task goes (text), or None for silence.
        poll_s: seconds between polls of ``GET /v1/jobs``.
        first: a task's JobView already known (the submission's answer), or None.
    """

    def __init__(
        self,
        client: Client,
        array_id: str,
        err: TextIO | None,
        poll_s: float = POLL_S,
        first: dict[str, Any] | None = None,
    ) -> None:
        self.client = client
        self.array_id = array_id
        self.err = err
        self.poll_s = poll_s
        self.tasks: dict[str, dict[str, Any]] = {}  # task id -> its last JobView
        if first is not None:
            self.tasks[str(first["id"])] = first
        self.done: set[str] = set()

    def _poll(self) -> None:
        seen = set()
        for job in self.client.jobs():
            if str(job.get("array_id")) == self.array_id:
                seen.add(job["id"])
                self.tasks[job["id"]] = job
        # A task finished long enough ago leaves the listing (the newest finished jobs stay in it).
        for task_id in set(self.tasks) - seen - self.done:
            try:
                self.tasks[task_id] = self.client.job(task_id)
            except ApiError:
                continue
        for task_id, job in sorted(self.tasks.items(), key=lambda kv: int(kv[1].get("array_index") or 0)):
            if task_id not in self.done and job.get("state") in FINISHED_STATES:
                self.done.add(task_id)
                if self.err is not None:
                    status = job.get("exit_status")
                    tail = f" (exit {status})" if isinstance(status, int) else ""
                    print(f"labgang: {task_id} {job['state']}{tail}", file=self.err, flush=True)

    def task_ids(self) -> frozenset[str]:
        """The ids of the array's tasks seen so far (``ARRAY_ID_INDEX``), the ``first`` given included."""
        return frozenset(self.tasks)

    def follow(self) -> list[dict[str, Any]]:
        """Poll until every task has finished; return their final JobViews in index order."""
        while True:
            self._poll()
            if self.tasks and len(self.done) == len(self.tasks):
                return sorted(self.tasks.values(), key=lambda job: int(job.get("array_index") or 0))
            time.sleep(self.poll_s)


def array_exit_status(tasks: list[dict[str, Any]]) -> int:
    """0 when every task succeeded; else the exit status of the first task (by index) that did not
    (a failed rank's status, or 1; see :func:`~labgang.launcher.cli.follow.exit_status_of`)."""
    for job in tasks:
        status = exit_status_of(job)
        if status:
            return status
    return 0
