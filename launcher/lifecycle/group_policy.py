"""The run-side rules of a job of groups (issue 27): when it has succeeded, what a rank's failure
does, and which ranks may be launched yet (docs/group-lifecycle.md).

* ``--success-policy all`` (the default): the job succeeds when every rank exited 0 (the gang
  rule). ``any``: once every rank of *some* group exited 0; ``group:NAME``: once every rank of
  group NAME exited 0 (an MPI job succeeds when its launcher does). The ranks still running are
  then stopped with the job's grace and the job is COMPLETED, whatever their stop makes them exit
  with (JobSet's successPolicy, MPIJob's launcher).
* ``--failure-policy fail`` (the default): a rank that exits non-zero fails the job.
  ``restart``: it stops every rank and starts the whole job again (a new attempt through the
  queue), at most ``--max-restarts`` times; the next failure fails it (JobSet's
  failurePolicy.maxRestarts, MPIJob's backoffLimit).
* ``--startup-order g0,g1``: the ranks of a group are launched only once every rank of the
  groups before it reported started (LeaderWorkerSet's LeaderReady, JobSet's InOrder); groups
  the order does not name start last, together. Still one admission: every rank's devices are
  held from the start, and the startup timeout covers the whole job. The order begins with the
  first group (it holds global rank 0, whose node picks ``MASTER_PORT``).

Pure: these rules take a :class:`GroupLayout` (the groups' names and which rank is in which)
and a :class:`GroupPolicy`; the lifecycle (``gang.py``) asks them and acts on the answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

SUCCESS_POLICIES = ("all", "any", "group:NAME")
"""The ``--success-policy`` values (``group:`` followed by one of the job's group names)."""
FAILURE_POLICIES = ("fail", "restart")
"""The ``--failure-policy`` values."""
MAX_RESTARTS_LIMIT = 1000
"""The most ``--max-restarts`` a job may ask for."""


class BadGroupPolicy(ValueError):
    """A lifecycle policy of a job of groups that cannot be used.

    Attributes:
        field: the submission field at fault (``success_policy``, ``failure_policy``,
            ``max_restarts``, ``startup_order``: the submit options ``--success-policy``...).
        allowed: the allowed values, in words.
    """

    def __init__(self, field: str, message: str, allowed: str) -> None:
        self.field = field
        self.allowed = allowed
        super().__init__(f"{field}: {message} (allowed: {allowed})")


@dataclass(frozen=True)
class GroupLayout:
    """The groups of one attempt of a job: their names in group order and the group of each
    global rank (ranks are numbered over all groups in group order, so each group's ranks are
    one contiguous block).

    Attributes:
        names: group names, in group order (at least one).
        rank_groups: for global rank ``r``, the index in ``names`` of its group; non-decreasing,
            every group at least one rank.
    """

    names: tuple[str, ...]
    rank_groups: tuple[int, ...]

    @classmethod
    def from_sizes(cls, names: Sequence[str], sizes: Sequence[int]) -> GroupLayout:
        """The layout of groups ``names`` with ``sizes`` ranks each (same length, sizes >= 1).

        Raises:
            ValueError: the lengths differ or a size is below 1.
        """
        if len(names) != len(sizes) or not names or any(s < 1 for s in sizes):
            raise ValueError(f"groups {list(names)} with sizes {list(sizes)}: one size >= 1 per group")
        return cls(tuple(names), tuple(i for i, size in enumerate(sizes) for _ in range(size)))

    @classmethod
    def single(cls, size: int, name: str = "g0") -> GroupLayout:
        """A job of one shape: one group of ``size`` ranks."""
        return cls.from_sizes((name,), (size,))

    def ranks_of(self, group: int) -> list[int]:
        """The global ranks of group index ``group``, in order."""
        return [r for r, g in enumerate(self.rank_groups) if g == group]

    def index(self, name: str) -> int:
        """The index of group ``name``.

        Raises:
            KeyError: no group has that name.
        """
        try:
            return self.names.index(name)
        except ValueError:
            raise KeyError(name) from None


@dataclass(frozen=True)
class GroupPolicy:
    """A job's lifecycle policies (the submit options of the same names; defaults = a plain gang).

    Attributes:
        success: ``"all"``, ``"any"`` or ``"group:NAME"``.
        failure: ``"fail"`` or ``"restart"``.
        max_restarts: how many times ``failure = "restart"`` starts the job again, 0..1000.
        startup_order: group names in launch order; empty = every rank at once.
    """

    success: str = "all"
    failure: str = "fail"
    max_restarts: int = 0
    startup_order: tuple[str, ...] = ()

    @property
    def plain(self) -> bool:
        """True when the policies are a plain gang's (every rule as before groups)."""
        return self == GroupPolicy()


def check_policy(policy: GroupPolicy, names: Sequence[str]) -> None:
    """Check ``policy`` against a job whose groups are ``names`` (group order).

    Raises:
        BadGroupPolicy: naming the option at fault and its allowed values: an unknown success or
            failure policy, ``group:`` naming no group of the job, ``max_restarts`` outside
            0..1000 or above 0 without ``failure = "restart"``, a startup order naming an unknown
            group or one twice, or not beginning with the first group.
    """
    known = ", ".join(names)
    if policy.success not in ("all", "any"):
        head, sep, name = policy.success.partition(":")
        if head != "group" or not sep:
            raise BadGroupPolicy("success_policy", f"{policy.success!r} is not a policy", "all, any, group:NAME")
        if name not in names:
            raise BadGroupPolicy("success_policy", f"{name!r} is not a group of the job", f"group: one of {known}")
    if policy.failure not in FAILURE_POLICIES:
        raise BadGroupPolicy("failure_policy", f"{policy.failure!r} is not a policy", ", ".join(FAILURE_POLICIES))
    restarts = policy.max_restarts
    if isinstance(restarts, bool) or not isinstance(restarts, int) or not 0 <= restarts <= MAX_RESTARTS_LIMIT:
        raise BadGroupPolicy("max_restarts", f"{restarts!r} is not a count", f"0..{MAX_RESTARTS_LIMIT}")
    if restarts and policy.failure != "restart":  # JobSet's maxRestarts: only with a restart policy
        raise BadGroupPolicy(
            "max_restarts",
            f"--max-restarts {restarts} without --failure-policy restart restarts nothing",
            "--max-restarts only with --failure-policy restart",
        )
    order = policy.startup_order
    for i, name in enumerate(order):
        if name not in names:
            raise BadGroupPolicy("startup_order", f"{name!r} is not a group of the job", f"names among {known}")
        if name in order[:i]:
            raise BadGroupPolicy("startup_order", f"names {name} twice", "each group at most once")
    if order and order[0] != names[0]:
        raise BadGroupPolicy(
            "startup_order",
            f"begins with {order[0]}, not the first group {names[0]} (its rank 0 is MASTER_ADDR)",
            f"an order beginning with {names[0]}; list the groups in the order they should start",
        )


def parse_startup_order(text: str) -> tuple[str, ...]:
    """``"g0,g1"`` -> ``("g0", "g1")``; blanks around names are dropped, an empty text is no order.

    Raises:
        BadGroupPolicy: an empty name between commas.
    """
    if not text.strip():
        return ()
    names = tuple(part.strip() for part in text.split(","))
    if not all(names):
        raise BadGroupPolicy("startup_order", f"{text!r} has an empty group name", "group names separated by commas")
    return names


def succeeded_groups(layout: GroupLayout, exits: Mapping[int, int | None]) -> list[str]:
    """The groups every rank of which exited with status 0 (``exits``: global rank -> its exit
    status, None or absent while it has not exited), in group order."""
    return [
        name
        for g, name in enumerate(layout.names)
        if (ranks := layout.ranks_of(g)) and all(exits.get(r) == 0 for r in ranks)
    ]


def success_reached(layout: GroupLayout, policy: GroupPolicy, exits: Mapping[int, int | None]) -> str | None:
    """Why the job has succeeded while some of its ranks may still run, or None.

    ``all`` never answers here (every rank's exit 0 is the gang rule's own success); ``any`` and
    ``group:NAME`` answer once their group(s) exited 0, e.g. ``"group launcher succeeded
    (--success-policy group:launcher)"``.
    """
    if policy.success == "all":
        return None
    done = succeeded_groups(layout, exits)
    if policy.success == "any":
        return f"group {done[0]} succeeded (--success-policy any)" if done else None
    target = policy.success.partition(":")[2]
    return f"group {target} succeeded (--success-policy {policy.success})" if target in done else None


def restart_allowed(policy: GroupPolicy, restarts_used: int) -> bool:
    """True when a rank's failure starts the whole job again: ``failure = "restart"`` and fewer
    than ``max_restarts`` restarts used (``restarts_used`` >= 0)."""
    return policy.failure == "restart" and restarts_used < policy.max_restarts


def startup_stages(layout: GroupLayout, order: Sequence[str]) -> list[list[int]]:
    """The group indexes launched together, stage by stage: the ordered groups one per stage,
    then every group the order does not name in one last stage. No order: one stage of all."""
    named = [layout.index(name) for name in order]
    rest = [g for g in range(len(layout.names)) if g not in named]
    return [[g] for g in named] + ([rest] if rest else [])


def launchable_ranks(layout: GroupLayout, order: Sequence[str], started: frozenset[int] | set[int]) -> frozenset[int]:
    """The global ranks that may be launched now: those of every stage up to and including the
    first stage some rank of which has not reported started (``started``: global ranks that
    did). No order: every rank."""
    allowed: set[int] = set()
    for stage in startup_stages(layout, order):
        ranks = [r for g in stage for r in layout.ranks_of(g)]
        allowed.update(ranks)
        if not all(r in started for r in ranks):
            break
    return frozenset(allowed)


def waiting_stage(layout: GroupLayout, order: Sequence[str], started: frozenset[int] | set[int]) -> list[str] | None:
    """The groups of the first stage not yet launchable (waiting for the stage before it), or
    None when every rank may be launched."""
    allowed = launchable_ranks(layout, order, started)
    for stage in startup_stages(layout, order):
        if any(r not in allowed for g in stage for r in layout.ranks_of(g)):
            return [layout.names[g] for g in stage]
    return None
