"""Typed events the lifecycle model takes (:meth:`Lifecycle.apply`).

Every event carries ``now``: the model never reads a clock (unix seconds in the coordinator,
simulated seconds in ``labgang simulate``). Drivers translate what they receive (API calls,
agent messages, scheduling cycles, timers) into these.

Instances are values: compared and hashed by their fields, and never changed after construction (no
code assigns to one). They are not ``frozen`` dataclasses only because Python 3.11's frozen
``__init__`` sets each field through ``object.__setattr__``, 3-5x the cost of a plain slot write,
and a replay builds hundreds of thousands of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from labgang.launcher.lifecycle.dependency import Target
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.lifecycle.states import RankPhase
from labgang.launcher.scheduler.decisions import CycleResult

if TYPE_CHECKING:
    # an annotation only: an update is made where ``labgang update`` is read (the coordinator,
    # which imports the verbs), and the model only calls its methods
    from labgang.launcher.lifecycle.verbs import JobUpdate


@dataclass(slots=True, unsafe_hash=True)
class JobSubmitted:
    """A job was accepted (already inserted in the store, so it has its id).

    ``targets``: the finished jobs its ``--dependency`` names (a driver that keeps only active
    jobs in the model reads them from its store); active ones the model knows itself.
    """

    now: float
    job: JobRecord
    targets: tuple[Target, ...] = ()


@dataclass(slots=True, unsafe_hash=True)
class CancelRequested:
    """``by`` (a user name) cancels ``job_id``: at once if pending, with grace otherwise."""

    now: float
    job_id: str
    by: str


@dataclass(slots=True, unsafe_hash=True)
class HoldRequested:
    """``by`` holds pending job ``job_id`` (``labgang hold``; ``verbs.hold_refusal`` allowed it).
    ``admin``: an admin holding another user's job (only an admin may then release it)."""

    now: float
    job_id: str
    by: str
    admin: bool = False


@dataclass(slots=True, unsafe_hash=True)
class ReleaseRequested:
    """``by`` releases held job ``job_id`` (``labgang release``; ``verbs.release_refusal`` allowed it)."""

    now: float
    job_id: str
    by: str


@dataclass(slots=True, unsafe_hash=True)
class RequeueRequested:
    """``by`` requeues admitted or running job ``job_id`` (``labgang requeue``, Slurm's ``scontrol
    requeue``): its ranks are stopped with its grace, then it is pending again as a new attempt.
    ``hold``: also hold it (``requeue --hold``, Slurm's ``requeuehold``); ``admin`` as in
    :class:`HoldRequested`."""

    now: float
    job_id: str
    by: str
    hold: bool = False
    admin: bool = False


@dataclass(slots=True, unsafe_hash=True)
class UpdateRequested:
    """``by`` changes job ``job_id``'s spec (``labgang update``; ``verbs.update_refusal`` allowed it).

    Attributes:
        update: the new values (``verbs.JobUpdate``). targets: the finished jobs a new dependency
            names (as for :class:`JobSubmitted`).
    """

    now: float
    job_id: str
    by: str
    update: JobUpdate
    targets: tuple[Target, ...] = ()


@dataclass(slots=True, unsafe_hash=True)
class CycleDecided:
    """One scheduling cycle's result, decided on a snapshot taken at ``now``.

    Attributes:
        admitted_before: ids of the gangs earlier cycles of the same burst admitted (a driver
            runs cycles until one decides nothing new); a cycle never evicts them.
    """

    now: float
    result: CycleResult
    admitted_before: frozenset[str] = frozenset()


@dataclass(slots=True, unsafe_hash=True)
class RankObserved:
    """An agent says where one rank of run ``run_id`` is (a rank event or a rank status).

    Attributes:
        phase: the phase it means (``RankPhase.from_agent`` for a status; started/exited/gone
            events map to RUNNING/EXITED/GONE).
        pid: the rank's pid when known. exit_status: its main process's status when known.
        fenced: the agent stopped this rank itself because the node's lease ran out (it could
            not reach the coordinator): its exit is the node's loss, not the job's failure.
        fenced_at: when the fence stopped it (unix s, the agent's clock), if known: the job's
            history lines about it are dated then (a report can arrive much later, e.g. at the
            next ``labgang up`` after a ``kill -9``).
        started_at: when the rank's main process started (unix s, the agent's clock; None when
            the report does not say): its recorded start instant. None for a rank reported
            running: the instant of the report (``now``) stands for it.
        ended_at: when its main process exited (unix s, the agent's clock), if the report says;
            otherwise an ended rank's end instant is the report's ``now``.
    """

    now: float
    node: str
    run_id: str
    rank: int
    phase: RankPhase
    pid: int | None = None
    exit_status: int | None = None
    fenced: bool = False
    fenced_at: float | None = None
    started_at: float | None = None
    ended_at: float | None = None


@dataclass(slots=True, unsafe_hash=True)
class LaunchSent:
    """The driver is sending the ``launch`` of run ``run_id``'s ranks on ``node``; ``master_addr``
    is rank 0's node address, given with the first launch of the run (None after that)."""

    now: float
    node: str
    run_id: str
    master_addr: str | None = None


@dataclass(slots=True, unsafe_hash=True)
class LaunchAnswered:
    """A node answered a ``launch`` for run ``run_id``.

    Attributes:
        master_port: the port rank 0's agent chose (None when this answer has none).
        refused: (rank, error) for every rank the agent refused to launch.
        permanent: True when a refusal would only repeat (uid/root policy, a cwd the user may not enter).
        observed: the statuses of the ranks it launched.
    """

    now: float
    node: str
    run_id: str
    master_port: int | None
    refused: tuple[tuple[int, str], ...]
    permanent: bool
    observed: tuple[RankObserved, ...]


@dataclass(slots=True, unsafe_hash=True)
class LaunchFailed:
    """A ``launch`` for run ``run_id`` on ``node`` was not delivered or not answered."""

    now: float
    node: str
    run_id: str
    message: str


@dataclass(slots=True, unsafe_hash=True)
class NodeJoined:
    """A node (re)connected, or answered again after being lost, and reported its ranks.

    Attributes:
        reported: every rank the agent knows. connected: the nodes connected now (a gang
            admitted before a coordinator restart is dispatched once all of its nodes are back).
    """

    now: float
    node: str
    reported: tuple[RankObserved, ...]
    connected: frozenset[str]


@dataclass(slots=True, unsafe_hash=True)
class NodeLost:
    """The node's lease ran out (``node_timeout_s`` without a word from its agent).

    Its ranks whose main process already exited count as lost at once; the others are
    *fenced*: they count as stopped only at ``last_contact + node_timeout_s + grace`` (the
    latest instant the agent, on its own lease, has stopped them), or earlier when the
    agent comes back and reports their real exits (docs/queue-semantics.md §A5).

    Attributes:
        last_contact: when the driver last heard from the node (same clock as ``now``); None
            counts from ``now`` (later than the truth, so still safe).
    """

    now: float
    node: str
    why: str
    last_contact: float | None = None


@dataclass(slots=True, unsafe_hash=True)
class Tick:
    """Time passed: startup timeouts, time limits and their warning signals, and the fences of
    lost nodes' ranks are checked.

    Attributes:
        started_at: when the driver started (a startup timeout counts from the later of the
            admission and this). connected: nodes connected now (named in a timeout's reason).
        holders: the model's ``active()`` as the driver listed it for this tick's own checks
            (the coordinator walks the holders for ranks on nodes gone since a restart), so that
            the model does not walk every job again; None: the model lists them. A list made
            before the events the driver applied since is fine: those can end a job's holding
            (a node lost) but never begin one (only a cycle admits), and the model judges each
            listed job by its state now.
    """

    now: float
    started_at: float
    connected: frozenset[str]
    holders: Sequence[JobRecord] | None = None


@dataclass(slots=True, unsafe_hash=True)
class ShutdownRequested:
    """labgang itself is stopping its jobs: each is requeued (or cancelled) once its ranks are gone."""

    now: float
    why: str


@dataclass(slots=True, unsafe_hash=True)
class DeviceViolationSeen:
    """A node's NVML shows a process of rank ``rank`` of run ``run_id`` on ``device``, a device
    the rank was not given (``agent/supervisor/violations.py``); or, with ``budget`` set, a
    sharing rank's processes using more of its card than its ``--gpu-mem`` budget
    (``agent/supervisor/budgets.py``).

    Attributes:
        pid: the process (the rank's main process or a descendant; for a budget, its biggest
            user of the card). allowed: the rank's devices.
        used: for a budget, bytes the rank's processes use on the card; None otherwise.
        budget: the rank's device-memory budget in bytes; None for a device violation.
    """

    now: float
    node: str
    run_id: str
    rank: int
    device: str
    pid: int
    allowed: tuple[str, ...]
    used: int | None = None
    budget: int | None = None


Event = (
    JobSubmitted
    | CancelRequested
    | HoldRequested
    | ReleaseRequested
    | RequeueRequested
    | UpdateRequested
    | CycleDecided
    | RankObserved
    | LaunchSent
    | LaunchAnswered
    | LaunchFailed
    | NodeJoined
    | NodeLost
    | Tick
    | ShutdownRequested
    | DeviceViolationSeen
)
"""Anything :meth:`Lifecycle.apply` takes."""
