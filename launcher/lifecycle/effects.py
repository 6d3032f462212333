"""Typed effects the lifecycle model returns; the driver carries them out.

Persisting effects (:class:`SaveStatus`, :class:`SaveSpec`, :class:`SaveRank`, :class:`AddHistory`,
:class:`SaveAttempt`, :class:`RecordDecision`) are committed first; the others (stop, signal, launch, dispatch) only
run after that commit, so a crash never leaves an agent doing something the store does not know.

Instances are values: compared and hashed by their fields, and never changed after construction (no
code assigns to one). They are not ``frozen`` dataclasses only because Python 3.11's frozen
``__init__`` sets each field through ``object.__setattr__``, 3-5x the cost of a plain slot write,
and a replay builds hundreds of thousands of them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from labgang.launcher.lifecycle.attempts import AttemptRecord
from labgang.launcher.lifecycle.records import HistoryEntry, JobRecord, RankRecord


@dataclass(slots=True, unsafe_hash=True)
class SaveStatus:
    """Persist the job's status (its latest value is written at commit time)."""

    job: JobRecord


@dataclass(slots=True, unsafe_hash=True)
class SaveSpec:
    """Persist the job's spec, replaced by ``labgang update`` (its latest value is written at commit time)."""

    job: JobRecord


@dataclass(slots=True, unsafe_hash=True)
class SaveRank:
    """Persist one rank of attempt ``attempt`` of the job: the attempt the rank belongs to, fixed
    when the effect is made. A driver carries effects out after the event that made them, and by
    then a requeue in the same event may have moved the job to its next attempt (which has no
    ranks until it is admitted)."""

    job: JobRecord
    rank: RankRecord
    attempt: int


@dataclass(slots=True, unsafe_hash=True)
class AddHistory:
    """Persist a history line the model appended to ``job.history``."""

    job: JobRecord
    entry: HistoryEntry


@dataclass(slots=True, unsafe_hash=True)
class SaveAttempt:
    """Persist the accounting record of one start attempt (its latest values are written at commit time)."""

    record: AttemptRecord


class DecisionKind(enum.StrEnum):
    """What a :class:`RecordDecision` records (its value is the store's ``decisions.kind``)."""

    ADMIT = "admit"
    PREEMPT = "preempt"
    VICTIM = "victim"  # the job was chosen as a victim and is being stopped
    PENDING = "pending"


@dataclass(slots=True, unsafe_hash=True)
class RecordDecision:
    """Persist one scheduling decision about job ``job_id`` at ``time`` (seconds): ``code`` is the
    scheduler's reason code (``ReasonCode``/``EndReason`` value, or "admitted"/"preempt"/"preempted")."""

    time: float
    job_id: str
    kind: DecisionKind
    code: str
    message: str


@dataclass(slots=True, unsafe_hash=True)
class Stop:
    """Stop every rank of ``run_id`` on ``node`` with ``grace`` seconds (idempotent); ``warn``: the
    job's ``--signal`` warning precedes SIGTERM. Stops for one node issued together go as one command.
    ``job_id``: the job the run belongs to (None: a run no job in memory knows, found on a node)."""

    node: str
    run_id: str
    grace: float
    warn: bool
    job_id: str | None


@dataclass(slots=True, unsafe_hash=True)
class Signal:
    """Send ``signum`` to every rank of ``run_id`` on ``node``: to each rank's process group, or
    with ``shell_only`` to each rank's own process (``--signal B:``, the batch shell) alone."""

    node: str
    run_id: str
    signum: int
    shell_only: bool = False


@dataclass(slots=True, unsafe_hash=True)
class Dispatch:
    """Start an admitted gang: launch rank 0's node (it picks MASTER_PORT), then the others."""

    job: JobRecord


@dataclass(slots=True, unsafe_hash=True)
class Launch:
    """(Re)send the ``launch`` of the job's ranks on ``node`` for run ``run_id`` (after a reconnect)."""

    job: JobRecord
    node: str
    run_id: str


@dataclass(slots=True, unsafe_hash=True)
class Requeued:
    """The job went back to its queue as a new attempt (its ``requeued`` history line is an
    :class:`AddHistory` of the same event): a driver lets go of what the old attempt held."""

    job: JobRecord


@dataclass(slots=True, unsafe_hash=True)
class Finished:
    """The job reached a final state and left the model's active jobs: the driver keeps what it
    wants of it (the coordinator: a bounded list of recently finished jobs; the store has it all)."""

    job: JobRecord


@dataclass(slots=True, unsafe_hash=True)
class WakeScheduler:
    """Something the scheduler sees changed: run a cycle (coalesced with other wakes)."""


@dataclass(slots=True, unsafe_hash=True)
class WakeAt:
    """Check the timers (a :class:`~labgang.launcher.lifecycle.events.Tick`) and run a cycle at
    ``time``: a requeue backoff ends then, or a lost node's fence expires."""

    time: float


@dataclass(slots=True, unsafe_hash=True)
class AdmissionObserved:
    """A job of ``queue`` was admitted after waiting ``wait_s`` seconds (for metrics)."""

    queue: str
    wait_s: float


@dataclass(slots=True, unsafe_hash=True)
class PreemptionCounted:
    """A job of ``queue`` was preempted; ``why`` is "in_queue" or "reclaim" (for metrics)."""

    queue: str
    why: str


Effect = (
    SaveStatus
    | SaveSpec
    | SaveRank
    | AddHistory
    | SaveAttempt
    | RecordDecision
    | Stop
    | Signal
    | Dispatch
    | Launch
    | Requeued
    | Finished
    | WakeScheduler
    | WakeAt
    | AdmissionObserved
    | PreemptionCounted
)
"""Anything :meth:`Lifecycle.apply` returns."""
