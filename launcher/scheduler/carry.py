"""What one cycle's :class:`~labgang.launcher.scheduler.state.CycleState` derives from the running
jobs (each job by id, quota usage per queue and resource, victim orders), carried over to the
next cycle and updated for the running jobs gone and new instead of built again.

Consecutive cycles differ by a few running jobs, and callers that keep a job's
:class:`RunningJob` while the job does not change (the simulate engine; ``labgang plan replay``
runs tens of thousands of cycles over a few hundred running jobs) let the jobs be compared by
identity: a job whose view changed (told to stop, say) is a new object, so it counts as gone
and new. The previous running jobs are kept, so no identity they hold is reused by a new object.

A pure memo, as :func:`labgang.launcher.scheduler.capacity._owners` is: the answer is always
what the full build gives (:func:`build`), whatever the caller passes, in whatever order:

- ``running``: id -> job in snapshot order, the first of several with one id (the full build);
  duplicate ids make every cycle build anew and carry nothing.
- ``usage``: (queue, resource) -> devices held; the same sums whatever the order.
- victim lists: each sorted by :func:`victim_order`, which ends with the job id, unique here,
  so the order is total and a list kept sorted by insertion equals a fresh sort.
"""

from __future__ import annotations

from bisect import insort
from operator import attrgetter

from labgang.launcher.scheduler.snapshot import RunningJob, victim_order

VictimKey = tuple[str, str, bool]
"""``(queue, resource, terminating)``: one victim list of a cycle."""

_ID = attrgetter("id")


class Carried:
    """The running jobs' derived state for one cycle.

    Attributes:
        running: job id -> job, in snapshot order (the first of several with one id).
        usage: (queue, resource) -> devices the running jobs hold.
        victims: victim lists computed so far (this cycle's and carried ones); lists are never
            changed once made (the next cycle makes new ones where jobs came or went), and the
            cycle adds the lists it builds, so the next cycle can carry them.
    """

    __slots__ = ("running", "usage", "victims")

    def __init__(
        self,
        running: dict[str, RunningJob],
        usage: dict[tuple[str, str], int],
        victims: dict[VictimKey, list[RunningJob]],
    ) -> None:
        self.running = running
        self.usage = usage
        self.victims = victims


def build(running: tuple[RunningJob, ...]) -> Carried:
    """The full build from ``running``, carrying nothing (and no memo kept)."""
    by_id: dict[str, RunningJob] = {}
    usage: dict[tuple[str, str], int] = {}
    for job in running:
        if job.id in by_id:
            continue
        by_id[job.id] = job
        key = (job.queue, job.request.resource)
        usage[key] = usage.get(key, 0) + job.request.total
    return Carried(by_id, usage, {})


_last: tuple[dict[int, RunningJob], Carried, tuple[RunningJob, ...]] | None = None
"""The last :func:`carried` call's running jobs by identity (the dict keeps them alive, so no
identity is reused), its result and the tuple it was given (the same tuple again: the result
copied, no pass over the jobs)."""


def carried(running: tuple[RunningJob, ...]) -> Carried:
    """The derived state of ``running`` (a snapshot's running jobs), from the previous call's
    updated for the jobs gone and new when that is cheaper; equal to :func:`build` ``(running)``.

    The jobs gone and new are found with set operations on identities (C-level): a cycle costs
    a few C passes over the running jobs plus Python work for the jobs that changed only."""
    global _last
    last = _last
    if last is not None and last[2] is running:  # the same tuple again (the driver hands it while unchanged)
        prev = last[1]
        return _remember(last[0], Carried(dict(prev.running), dict(prev.usage), dict(prev.victims)), running)
    by_id = dict(zip(map(_ID, running), running, strict=True))
    if len(by_id) != len(running):  # duplicate ids: the full build decides which counts
        _last = None
        return build(running)
    ident = dict(zip(map(id, running), running, strict=True))
    if last is None or len(ident) != len(running):  # the same object twice: build anew
        return _remember(ident, build(running), running)
    before, prev, _ = last
    new_keys = ident.keys() - before.keys()
    if len(new_keys) * 2 > len(running) + 8:  # mostly new jobs (another caller, a fresh view): build anew
        return _remember(ident, build(running), running)
    new = [ident[i] for i in new_keys]
    gone = [before[i] for i in before.keys() - ident.keys()]
    usage = dict(prev.usage)
    for job in gone:
        key = (job.queue, job.request.resource)
        usage[key] -= job.request.total
    for job in new:
        key = (job.queue, job.request.resource)
        usage[key] = usage.get(key, 0) + job.request.total
    victims = dict(prev.victims)
    if gone or new:
        gone_keys: set[VictimKey] = {(j.queue, j.request.resource, j.terminating) for j in gone}
        gone_ids = set(map(id, gone))
        for vkey in gone_keys & victims.keys():
            victims[vkey] = [j for j in victims[vkey] if id(j) not in gone_ids]
        fresh: set[VictimKey] = set()
        for job in new:
            vkey = (job.queue, job.request.resource, job.terminating)
            lst = victims.get(vkey)
            if lst is None:
                continue  # not computed yet: built from ``running`` when first asked
            if vkey not in fresh and vkey not in gone_keys:
                lst = victims[vkey] = lst[:]  # the carried list stays as it was
                fresh.add(vkey)
            insort(lst, job, key=victim_order)
    return _remember(ident, Carried(by_id, usage, victims), running)


def _remember(ident: dict[int, RunningJob], out: Carried, running: tuple[RunningJob, ...]) -> Carried:
    global _last
    _last = (ident, out, running)
    return out
