"""Per-user limits of a queue inside one cycle: ``max_gpus_per_user`` and ``max_running_jobs_per_user``.

Slurm's QOS limits MaxTRESPerUser=gres/gpu=N and MaxJobsPerUser, per queue. A user's jobs of a
queue that hold devices (admitted, running, terminating) count, and so do the jobs this cycle
admits or lets wait for victims. A job that would take its user over a limit stays pending with a
USER_LIMIT reason naming the limit and the numbers; it never looks for victims (a limit never
causes preemption) and never blocks another user's job: in a strict-fifo queue it is passed over
like an unschedulable job, while its user's later jobs of that queue wait behind it (the user's
own order is kept).

A share of one card (``--shards``, ``--mps``) counts toward ``max_gpus_per_user`` as its GPU
fraction (a shard is ``1/shards_per_gpu`` gpu, ``--mps 25`` is 0.25 gpu), exactly: four quarter-GPU
shares of a user fill a limit of 1, a fifth waits.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import math
from fractions import Fraction

from labgang.launcher.model import JobRequest, QueueSpec
from labgang.launcher.scheduler import reasons
from labgang.launcher.scheduler.decisions import PendingReason
from labgang.launcher.scheduler.shares import share_units
from labgang.launcher.scheduler.snapshot import PendingJob, Snapshot


def has_user_limits(spec: QueueSpec) -> bool:
    """True when ``spec`` sets ``max_gpus_per_user`` or ``max_running_jobs_per_user``."""
    return spec.max_gpus_per_user is not None or spec.max_running_jobs_per_user is not None


class UserBook:
    """What each user's jobs hold per queue, during one cycle, for the queues with per-user limits.

    Args:
        snapshot: the cycle's input; its ``running`` jobs (terminating included) are counted.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.specs = {q.name: q for q in snapshot.queues if has_user_limits(q)}
        self.shards_per_gpu = snapshot.gpu_sharing.shards_per_gpu
        self.devices: dict[tuple[str, str], int | Fraction] = {}  # in GPUs; a Fraction once shares count
        self.jobs: dict[tuple[str, str], int] = {}
        self.strict_waiting: dict[tuple[str, str], str] = {}  # (queue, user) -> the user's job held first
        for r in snapshot.running if self.specs else ():  # no pass over the running jobs when no queue limits users
            if r.queue in self.specs:
                self.add(r.queue, r.user, r.request)

    def __bool__(self) -> bool:
        return bool(self.specs)

    def gpus(self, req: JobRequest) -> int | Fraction:
        """What ``req`` counts toward ``max_gpus_per_user``: its devices, or a share's GPU fraction."""
        return share_units(req, self.shards_per_gpu) if req.shared else req.total

    def add(self, queue: str, user: str, req: JobRequest) -> None:
        """Count one more job of ``user`` in ``queue`` holding what ``req`` (at its admitted size) asks."""
        if queue in self.specs:
            key = (queue, user)
            self.devices[key] = self.devices.get(key, 0) + self.gpus(req)
            self.jobs[key] = self.jobs.get(key, 0) + 1

    def room(self, queue: str, user: str) -> int | None:
        """Whole devices ``user`` may still take in ``queue``, rounded down (None: no device limit there)."""
        spec = self.specs.get(queue)
        if spec is None or spec.max_gpus_per_user is None:
            return None
        return math.floor(spec.max_gpus_per_user - self.devices.get((queue, user), 0))

    def reason(self, job: PendingJob, strict: bool = False) -> PendingReason | None:
        """Why ``job`` may not start now because of its user's limits in its queue, or None.

        Judges the job's smallest size (an elastic gang's minimum). ``strict``: the queue is
        strict-fifo, where a user's later job waits behind that user's earlier limited job
        (recorded by :meth:`passed_over`).
        """
        spec = self.specs.get(job.queue)
        if spec is None:
            return None
        key = (job.queue, job.user)
        if strict and key in self.strict_waiting:
            return reasons.user_queue_order_reason(job.user, job.queue, self.strict_waiting[key])
        return self._over(spec, job)

    def passed_over(self, job: PendingJob) -> None:
        """``job`` of a strict-fifo queue was held by its user's limit: that user's later jobs of
        the queue wait behind it for the rest of the cycle."""
        self.strict_waiting.setdefault((job.queue, job.user), job.id)

    def _over(self, spec: QueueSpec, job: PendingJob) -> PendingReason | None:
        key = (job.queue, job.user)
        limit = spec.max_running_jobs_per_user
        if limit is not None and self.jobs.get(key, 0) + 1 > limit:
            return reasons.user_limit_reason(job.user, job.queue, self.jobs.get(key, 0), limit, "jobs", 1)
        limit = spec.max_gpus_per_user
        need = self.gpus(job.request.floor())
        used = self.devices.get(key, 0)
        if limit is not None and used + need > limit:
            return reasons.user_limit_reason(job.user, job.queue, _number(used), limit, "gpu", _number(need))
        return None


def _number(x: int | Fraction) -> float:
    """A GPU count for a reason's text: ``2``, or ``1.25`` where shares make it a fraction."""
    return int(x) if x == int(x) else float(x)
