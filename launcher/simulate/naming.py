"""Job ids in ``labgang simulate``: the coordinator's numbers inside, the scenario's names outside.

The lifecycle model judges dependencies on the coordinator's job ids (``12``, ``12_3``:
``launcher/lifecycle/dependency.py``), so the simulation numbers its jobs as the coordinator
would have, had the file's jobs been submitted in file order: each job takes the next number
(1, 2, …); a job array (``array = "0-9%2"``) takes one number per task, its id is its first
task's number and task ``I`` is ``ID_I`` (docs/arrays.md). Everything a person reads (the trace,
expectations, reports, messages) names jobs as the file does: a job by its ``id``, a task of
array ``sweep`` as ``sweep_I``, and a ``dependency`` names jobs by their scenario ids
(docs/scenarios.md, "Arrays and dependencies"). :class:`JobIds` translates both ways.

A scenario with no job array, no ``dependency`` and no job held at submission gives the lifecycle
model nothing that reads the numbering, so its jobs keep their file names inside too
(:meth:`JobIds.use_names`) and nothing is translated (``labgang plan replay``'s usual histories:
no snapshot or cycle result is copied under other names each cycle).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import TYPE_CHECKING, Any, TypeVar

from labgang.launcher.arrays import BadArraySpec, parse_array, step_of, task_id
from labgang.launcher.config.limits import LimitsConfig
from labgang.launcher.lifecycle.dependency import KINDS, UNSUPPORTED, BadDependency, parse_dependency
from labgang.launcher.lifecycle.records import ArrayTask
from labgang.launcher.scheduler import capacity
from labgang.launcher.scheduler.capacity import RunningChange
from labgang.launcher.scheduler.decisions import CycleResult, Pending
from labgang.launcher.scheduler.snapshot import PendingJob, RunningJob, Snapshot

if TYPE_CHECKING:
    from labgang.launcher.simulate.scenario import JobModel

_T = TypeVar("_T")
_LAYOUTS: dict[type, tuple[attrgetter[Any], dict[str, int]]] = {}


def _with(obj: _T, **changes: Any) -> _T:
    """``dataclasses.replace(obj, **changes)`` for the decision and view classes named here
    (every field an ``__init__`` argument, in field order): the same object, built straight from
    its fields' values (``replace`` looks each field up again on every call, and the renaming
    copies several views and decisions a cycle)."""
    cls = type(obj)
    layout = _LAYOUTS.get(cls)
    if layout is None:
        names = [f.name for f in fields(cls)]  # type: ignore[arg-type]
        assert len(names) > 1, cls  # attrgetter of one name gives the value, not a tuple
        layout = _LAYOUTS[cls] = (attrgetter(*names), {n: k for k, n in enumerate(names)})
    values = list(layout[0](obj))
    at = layout[1]
    for name, value in changes.items():
        values[at[name]] = value
    return cls(*values)


assert [f.name for f in fields(Pending)] == ["job_id", "reason"], "model_result builds a Pending from these two"

MAX_ARRAY_SIZE = LimitsConfig().max_array_size
"""Every index of a scenario's ``array`` is below this: the coordinator's default ``[limits] max_array_size``."""

_NUMBERS = "a job number such as 12, or an array task such as 12_3"
"""What the parser allows for a job id, in the coordinator's terms (scenarios name jobs instead)."""
_UNKNOWN = "999999999"
"""Stands for a name no job has while a dependency's syntax is checked."""


@dataclass(unsafe_hash=True)
class SimTask:
    """One job of the simulation: a scenario job, or one task of a scenario job array.

    A value, not changed after construction; equality and hash by fields (not ``frozen`` only for
    its cheaper ``__init__``).

    Attributes:
        name: what people read: the scenario ``id``, or ``"<id>_<index>"`` for a task.
        model_id: the coordinator's id for it (``"3"``, ``"3_0"``), the lifecycle record's id.
        seq: its submission number (the coordinator's ``seq``): file order, tasks in index order.
        index: its place in ``[[jobs]]``.
        job: its ``[[jobs]]`` table.
        task: which task of which array it is (None for a job of its own).
    """

    name: str
    model_id: str
    seq: int
    index: int
    job: JobModel
    task: ArrayTask | None = None


@dataclass
class JobIds:
    """Every job of a scenario under both ids, and the translations between them.

    Attributes:
        tasks: every job in submission order (a scenario job, or an array's tasks in index order).
        by_name: name (scenario id, ``<id>_<index>`` for a task) -> job.
        arrays: scenario id of a job array -> its tasks' names, in index order.
        model_names: the coordinator's id -> name, array ids included (``"3"`` -> ``"sweep"``).
        by_name_only: True once :meth:`use_names` made every job's model id its name (no
            translation left to do: snapshots, results and messages are handed on as they are).
    """

    tasks: list[SimTask] = field(default_factory=list)
    by_name: dict[str, SimTask] = field(default_factory=dict)
    arrays: dict[str, list[str]] = field(default_factory=dict)
    model_names: dict[str, str] = field(default_factory=dict)
    by_name_only: bool = False
    _model_ids: dict[str, str] = field(default_factory=dict)  # name (array names too) -> the coordinator's id
    # id() of a running view -> the same view named: a job's view is named again only when it changes
    _named_running: dict[int, RunningJob] = field(default_factory=dict, compare=False, repr=False)
    # id() of a running view -> the view (kept alive while named above, so no identity is reused)
    _running_kept: dict[int, RunningJob] = field(default_factory=dict, compare=False, repr=False)
    # coordinator's id -> (a pending view, the same view named), for the jobs pending at the last cycle
    _named_pending: dict[str, tuple[PendingJob, PendingJob]] = field(default_factory=dict, compare=False, repr=False)
    # the last snapshot's running tuple (kept alive, so its identity is not reused) and its named copy
    _last_running: tuple[tuple[RunningJob, ...] | None, tuple[RunningJob, ...]] = field(
        default=(None, ()), compare=False, repr=False
    )

    def members(self, name: str) -> list[str]:
        """The jobs a name covers: an array's every task, else the job itself (``[]`` when unknown)."""
        if name in self.arrays:
            return list(self.arrays[name])
        return [name] if name in self.by_name else []

    def use_names(self) -> bool:
        """Give every job the file's name as its coordinator's id too, when nothing the lifecycle
        model does reads the coordinator's numbering: no job array (a task's id is
        ``ARRAY_INDEX``, which the array rules and hold messages parse) and no ``dependency``
        (parsed as ``--dependency``'s job numbers); the caller also checks that no job is held
        at submission (a hold's message quotes the id as a number to release). Then the
        model's records, effects and messages already name jobs as the file does, and
        :meth:`named_snapshot`, :meth:`model_result` and :meth:`shown` hand on what they are
        given (a replay renames no snapshot and no result). Returns whether it did; call it
        before the jobs' records are built (their ids are :attr:`SimTask.model_id`).

        The scheduler sees exactly what it saw before (its snapshot was named view by view);
        ``tests/simulate/test_engine_unchanged.py`` pins every scenario's per-job times and
        trace hash, and ``tests/simulate/test_names_as_ids.py`` compares a replay with the
        numbering kept against one with the names.
        """
        if self.arrays or any(t.task is not None for t in self.tasks):
            return False
        self.tasks = [replace(t, model_id=t.name) for t in self.tasks]
        self.by_name = {t.name: t for t in self.tasks}
        self._model_ids = {t.name: t.name for t in self.tasks}
        self.model_names = dict(self._model_ids)
        self.by_name_only = True
        return True

    def shown(self, message: str) -> str:
        """``message`` (the lifecycle model's words) with every job id named as the file
        names it: ``job 3`` -> ``job train``, ``task 4_1`` -> ``task sweep_1``, ``afterok:3`` ->
        ``afterok:train``, ``array 4 runs at most …`` -> ``array sweep runs at most …``
        (as it is after :meth:`use_names`)."""
        if self.by_name_only:
            return message
        return _REFERENCE.sub(lambda m: m.group(1) + self._name_list(m.group(2)), message)

    def _name_list(self, ids: str) -> str:
        return ":".join(self.model_names.get(i, i) for i in ids.split(":"))

    def named_snapshot(self, snapshot: Snapshot, change: RunningChange | None = None) -> Snapshot:
        """``snapshot`` (built from the lifecycle model) with every job named as the file names
        it: what the scheduler gets, so its decisions and reasons speak the file's names.

        ``change``: how the driver's running tuple changed since the last one (the cycle
        driver's ``running_change``): when it leads from the last tuple named here to this one,
        only its new views are named, and the scheduler is told the named tuple's change
        (:func:`~labgang.launcher.scheduler.capacity.note_running_change`).
        """

        if self.by_name_only:  # its views name jobs as the file does already (:meth:`use_names`)
            if change is not None and change[1] is snapshot.running:
                capacity.note_running_change(*change)
            return snapshot

        def name(model_id: str) -> str:
            return self.model_names.get(model_id, model_id)

        # The driver hands mostly the same view objects cycle after cycle: the very tuple of the
        # last cycle (handed again while no running job changed) is named as last time; else the
        # named views are looked up by the view's identity in C-level passes (map, compress),
        # and only the views not seen before are named in Python. The cache holds each view (no
        # identity reused).
        running = snapshot.running
        if running is self._last_running[0]:
            running_named = self._last_running[1]
        elif change is not None and change[1] is running and change[0] is self._last_running[0]:
            named, alive = self._named_running, self._running_kept
            for j in change[3]:
                if id(j) not in named:
                    alive[id(j)] = j
                    named[id(j)] = _with(j, id=name(j.id))
            before = self._last_running[1]
            running_named = tuple(map(named.__getitem__, map(id, running)))
            gone = [named[id(j)] for j in change[2]]  # each in the last tuple: still named
            capacity.note_running_change(before, running_named, gone, [named[id(j)] for j in change[3]])
            if len(named) > 2 * len(running) + 64:  # forget the views gone
                idents = list(map(id, running))
                self._named_running = {i: named[i] for i in idents}
                self._running_kept = {i: alive[i] for i in idents}
            self._last_running = (running, running_named)
        else:
            named, alive = self._named_running, self._running_kept
            found = list(map(named.get, map(id, running)))
            missing = list(compress(range(len(found)), map(is_, found, repeat(None))))
            if missing:
                for at in missing:
                    j = running[at]
                    view = named.get(id(j))  # named already when the view is listed twice
                    if view is None:
                        alive[id(j)] = j
                        view = named[id(j)] = _with(j, id=name(j.id))
                    found[at] = view
                if len(named) > 2 * len(running) + 64:  # forget the views gone
                    idents = list(map(id, running))
                    self._named_running = {i: named[i] for i in idents}
                    self._running_kept = {i: alive[i] for i in idents}
            running_named = tuple(found)  # type: ignore[arg-type]  # every view named above
            self._last_running = (running, running_named)
        # A pending job's view is built anew every cycle, but equal to the last one while the job
        # waits unchanged: comparing (well under a microsecond) spares the copy (several). Only
        # this cycle's pending jobs are kept.
        last = self._named_pending
        kept: dict[str, tuple[PendingJob, PendingJob]] = {}
        pending: list[PendingJob] = []
        for p in snapshot.pending:
            seen = last.get(p.id)
            if seen is None or (seen[0] is not p and seen[0] != p):  # the driver hands an unchanged view again
                seen = (p, _with(p, id=name(p.id), nominated=tuple(name(v) for v in p.nominated)))
            kept[p.id] = seen
            pending.append(seen[1])
        self._named_pending = kept
        return _with(snapshot, running=running_named, pending=tuple(pending))

    def model_result(self, result: CycleResult) -> CycleResult:
        """A cycle's decisions on a :meth:`named_snapshot` with the jobs given back their
        coordinator's ids (for the lifecycle model); reasons keep the file's names."""

        if self.by_name_only:  # the lifecycle model's ids are the names (:meth:`use_names`)
            return result
        get = self._model_ids.get

        def mid(name: str) -> str:
            return get(name, name)

        # every cycle answers each waiting job: its decision is built straight from its two fields
        return _with(
            result,
            admitted=tuple(_with(a, job_id=mid(a.job_id)) for a in result.admitted),
            preempted=tuple(
                _with(p, job_id=mid(p.job_id), victims=tuple(mid(v) for v in p.victims)) for p in result.preempted
            ),
            pending=tuple([Pending(get(p.job_id, p.job_id), p.reason) for p in result.pending]),
            held=tuple(mid(h) for h in result.held),
        )

    def model_dependency(self, text: str) -> str:
        """A scenario ``dependency`` (jobs named by scenario id) as the coordinator stores it:
        the same grammar and parser as ``--dependency``, names turned into the coordinator's ids,
        in the canonical spelling (``afterok:train,afterok:prep`` -> ``afterok:2:1``).

        Raises:
            BadDependency: the text does not parse, or names no job of the file; the message
                quotes the text as written.
        """
        parts = re.split(r"([,?])", text)
        model_parts: list[str] = []
        unknown: list[str] = []
        for part in parts:
            if part in (",", "?"):
                model_parts.append(part)
                continue
            model_parts.append(self._model_part(part.strip(), unknown))
        model_text = "".join(model_parts)
        try:
            dep = parse_dependency(model_text)
        except BadDependency as exc:
            message = str(exc).replace(repr(model_text.strip()), repr(text.strip()))
            for model_part, part in zip(model_parts, parts, strict=True):
                message = message.replace(repr(model_part), repr(part.strip()))
            message = message.replace(_NUMBERS, "a job id of this file, or an array task as NAME_INDEX")
            raise BadDependency(message) from None
        if unknown:
            raise BadDependency(
                f"dependency: no job {unknown[0]!r} in this file (in {text!r}); allowed: the id of a job in "
                "[[jobs]], or a task of a job array as NAME_INDEX"
            )
        return dep.text

    def _model_part(self, part: str, unknown: list[str]) -> str:
        """One condition with its names replaced by the coordinator's ids (an unknown name by a
        stand-in, recorded in ``unknown``)."""

        def model_id(name: str) -> str:
            found = self._model_ids.get(name)
            if found is None:
                unknown.append(name)
                return _UNKNOWN
            return found

        kind, colon, names = part.partition(":")
        if not colon:
            if part.lower() in KINDS or part.lower() in UNSUPPORTED or not part:
                return part
            return model_id(part)  # a bare job: Slurm's shorthand for afterany
        if kind.lower() not in KINDS:
            return part  # the parser names the bad type
        return ":".join([kind, *(_with_delay(model_id, name) if name else name for name in names.split(":"))])


def _with_delay(model_id: Callable[[str], str], name: str) -> str:
    """``server+2`` -> ``3+2``: the name in the coordinator's ids, ``after:ID+MINUTES``'s delay kept."""
    job, plus, minutes = name.partition("+")
    return model_id(job) + plus + minutes


_REFERENCE = re.compile(
    r"(\b(?:job|task|array) |\b(?:after|afterany|afterok|afternotok|aftercorr):)(\d+(?:_\d+)?(?::\d+(?:_\d+)?)*)\b"
)
"""A job id in the model's words: after ``job ``, ``task ``, ``array ``, or a dependency type."""


def job_ids(jobs: Sequence[JobModel], where: Callable[[int], str]) -> tuple[JobIds, list[str]]:
    """Number a scenario's jobs as the coordinator would (file order; an array one number per
    task) and check each ``array`` spec with ``--array``'s parser.

    Args:
        jobs: the ``[[jobs]]`` tables, in file order.
        where: a job's index -> how problems name it (``"jobs[2] ('sweep')"``).

    Returns:
        The ids, and one line per problem (a bad array spec, a name used twice).
    """
    ids = JobIds()
    problems: list[str] = []
    seq = 1
    for i, job in enumerate(jobs):
        if job.array is None:
            ids.tasks.append(SimTask(job.id, str(seq), seq, i, job))
            seq += 1
            continue
        try:
            spec = parse_array(job.array, MAX_ARRAY_SIZE)
        except BadArraySpec as exc:
            problems.append(
                f"{where(i)}.array: {exc}; allowed: Slurm's --array syntax, e.g. 0-9, 1,3,5-9, 0-20:4, 0-99%8"
            )
            continue
        array_id, indices = str(seq), spec.indices
        names = []
        for index in indices:
            task = ArrayTask(array_id, index, len(indices), indices[0], indices[-1], step_of(indices), spec.limit)
            names.append(task_id(job.id, index))
            ids.tasks.append(SimTask(names[-1], task_id(array_id, index), seq, i, job, task))
            seq += 1
        ids.arrays[job.id] = names
        ids._model_ids[job.id] = array_id
        ids.model_names[array_id] = job.id
    for t in ids.tasks:
        if t.name in ids.by_name or (t.task is None and t.name in ids.arrays):
            problems.append(f"{where(t.index)}: the name {t.name!r} is taken by another job or array task")
            continue
        ids.by_name[t.name] = t
        ids._model_ids[t.name] = t.model_id
        ids.model_names[t.model_id] = t.name
    return ids, problems


def dependencies(
    ids: JobIds, jobs: Sequence[JobModel], where: Callable[[int], str]
) -> tuple[dict[int, str], list[str]]:
    """Check every job's ``dependency`` and give it in the coordinator's ids.

    A dependency names jobs submitted before its own (by ``submit``, then file order; a
    ``running = true`` job is there from the start), as a ``--dependency`` names jobs that
    exist; so a cycle of dependencies is an error, and so is a name the file does not have.

    Args:
        ids: the file's jobs (:func:`job_ids`). jobs: the ``[[jobs]]`` tables. where: as in :func:`job_ids`.

    Returns:
        ``[[jobs]]`` index -> the canonical dependency text in the coordinator's ids, and one
        line per problem, naming the key and what is allowed.
    """
    texts: dict[int, str] = {}
    problems: list[str] = []
    named: dict[int, list[int]] = {}  # job index -> the job indices its dependency names
    index_of = {t.model_id: t.index for t in ids.tasks}  # the coordinator's id -> [[jobs]] index
    index_of.update({t.task.array_id: t.index for t in ids.tasks if t.task is not None})
    for i, job in enumerate(jobs):
        if job.dependency is None:
            continue
        if job.running:
            problems.append(f"{where(i)}.dependency: not allowed with running = true (that job is already running)")
            continue
        try:
            text = ids.model_dependency(job.dependency)
        except BadDependency as exc:
            problems.append(f"{where(i)}.{exc}")
            continue
        if job.array is None and parse_dependency(text).corresponding:  # as the coordinator refuses it
            problems.append(
                f"{where(i)}.dependency: {job.dependency!r}: aftercorr is for a job array (each task waits for "
                "the task with its own index); allowed: aftercorr with array, or afterok:ID for one job"
            )
            continue
        texts[i] = text
        named[i] = [index_of[m] for m in parse_dependency(text).job_ids if index_of.get(m, -1) >= 0]
    in_cycle: set[int] = set()
    for i in sorted(named):
        cycle = None if i in in_cycle else _cycle(i, named)
        if i in in_cycle:
            continue
        if cycle is not None:
            in_cycle.update(cycle)
            loop = " -> ".join(jobs[k].id for k in cycle)
            problems.append(
                f"{where(i)}.dependency: a cycle of dependencies ({loop}); allowed: jobs submitted before this one"
            )
            continue

        def key(k: int) -> tuple[float, int]:
            return (-1.0 if jobs[k].running else max(0.0, jobs[k].submit), k)

        later = [k for k in named[i] if key(k) >= key(i)]
        if later:
            k = later[0]
            problems.append(
                f"{where(i)}.dependency: {jobs[k].id!r} is submitted after this job (submit {jobs[k].submit:g} s, "
                f"jobs[{k}]); allowed: jobs submitted before it (earlier submit, or the same and earlier in the file)"
            )
    return texts, problems


def _cycle(start: int, named: dict[int, list[int]]) -> list[int] | None:
    """A path start -> ... -> start through ``named``, or None."""
    path: list[int] = [start]
    seen: set[int] = set()

    def walk(k: int) -> bool:
        for nxt in named.get(k, ()):
            if nxt == start:
                path.append(start)
                return True
            if nxt in seen:
                continue
            seen.add(nxt)
            path.append(nxt)
            if walk(nxt):
                return True
            path.pop()
        return False

    return path if walk(start) else None
