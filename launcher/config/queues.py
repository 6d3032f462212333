"""One schema for queues, cohorts, tenants and fair sharing: ``cluster.toml`` and scenario files.

The pydantic models here are the ``[[queues]]``, ``[[cohorts]]`` and ``[[tenants]]`` tables
and the fair-sharing settings shared by the cluster configuration (:mod:`labgang.launcher.config.cluster`)
and ``labgang simulate`` files (:mod:`labgang.launcher.simulate.scenario`); each side adds only
its own keys (the config's ``users``/``groups``, a cohort's ``description``). Unknown keys are
errors. :func:`tree_problems` checks what one table cannot: names, parents, cycles and limits
(docs/scenarios.md, "Fair sharing and cohort trees").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Literal

from labgang.launcher.host_quota import is_host_resource, quota_problem, quota_value
from labgang.launcher.model import (
    DEFAULT_FAIR_PREEMPTION,
    SHARE_GPUS,
    AdmissionFairSharing,
    BorrowPolicy,
    BorrowWithinCohort,
    CohortSpec,
    FairPreemption,
    Queueing,
    QueueSpec,
    ReclaimWithinCohort,
    SharingPolicy,
    TenantSpec,
    WithinQueue,
    is_valid_resource,
)
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

FAIR_PREEMPTION_LISTS: tuple[tuple[FairPreemption, ...], ...] = (
    (FairPreemption.LESS_THAN_OR_EQUAL_TO_FINAL_SHARE,),
    (FairPreemption.LESS_THAN_INITIAL_SHARE,),
    DEFAULT_FAIR_PREEMPTION,
)
"""The only allowed ``fair_preemption`` lists."""


COUNT_HELP = "a whole number of devices >= 0"
NUMBER_HELP = "a number"


def shown(value: object) -> str:
    """``value`` as it reads in TOML: ``true``, ``"3"``, ``1.5``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def _ctx(value: object, allowed: str) -> dict[str, object]:
    return {"shown": shown(value), "allowed": allowed}


def strict_int(allowed: str) -> BeforeValidator:
    """A check that lets only a whole number (an ``int``, never ``true``/``false`` or ``"3"``) or None through.

    Raises (when validating):
        PydanticCustomError: ``<value> is not allowed; allowed: <allowed>``.
    """

    def check(value: object) -> object:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            kind = "int_from_float" if isinstance(value, float) else "int_type"  # worded by the config's checker too
            raise PydanticCustomError(kind, "{shown} is not allowed; allowed: {allowed}", _ctx(value, allowed))
        return value

    return BeforeValidator(check)


def strict_number(allowed: str = NUMBER_HELP) -> BeforeValidator:
    """A check that lets only an ``int`` or ``float`` (never ``true``/``false`` or a string) or None through.

    Raises (when validating):
        PydanticCustomError: ``<value> is not allowed; allowed: <allowed>``.
    """

    def check(value: object) -> object:
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise PydanticCustomError("float_type", "{shown} is not allowed; allowed: {allowed}", _ctx(value, allowed))
        return value

    return BeforeValidator(check)


Count = Annotated[int, strict_int(COUNT_HELP)]
"""A device count: a whole number (checked >= 0 by :func:`check_quantities`)."""
Number = Annotated[float, strict_number()]
"""A plain number (int or float), never a bool or a string."""
OptionalNumber = Annotated[float | None, strict_number()]
"""A plain number or None."""
Whole = Annotated[int, strict_int("a whole number")]
"""A whole number, never a bool, a float or a string."""
OptionalWhole = Annotated[int | None, strict_int("a whole number")]

PRIORITY_MIN, PRIORITY_MAX = -(2**31), 2**31 - 1
"""Priorities are signed 32-bit integers (Kubernetes PriorityClass values use the same range)."""

Priority = Annotated[int, strict_int("a whole number"), Field(ge=PRIORITY_MIN, le=PRIORITY_MAX)]
"""A priority class's value in ``[priority_classes]``: a job's priority, so in its range."""
"""A whole number or None."""


class Strict(BaseModel):
    """Base of every table: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


def check_quantities(value: dict[str, int], what: str) -> dict[str, int]:
    """Devices per resource (the table ``what``): names ``gpu`` / ``mig-<profile>``, counts >= 0.

    Raises:
        ValueError: naming the bad resource or count and the allowed values.
    """
    for res, n in value.items():
        if not is_valid_resource(res):
            raise ValueError(
                f"unknown resource {res!r} in {what}; allowed: 'gpu' or 'mig-<profile>' such as 'mig-1g.10gb'"
            )
        if n < 0:
            raise ValueError(f"{what}[{res!r}] must be >= 0, got {n}")
    return value


def host_sizes(value: object) -> object:
    """A quota table with its ``memory`` entry (a size such as ``"512G"``, or a whole number of
    MiB as ``--mem`` reads it) in bytes, before the types are checked (launcher/host_quota.py).

    Raises:
        ValueError: a ``memory`` string that is not a size (names what is allowed).
    """
    if not isinstance(value, dict):
        return value
    try:
        return {res: quota_value(res, count) for res, count in value.items()}
    except ValueError as exc:
        raise ValueError(f"memory: {exc}") from None


def check_quota(value: dict[str, int], what: str) -> dict[str, int]:
    """A quota table (the table ``what``): devices per resource as :func:`check_quantities`,
    plus the host resources ``cpu`` (logical CPUs) and ``memory`` (bytes) in their ranges.

    Raises:
        ValueError: naming the bad resource or count and the allowed values.
    """
    for res, n in value.items():
        if is_host_resource(res):
            problem = quota_problem(res, n)
            if problem is not None:
                raise ValueError(f"{res}: {problem}")
        elif not is_valid_resource(res):
            raise ValueError(
                f"unknown resource {res!r} in {what}; allowed: 'gpu' or 'mig-<profile>' such as "
                "'mig-1g.10gb' (devices), 'cpu' or 'memory' (host)"
            )
        elif n < 0:
            raise ValueError(f"{what}[{res!r}] must be >= 0, got {n}")
    return value


class BorrowWithinCohortModel(Strict):
    """``borrow_within_cohort = { policy, max_priority_threshold }``."""

    policy: BorrowPolicy = BorrowPolicy.NEVER
    max_priority_threshold: OptionalWhole = None


class QueueModel(Strict):
    """``[[queues]]``: one queue's quota, policies, fair-sharing weight and per-user limits
    (``max_gpus_per_user``, ``max_running_jobs_per_user``: whole numbers >= 0, absent = no limit);
    ``share_gpus`` (``none``/``queue``/``user``) and ``share_with`` say whose jobs its shares of a card
    may sit with (docs/sharing.md; :mod:`labgang.launcher.config.sharing` checks ``share_with``).
    ``nominal``, ``borrowing_limit`` and ``lending_limit`` may name ``cpu`` (logical CPUs) and
    ``memory`` (a size such as ``"256G"``, or a whole number of MiB; held in bytes) beside the
    devices (docs/host-resources.md, "Quotas")."""

    name: str = Field(min_length=1)
    cohort: str | None = Field(default=None, min_length=1)
    nominal: dict[str, Count] = {}
    borrowing_limit: dict[str, Count] = {}
    lending_limit: dict[str, Count] = {}
    within_queue: WithinQueue = WithinQueue.NEVER
    reclaim_within_cohort: ReclaimWithinCohort = ReclaimWithinCohort.NEVER
    borrow_within_cohort: BorrowWithinCohortModel = BorrowWithinCohortModel()
    queueing: Queueing = Queueing.BEST_EFFORT_FIFO
    starvation_after: OptionalNumber = Field(default=None, ge=0)
    fair_weight: Number = Field(default=1.0, ge=0)
    max_gpus_per_user: OptionalWhole = Field(default=None, ge=0)
    max_running_jobs_per_user: OptionalWhole = Field(default=None, ge=0)
    share_gpus: str = "none"
    share_with: list[str] = []

    @field_validator("nominal", "borrowing_limit", "lending_limit", mode="before")
    @classmethod
    def _sizes(cls, v: object) -> object:
        return host_sizes(v)

    @field_validator("nominal", "borrowing_limit", "lending_limit")
    @classmethod
    def _q(cls, v: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        return check_quota(v, info.field_name or "quantities")

    @field_validator("share_gpus")
    @classmethod
    def _share_gpus(cls, v: str) -> str:
        if v not in SHARE_GPUS:
            raise ValueError(f"{v!r} is not allowed; allowed: {', '.join(SHARE_GPUS)}")
        return v

    def to_spec(self) -> QueueSpec:
        """The scheduler's :class:`QueueSpec`."""
        bwc = self.borrow_within_cohort
        return QueueSpec(
            name=self.name,
            nominal=dict(self.nominal),
            cohort=self.cohort,
            borrowing_limit=dict(self.borrowing_limit),
            lending_limit=dict(self.lending_limit),
            within_queue=self.within_queue,
            reclaim_within_cohort=self.reclaim_within_cohort,
            borrow_within_cohort=BorrowWithinCohort(bwc.policy, bwc.max_priority_threshold),
            queueing=self.queueing,
            starvation_after=self.starvation_after,
            fair_weight=self.fair_weight,
            max_gpus_per_user=self.max_gpus_per_user,
            max_running_jobs_per_user=self.max_running_jobs_per_user,
            share_gpus=self.share_gpus,
            share_with=tuple(self.share_with),
        )


class CohortModel(Strict):
    """``[[cohorts]]``: a cohort's parent, own quota, limits towards its parent, weight."""

    name: str = Field(min_length=1)
    parent: str | None = Field(default=None, min_length=1)
    nominal: dict[str, Count] = {}
    borrowing_limit: dict[str, Count] = {}
    lending_limit: dict[str, Count] = {}
    fair_weight: Number = Field(default=1.0, ge=0)

    @field_validator("nominal", "borrowing_limit", "lending_limit", mode="before")
    @classmethod
    def _sizes(cls, v: object) -> object:
        return host_sizes(v)

    @field_validator("nominal", "borrowing_limit", "lending_limit")
    @classmethod
    def _q(cls, v: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        return check_quota(v, info.field_name or "quantities")

    def to_spec(self) -> CohortSpec:
        """The scheduler's :class:`CohortSpec`."""
        return CohortSpec(
            name=self.name,
            parent=self.parent,
            nominal=dict(self.nominal),
            borrowing_limit=dict(self.borrowing_limit),
            lending_limit=dict(self.lending_limit),
            fair_weight=self.fair_weight,
        )


class TenantModel(Strict):
    """``[[tenants]]``: a user or group of one queue, for admission fair sharing."""

    name: str = Field(min_length=1)
    queue: str = Field(min_length=1)
    fair_weight: Number = Field(default=1.0, ge=0)
    usage: dict[str, Count] = {}

    @field_validator("usage")
    @classmethod
    def _q(cls, v: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        return check_quantities(v, info.field_name or "quantities")

    def to_spec(self) -> TenantSpec:
        """The scheduler's :class:`TenantSpec`."""
        return TenantSpec(self.name, self.queue, self.fair_weight, dict(self.usage))


class AdmissionFairSharingModel(Strict):
    """``admission_fair_sharing = { half_life, sampling_interval }`` (seconds, both > 0)."""

    half_life: Number = Field(gt=0)
    sampling_interval: Number = Field(default=300.0, gt=0)

    def to_spec(self) -> AdmissionFairSharing:
        """The scheduler's :class:`AdmissionFairSharing`."""
        return AdmissionFairSharing(self.half_life, self.sampling_interval)


FairPreemptionName = Literal["less-than-or-equal-to-final-share", "less-than-initial-share"]


def fair_preemption_problem(value: Sequence[str] | None, fair_sharing: bool, where: str) -> str | None:
    """The problem with a ``fair_preemption`` list, or None."""
    if value is None:
        return None
    if not fair_sharing:
        return f"{where}: only allowed with fair_sharing = true"
    allowed = [[r.value for r in lst] for lst in FAIR_PREEMPTION_LISTS]
    if list(value) not in allowed:
        return f"{where}: {list(value)!r} is not allowed; allowed: " + " or ".join(repr(a) for a in allowed)
    return None


def sharing_policy(
    fair_sharing: bool, fair_preemption: Sequence[str] | None, admission: AdmissionFairSharingModel | None
) -> SharingPolicy:
    """The scheduler's :class:`SharingPolicy` from validated settings."""
    rules = tuple(FairPreemption(r) for r in fair_preemption) if fair_preemption else DEFAULT_FAIR_PREEMPTION
    return SharingPolicy(fair_sharing, rules, admission.to_spec() if admission is not None else None)


def tree_problems(
    queues: Sequence[QueueModel], cohorts: Sequence[CohortModel], tenants: Sequence[TenantModel] = ()
) -> list[str]:
    """Cross-table problems: duplicate names, a cycle of parents, limits on a root cohort,
    a lending limit above the quota it limits, tenants of unknown queues or listed twice."""
    problems: list[str] = []
    seen: dict[str, int] = {}
    for i, c in enumerate(cohorts):
        if c.name in seen:
            problems.append(f"cohorts[{i}] ({c.name!r}): duplicate name")
        seen.setdefault(c.name, i)
    by_name = {c.name: c for c in cohorts}
    for i, c in enumerate(cohorts):
        where = f"cohorts[{i}] ({c.name!r})"
        if c.parent is None and (c.borrowing_limit or c.lending_limit):
            key = "borrowing_limit" if c.borrowing_limit else "lending_limit"
            problems.append(f"{where}.{key}: only allowed on a cohort with a parent")
        n: str | None = c.parent
        path = {c.name}
        while n is not None:
            if n in path:
                problems.append(f"{where}.parent: cycle of parents through {n!r}; cohorts must form a tree")
                break
            path.add(n)
            parent = by_name.get(n)
            n = parent.parent if parent is not None else None
    for i, q in enumerate(queues):
        for res, limit in q.lending_limit.items():
            have = q.nominal.get(res, 0)
            if limit > have:
                problems.append(
                    f"queues[{i}] ({q.name!r}).lending_limit.{res}: {limit} is above the nominal quota "
                    f"({have}); allowed: 0..{have} (a queue lends at most its nominal quota, as in Kueue)"
                )
    queue_names = [q.name for q in queues]
    seen_tenants: set[str] = set()
    for i, t in enumerate(tenants):
        where = f"tenants[{i}] ({t.name!r})"
        if t.name in seen_tenants:
            problems.append(f"{where}: duplicate name (tenant names are unique)")
        seen_tenants.add(t.name)
        if t.queue not in queue_names:
            problems.append(f"{where}.queue: unknown queue {t.queue!r}; allowed: {', '.join(queue_names)}")
    return problems
