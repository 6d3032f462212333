"""The cluster configuration (``cluster.toml``): queues, cohorts, priority classes, who may do what.

Validated with pydantic (unknown keys are errors); every error names the key path
(``queues[1].within_queue``) and, where the value comes from a fixed set, the allowed
values (worded in ``launcher/config/errors.py``). :func:`load_config` reads a file;
:meth:`ClusterConfig.default_for` builds the embedded default of ``labgang up`` (one queue
``default`` covering every device).

Example::

    default_queue = "team-a"
    admins = ["alice"]
    node_timeout_s = 30.0

    [priority_classes]
    high = 100

    [[queues]]
    name = "team-a"
    cohort = "lab"
    nominal = { gpu = 8 }
    users = ["alice", "bob"]

    [pitfalls]            # thresholds of the pitfall detectors (launcher/pitfalls/thresholds.py)
    idle_after_s = 300
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal

from labgang.agent import tomlfile
from labgang.launcher.config.errors import (
    CLUSTER_EXAMPLE,
    NO_SUCH_FILE,
    QUANTITY_MAX,
    ConfigError,
    describe_errors,
    listed,
    missing_file_problem,
)
from labgang.launcher.config.limits import LimitsConfig
from labgang.launcher.config.notify import NotifyConfig
from labgang.launcher.config.queues import (
    AdmissionFairSharingModel,
    BorrowWithinCohortModel,
    CohortModel,
    FairPreemptionName,
    Number,
    OptionalNumber,
    OptionalWhole,
    Priority,
    QueueModel,
    TenantModel,
    Whole,
    fair_preemption_problem,
    sharing_policy,
)
from labgang.launcher.config.sharing import SharingModel, share_with_problems
from labgang.launcher.host_quota import MAX_CPUS, MAX_MEMORY, is_host_resource, quota_problem, quota_value
from labgang.launcher.model import CohortSpec, GpuSharing, QueueSpec, SharingPolicy, WithinQueue, is_valid_resource
from labgang.launcher.pitfalls.thresholds import PitfallThresholds
from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

BorrowWithinCohortConfig = BorrowWithinCohortModel
"""Kueue's ``borrowWithinCohort`` table (the shared schema's model)."""

DEFAULT_QUEUE = "default"
DEFAULT_STARVATION_S = 300.0
"""``labgang up``'s default queue reserves devices for a gang that has waited this long (seconds),
so a stream of small jobs cannot overtake a big gang forever."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _host_sizes(value: object) -> object:
    """A quota table with its ``memory`` size (``"512G"``) in bytes, before the types are checked.

    Every entry is looked at: when a ``cpu`` or ``memory`` entry is wrong, the problems of every
    entry of the table (devices too) are raised together, one ``.<resource>: ...`` line each, as
    :func:`_check_quantities` words them, so ``config check`` names them all in one pass.

    Raises:
        ValueError: one line per bad entry, naming the resource and what is allowed.
    """
    if not isinstance(value, dict):
        return value
    out: dict[object, object] = {}
    problems: list[str] = []
    for resource, given in value.items():
        count, problem = _quota_entry(str(resource), given)
        out[resource] = count
        if problem is not None:
            problems.append(f".{resource}: {problem}")
    if problems and any(is_host_resource(str(r)) for r in value):
        raise ValueError("\n".join(problems))
    return {r: (out[r] if is_host_resource(str(r)) else c) for r, c in value.items()}


def _quota_entry(resource: str, given: object) -> tuple[object, str | None]:
    """One quota table entry as counted (``memory`` in bytes) and why it cannot be, or None.

    ``cpu`` and device counts are whole numbers (an ``int``, never ``"4"`` or ``true``, as the
    schema's ``Count``); ``memory`` is a size or a whole number of MiB (:func:`quota_value`).
    """
    shown = str(given).lower() if isinstance(given, bool) else repr(given)
    if resource == "memory":
        try:
            count = quota_value(resource, given)
        except ValueError as exc:
            return given, str(exc)
        if isinstance(count, bool) or not isinstance(count, int):
            return given, f"{shown} is not a memory size; allowed: a size such as '512G', or a whole number of MiB"
        if quota_problem(resource, count) is not None:  # out of range: said as written, not in bytes
            return count, f"{shown} is out of range; allowed: a size from 0 to {MAX_MEMORY} bytes, such as '512G'"
        return count, None
    if not is_host_resource(resource) and not is_valid_resource(resource):
        return given, (
            f"unknown resource {resource!r}; allowed: 'gpu' or 'mig-<profile>' such as "
            "'mig-1g.10gb' (devices), 'cpu' or 'memory' (host)"
        )
    what = f"a CPU count from 0 to {MAX_CPUS}" if resource == "cpu" else f"a device count from 0 to {QUANTITY_MAX}"
    if isinstance(given, bool) or not isinstance(given, int):  # strict, as the schema's Count
        return given, f"{shown} is not allowed; allowed: {what}"
    if not 0 <= given <= (MAX_CPUS if resource == "cpu" else QUANTITY_MAX):
        return given, f"{given} is out of range; allowed: {what}"
    return given, None


def _check_quantities(value: dict[str, int], what: str) -> dict[str, int]:
    """Every bad entry of a quota table, one line each (``.<resource>: ...``), so one pass names them all."""
    problems = []
    for resource, count in value.items():
        if is_host_resource(resource):  # cpu, memory (bytes): launcher/host_quota.py
            problem = quota_problem(resource, count)
            if problem is not None:
                problems.append(f".{resource}: {problem}")
        elif not is_valid_resource(resource):
            problems.append(
                f".{resource}: unknown resource {resource!r}; allowed: 'gpu' or 'mig-<profile>' such as "
                "'mig-1g.10gb' (devices), 'cpu' or 'memory' (host)"
            )
        elif not 0 <= count <= QUANTITY_MAX:
            problems.append(f".{resource}: {count} is out of range; allowed: a device count from 0 to {QUANTITY_MAX}")
    if problems:
        raise ValueError("\n".join(problems))
    return value


class QueueConfig(QueueModel):
    """One ``[[queues]]`` table: the shared queue schema (:class:`labgang.launcher.config.queues.QueueModel`,
    the same keys as scenario files) plus who may submit.

    Quota fields are device counts per resource (``gpu``, ``mig-<profile>``);
    ``starvation_after`` is in seconds. ``users`` / ``groups`` restrict who may submit
    to the queue (both absent = everyone; admins always may).

    ``priority_classes``: the names of the cluster's ``[priority_classes]`` its jobs may use
    (absent = every class); ``default_priority_class``: the class of a job submitted without
    ``-p`` (absent = priority 0). ``max_submitted_jobs_per_user`` (Slurm's MaxSubmitJobsPerUser):
    the most unfinished jobs (pending or holding devices; each array task counts) one user may
    have in the queue; a submission over it is refused (launcher/coordinator/policy.py).
    """

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    starvation_after: OptionalNumber = Field(default=None, gt=0)
    users: list[str] | None = None
    groups: list[str] | None = None
    priority_classes: list[str] | None = None
    default_priority_class: str | None = None
    max_submitted_jobs_per_user: OptionalWhole = Field(default=None, ge=0)

    @field_validator("nominal", "borrowing_limit", "lending_limit", mode="before")
    @classmethod
    def _sizes(cls, v: object) -> object:
        return _host_sizes(v)

    @field_validator("nominal", "borrowing_limit", "lending_limit")
    @classmethod
    def _q(cls, v: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        return _check_quantities(v, info.field_name or "quantities")


class CohortConfig(CohortModel):
    """One ``[[cohorts]]`` table: the shared cohort schema (parent, own quota, limits towards the
    parent, fair weight) plus a free-text ``description``."""

    description: str = ""

    @field_validator("nominal", "borrowing_limit", "lending_limit", mode="before")
    @classmethod
    def _sizes(cls, v: object) -> object:
        return _host_sizes(v)

    @field_validator("nominal", "borrowing_limit", "lending_limit")
    @classmethod
    def _q(cls, v: dict[str, int], info: ValidationInfo) -> dict[str, int]:
        return _check_quantities(v, info.field_name or "quantities")


class TenantConfig(TenantModel):
    """One ``[[tenants]]`` table (admission fair sharing): a tenant of one queue and its weight.

    Its jobs are those submitted to ``queue`` by one of ``users`` or a member of ``groups``;
    with neither, by the user called ``name``. ``usage`` seeds its history (devices).
    """

    users: list[str] | None = None
    groups: list[str] | None = None

    def matches(self, user: str, groups: Iterable[str] = ()) -> bool:
        """True when a job of ``user`` (member of ``groups``) belongs to this tenant."""
        if self.users is None and self.groups is None:
            return user == self.name
        if self.users is not None and user in self.users:
            return True
        return self.groups is not None and bool(set(groups) & set(self.groups))


class ClusterConfig(_Strict):
    """The whole ``cluster.toml``.

    Times are seconds. An event after a quiet spell runs a scheduling cycle at once;
    events soon after the last cycle share the next one, within a window of four times
    what that cycle cost, at most ``cycle_coalesce_s`` (never waiting more than
    ``cycle_coalesce_max_s``), so a burst of submissions costs one cycle per window and a
    lone release no wait at all.
    ``requeue_backoff_s`` is the first delay before a job that failed to start is offered
    again (doubling up to ``requeue_backoff_max_s``); after ``max_start_failures`` failed
    starts the job fails; ``kill_invalid_depend`` cancels a job whose dependency can never
    hold (off: it stays pending). ``max_signal_lead_s`` bounds a ``--signal SIG@T`` lead; ``[limits]``
    bounds a submission (:class:`LimitsConfig`); ``read_token_file``, ``metrics_public`` and
    ``private_data`` (Slurm's ``PrivateData=jobs``) say who reads what (docs/security.md).
    ``violation`` is what a rank seen on a device it was not given costs its job: ``report``
    (a history line and a pitfall) or ``kill`` (also stopped, failed with that reason).
    ``[notify]`` is where job notifications go (``--mail-type``; :class:`NotifyConfig`).
    """

    default_queue: str = DEFAULT_QUEUE
    admins: list[str] = Field(default_factory=list)
    admin_groups: list[str] = Field(default_factory=list)
    token_file: str | None = None
    tcp_host: str | None = None
    tcp_port: OptionalWhole = Field(default=None, ge=0, le=65535)
    read_token_file: str | None = None
    metrics_public: bool = True
    private_data: bool = True
    node_timeout_s: Number = Field(default=30.0, gt=0)
    startup_timeout_s: Number = Field(default=60.0, gt=0)
    cycle_coalesce_s: Number = Field(default=0.01, ge=0, le=5)
    cycle_coalesce_max_s: Number = Field(default=0.25, ge=0, le=30)
    timer_interval_s: Number = Field(default=0.5, gt=0, le=60)
    requeue_backoff_s: Number = Field(default=5.0, ge=0)
    requeue_backoff_max_s: Number = Field(default=300.0, ge=0)
    max_start_failures: Whole = Field(default=3, ge=1)
    kill_invalid_depend: bool = True
    default_grace_s: Number = Field(default=10.0, ge=0)
    max_signal_lead_s: Number = Field(default=300.0, ge=0, le=86400)
    limits: LimitsConfig = LimitsConfig()
    priority_classes: dict[str, Priority] = Field(default_factory=dict)
    fair_sharing: bool = False
    fair_preemption: list[FairPreemptionName] | None = None
    admission_fair_sharing: AdmissionFairSharingModel | None = None
    cohorts: list[CohortConfig] = Field(default_factory=list)
    queues: list[QueueConfig] = Field(min_length=1)
    tenants: list[TenantConfig] = Field(default_factory=list)
    pitfalls: dict[str, float] = Field(default_factory=dict)
    violation: Literal["report", "kill"] = "report"
    notify: NotifyConfig = NotifyConfig()
    sharing: SharingModel = SharingModel()

    @field_validator("pitfalls")
    @classmethod
    def _pitfalls(cls, v: dict[str, float]) -> dict[str, float]:
        PitfallThresholds.from_mapping(v)  # raises ValueError naming the threshold and what it allows
        return v

    def pitfall_thresholds(self) -> PitfallThresholds:
        """The pitfall detectors' thresholds: ``[pitfalls]`` over the defaults (see README, "Pitfalls")."""
        return PitfallThresholds.from_mapping(self.pitfalls)

    @model_validator(mode="after")
    def _cross_checks(self) -> ClusterConfig:
        problems = cross_field_problems(self.model_dump(mode="json"))
        if problems:
            raise ValueError("\n".join(problems))
        return self

    # ----- lookups -------------------------------------------------------------------------

    def queue_specs(self) -> tuple[QueueSpec, ...]:
        """The scheduler's queue specs, in file order."""
        return tuple(q.to_spec() for q in self.queues)

    def cohort_specs(self) -> tuple[CohortSpec, ...]:
        """The scheduler's cohort specs, in file order."""
        return tuple(c.to_spec() for c in self.cohorts)

    def sharing_policy(self) -> SharingPolicy:
        """Fair sharing and admission fair sharing settings for the scheduler."""
        return sharing_policy(self.fair_sharing, self.fair_preemption, self.admission_fair_sharing)

    def gpu_sharing(self) -> GpuSharing:
        """The ``[sharing]`` table (GPU shards and MPS, per-node overrides) for the scheduler."""
        return self.sharing.to_spec()

    def tenant_of(self, queue: str, user: str, groups: Iterable[str] = ()) -> str | None:
        """The tenant a job of ``user`` in ``queue`` belongs to (first match in file order), or
        None (the queue's default tenant)."""
        for t in self.tenants:
            if t.queue == queue and t.matches(user, groups):
                return t.name
        return None

    def queue(self, name: str) -> QueueConfig | None:
        """The queue called ``name``, or None."""
        for q in self.queues:
            if q.name == name:
                return q
        return None

    def is_admin(self, user: str, groups: Iterable[str] = ()) -> bool:
        """True for root, for users listed in ``admins`` and members of ``admin_groups``."""
        if user == "root" or user in self.admins:
            return True
        return bool(set(groups) & set(self.admin_groups))

    def may_use_queue(self, queue: QueueConfig, user: str, groups: Iterable[str] = ()) -> bool:
        """True when ``user`` (member of ``groups``) may submit to ``queue``."""
        if queue.users is None and queue.groups is None:
            return True
        if self.is_admin(user, groups):
            return True
        if queue.users is not None and user in queue.users:
            return True
        return queue.groups is not None and bool(set(groups) & set(queue.groups))

    def resolve_priority(self, value: int | str | None) -> int:
        """Turn a priority (an int or a ``priority_classes`` name) into an int.

        Raises:
            ValueError: an unknown class name; the message lists the allowed names.
        """
        if value is None:
            return 0
        if isinstance(value, bool):
            raise ValueError("priority must be an integer or a priority class name")
        if isinstance(value, int):
            return value
        text = str(value).strip()
        if text in self.priority_classes:
            return self.priority_classes[text]
        try:
            return int(text)
        except ValueError:
            raise ValueError(
                f"unknown priority class {text!r}; allowed: an integer"
                + (f" or one of {listed(sorted(self.priority_classes))}" if self.priority_classes else "")
            ) from None

    @classmethod
    def default_for(cls, inventory: Any) -> ClusterConfig:
        """The embedded default for one workstation: a queue ``default`` whose nominal
        quota covers every allocatable device of ``inventory``, where a higher ``-p`` preempts
        lower-priority jobs (``within_queue = "lower-priority"``) and a gang that has waited
        :data:`DEFAULT_STARVATION_S` gets devices reserved (``starvation_after``).

        Args:
            inventory: a :class:`labgang.agent.inventory.NodeInventory` (anything with
                ``allocatable()`` returning devices that have a ``resource``), or an
                iterable of such inventories for several nodes.
        """
        inventories = [inventory] if hasattr(inventory, "allocatable") else list(inventory)
        counts: Counter[str] = Counter()
        for inv in inventories:
            for device in inv.allocatable():
                counts[device.resource] += 1
        queue = QueueConfig(
            name=DEFAULT_QUEUE,
            nominal=dict(sorted(counts.items())),
            within_queue=WithinQueue.LOWER_PRIORITY,
            starvation_after=DEFAULT_STARVATION_S,
        )
        return cls(queues=[queue])


# ----- cross-field checks -------------------------------------------------------------------


def _table_list(data: Mapping[str, Any], key: str) -> list[tuple[int, Mapping[str, Any]]]:
    """The ``(index, table)`` pairs of array-of-tables ``key``; entries that are not tables are skipped
    (their shape is the schema's problem, reported on its own)."""
    value = data.get(key)
    if not isinstance(value, list):
        return []
    return [(i, t) for i, t in enumerate(value) if isinstance(t, Mapping)]


def _names(tables: list[tuple[int, Mapping[str, Any]]]) -> list[tuple[int, str]]:
    return [(i, t["name"]) for i, t in tables if isinstance(t.get("name"), str)]


def _duplicates(problems: list[str], table: str, names: list[tuple[int, str]]) -> None:
    first: dict[str, int] = {}
    for i, name in names:
        if name in first:
            problems.append(
                f"{table}[{i}].name: duplicate name {name!r} (first at {table}[{first[name]}]); "
                f"allowed: a name not used by another [[{table}]] table"
            )
        else:
            first[name] = i


def cross_field_problems(data: Mapping[str, Any]) -> list[str]:
    """The rules that tie keys together, checked on a decoded ``cluster.toml``.

    Works on the raw mapping, so it runs even when single keys are wrong (one pass
    reports every problem): ill-shaped parts are skipped here and left to the schema.

    Rules: queue and cohort names are unique; ``default_queue`` names a queue; a queue's
    ``cohort`` is declared in ``[[cohorts]]`` (when any are declared); ``borrowing_limit``
    and ``lending_limit`` need a cohort; a lending limit is at most the nominal quota of
    that resource (as Kueue requires; a resource absent from ``nominal`` has 0); cohorts
    form a tree (no cycle of parents, limits only on a cohort with a parent); tenants name
    a queue and need ``admission_fair_sharing``; ``fair_preemption`` needs ``fair_sharing``; two queues
    in each other's ``share_with`` name each other (:func:`labgang.launcher.config.sharing.share_with_problems`).

    Args:
        data: the decoded TOML document.

    Returns:
        One line per problem, each starting with its key path and saying what is allowed.
    """
    problems: list[str] = []
    queues = _table_list(data, "queues")
    cohorts = _table_list(data, "cohorts")
    queue_names = _names(queues)
    _duplicates(problems, "queues", queue_names)
    _duplicates(problems, "cohorts", _names(cohorts))
    allowed_queues = sorted({n for _, n in queue_names})
    default = data.get("default_queue", DEFAULT_QUEUE)
    if isinstance(default, str) and isinstance(data.get("queues"), list) and default not in allowed_queues:
        if "default_queue" in data:
            allowed = listed(allowed_queues, "the name of a [[queues]] table")
            problems.append(f"default_queue: {default!r} is not a queue; allowed: {allowed}")
        else:  # the user wrote no default_queue: say so first, then what to set it to
            choices = f"one of: {listed(allowed_queues)}" if allowed_queues else "the name of a [[queues]] table"
            problems.append(
                f"default_queue: not set, and its default {DEFAULT_QUEUE!r} is not a queue; "
                f"set default_queue to {choices}"
            )
    declared = sorted({n for _, n in _names(cohorts)})
    for i, q in queues:
        cohort = q.get("cohort")
        if declared and isinstance(cohort, str) and cohort not in declared:
            problems.append(
                f"queues[{i}].cohort: {cohort!r} is not declared in [[cohorts]]; allowed: {listed(declared)}"
            )
        for key in ("borrowing_limit", "lending_limit"):
            if cohort is None and q.get(key):
                problems.append(
                    f"queues[{i}].{key}: needs a cohort; allowed: set queues[{i}].cohort"
                    + (f" to one of {listed(declared)}" if declared else "")
                    + f" or remove {key}"
                )
        nominal = q.get("nominal")
        nominal = nominal if isinstance(nominal, Mapping) else {}
        lending = q.get("lending_limit")
        lending = lending if isinstance(lending, Mapping) else {}
        for resource, limit in lending.items():
            have = nominal.get(resource, 0)
            if is_host_resource(resource) and resource != "cpu":  # memory sizes ("64G", MiB) compare in bytes
                try:
                    if quota_value(resource, have) < quota_value(resource, limit):  # type: ignore[operator]
                        problems.append(
                            f"queues[{i}].lending_limit.{resource}: {limit!r} is above the nominal quota "
                            f"({have!r}); allowed: at most {have!r} (a queue lends at most its nominal quota)"
                        )
                except (ValueError, TypeError):
                    pass  # the table's own check names it
                continue
            if isinstance(limit, int) and isinstance(have, int) and 0 <= have < limit:
                problems.append(
                    f"queues[{i}].lending_limit.{resource}: {limit} is above the nominal quota "
                    f"({have}); allowed: 0..{have} (a queue lends at most its nominal quota)"
                )
    declared_cohorts = {n: t for i, t in cohorts for n in [t.get("name")] if isinstance(n, str)}
    for i, c in cohorts:
        if not isinstance(c.get("name"), str):
            continue
        if c.get("parent") is None and (c.get("borrowing_limit") or c.get("lending_limit")):
            key = "borrowing_limit" if c.get("borrowing_limit") else "lending_limit"
            problems.append(f"cohorts[{i}].{key}: only allowed on a cohort with a parent; allowed: set parent")
        seen = {c["name"]}
        parent = c.get("parent")
        if isinstance(parent, str) and parent not in declared_cohorts:  # a typo, as a queue's undeclared cohort
            others = sorted(n for n in declared_cohorts if n != c["name"])
            allowed = (f"one of {listed(others)}, or " if others else "") + f"a [[cohorts]] table named {parent!r}"
            problems.append(f"cohorts[{i}].parent: {parent!r} is not declared in [[cohorts]]; allowed: {allowed}")
            continue
        while isinstance(parent, str):
            if parent in seen:
                problems.append(f"cohorts[{i}].parent: cycle of parents through {parent!r}; cohorts must form a tree")
                break
            seen.add(parent)
            parent = declared_cohorts.get(parent, {}).get("parent")
    fp = data.get("fair_preemption")
    if isinstance(fp, list):
        problem = fair_preemption_problem([str(x) for x in fp], data.get("fair_sharing") is True, "fair_preemption")
        if problem:
            problems.append(problem)
    problems.extend(_priority_class_problems(data, queues))
    problems.extend(share_with_problems(queues))
    tenants = _table_list(data, "tenants")
    if tenants and not isinstance(data.get("admission_fair_sharing"), Mapping):
        problems.append("tenants: only allowed with admission_fair_sharing = { half_life = <seconds> }")
    _duplicates(problems, "tenants", _names(tenants))
    for i, t in tenants:
        if isinstance(t.get("queue"), str) and t["queue"] not in allowed_queues:
            allowed = listed(allowed_queues, "the name of a [[queues]] table")
            problems.append(f"tenants[{i}].queue: {t['queue']!r} is not a queue; allowed: {allowed}")
    return problems


def _priority_class_problems(data: Mapping[str, Any], queues: list[tuple[int, Mapping[str, Any]]]) -> list[str]:
    """A queue's ``priority_classes`` name classes of ``[priority_classes]``, each once; its
    ``default_priority_class`` is one of them (or of every class, without the list)."""
    problems: list[str] = []
    classes = data.get("priority_classes")
    defined = sorted(classes) if isinstance(classes, Mapping) else []
    allowed_defined = listed(defined, "none: define them in [priority_classes] first")
    for i, q in queues:
        names = q.get("priority_classes")
        usable = defined
        if isinstance(names, list):
            seen: set[str] = set()
            for j, name in enumerate(names):
                if not isinstance(name, str):
                    continue  # the schema's problem
                if name not in defined:
                    problems.append(
                        f"queues[{i}].priority_classes[{j}]: {name!r} is not a priority class; "
                        f"allowed: {allowed_defined}"
                    )
                elif name in seen:
                    problems.append(f"queues[{i}].priority_classes[{j}]: {name!r} is listed twice; allowed: once")
                seen.add(name)
            usable = [n for n in names if isinstance(n, str) and n in defined]
        default = q.get("default_priority_class")
        if isinstance(default, str) and default not in usable:
            where = f"queues[{i}].priority_classes" if isinstance(names, list) else "[priority_classes]"
            problems.append(
                f"queues[{i}].default_priority_class: {default!r} is not a class of {where}; "
                f"allowed: {listed(usable, allowed_defined)}"
            )
    return problems


# ----- loading ------------------------------------------------------------------------------


def parse_config(data: dict[str, Any], source: str = "<config>") -> ClusterConfig:
    """Validate an already-parsed TOML mapping, collecting every problem in one pass.

    Raises:
        ConfigError: with one problem per bad key or broken cross-field rule (see
            :func:`cross_field_problems`), each naming its key path and what is allowed.
    """
    try:
        return ClusterConfig.model_validate(data)
    except ValidationError as exc:
        # pydantic skips the cross-field validator when a single key is wrong: those rules are
        # checked on the raw mapping instead (and the validator's own lines left out, so each
        # problem is said once), so one pass reports every problem
        problems = describe_errors(exc, ClusterConfig, top_level=False) + cross_field_problems(data)
    except UnicodeEncodeError:  # a lone surrogate (not from TOML, which is UTF-8): pydantic cannot read it
        raise ConfigError(source, ["a key or value is not valid Unicode text (a lone surrogate)"]) from None
    raise ConfigError(source, problems)


def read_toml(path: str | Path) -> dict[str, Any]:
    """Read a user-given TOML file (see :func:`labgang.agent.tomlfile.read_toml`).

    Raises:
        ConfigError: with ``unreadable=True`` and the one reason the file could not be read
            (``missing=True`` too when it is not there: the reason is ``no such file``).
    """
    try:
        return tomlfile.read_toml(path)
    except tomlfile.TomlFileError as exc:
        raise ConfigError(exc.path, [exc.reason], unreadable=True, missing=exc.reason == NO_SUCH_FILE) from None


def load_config(path: str | Path) -> ClusterConfig:
    """Read and validate ``cluster.toml``, the file a command's ``--config`` names.

    Raises:
        ConfigError: the file is missing (``missing=True``, the one problem saying how to pass
            one), unreadable, not UTF-8, not valid TOML (``unreadable=True``), or breaks a rule
            (one problem per key).
    """
    try:
        data = read_toml(path)
    except ConfigError as exc:
        if exc.missing:
            raise ConfigError(exc.source, [missing_file_problem("--config", CLUSTER_EXAMPLE)], missing=True) from None
        raise
    return parse_config(data, str(path))
