"""Phase 2 of a cycle: reservations for starving gangs (no starvation of big gangs).

A pending job whose queue sets ``starvation_after`` and that has waited that long (since
submission or its last requeue) reserves the devices of the placement it would get on an
otherwise empty cluster, starving jobs in order (higher priority, earlier submit, submission
order), each avoiding earlier reservations. Nobody else starts on reserved devices, even
after their current holder leaves; the starving job itself may use them or any free device.

In a strict-fifo queue only the head may reserve: a job behind the head cannot start anyway,
and its reservation could keep the head from ever fitting (a deadlock).
"""

from __future__ import annotations

from labgang.launcher.model import Queueing
from labgang.launcher.scheduler.capacity import FreeIndex
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
    for e in starving:
        req = e.job.request.floor()  # an elastic gang reserves for its minimum
        if req.groups:
            continue  # a job of groups reserves nothing while it starves (docs/job-groups.md)
        model = req.gpu_model.lower() if req.gpu_model else None
        key = (req.resource, model)
        ix = empties.get(key)
        if ix is None:
            ix = book.all_devices_index(req.resource, model, skip_unavailable=True)
            for d in sorted(taken):
                if book.matches(d, req.resource, model):
                    ix.remove(d)
            empties[key] = ix
        raw = place(book, ix, req.workers, req.per_worker, req.nodes, req.topology)
        if raw is None:
            continue
        devs = [d for _, ds in raw for d in ds]
        for d in devs:
            taken.add(d)
            for (res, m), other in empties.items():
                if res == book.resource[d] and (m is None or m in book.model[d]):
                    other.remove(d)
        got = book.reserve(devs, e.job.id)
        if got:
            out[e.job.id] = got
    return out
