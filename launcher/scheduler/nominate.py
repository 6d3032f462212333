"""Phase 1 of a cycle: sort each queue's pending jobs and set aside the unschedulable ones.

A queue's order (docs/queue-semantics.md §A4): a preemptor that evicted victims and is not admitted yet first
(sticky head, even once its victims are gone, so nobody else takes the room it freed),
then higher priority, earlier submit time, submission order. A job that could not start
even on an empty cluster is marked unschedulable here once per distinct request.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from labgang.launcher.model import GroupRequest, JobRequest, NodeGpuSharing, QueueSpec
from labgang.launcher.scheduler.capacity import FreeIndex
from labgang.launcher.scheduler.decisions import Pending, PendingReason, ReasonCode
from labgang.launcher.scheduler.groups import group_class, plain_gang_of
from labgang.launcher.scheduler.quota import CohortTree
from labgang.launcher.scheduler.reasons import begin_reason
from labgang.launcher.scheduler.shares import reads_user, share_refusal
from labgang.launcher.scheduler.snapshot import PendingJob, Snapshot
from labgang.launcher.scheduler.state import CycleState
from labgang.launcher.scheduler.unschedulable import (
    groups_never_fit,
    host_never_fits,
    placement_never_fits,
    quota_never_fits,
)


@dataclass(slots=True)
class Entry:
    """One pending job as the cycle sees it.

    Attributes:
        job: the pending job.
        spec: its queue.
        live_victims: its nominated victims that still hold devices.
        unschedulable: the reason it can never start, or None.
        starving: True when its queue's ``starvation_after`` has passed since ``pending_since``.
        cls: ``(queue, workers, per_worker, resource, gpu_model, nodes, topology, min_workers,
            host requests, groups (:func:`.groups.group_class`), share request and user)``: jobs
            of one class fit or fail alike (up to priority); jobs of groups share a class whatever
            their group names (and a plain job whatever its cut), their reasons kept as templates
            (:func:`.groups.render`).
    """

    job: PendingJob
    spec: QueueSpec
    live_victims: tuple[str, ...]
    unschedulable: PendingReason | None
    starving: bool
    cls: tuple[Hashable, ...] = ()


def nominate(snapshot: Snapshot, state: CycleState) -> tuple[dict[str, list[Entry]], list[Pending]]:
    """Group pending jobs by queue, in queue order.

    Returns:
        ``(entries by queue name in configuration order, pending decisions for jobs whose
        queue does not exist or whose ``--begin`` time has not come)``.
    """
    specs = {q.name: q for q in snapshot.queues}
    by_queue: dict[str, list[Entry]] = {q.name: [] for q in snapshot.queues}
    orphans: list[Pending] = []
    verdicts: dict[tuple[Hashable, ...], PendingReason | None] = {}
    sources: dict[tuple[Hashable, ...], tuple[GroupRequest, ...]] = {}  # the groups of the job each verdict is of
    empties: dict[tuple[str, str | None], FreeIndex] = {}
    now = snapshot.now
    running = state.running
    node_sharing: set[NodeGpuSharing] | None = None
    reads_user_of: dict[tuple[str, bool], bool] = {}
    for job in snapshot.pending:
        if job.begin_time is not None and job.begin_time > now:
            orphans.append(Pending(job.id, begin_reason(job.begin_time)))
            continue
        spec = specs.get(job.queue)
        if spec is None:
            allowed = ", ".join(specs) or "none configured"
            orphans.append(
                Pending(
                    job.id,
                    PendingReason(
                        ReasonCode.UNSCHEDULABLE,
                        f"queue {job.queue!r} does not exist (queues: {allowed}); "
                        f"`labgang update {job.id} Partition=QUEUE` moves it",
                    ),
                )
            )
            continue
        req = job.request
        share = None  # shares: what the trust rule reads (shares.trust_key), its test kept per queue and mode
        if req.shards or req.mps:
            by_user = reads_user_of.get((spec.name, bool(req.mps)))
            if by_user is None:
                by_user = reads_user_of[(spec.name, bool(req.mps))] = reads_user(spec, specs, bool(req.mps))
            share = (req.shards, req.mps, job.user if by_user else None)
        # a plain job of groups with a device for every rank is in the class of its one gang
        k = (plain_gang_of(req) or req) if req.groups else req
        key = (
            spec.name,
            k.workers,
            k.per_worker,
            k.resource,
            k.gpu_model,
            k.nodes,
            k.topology,
            k.min_workers,
            (k.cpus_per_task, k.mem, k.mem_per_gpu, k.exclusive),
            group_class(k),  # any other job of groups: its groups' shapes (or its plain size), not their names
            share,
        )
        # whether it can ever start reads no user: one verdict for the same share of every user
        vkey = key if share is None else (*key[:-1], (req.shards, req.mps))
        verdict = verdicts.get(vkey, _UNJUDGED)  # one hash of the key (a tuple's is not kept)
        if verdict is _UNJUDGED:  # an elastic gang can start when its minimum can
            verdict = verdicts[vkey] = _never_fits_kept(state, spec, req, empties)
            sources[vkey] = req.groups
            if verdict is None and req.shared:
                if node_sharing is None:  # the distinct per-node sharing settings, once per cycle
                    gs = snapshot.gpu_sharing
                    if gs.nodes or not state.devices.node_names:
                        node_sharing = set(map(gs.node, state.devices.node_names))
                    else:  # no per-node overrides: every node has the cluster-wide values
                        node_sharing = {NodeGpuSharing(gs.shards_per_gpu, gs.mps)}
                why = share_refusal(snapshot.gpu_sharing, spec, req.shards, req.mps, node_sharing)
                verdict = verdicts[vkey] = None if why is None else PendingReason(ReasonCode.UNSCHEDULABLE, why)
        if verdict is not None and sources[vkey] != req.groups:
            # whether a job can ever start holds for its class; why not names a job of groups's groups
            named = (vkey, req.groups)
            if named not in verdicts:
                verdicts[named] = _never_fits(state, spec, req.floor(), empties)
            verdict = verdicts[named]
        live = tuple(v for v in job.nominated if v in running) if job.nominated else ()
        starving = spec.starvation_after is not None and now - job.pending_since >= spec.starvation_after
        by_queue[spec.name].append(Entry(job, spec, live, verdict, starving, key))
    for entries in by_queue.values():
        entries.sort(key=lambda e: (not e.job.nominated, -e.job.priority, e.job.submit_time, e.job.seq, e.job.id))
    return by_queue, orphans


_UNJUDGED = PendingReason(ReasonCode.UNSCHEDULABLE, "(not judged yet)")
"""A verdict not judged yet, told by identity (None is the verdict "it can start")."""

memo_verdicts = True
"""Off: every cycle judges each class's "could it ever start" anew (tests build the reference so)."""


def _never_fits_kept(
    state: CycleState, spec: QueueSpec, req: JobRequest, empties: dict[tuple[str, str | None], FreeIndex]
) -> PendingReason | None:
    """:func:`_never_fits` of ``req``'s floor, for a plain whole-device request remembered across
    cycles: the answer reads only the quota configuration (the cycle's quota tree, shared by
    every cycle on the same queues and cohorts tuples) and the nodes' static layout (whose memo
    dict holds it), never the usage or the owners, so it is kept per (tree, request) until either
    changes. A share (its answer reads the sharing settings) and a job of groups are judged as
    before."""
    global _kept_verdicts
    if req.groups or req.shared or not memo_verdicts:
        return _never_fits(state, spec, req.floor(), empties)
    tree, layout = state.quota.tree, state.devices.static
    kept = _kept_verdicts
    if kept is None or kept[0] is not tree or kept[1] is not layout:
        kept = _kept_verdicts = (tree, layout, {})
    memo = kept[2]
    key = (spec.name, req)
    found = memo.get(key, _UNJUDGED)
    if found is not _UNJUDGED:
        return found
    memo[key] = found = _never_fits(state, spec, req.floor(), empties)
    return found


_kept_verdicts: tuple[CohortTree, object, dict[tuple[str, JobRequest], PendingReason | None]] | None = None
"""The quota tree and node layout the kept verdicts of :func:`_never_fits_kept` were judged on,
and those verdicts per (queue, request): one slot, replaced when either changes."""


def _never_fits(
    state: CycleState, spec: QueueSpec, req: JobRequest, empties: dict[tuple[str, str | None], FreeIndex]
) -> PendingReason | None:
    if req.groups:
        found = groups_never_fit(state.quota, spec.name, state.devices, req)
        return None if found is None else found[0]
    reason = quota_never_fits(state.quota, spec.name, req)
    if reason is not None:
        return reason
    model = req.gpu_model.lower() if req.gpu_model else None
    ix = empties.get((req.resource, model))
    if ix is None:
        ix = state.devices.all_devices_index(req.resource, model, skip_unavailable=False)
        empties[(req.resource, model)] = ix
    reason = placement_never_fits(ix, req)
    if reason is None and req.host:
        found = host_never_fits(state.devices, ix, req)
        reason = None if found is None else found[0]
    return reason
