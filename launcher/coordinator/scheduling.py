"""The scheduling loop: build a :class:`Snapshot` from the store and live inventories,
run the pure ``run_cycle``, record its decisions, then dispatch.

Events that can change a decision (submission, cancellation, a job leaving its devices
or starting to stop, a device freed or taken outside labgang, a timer) only *kick* the
loop. A kick after a quiet spell runs a cycle at once; kicks that come within
``cycle_coalesce_s`` of the last cycle wait for the rest of that window and share one
cycle, so a burst of submissions costs one cycle per window and a lone release costs no
wait at all. Decisions are assumed in memory and written to the store; only after the
commit are victims stopped and admitted gangs launched (assume, then confirm).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Container, Mapping

from labgang.launcher.coordinator import lifecycle
from labgang.launcher.model import JobState
from labgang.launcher.scheduler.cycle import run_cycle
from labgang.launcher.scheduler.decisions import CycleResult
from labgang.launcher.scheduler.snapshot import Device, Node, PendingJob, RankPlacement, RunningJob, Snapshot
from labgang.launcher.scheduler.unschedulable import never_schedulable
from labgang.launcher.store import JobRecord, JobSpec, RankRecord

if TYPE_CHECKING:
    from labgang.launcher.coordinator.core import Coordinator

log = logging.getLogger("labgang.coordinator.scheduling")

MAX_CYCLES_PER_WAKE = 32
PERIODIC_CYCLE_S = 5.0


def cluster_nodes(coord: "Coordinator") -> tuple[Node, ...]:
    """Every node with a known inventory and all its allocatable devices, in name order."""
    nodes = []
    for name in sorted(coord.agents.nodes):
        conn = coord.agents.nodes[name]
        if conn.inventory is None:
            continue
        devices = tuple(
            Device(uuid=d.uuid, node=name, resource=d.resource, model=d.model or "", group=d.parent_uuid or "")
            for d in conn.inventory.allocatable()
        )
        nodes.append(Node(name=name, devices=devices))
    return tuple(nodes)


def held_devices(coord: "Coordinator") -> dict[str, JobRecord]:
    """Device UUID → the job that holds it (admitted, running or terminating)."""
    held: dict[str, JobRecord] = {}
    for job in lifecycle.active_jobs(coord):
        for rank in job.ranks.values():
            for uuid in rank.devices:
                held[uuid] = job
    return held


def busy_unheld(device_pids: Mapping[str, frozenset[int]], held: Container[str]) -> frozenset[str]:
    """Devices that NVML shows processes on while no job holds them (foreign processes, memory
    still held after a job): never offered to the scheduler.

    Args:
        device_pids: device UUID → pids NVML shows on it (``NodeInventory.device_pids()``).
        held: UUIDs of devices some job holds (e.g. :func:`held_devices`).
    """
    return frozenset(uuid for uuid, pids in device_pids.items() if pids and uuid not in held)


def unavailable_devices(coord: "Coordinator", held: dict[str, JobRecord]) -> frozenset[str]:
    """Devices not offered: on nodes that are disconnected or lost, on lost GPUs, or showing
    processes while no job holds them (foreign processes, memory still held)."""
    out: set[str] = set()
    for name, conn in coord.agents.nodes.items():
        if conn.inventory is None:
            continue
        offered = conn.connected and not conn.lost
        busy = busy_unheld(conn.inventory.device_pids(), held)
        for d in conn.inventory.allocatable():
            if not offered or d.uuid in busy:
                out.add(d.uuid)
        for gpu in conn.inventory.gpus:
            if gpu.lost:
                out.add(gpu.uuid)
                out.update(m.uuid for m in gpu.mig_devices)
    return frozenset(out)


def build_snapshot(coord: "Coordinator", now: float) -> Snapshot:
    """The scheduler's view at ``now``: nodes, queues, jobs holding devices, jobs waiting.

    A requeued job in backoff (``not_before`` > now) is left out of ``pending``.
    """
    held = held_devices(coord)
    running = []
    pending = []
    for job in sorted(coord.jobs.values(), key=lambda j: j.seq):
        st = job.status
        if st.state.holds_devices:
            placement = tuple(
                RankPlacement(rank=r.rank, node=r.node, devices=tuple(r.devices))
                for r in (job.ranks[i] for i in sorted(job.ranks))
            )
            running.append(
                RunningJob(
                    id=job.id,
                    queue=job.spec.queue,
                    request=job.spec.request,
                    priority=job.spec.priority,
                    submit_time=st.submit_time,
                    admit_time=st.admit_time or st.submit_time,
                    placement=placement,
                    grace=job.spec.grace_s,
                    terminating=st.state == JobState.TERMINATING,
                    seq=job.seq,
                    tenant=coord.sharing.tenant(job.spec),
                )
            )
        elif st.state == JobState.PENDING and st.not_before <= now:
            pending.append(
                PendingJob(
                    id=job.id,
                    queue=job.spec.queue,
                    request=job.spec.request,
                    priority=job.spec.priority,
                    submit_time=st.submit_time,
                    seq=job.seq,
                    pending_since=st.pending_since,
                    nominated=tuple(st.nominated),
                    tenant=coord.sharing.tenant(job.spec),
                    held_last_cycle=job.id in coord.sharing.held,
                )
            )
    coord.sharing.sample(now, running)
    return Snapshot(
        now=now,
        nodes=cluster_nodes(coord),
        queues=coord.config.queue_specs(),
        running=tuple(running),
        pending=tuple(pending),
        unavailable=unavailable_devices(coord, held),
        cohorts=coord.config.cohort_specs(),
        sharing=coord.config.sharing_policy(),
        tenants=coord.sharing.snapshot_tenants(),
    )


def apply_result(coord: "Coordinator", result: CycleResult, now: float) -> list[JobRecord]:
    """Record one cycle's decisions in memory and in the store; return the admitted jobs.

    Victims are told to stop (queued effects, sent after the commit); preemptors keep
    their nominated victims; pending reasons are written when they change.
    """
    store = coord.store
    admitted: list[JobRecord] = []
    for adm in result.admitted:
        job = coord.jobs.get(adm.job_id)
        if job is None or job.status.state != JobState.PENDING:
            continue
        st = job.status
        st.state = JobState.ADMITTED
        st.admit_time = now
        st.nominated = ()
        st.reason_code = st.reason_message = None
        job.ranks = {rp.rank: RankRecord(rank=rp.rank, node=rp.node, devices=tuple(rp.devices)) for rp in adm.placement}
        store.save_status(job)
        for rank in job.ranks.values():
            store.save_rank(job, rank)
        where = ", ".join(f"{n}" for n in lifecycle.job_nodes(job))
        store.add_decision(now, job.id, "admit", "admitted", f"on {where}")
        coord.event(job, "admitted", f"{job.spec.workers} ranks on {where}")
        admitted.append(job)
        if coord.metrics is not None:
            coord.metrics.observe_admission(job.spec.queue, now - st.pending_since)
    for pre in result.preempted:
        job = coord.jobs.get(pre.job_id)
        if job is None:
            continue
        if tuple(job.status.nominated) != tuple(pre.victims):
            job.status.nominated = tuple(pre.victims)
            store.save_status(job)
            store.add_decision(now, job.id, "preempt", "preempt", f"victims {', '.join(pre.victims)}: {pre.reason}")
            coord.event(job, "preempting", f"waiting for {', '.join(pre.victims)} to stop: {pre.reason}")
        for victim_id in pre.victims:
            victim = coord.jobs.get(victim_id)
            if victim is not None and victim.status.state in (JobState.ADMITTED, JobState.RUNNING):
                store.add_decision(now, victim.id, "victim", "preempted", f"by job {job.id}: {pre.reason}")
                lifecycle.begin_termination(coord, victim, "requeue", f"preempted by job {job.id}: {pre.reason}")
                if coord.metrics is not None:
                    why = "in_queue" if victim.spec.queue == job.spec.queue else "reclaim"
                    coord.metrics.count_preemption(victim.spec.queue, why)
    for pend in result.pending:
        job = coord.jobs.get(pend.job_id)
        if job is None or job.status.state != JobState.PENDING:
            continue
        code = getattr(pend.reason.code, "value", str(pend.reason.code))
        st = job.status
        if st.reason_code != code:
            # A new kind of reason is a decision worth keeping; a new number in the same
            # reason only updates memory (and goes to disk with the next status write).
            st.reason_code, st.reason_message = code, pend.reason.message
            store.add_decision(now, job.id, "pending", code, pend.reason.message)
            store.save_status(job)
        else:
            st.reason_message = pend.reason.message
    return admitted


def run_cycles(coord: "Coordinator") -> list[JobRecord]:
    """Run cycles until one admits nothing new; return every job admitted."""
    admitted: list[JobRecord] = []
    if coord.shutting_down:
        return admitted  # jobs requeued by the shutdown wait for the next start
    for _ in range(MAX_CYCLES_PER_WAKE):
        now = coord.clock()
        snapshot = build_snapshot(coord, now)
        if not snapshot.pending:
            break
        started = time.perf_counter()
        result = run_cycle(snapshot)
        had_held = bool(coord.sharing.held)
        coord.sharing.after_cycle(result)
        coord.cycles += 1
        coord.last_cycle_at = now
        if coord.metrics is not None:
            coord.metrics.observe_cycle(time.perf_counter() - started)
        log.debug(
            "cycle %d: %d pending, %d admitted, %d preempting, %.1f ms",
            coord.cycles,
            len(snapshot.pending),
            len(result.admitted),
            len(result.preempted),
            (time.perf_counter() - started) * 1e3,
        )
        new = apply_result(coord, result, now)
        admitted.extend(new)
        # a hold lasts one cycle: a cycle that starts holding is followed by one without it
        if not new and not (result.held and not had_held):
            break
    return admitted


async def scheduling_loop(coord: "Coordinator") -> None:
    """Forever: wait for a kick, run cycles (at once, or at the end of the current coalescing
    window), commit, dispatch admitted gangs."""
    from labgang.launcher.coordinator.dispatch import dispatch_job

    loop = asyncio.get_running_loop()
    # Never wait longer than cycle_coalesce_max_s for a cycle, whatever the window.
    window = min(coord.config.cycle_coalesce_s, coord.config.cycle_coalesce_max_s)
    last_cycle_end = float("-inf")
    while True:
        await coord.wake.wait()
        # Leading edge: the first kick after a quiet window runs a cycle now; kicks inside the
        # window after a cycle wait for its end, and all of them share the next cycle.
        wait = last_cycle_end + window - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        coord.wake.clear()
        try:
            admitted = run_cycles(coord)
            await coord.flush()
        except Exception:  # a bug in one cycle must not stop scheduling for good
            log.exception("scheduling cycle failed")
            await asyncio.sleep(1.0)
            continue
        last_cycle_end = loop.time()
        for job in admitted:
            coord.spawn(dispatch_job(coord, job))


async def timer_loop(coord: "Coordinator") -> None:
    """Every ``timer_interval_s``: timed arrows, then a scheduling kick when a backoff expired."""
    last = coord.clock()
    while True:
        await asyncio.sleep(coord.config.timer_interval_s)
        now = coord.clock()
        try:
            lifecycle.check_timers(coord)
            await coord.flush()
        except Exception:
            log.exception("timer check failed")
        pending = [j for j in coord.jobs.values() if j.status.state == JobState.PENDING]
        # A real backoff (not_before after the requeue); a job requeued without one was kicked for.
        if any(last < j.status.not_before <= now and j.status.not_before > j.status.pending_since for j in pending):
            coord.kick()  # a backoff expired
        elif pending and now - coord.last_cycle_at >= PERIODIC_CYCLE_S:
            coord.kick()  # time alone changes decisions (starvation reservations)
        last = now


def check_submission(coord: "Coordinator", spec: JobSpec) -> tuple[str, str] | None:
    """Why a submission could never start (quota or hardware) and the body field at fault
    ("workers", "gpus_per_worker", "mig", "gpu_model", "nodes", "queue"), or None.

    Without any node known yet (the agents have not connected), only quota is judged.
    """
    key = (spec.queue, spec.request)
    if key in coord.schedulable_cache:
        return coord.schedulable_cache[key]
    queue = next(q for q in coord.config.queue_specs() if q.name == spec.queue)
    nodes = cluster_nodes(coord)
    # With no node known, an empty node list leaves only the quota check able to object.
    found = (
        never_schedulable(spec.request, queue, coord.config.queue_specs(), nodes, coord.config.cohort_specs())
        if nodes
        else _quota_only(coord, spec)
    )
    answer = None if found is None else (found[0].message, found[1])
    coord.schedulable_cache[key] = answer
    return answer


def _quota_only(coord: "Coordinator", spec: JobSpec) -> tuple[Any, str] | None:
    from labgang.launcher.scheduler.quota import QuotaBook
    from labgang.launcher.scheduler.unschedulable import quota_fault_field, quota_never_fits

    book = QuotaBook(coord.config.queue_specs(), {}, coord.config.cohort_specs())
    reason = quota_never_fits(book, spec.queue, spec.request)
    return None if reason is None else (reason, quota_fault_field(book, spec.queue, spec.request))
