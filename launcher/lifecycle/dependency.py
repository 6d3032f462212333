"""Job dependencies (``--dependency``), Slurm's spelling: the grammar and the verdict on one job.

A dependency is a list of conditions joined by ``,`` (all of them must hold) or ``?`` (any one
of them is enough); one list uses one separator::

    afterok:12            12 succeeded
    afternotok:12:13      12 and 13 each failed or were cancelled
    afterany:12           12 finished, whatever the outcome
    after:12              12 started (or finished without starting, e.g. cancelled while pending)
    after:12+5            5 minutes after 12 started (or was cancelled), as in Slurm
    singleton             no other job with this job's name and user runs (or goes first)
    aftercorr:12          (a job array) each task waits for 12's task of the same index to succeed
    12                    Slurm's shorthand for afterany:12

``aftercorr`` is read per task: task ``I`` of an array submitted with ``aftercorr:12`` depends on
``afterok:12_I`` (:func:`for_task`; the coordinator and the simulation rewrite it as they record the
tasks), so a task waits only for its own counterpart, as in Slurm.

Job ids may have leading zeros (``afterok:0016`` is ``afterok:16``), as ``cancel`` takes them.

``afterok:12:13`` names two conditions, ``afterok:12`` and ``afterok:13``, each joined to the
others by the list's separator, as in Slurm. A job id names the job itself and, for a job
array, every task of it: the jobs whose id is ``12`` or starts with ``12_`` (:func:`matches`).
Over an array, ``afterok``/``afterany``/``after`` hold once they hold for every task, and
``afternotok`` once every task finished and at least one of them failed.

Pure: no I/O, no clock. docs/dependencies.md describes the rules for users.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from labgang.launcher.lifecycle.states import JobState


class DependencyKind(str, enum.Enum):
    """What a condition waits for; the value is Slurm's name for it."""

    AFTER = "after"
    AFTERANY = "afterany"
    AFTEROK = "afterok"
    AFTERNOTOK = "afternotok"
    AFTERCORR = "aftercorr"
    SINGLETON = "singleton"


KINDS = tuple(k.value for k in DependencyKind)
"""The allowed dependency type names, for error messages."""

_JOB_ID = re.compile(r"0*[1-9][0-9]*(?:_[0-9]+)?")
"""A job id as typed: leading zeros allowed, as ``cancel`` and ``show`` take them (:func:`_normal_id`)."""

MAX_DELAY_MINUTES = 3650 * 24 * 60
"""The longest ``after:ID+MINUTES`` delay: 5,256,000 minutes, 3650 days (10 years), the same bound as
``--begin``'s (further is a typo, and a time past the year 9999 cannot even be printed). Slurm sets
none; within it a delay in seconds is an exact float, so every accepted text spells back the same."""

UNSUPPORTED = ("expand",)
"""Slurm dependency types labgang does not support (refused with a line saying so)."""


def _normal_id(text: str) -> str:
    """``"16"`` for ``"0016"``, ``"12_3"`` for ``"012_03"``: one spelling per job."""
    head, sep, index = text.partition("_")
    return f"{int(head)}_{int(index)}" if sep else str(int(head))


class BadDependency(ValueError):
    """A ``--dependency`` text that does not parse; the message names the part at fault and what is allowed."""


@dataclass(frozen=True, slots=True)
class Condition:
    """One condition: ``kind`` on ``job_id`` (None for ``singleton``); ``delay_s`` is ``after:ID+MINUTES``'s
    delay in seconds (0 for every other condition)."""

    kind: DependencyKind
    job_id: str | None = None
    delay_s: float = 0.0

    @property
    def id_text(self) -> str | None:
        """``"12"``, ``"12+5"`` with a delay of five minutes, ``"12+1000000"`` (never an exponent, which
        the grammar does not read); None for ``singleton``. The parser makes whole minutes only; a
        fractional delay built by hand is spelled in fixed-point."""
        if self.job_id is None:
            return None
        if not self.delay_s:
            return self.job_id
        minutes = self.delay_s / 60
        spelled = str(int(minutes)) if minutes.is_integer() else f"{minutes:f}".rstrip("0")
        return f"{self.job_id}+{spelled}"

    @property
    def text(self) -> str:
        """``"afterok:12"``, ``"after:12+5"``, or ``"singleton"``."""
        return self.kind.value if self.job_id is None else f"{self.kind.value}:{self.id_text}"


@dataclass(frozen=True)
class Dependency:
    """A parsed dependency: its conditions, joined by all-of (``any_of`` False) or any-of.
    Hashable; its derived facts are computed once (a sweep judges one text thousands of times)."""

    conditions: tuple[Condition, ...]
    any_of: bool = False

    def __post_init__(self) -> None:
        # One form per meaning, so that parse_dependency(dep.text) == dep: a repeated condition
        # counts once, and with fewer than two conditions all-of and any-of are the same.
        conditions = tuple(dict.fromkeys(self.conditions))
        object.__setattr__(self, "conditions", conditions)
        object.__setattr__(self, "any_of", self.any_of and len(conditions) > 1)

    @cached_property
    def text(self) -> str:
        """The canonical spelling (what the job spec stores): ``"afterok:12:13,singleton"`` (all-of
        joins the ids of neighbouring same-type conditions), ``"afterok:12?afterok:13"`` (any-of
        spells each condition whole: ``afterok:12:13`` would read as all-of)."""
        groups: list[tuple[DependencyKind, list[str]]] = []
        for cond in self.conditions:
            if not self.any_of and cond.id_text is not None and groups and groups[-1][0] == cond.kind:
                groups[-1][1].append(cond.id_text)
            else:
                groups.append((cond.kind, [] if cond.id_text is None else [cond.id_text]))
        return ("?" if self.any_of else ",").join(":".join([kind.value, *ids]) for kind, ids in groups)

    @cached_property
    def job_ids(self) -> tuple[str, ...]:
        """Every job id the conditions name, in order, without repeats."""
        return tuple(dict.fromkeys(c.job_id for c in self.conditions if c.job_id is not None))

    @cached_property
    def corresponding(self) -> bool:
        """True when one of the conditions is ``aftercorr`` (a job array's tasks each wait for their counterpart)."""
        return any(c.kind == DependencyKind.AFTERCORR for c in self.conditions)

    @cached_property
    def singleton(self) -> bool:
        """True when one of the conditions is ``singleton``."""
        return any(c.kind == DependencyKind.SINGLETON for c in self.conditions)


def parse_dependency(text: str) -> Dependency:
    """Parse a ``--dependency`` text (see the module docstring for the grammar).

    Raises:
        BadDependency: the message names the part that is wrong, e.g.
            ``dependency: 'afterfoo:12': 'afterfoo' is not a dependency type; allowed: after, ...``.
    """
    text = text.strip()
    if not text:
        raise BadDependency("dependency: must not be empty; allowed: afterok:ID[:ID...], afternotok, afterany, after, "
                            "singleton, joined by ',' (all of) or '?' (any of)")  # fmt: skip
    if "," in text and "?" in text:
        raise BadDependency(f"dependency: {text!r} mixes ',' (all of) and '?' (any of); a dependency uses one of them")
    any_of = "?" in text
    conditions: list[Condition] = []
    for part in text.split("?" if any_of else ","):
        conditions.extend(_parse_part(part.strip()))
    return Dependency(tuple(conditions), any_of)


def _parse_part(part: str) -> list[Condition]:
    if not part:
        raise BadDependency("dependency: an empty condition between separators; allowed: TYPE:ID[:ID...] or singleton")
    if _JOB_ID.fullmatch(part):
        return [Condition(DependencyKind.AFTERANY, _normal_id(part))]  # Slurm's shorthand: a bare id is afterany
    name, *ids = part.split(":")
    try:
        kind = DependencyKind(name.lower())
    except ValueError:
        if name.lower() in UNSUPPORTED:
            raise BadDependency(
                f"dependency: {part!r}: {name!r} is a Slurm dependency type labgang does not support; "
                f"allowed: {', '.join(KINDS)}"
            ) from None
        raise BadDependency(
            f"dependency: {part!r}: {name!r} is not a dependency type; allowed: {', '.join(KINDS)}"
        ) from None
    if kind == DependencyKind.SINGLETON:
        if ids:
            raise BadDependency(f"dependency: {part!r}: singleton takes no job id")
        return [Condition(kind)]
    if not ids:
        raise BadDependency(f"dependency: {part!r}: {kind.value} needs at least one job id ({kind.value}:ID[:ID...])")
    delays: list[float] = []
    for i, given in enumerate(ids):
        job_id, plus, minutes = given.partition("+")
        if plus and kind != DependencyKind.AFTER:
            raise BadDependency(
                f"dependency: {part!r}: a delay after a job ({given!r}) is only for after, as in Slurm; "
                f"allowed: {kind.value}:ID[:ID...], or after:ID+MINUTES"
            )
        if plus and not (minutes.isascii() and minutes.isdigit()):
            raise BadDependency(
                f"dependency: {part!r}: {minutes!r} is not a number of minutes; "
                "allowed: after:ID+MINUTES, e.g. after:12+5"
            )
        # Compared by length first: int() of thousands of digits raises ValueError (CPython's limit).
        digits = minutes.lstrip("0")
        if plus and (len(digits) > len(str(MAX_DELAY_MINUTES)) or int(digits or "0") > MAX_DELAY_MINUTES):
            raise BadDependency(
                f"dependency: {part!r}: a delay of {minutes} minutes is out of range; "
                f"allowed: after:ID+MINUTES with 0 to {MAX_DELAY_MINUTES:,} minutes (3650 days)"
            )
        delays.append(int(minutes) * 60.0 if plus else 0.0)
        ids[i] = job_id
        if not _JOB_ID.fullmatch(job_id):
            raise BadDependency(
                f"dependency: {part!r}: {job_id!r} is not a job id; allowed: a job number such as 12, "
                "or an array task such as 12_3"
            )
        if kind == DependencyKind.AFTERCORR and "_" in job_id:
            raise BadDependency(
                f"dependency: {part!r}: aftercorr names a job array, not one task ({job_id!r}); "
                "allowed: aftercorr:ARRAY_ID (each task waits for the task of ARRAY_ID with its own index)"
            )
    return [Condition(kind, _normal_id(job_id), delay) for job_id, delay in zip(ids, delays, strict=True)]


def for_task(dep: Dependency, index: int) -> Dependency:
    """``dep`` as task ``index`` of a job array waits: each ``aftercorr:ID`` becomes ``afterok:ID_index``
    (the task of ``ID`` with the same index; one that does not exist can never succeed). Other
    conditions are kept."""
    if not dep.corresponding:
        return dep
    return Dependency(
        tuple(
            Condition(DependencyKind.AFTEROK, f"{c.job_id}_{index}") if c.kind == DependencyKind.AFTERCORR else c
            for c in dep.conditions
        ),
        dep.any_of,
    )


def task_dependency(text: str | None, index: int) -> str | None:
    """The stored dependency text of task ``index`` of an array submitted with ``text`` (:func:`for_task`)."""
    if text is None:
        return None
    dep = parse_dependency(text)
    return for_task(dep, index).text if dep.corresponding else text


def matches(target: str, job_id: str) -> bool:
    """True when a dependency on ``target`` covers ``job_id``: the job itself or, for an array
    ``target``, one of its tasks (``"12_3"`` for ``"12"``)."""
    return job_id == target or job_id.startswith(target + "_")


def targets_of(job_id: str) -> tuple[str, ...]:
    """Every dependency target that covers ``job_id``: ``("12_3", "12")`` for ``"12_3"``."""
    out = [job_id]
    cut = job_id.rfind("_")
    while cut > 0:
        out.append(job_id[:cut])
        cut = job_id.rfind("_", 0, cut)
    return tuple(out)


class Outcome(enum.Enum):
    """Where a condition (or a whole dependency) stands."""

    MET = "met"
    WAITING = "waiting"
    NEVER = "never"  # it can never hold: the job it waits for ended the wrong way, or does not exist


@dataclass(frozen=True, slots=True)
class Target:
    """What a dependency needs to know of one job it names: its id, state, and whether it ever
    started (some rank of some attempt ran)."""

    id: str
    state: JobState
    started: bool
    started_at: float | None = None
    """When it started (its current attempt), or ended without starting; None: not yet (``after:ID+MINUTES``)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The outcome of a dependency and what to tell the user: for WAITING, what it waits for
    (``"afterok:12 (running)"``); for NEVER, which condition fails and why; for MET, what held."""

    outcome: Outcome
    message: str
    not_before: float = 0.0
    """For MET with ``after:ID+MINUTES``: the instant it holds from (the job waits until then); else 0."""


_FAILED = (JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL)


def _one(kind: DependencyKind, t: Target) -> Outcome:
    """One job against one condition kind (not singleton)."""
    if kind == DependencyKind.AFTER:
        return Outcome.MET if t.started or t.state.finished else Outcome.WAITING
    if not t.state.finished:
        return Outcome.WAITING
    if kind == DependencyKind.AFTERANY:
        return Outcome.MET
    failed = t.state in _FAILED
    if kind in (DependencyKind.AFTEROK, DependencyKind.AFTERCORR):  # aftercorr: resolved per task (for_task)
        return Outcome.NEVER if failed else Outcome.MET
    return Outcome.MET if failed else Outcome.NEVER  # AFTERNOTOK


def judge_condition(cond: Condition, targets: Sequence[Target]) -> tuple[Outcome, str]:
    """The outcome of one id-naming condition over the jobs its id covers, and a short note
    (``"running"``, ``"failed"``, ``"3 of 10 tasks finished"``, ``"no such job"``).

    Args:
        cond: a condition with a ``job_id`` (not ``singleton``).
        targets: the jobs :func:`matches` covers for ``cond.job_id`` (empty: none is known).
    """
    if not targets:
        return Outcome.NEVER, "no such job"
    outcomes = [_one(cond.kind, t) for t in targets]
    if len(targets) == 1:
        t = targets[0]
        return outcomes[0], t.state.value
    n = len(targets)
    finished = sum(t.state.finished for t in targets)
    if cond.kind == DependencyKind.AFTERNOTOK:
        failed = [t.id for t in targets if t.state in _FAILED]
        if finished < n:
            return Outcome.WAITING, f"{finished} of {n} tasks finished"
        if failed:
            return Outcome.MET, f"task {failed[0]} {next(t.state.value for t in targets if t.id == failed[0])}"
        return Outcome.NEVER, f"all {n} tasks succeeded"
    never = next((t for t, o in zip(targets, outcomes, strict=True) if o == Outcome.NEVER), None)
    if never is not None:
        return Outcome.NEVER, f"task {never.id} {never.state.value}"
    if all(o == Outcome.MET for o in outcomes):
        return Outcome.MET, f"all {n} tasks {'started' if cond.kind == DependencyKind.AFTER else 'finished'}"
    if cond.kind == DependencyKind.AFTER:
        started = sum(o == Outcome.MET for o in outcomes)
        return Outcome.WAITING, f"{started} of {n} tasks started"
    return Outcome.WAITING, f"{finished} of {n} tasks finished"


def judge(
    dep: Dependency,
    targets: dict[str, list[Target]],
    singleton_holder: str | None,
    *,
    met_before: bool = False,
) -> Verdict:
    """The verdict on a whole dependency.

    Args:
        dep: the parsed dependency.
        targets: for each id ``dep`` names, the jobs it covers (missing or empty: unknown).
        singleton_holder: for ``singleton``: a job with the same name and user that holds
            devices or goes first (``"job 14 (running)"``), or None when there is none.
        met_before: the dependency held once already (the job was released, ran, and was
            requeued): only ``singleton`` is judged again; what the ``after*`` conditions
            waited for has happened for good.
    """
    results: list[tuple[Condition, Outcome, str]] = []
    ready: dict[Condition, float] = {}  # a MET after:ID+MINUTES: the instant it holds from
    for cond in dep.conditions:
        if cond.job_id is None:
            if singleton_holder is None:
                results.append((cond, Outcome.MET, "no other job of this name running"))
            else:
                results.append((cond, Outcome.WAITING, singleton_holder))
        elif met_before:
            results.append((cond, Outcome.MET, "held before"))
        else:
            outcome, note = judge_condition(cond, targets.get(cond.job_id, []))
            results.append((cond, outcome, note))
            if outcome == Outcome.MET and cond.delay_s:
                ready[cond] = cond.delay_s + max((t.started_at or 0.0) for t in targets.get(cond.job_id, []))
    if met_before and dep.any_of:
        return Verdict(Outcome.MET, "held before")
    met = [r for r in results if r[1] == Outcome.MET]
    never = [r for r in results if r[1] == Outcome.NEVER]
    waiting = [r for r in results if r[1] == Outcome.WAITING]
    if dep.any_of:
        if met:
            soonest = min(met, key=lambda r: ready.get(r[0], 0.0))
            return Verdict(Outcome.MET, _listing([soonest]), ready.get(soonest[0], 0.0))
        if not waiting:
            return Verdict(Outcome.NEVER, "none of " + _listing(never) + " can be satisfied")
        return Verdict(Outcome.WAITING, "waits for " + " or ".join(_listing([r]) for r in waiting))
    if never:
        cond, _, note = never[0]
        return Verdict(Outcome.NEVER, f"{cond.text} can never be satisfied ({note})")
    if waiting:
        return Verdict(Outcome.WAITING, "waits for " + _listing(waiting))
    return Verdict(Outcome.MET, _listing(met), max((ready.get(r[0], 0.0) for r in met), default=0.0))


def _listing(results: Sequence[tuple[Condition, Outcome, str]]) -> str:
    return ", ".join(f"{cond.text} ({note})" for cond, _, note in results)
