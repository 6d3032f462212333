"""The job lifecycle's vocabulary: job states, rank phases, end intents, end reasons, and the
only arrows allowed between job states.

A job's life (docs/queue-semantics.md §A5)::

    PENDING ──cycle admits──► ADMITTED ──every rank started──► RUNNING
    PENDING ──cancel──► CANCELLED
    PENDING ──late exits: the attempt requeued on a lost node's fence had finished──► SUCCEEDED
    ADMITTED | RUNNING ──stop (cancel, preemption, failed rank, lost node, time limit,
                         failed start, shutdown)──► TERMINATING
    RUNNING ──every rank gone──► SUCCEEDED | FAILED          (decided by the ranks' exits)
    TERMINATING ──every rank gone──► SUCCEEDED | FAILED | CANCELLED | TIMEOUT | NODE_FAIL,
                                     or PENDING (requeue)

A preempted job that is not requeued (``requeue = false``, or a ``labgang run`` job) ends
CANCELLED: Slurm's PreemptMode=CANCEL ends it PREEMPTED, a state labgang has not, and FAILED
would say its own command failed; its attempt record's outcome is ``preempted``.

TIMEOUT (Slurm's TO) is a job stopped by its time limit; NODE_FAIL (NF) one stopped because a
node of it was lost (or cut off by its lease) that could not go back to its queue (``requeue =
false``). Each start attempt's own outcome, PREEMPTED included, is its attempt record's
(``lifecycle/attempts.py``).

A requeue is an event (``requeued`` in the job's history) that returns a job to PENDING as a
new attempt, not a state and not a reason code. A hold (``labgang hold``) is not a state either:
a PENDING job with ``JobStatus.hold`` set, which no cycle admits (reason ``held``).
Every change of a job's state goes through :func:`transition`, which refuses an arrow absent
from :data:`JOB_MOVES`; a rank's phase only moves forward (:func:`advance`).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import enum
from typing import Protocol

from labgang.agent.supervisor.states import RankState


class JobState(str, enum.Enum):
    """A job's life, as ``squeue`` would name it. The value is the wire name."""

    PENDING = "pending"  # in its queue, not admitted
    ADMITTED = "admitted"  # quota and devices assumed, ranks being launched
    RUNNING = "running"  # every rank confirmed started
    TERMINATING = "terminating"  # told to stop (preempted, cancelled, failed rank); devices still held
    SUCCEEDED = "succeeded"  # every rank exited 0
    FAILED = "failed"  # a rank failed, or it could not start
    CANCELLED = "cancelled"  # cancelled by its owner or an admin, or preempted and not requeued
    TIMEOUT = "timeout"  # stopped by its time limit (Slurm's TIMEOUT, TO)
    NODE_FAIL = "node_fail"  # its node was lost and it could not requeue (Slurm's NODE_FAIL, NF)

    finished: bool
    """True for the five final states (a plain attribute of each member, set below: read tens of
    times a job, where a property call cost 3x the read)."""

    holds_devices: bool
    """True while the job's quota and devices count as used (ADMITTED, RUNNING, TERMINATING; a
    plain attribute of each member, set below)."""


_FINAL = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL})
for _state in JobState:
    _state.finished = _state in _FINAL
    _state.holds_devices = _state in (JobState.ADMITTED, JobState.RUNNING, JobState.TERMINATING)
del _state
FINAL_STATES: tuple[str, ...] = ("succeeded", "failed", "cancelled", "timeout", "node_fail")
"""The wire names of the final states (what the store's ``jobs.state`` column holds for a finished job)."""

JOB_MOVES: dict[JobState, frozenset[JobState]] = {
    # PENDING -> SUCCEEDED: requeued on a lost node's fence, then its agent reported that the ranks
    # whose exits were unheard had exited 0 (GangRules.late_exit, docs/queue-semantics.md §A3.6)
    JobState.PENDING: frozenset({JobState.ADMITTED, JobState.CANCELLED, JobState.SUCCEEDED}),
    JobState.ADMITTED: frozenset({JobState.RUNNING, JobState.TERMINATING}),
    JobState.RUNNING: frozenset({JobState.TERMINATING, JobState.SUCCEEDED, JobState.FAILED}),
    JobState.TERMINATING: frozenset(
        {
            JobState.PENDING,
            JobState.SUCCEEDED,
            JobState.FAILED,
            JobState.CANCELLED,
            JobState.TIMEOUT,
            JobState.NODE_FAIL,
        }
    ),
    JobState.SUCCEEDED: frozenset(),
    JobState.FAILED: frozenset(),
    JobState.CANCELLED: frozenset(),
    JobState.TIMEOUT: frozenset(),
    JobState.NODE_FAIL: frozenset(),
}
"""Every legal arrow between job states; anything else is a bug and :func:`transition` raises."""


class IllegalTransition(Exception):
    """A job state change absent from :data:`JOB_MOVES` (or a rank phase moving backwards)."""


class HasState(Protocol):
    """Anything with a mutable job ``state`` (a ``JobStatus``)."""

    state: JobState


def transition(status: HasState, to: JobState) -> None:
    """Move ``status.state`` to ``to``: the one place a job's state changes.

    Raises:
        IllegalTransition: ``to`` is not in ``JOB_MOVES[status.state]``.
    """
    if to not in JOB_MOVES[status.state]:
        raise IllegalTransition(f"job state {status.state.value} -> {to.value} is not allowed")
    status.state = to


class RankPhase(str, enum.Enum):
    """Where one rank of the current attempt is, as the coordinator records it. The value is
    the wire name (the ``ranks.state`` column and the API's rank ``state``).

    Phases only move forward (ASSIGNED → LAUNCHING → RUNNING → EXITED → GONE, or LOST from
    any phase); a phase may be skipped (a refused launch goes ASSIGNED → GONE).
    """

    ASSIGNED = "assigned"  # placed by an admission, not sent to an agent yet
    LAUNCHING = "launching"  # the launch was sent; the agent has not confirmed the start
    RUNNING = "running"  # the rank's main process runs
    EXITED = "exited"  # its main process exited (exit status known); devices may still be busy
    GONE = "gone"  # no process of the rank remains and its devices are free
    LOST = "lost"  # its node was lost: nothing more will be heard of it

    order: int
    """Position in the forward order (GONE and LOST are both last): a plain attribute of each
    member, set below from ``_PHASE_ORDER`` (the rank rules compare phases tens of times a job;
    a property call cost 3x the read)."""

    ended: bool
    """True once the rank's processes are gone and its devices free (or its node was lost): GONE
    and LOST (a plain attribute of each member, set below)."""

    @classmethod
    def from_agent(cls, state: str, exit_status: int | None) -> RankPhase:
        """The phase an agent's ``RankState`` wire value (``agent/supervisor/states.py``) means.

        ``starting`` → LAUNCHING; ``running``/``warned``/``stopping``/``killing`` → RUNNING while
        no exit status is known, EXITED once the main process exited (leftovers being stopped);
        ``releasing`` → EXITED; ``gone`` → GONE.

        Raises:
            ValueError: ``state`` is not a RankState value.
        """
        try:
            agent = RankState(state)
        except ValueError:
            allowed = ", ".join(s.value for s in RankState)
            raise ValueError(f"unknown rank state {state!r} (allowed: {allowed})") from None
        if agent is RankState.STARTING:
            return cls.LAUNCHING
        if agent in _AGENT_LIVE:
            return cls.RUNNING if exit_status is None else cls.EXITED
        if agent is RankState.RELEASING:
            return cls.EXITED
        return cls.GONE  # RankState.GONE


_PHASE_ORDER = {
    RankPhase.ASSIGNED: 0,
    RankPhase.LAUNCHING: 1,
    RankPhase.RUNNING: 2,
    RankPhase.EXITED: 3,
    RankPhase.GONE: 4,
    RankPhase.LOST: 4,
}
for _phase, _order in _PHASE_ORDER.items():
    _phase.order = _order
    _phase.ended = _phase in (RankPhase.GONE, RankPhase.LOST)
del _phase, _order
_AGENT_LIVE = frozenset({RankState.RUNNING, RankState.WARNED, RankState.STOPPING, RankState.KILLING})
#: The phases whose ``order`` is EXITED's or later: the rank's main process has ended (a tuple:
#: membership is an identity test, cheaper than two ``order`` look-ups, on every rank report).
PAST_EXIT = (RankPhase.EXITED, RankPhase.GONE, RankPhase.LOST)


class HasPhase(Protocol):
    """Anything with a mutable rank ``state`` (a ``RankRecord``)."""

    state: RankPhase


def advance(rank: HasPhase, to: RankPhase) -> bool:
    """Move ``rank.state`` forward to ``to``; returns False (and changes nothing) when ``to`` is
    not later than the current phase: reports arrive at least once and out of order."""
    if to is rank.state:  # the usual report: the phase already known
        return False
    if to.order > rank.state.order:
        rank.state = to
        return True
    return False


class EndIntent(str, enum.Enum):
    """What happens once a terminating job's ranks are all gone. None (no intent) means the
    outcome is decided by the ranks' exits. The intents that requeue (PREEMPT, LOST, RETRY,
    SHUTDOWN) end the job as succeeded instead when every rank exited 0 on its own
    (``rules.exited_zero_on_their_own``, docs/queue-semantics.md §A3.6)."""

    CANCEL = "cancel"  # cancelled by its owner or an admin → CANCELLED
    FAIL = "fail"  # a rank failed or a launch was refused for good → FAILED
    TIMEOUT = "timeout"  # its time limit passed → TIMEOUT
    PREEMPT = "requeue"  # chosen as a victim → requeued (or CANCELLED with requeue = false)
    LOST = "lost"  # its node was lost → requeued (or NODE_FAIL with requeue = false)
    RETRY = "retry"  # its start failed → requeued with backoff, FAILED after max_start_failures
    SHUTDOWN = "shutdown"  # labgang itself stopped → requeued (or CANCELLED with requeue = false)
    REQUEUE = "requeue_requested"  # `labgang requeue` by its owner or an admin → requeued (scontrol requeue)
    SUCCEED = "succeed"  # its --success-policy group succeeded: the rest stopped → SUCCEEDED
    RESTART = "restart"  # a rank failed under --failure-policy restart → requeued as a new attempt

    @property
    def warned(self) -> bool:
        """True when the stop is preceded by the job's ``--signal`` warning (Slurm: preemption, scancel)."""
        return self in (EndIntent.CANCEL, EndIntent.PREEMPT)


class EndReason(str, enum.Enum):
    """Why a job is where it is, when the scheduler is not the one saying it (the scheduler's
    pending reasons are ``launcher/scheduler/decisions.py`` ``ReasonCode``). Lifecycle words like
    "requeued" are history events, not reasons: a requeued job's reason is why it was stopped.

    ``DEPENDENCY``: pending, not offered to the scheduler until its ``--dependency`` holds (the
    message says what it waits for). ``DEPENDENCY_NEVER``: that dependency can never hold; the
    job is cancelled with it (Slurm's ``kill_invalid_depend``), or kept pending when that is off.
    ``HELD``: pending, held by ``labgang hold`` or ``submit --hold`` until ``labgang release``
    (Slurm's JobHeldUser/JobHeldAdmin). ``REQUEUE_REQUESTED``: stopped by ``labgang requeue``."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    PREEMPTED = "preempted"
    NODE_LOST = "node_lost"
    START_FAILED = "start_failed"
    SHUTDOWN = "shutdown"
    DEPENDENCY = "dependency"
    DEPENDENCY_NEVER = "dependency_never"
    HELD = "held"
    REQUEUE_REQUESTED = "requeue_requested"


INTENT_REASON: dict[EndIntent, EndReason] = {
    EndIntent.CANCEL: EndReason.CANCELLED,
    EndIntent.FAIL: EndReason.FAILED,
    EndIntent.TIMEOUT: EndReason.TIMEOUT,
    EndIntent.PREEMPT: EndReason.PREEMPTED,
    EndIntent.LOST: EndReason.NODE_LOST,
    EndIntent.RETRY: EndReason.START_FAILED,
    EndIntent.SHUTDOWN: EndReason.SHUTDOWN,
    EndIntent.REQUEUE: EndReason.REQUEUE_REQUESTED,
    EndIntent.SUCCEED: EndReason.COMPLETED,
    EndIntent.RESTART: EndReason.FAILED,
}
"""The reason a job carries while it stops for an intent (and keeps once it ended or was requeued)."""


_PHRASES = {
    "succeeded": "has succeeded",
    "failed": "has failed",
    "cancelled": "was cancelled",
    "timeout": "timed out",
    "node_fail": "ended when its node was lost (node_fail)",
}


def state_phrase(state: JobState) -> str:
    """A job's state as a sentence words it after ``job 5 ``: ``is pending``, ``is running``, ``has
    succeeded``, ``timed out`` (never ``is timeout``)."""
    return _PHRASES.get(state.value) or f"is {state.value}"
