"""Job arrays in Slurm's syntax (docs/arrays.md): parsing ``--array``, folding task indices back
into ranges, and the environment each task gets.

An array spec is a comma-separated list of parts, each an index (``7``), a range (``0-99``) or
a range with a step (``0-20:4`` = 0, 4, … 20), optionally followed by ``%N``: at most N tasks
run at once (``0-99%8``). Indices are integers >= 0; the set is sorted and each index counts
once. Task ``I`` of array ``A`` is the job ``A_I`` (:func:`task_id`).

Stdlib only and no ``dataclasses``: ``labgang submit --array`` checks the syntax on the fast path
of the CLI (``launcher/cli/quick.py``), where every import is paid for by every command. The
coordinator parses it again, with the cluster's ``[limits] max_array_size``.
"""

from __future__ import annotations

from itertools import pairwise

# ``typing`` is for the type checker only (a shell command would pay ~2 ms to import it).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

ARRAY_ENV_PREFIXES = ("LABGANG_ARRAY_", "SLURM_ARRAY_")

ARRAY_SIZE_CEILING = 1_000_001
"""The largest ``[limits] max_array_size`` a cluster may set: the CLI checks a spec against it
before sending (so a typo such as ``0-99999999`` is refused at once instead of building a hundred
million indices); the coordinator checks the cluster's own, smaller or equal, bound."""
"""The names of every variable :func:`task_environment` sets start with one of these."""


class BadArraySpec(ValueError):
    """An ``--array`` spec that does not parse; the message names the part that is wrong
    (``'"5-2": end below start'``)."""


class ArraySpec:
    """A parsed ``--array``: ``indices`` (sorted, distinct, >= 0) and ``limit`` (the ``%N`` cap
    on tasks running at once; None = no cap)."""

    __slots__ = ("indices", "limit")

    def __init__(self, indices: tuple[int, ...], limit: int | None) -> None:
        self.indices = indices
        self.limit = limit

    def __repr__(self) -> str:
        return f"ArraySpec({fold(self.indices)}{'' if self.limit is None else f'%{self.limit}'})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ArraySpec) and (self.indices, self.limit) == (other.indices, other.limit)

    def __hash__(self) -> int:
        return hash((self.indices, self.limit))


def _number(text: str, part: str, what: str) -> int:
    if not text:
        raise BadArraySpec(f'"{part}": the {what} is missing (indices are whole numbers >= 0)')
    if not (text.isascii() and text.isdigit()):
        raise BadArraySpec(f'"{part}": {what} {text!r} is not a whole number >= 0')
    return int(text)


def parse_array(text: str, max_size: int | None = None, *, bound: str = "limits.max_array_size") -> ArraySpec:
    """Parse an array spec such as ``"0-99"``, ``"1,3,5-9"``, ``"0-20:4"`` or ``"0-99%8"``.

    Args:
        text: the spec as typed.
        max_size: Slurm's ``MaxArraySize``: every index must be below it (None: no bound; the
            coordinator passes ``[limits] max_array_size``).
        bound: what ``max_size`` is, as the messages name it (the CLI's check before sending is
            against :data:`ARRAY_SIZE_CEILING`, not the cluster's own limit).

    Returns:
        The sorted, distinct indices and the ``%N`` cap.

    Raises:
        BadArraySpec: the message names the part that is wrong and why, e.g.
            ``'"5-2": end below start'`` or ``'"%0": the cap must be a whole number >= 1'``.
    """
    spec = text.strip()
    if not spec:
        raise BadArraySpec("empty; allowed: indices and ranges such as 0-99, 1,3,5-9, 0-20:4, with %N to cap")
    body, pct, cap = spec.partition("%")
    limit = None
    if pct:
        if not (cap.isascii() and cap.isdigit()):
            raise BadArraySpec(f'"%{cap}": the cap must be a whole number >= 1 (tasks running at once)')
        if len(cap.lstrip("0")) > len(str(ARRAY_SIZE_CEILING)) or int(cap) > ARRAY_SIZE_CEILING:
            raise BadArraySpec(
                f'"%{cap}": the cap is over {ARRAY_SIZE_CEILING}, more tasks than an array may have; '
                f"allowed: a whole number from 1 to {ARRAY_SIZE_CEILING} (tasks running at once)"
            )
        limit = int(cap)
        if limit < 1:
            raise BadArraySpec(f'"%{cap}": the cap must be a whole number >= 1 (tasks running at once)')
    if not body:
        raise BadArraySpec(f'"{spec}": no indices before the %; allowed: e.g. 0-99%8')
    indices: set[int] = set()
    for part in body.split(","):
        part = part.strip()
        if not part:
            raise BadArraySpec(f'"{body}": an empty part between commas')
        rng, colon, step_text = part.partition(":")
        first, dash, last = rng.partition("-")
        start = _number(first, part, "start" if dash else "index")
        end = _number(last, part, "end") if dash else start
        step = 1
        if colon:  # a bad step (missing, negative, not a number) reads as 0: one message below
            step = int(step_text) if step_text.isascii() and step_text.isdigit() else 0
        if colon and not dash:
            raise BadArraySpec(f'"{part}": a step needs a range (start-end:step)')
        if end < start:
            raise BadArraySpec(f'"{part}": end below start (a range is START-END with START <= END, e.g. 2-5)')
        if step < 1:  # 0, negative, missing or not a number: one message for all
            raise BadArraySpec(f'"{part}": step must be a whole number >= 1')
        if max_size is not None and end >= max_size:
            raise BadArraySpec(f'"{part}": index {end} is over the largest allowed, {max_size - 1} ({bound})')
        if max_size is not None and (end - start) // step + 1 + len(indices) > max_size:
            raise BadArraySpec(f'"{part}": more than {max_size} tasks ({bound})')
        indices.update(range(start, end + 1, step))
    return ArraySpec(tuple(sorted(indices)), limit)


def task_id(array_id: str, index: int) -> str:
    """The job id of task ``index`` of array ``array_id``: ``"12_7"``."""
    return f"{array_id}_{index}"


def split_task_id(job_id: str) -> tuple[str, int] | None:
    """``("12", 7)`` for ``"12_7"``; None for a job id that names no array task."""
    array_id, sep, index = job_id.partition("_")
    if not sep or not array_id.isdigit() or not (index.isascii() and index.isdigit()):
        return None
    return array_id, int(index)


def fold(indices: Iterable[int]) -> str:
    """Sorted indices as Slurm prints them: runs of consecutive numbers as ranges, three or more
    evenly spaced ones as a range with its step, ``"0-20:4,21,23,30-39"``. A stepped run never
    takes the first member of a consecutive run (``"1,3,5-9"``), so ``parse_array`` reads the
    result back to the same indices."""
    values = sorted(set(indices))
    n = len(values)

    def starts_run(m: int) -> bool:
        return m + 1 < n and values[m + 1] == values[m] + 1

    parts: list[str] = []
    i = 0
    while i < n:
        j = i
        while starts_run(j):
            j += 1
        if j > i:
            parts.append(f"{values[i]}-{values[j]}")
            i = j + 1
            continue
        if i + 1 < n:
            step = values[i + 1] - values[i]
            while j + 1 < n and values[j + 1] - values[j] == step and not starts_run(j + 1):
                j += 1
        if j - i >= 2:
            parts.append(f"{values[i]}-{values[j]}:{values[i + 1] - values[i]}")
            i = j + 1
        else:
            parts.append(str(values[i]))
            i += 1
    return ",".join(parts)


def fold_ids(job_ids: Iterable[str]) -> list[str]:
    """Job ids with the tasks of each job array folded into one ``"45_[3-30]"`` at its first task's
    place, as ``queue`` shows pending tasks; a lone task and other jobs keep their ids and order."""
    ids = list(job_ids)
    tasks: dict[str, list[int]] = {}
    for job_id in ids:
        task = split_task_id(job_id)
        if task is not None:
            tasks.setdefault(task[0], []).append(task[1])
    out: list[str] = []
    for job_id in ids:
        task = split_task_id(job_id)
        if task is None or len(tasks.get(task[0], ())) == 1:
            out.append(job_id)
        elif task[0] in tasks:
            out.append(f"{task[0]}_[{fold(tasks.pop(task[0]))}]")
    return out


def step_of(indices: Sequence[int]) -> int:
    """The common step of evenly spaced ``indices`` (``SLURM_ARRAY_TASK_STEP``); 1 when uneven or single."""
    if len(indices) < 2:
        return 1
    step = indices[1] - indices[0]
    return step if all(b - a == step for a, b in pairwise(indices)) else 1


def task_environment(array_id: str, index: int, count: int, low: int, high: int, step: int) -> dict[str, str]:
    """The variables a task's ranks get, under labgang's names and Slurm's (sweep scripts written
    for ``sbatch --array`` run unchanged): ``*_ARRAY_JOB_ID``, ``*_ARRAY_TASK_ID``,
    ``*_ARRAY_TASK_COUNT``, ``*_ARRAY_TASK_MIN``, ``*_ARRAY_TASK_MAX``, ``*_ARRAY_TASK_STEP``."""
    values = {
        "JOB_ID": array_id,
        "TASK_ID": str(index),
        "TASK_COUNT": str(count),
        "TASK_MIN": str(low),
        "TASK_MAX": str(high),
        "TASK_STEP": str(step),
    }
    return {f"{prefix}{name}": value for prefix in ARRAY_ENV_PREFIXES for name, value in values.items()}
