"""Phase 2 of a cycle: reservations for starving gangs (no starvation of big gangs).

A pending job whose queue sets ``starvation_after`` and that has waited that long (since
submission or its last requeue) reserves the devices of the placement it would get on an
otherwise empty cluster, starving jobs in order (higher priority, earlier submit, submission
order), each avoiding earlier reservations. A job asking host CPUs or memory (or whole nodes)
reserves only on nodes whose CPUs and memory could hold its ranks there beside the earlier
reservations' (:func:`.hostres.capped_index`); its reserved devices then hold its host resources
too, for host use is derived from who holds or reserves a node's devices (:mod:`.hostres`).
Nobody else starts on reserved devices, even after their current holder leaves; the starving
job itself may use them or any free device.

A starving job of groups (at every group's minimum when elastic) reserves the devices of every
one of its device groups at once, or nothing (``_reserve_groups``).

In a strict-fifo queue only the head may reserve: a job behind the head cannot start anyway,
and its reservation could keep the head from ever fitting (a deadlock).
"""

from __future__ import annotations

from collections.abc import Callable

from labgang.launcher.model import JobRequest, Queueing
from labgang.launcher.scheduler.capacity import DeviceBook, FreeIndex
from labgang.launcher.scheduler.groups import units
from labgang.launcher.scheduler.hostres import NodeUse, capped_index
from labgang.launcher.scheduler.nominate import Entry
from labgang.launcher.scheduler.placement import place
from labgang.launcher.scheduler.state import CycleState


def reserve_for_starving(state: CycleState, entries: list[Entry]) -> dict[str, list[int]]:
    """Reserve devices for each starving, schedulable entry.

    Args:
        state: the cycle's copy (its device book gets the reservations).
        entries: every pending entry, each queue's entries in queue order.

    Returns:
        ``{job id: reserved device positions}`` for the jobs that got a reservation.
    """
    heads: set[str] = set()
    eligible = []
    for e in entries:
        if e.unschedulable is not None:
            continue
        if e.spec.queueing is Queueing.STRICT_FIFO:
            if e.spec.name in heads:
                continue
            heads.add(e.spec.name)
        if e.starving and not e.job.request.shared:  # a share needs part of one card: no gang to starve
            eligible.append(e)
    starving = sorted(eligible, key=lambda e: (-e.job.priority, e.job.submit_time, e.job.seq, e.job.id))
    if not starving:
        return {}
    book = state.devices
    empties: dict[tuple[str, str | None], FreeIndex] = {}
    taken: set[int] = set()
    out: dict[str, list[int]] = {}
    reserved_use = [NodeUse() for _ in book.node_names]  # host use of the reservations so far

    def empty(req: JobRequest) -> FreeIndex:
        model = req.gpu_model.lower() if req.gpu_model else None
        key = (req.resource, model)
        ix = empties.get(key)
        if ix is None:
            ix = book.all_devices_index(req.resource, model, skip_unavailable=True)
            for d in sorted(taken):
                if book.matches(d, req.resource, model):
                    ix.remove(d)
            empties[key] = ix
        return ix

    def take(d: int) -> None:
        taken.add(d)
        for (res, m), other in empties.items():
            if res == book.resource[d] and (m is None or m in book.model[d]):
                other.remove(d)

    def give_back(d: int) -> None:
        taken.discard(d)
        for (res, m), other in empties.items():
            if res == book.resource[d] and (m is None or m in book.model[d]):
                other.add(d)

    for e in starving:
        req = e.job.request.floor()  # an elastic gang reserves for its minimum
        if req.groups:  # its groups' host requests are not reserved (docs/job-groups.md)
            devs = _reserve_groups(req, empty, take, give_back, len(book.node_names), book)
            if devs is None:
                continue
        else:
            ix = empty(req)
            capped = capped_index(book, ix, req, idle=True, held=reserved_use) if req.host else None
            raw = place(book, ix, req.workers, req.per_worker, req.nodes, req.topology, capped)
            if raw is None:
                continue
            for n, _ in raw:  # its ranks' CPUs and memory, for the next starving job's nodes
                reserved_use[n].cpus += req.cpus_per_task
                reserved_use[n].memory += req.rank_mem()
            for n in {n for n, _ in raw}:
                use = reserved_use[n]
                use.holders += 1
                use.exclusive = use.exclusive or req.exclusive
                use.memory += req.mem
            devs = [d for _, ds in raw for d in ds]
            for d in devs:
                take(d)
        got = book.reserve(devs, e.job.id)
        if got:
            out[e.job.id] = got
    return out


def _reserve_groups(
    req: JobRequest,
    empty: Callable[[JobRequest], FreeIndex],
    take: Callable[[int], None],
    give_back: Callable[[int], None],
    node_count: int,
    book: DeviceBook,
) -> list[int] | None:
    """The devices a starving job of groups reserves: every device group placed as on an empty
    cluster minus earlier reservations (``empty``), in the order ``groups.units`` places them, a
    colocated set on one node; a group with no device reserves nothing. Each device is taken
    (``take``) as it is chosen; when some group does not fit, those are given back and None is
    returned (the job reserves nothing)."""
    devs: list[int] = []
    try:
        for unit in units(req):
            got = _reserve_unit(req, unit, empty, take, give_back, node_count, book)
            if got is None:
                return None
            devs.extend(got)
        done = devs
        devs = []
        return done
    finally:
        for d in devs:
            give_back(d)


def _reserve_unit(
    req: JobRequest,
    unit: list[int],
    empty: Callable[[JobRequest], FreeIndex],
    take: Callable[[int], None],
    give_back: Callable[[int], None],
    node_count: int,
    book: DeviceBook,
) -> list[int] | None:
    groups = [req.groups[i].request for i in unit if req.groups[i].request.per_worker > 0]
    if not groups:
        return []
    if len(unit) == 1:
        r = groups[0]
        raw = place(book, empty(r), r.workers, r.per_worker, r.nodes, r.topology)
        if raw is None:
            return None
        devs = [d for _, ds in raw for d in ds]
        for d in devs:
            take(d)
        return devs
    for n in range(node_count):  # a colocated set: all of its groups on one node
        held: list[int] = []
        for r in groups:
            one = FreeIndex(node_count, list(empty(r).free[n]), book.node_of)
            raw = place(book, one, r.workers, r.per_worker, None, r.topology)
            if raw is None:
                break
            for _, ds in raw:
                for d in ds:
                    take(d)
                    held.append(d)
        else:
            return held
        for d in held:
            give_back(d)
    return None
