"""The scheduler's output: what one cycle decided.

A cycle returns a :class:`CycleResult` with three kinds of decision:

- :class:`Admit`: start this job on this placement now (quota and devices are free).
- :class:`Preempt`: stop these victims (whole gangs) so this job can start later; the
  preemptor stays pending, waits until the victims are gone, and is admitted by a later
  cycle. The list names every victim the preemptor waits for (including ones already
  terminating), so issuing it twice is harmless.
- :class:`Pending`: the job stays in its queue, with a typed reason and a message with
  numbers a person can act on (squeue's REASON column).

The decisions, their reasons and the result are values compared and hashed by their fields and
never changed after construction; they are slotted, not ``frozen``, dataclasses because Python
3.11's frozen ``__init__`` sets each field through ``object.__setattr__`` (3-5x a slot write).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from labgang.launcher.scheduler.snapshot import Placement, TenantUsage


class ReasonCode(str, enum.Enum):
    """Why a job is still pending. Values are the strings the API and CLI show."""

    OVER_QUOTA = "over_quota"
    """Its queue would go above nominal + borrowing limit (or nominal, without a cohort)."""
    COHORT_EXHAUSTED = "cohort_exhausted"
    """Within its queue's limits, but the cohort has no more unused, lendable quota."""
    NO_CAPACITY = "no_capacity"
    """Fewer free devices of the resource (and model) than the gang needs."""
    FRAGMENTED = "fragmented"
    """Enough free devices in total, but no set of nodes holds every rank."""
    WAITING_FOR_VICTIMS = "waiting_for_victims"
    """It preempted jobs and waits until they are gone."""
    RESERVED_FOR_STARVING = "reserved_for_starving"
    """It would fit, but on devices reserved for a gang that has waited too long."""
    UNSCHEDULABLE = "unschedulable"
    """It could not start even on an empty cluster (quota or hardware); it never preempts."""
    BLOCKED_BY_HEAD = "blocked_by_head"
    """Its queue is strict-fifo and an earlier job (the head) has not started."""
    TOPOLOGY = "topology"
    """It requires a topology level (``--topology``) that no node's free devices reach now."""
    ARRAY_LIMIT = "array_limit"
    """A task of a job array whose ``%N`` cap is reached: N of its tasks hold devices (docs/arrays.md)."""
    USER_LIMIT = "user_limit"
    """Its user's jobs in its queue hold ``max_gpus_per_user`` devices or ``max_running_jobs_per_user``
    jobs already (Slurm's QOSMaxGRESPerUser / QOSMaxJobsPerUserLimit); it never preempts for that."""
    BEGIN_TIME = "begin_time"
    """Its ``--begin`` time has not come (Slurm's ``BeginTime``); it is not considered before."""
    HELD = "held"
    """Held by ``labgang hold`` (or ``submit --hold``) until ``labgang release``: never admitted."""
    HOST_RESOURCES = "host_resources"
    """Devices are free, but not with enough host CPUs or memory on their nodes (``-c``, ``--mem``,
    ``--mem-per-gpu``), or the nodes are not free whole for ``--exclusive`` (docs/host-resources.md)."""


class NoPreemptionCode(str, enum.Enum):
    """Why a job that does not fit looked for no victims at all (docs/queue-semantics.md §A3.1).
    Values are the strings the API and ``labgang explain --json`` show."""

    WOULD_BORROW = "would_borrow"
    """Its request is above its queue's nominal quota, so it could only start by borrowing, and
    a job that would borrow may not preempt: its queue has no cohort, or the queue's
    ``borrow_within_cohort`` is ``never`` (and neither fair sharing nor a lower cohort lets it
    look)."""


@dataclass(frozen=True, slots=True)
class NoPreemption:
    """The preemption rule that kept a pending job from looking for victims, with its numbers.

    Attributes:
        code: which rule.
        queue: the job's queue.
        resource: the contested resource (``gpu``, ``mig-1g.10gb``).
        request: devices the job asks for (an elastic gang: its minimum).
        nominal: the queue's nominal quota of ``resource``.
        cohort: the queue's cohort (None: none, so it can never borrow).
        borrow_within_cohort: the queue's ``borrow_within_cohort`` policy (``never``, ``lower-priority``).
        message: the rule in a sentence with those numbers, for people.
    """

    code: NoPreemptionCode
    queue: str
    resource: str
    request: int
    nominal: int
    cohort: str | None
    borrow_within_cohort: str
    message: str

    @property
    def borrow(self) -> int:
        """Devices above the queue's nominal quota the job would need even with its queue empty."""
        return self.request - self.nominal

    def facts(self) -> dict[str, str | int | None]:
        """The fields as JSON-ready values (``code`` as its string), with ``borrow``: what the
        JobView's ``reason.no_preemption`` holds."""
        return {
            "code": self.code.value,
            "queue": self.queue,
            "resource": self.resource,
            "request": self.request,
            "nominal": self.nominal,
            "borrow": self.borrow,
            "cohort": self.cohort,
            "borrow_within_cohort": self.borrow_within_cohort,
            "message": self.message,
        }

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any]) -> NoPreemption:
        """Read back :meth:`facts` (``borrow`` is derived and ignored).

        Raises:
            ValueError: an unknown ``code``.
            KeyError: a missing field.
        """
        cohort = facts["cohort"]
        return cls(
            NoPreemptionCode(facts["code"]),
            str(facts["queue"]),
            str(facts["resource"]),
            int(facts["request"]),
            int(facts["nominal"]),
            None if cohort is None else str(cohort),
            str(facts["borrow_within_cohort"]),
            str(facts["message"]),
        )


@dataclass(slots=True, unsafe_hash=True)
class PendingReason:
    """A typed reason and a human message with numbers, e.g.
    ``PendingReason(ReasonCode.OVER_QUOTA, "team-a uses 5 gpu of the 5 it may use (nominal quota 3 +
    borrowing limit 2); job needs 1")``.

    ``no_preemption``: set when the job did not fit and the preemption rules kept it from even
    looking for victims (docs/queue-semantics.md §A3.1); None when it looked (and found none) or
    did not need to.
    """

    code: ReasonCode
    message: str
    no_preemption: NoPreemption | None = None


@dataclass(slots=True, unsafe_hash=True)
class Admit:
    """Start ``job_id`` on ``placement`` (one entry per rank).

    ``whole``: for an ``--exclusive`` job, every device of its resource on its nodes, as
    ``"node/uuid"`` (those its ranks got included): what it holds whole, for accounting
    (``labgang report``); () for any other job. ``note``: for a share of a card, how it was
    placed (joined a shared card or took a whole one, and why; "" otherwise)."""

    job_id: str
    placement: Placement
    whole: tuple[str, ...] = ()
    note: str = ""


@dataclass(slots=True, unsafe_hash=True)
class Preempt:
    """Stop ``victims`` (job ids, whole gangs) to make room for ``job_id``.

    Attributes:
        job_id: the preemptor; it stays pending with ``nominated = victims``.
        victims: every job the preemptor waits for, in the order they were chosen.
        reason: why, with numbers ("reclaim 2 gpu lent by team-b to team-a").
        reclaims: one entry per victim, in ``victims``' order: why a victim of another queue of the
            cohort was taken back ("vision was borrowing nlp's nominal gpu"), "" for one of the
            preemptor's own queue (preempted by priority); empty when not told.
    """

    job_id: str
    victims: tuple[str, ...]
    reason: str
    reclaims: tuple[str, ...] = ()


@dataclass(slots=True, unsafe_hash=True)
class Pending:
    """``job_id`` stays pending because of ``reason``."""

    job_id: str
    reason: PendingReason


@dataclass(slots=True, unsafe_hash=True)
class CycleResult:
    """All decisions of one cycle, each tuple in the order the cycle made them.

    Every pending job of the snapshot appears exactly once: in ``admitted`` or in ``pending``
    (a preemptor appears in ``preempted`` and in ``pending`` with WAITING_FOR_VICTIMS).

    ``held``: jobs that held their queue's idle quota in this cycle; the caller passes
    ``held_last_cycle = True`` for them in the next snapshot (a hold lasts one cycle).
    ``tenants``: every tenant's usage history after this cycle's admissions (entry penalties),
    with admission fair sharing on; the caller keeps them for the next snapshot.
    """

    admitted: tuple[Admit, ...]
    preempted: tuple[Preempt, ...]
    pending: tuple[Pending, ...]
    held: tuple[str, ...] = ()
    tenants: tuple[TenantUsage, ...] = ()
