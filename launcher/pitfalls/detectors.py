"""The snapshot detectors: pure functions ``detect_x(snapshot, thresholds) -> list[Finding]``."""

from __future__ import annotations

from labgang.agent.inventory import held_at_power_cap_only, throttle_kind
from labgang.agent.mem_size import size_text
from labgang.launcher.pitfalls.findings import ALLOCATED, FOREIGN, FREE, HELD, Finding, PitfallKind, Severity
from labgang.launcher.pitfalls.reclaim import can_take_back, reclaim_time_s
from labgang.launcher.pitfalls.sharing import detect_shared_card_memory, detect_sharers_contend
from labgang.launcher.pitfalls.thresholds import PitfallThresholds
from labgang.launcher.pitfalls.views import ClusterSnapshot, DeviceSample, _num, iter_devices


def _pct(x: float) -> str:
    return f"{x:.0f}%"


def _gib(b: float) -> str:
    return size_text(b)


# ----------------------------------------------------------------------------------------
# Detectors over one snapshot.


def detect_kernel_busy_sm_idle(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Full GPUs where NVML ``utilization.gpu`` is high but GPM SM activity is low.

    ``utilization.gpu`` (``nvmlDeviceGetUtilizationRates``) is the share of time *any* kernel
    ran, not how many SMs did work; GPM ``NVML_GPM_METRIC_SM_UTIL`` measures the latter.
    Never fires when SM activity is unavailable (pre-Hopper, no GPM) or on MIG devices.
    """
    out = []
    for dev in iter_devices(snapshot):
        if dev.is_mig:
            continue
        util, sm = _num(dev.info.utilization_gpu_pct), _num(dev.info.sm_active_pct)
        if util is None or sm is None or util < t.busy_util_pct or sm >= t.sm_idle_pct:
            continue
        out.append(
            Finding(
                PitfallKind.KERNEL_BUSY_SM_IDLE,
                Severity.WARNING,
                f"{dev.node} {dev.label}",
                f"utilization.gpu {_pct(util)} but SM activity {_pct(sm)}",
                "kernels keep the GPU 'busy' while most SMs idle: raise batch size, fuse small kernels, "
                "or check for a spin/sync loop",
                {"utilization_gpu_pct": util, "sm_active_pct": sm},
                dev.node,
                dev.uuid,
                dev.holder.job if dev.holder else None,
            )
        )
    return out


def detect_allocated_no_process(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Devices allocated to a running job on which NVML shows no process at all.

    A rank that crashed without exiting, hangs before CUDA init, or was given the wrong
    ``CUDA_VISIBLE_DEVICES``. Waits ``no_process_after_s`` after the job started.
    """
    out = []
    for dev in iter_devices(snapshot):
        h = dev.holder
        if h is None or h.state != ALLOCATED or dev.pids:
            continue
        job = snapshot.job(h.job)
        if job is None or job.state != "running" or job.start_time is None:
            continue
        running_s = snapshot.now - job.start_time
        if running_s < t.no_process_after_s:
            continue
        out.append(
            Finding(
                PitfallKind.ALLOCATED_NO_PROCESS,
                Severity.WARNING,
                f"{dev.node} {dev.label}",
                f"allocated to job {job.id} ({job.user}) for {running_s / 60:.0f} min with no process on it",
                "a rank may have crashed or hung before touching the GPU: check `labgang logs` and cancel if stuck",
                {"running_s": running_s},
                dev.node,
                dev.uuid,
                job.id,
            )
        )
    return out


def _owners(snapshot: ClusterSnapshot, dev: DeviceSample) -> list[str]:
    names = []
    for pid in dev.pids:
        owner = snapshot.processes.get((dev.node, pid))
        names.append(f"{pid}({owner.user})" if owner and owner.user else str(pid))
    return names


def detect_foreign_processes(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Devices with processes labgang did not start (device state ``foreign``).

    The coordinator marks such devices; in local mode the data source marks a device foreign
    when none of its processes carries ``LABGANG_JOB_ID``. A free device that NVML shows
    processes on also counts.
    """
    out = []
    ranks_elsewhere = {(n.name, v.pid) for n in snapshot.nodes for v in n.violations}
    for dev in iter_devices(snapshot):
        h = dev.holder
        if h is None or not (h.state == FOREIGN or (h.state == FREE and dev.pids)):
            continue
        if all((dev.node, pid) in ranks_elsewhere for pid in dev.pids):
            continue  # labgang ranks on a device they were not given: a device violation instead
        used = _num(dev.info.memory_used_bytes)
        owners = _owners(snapshot, dev)
        out.append(
            Finding(
                PitfallKind.FOREIGN_PROCESS,
                Severity.WARNING,
                f"{dev.node} {dev.label}",
                f"{len(owners)} process(es) not started by labgang: {', '.join(owners) or 'unknown pids'}"
                + (f", {_gib(used)} used" if used is not None else ""),
                "the device is kept out of scheduling; ask the owner to submit through labgang",
                {"processes": float(len(owners)), **({"memory_used_bytes": used} if used is not None else {})},
                dev.node,
                dev.uuid,
            )
        )
    return out


def detect_shared_memory_pressure(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Devices shared by several processes whose memory is nearly full.

    Without MIG nothing partitions device memory, so one process growing starves the others
    (OOM in whichever allocates next).
    """
    out = []
    for dev in iter_devices(snapshot):
        n = len(dev.pids)
        used, total = _num(dev.info.memory_used_bytes), _num(dev.info.memory_total_bytes)
        if n < t.shared_min_processes or used is None or not total:
            continue
        pct = 100.0 * used / total
        if pct < t.memory_pressure_pct:
            continue
        out.append(
            Finding(
                PitfallKind.SHARED_MEMORY_PRESSURE,
                Severity.WARNING,
                f"{dev.node} {dev.label}",
                f"{n} processes share {_gib(total)}, {_pct(pct)} used",
                "nothing partitions memory on a shared device: give each process its own GPU or MIG device, "
                "or cap its memory fraction",
                {"processes": float(n), "memory_used_pct": pct, "memory_used_bytes": used, "memory_total_bytes": total},
                dev.node,
                dev.uuid,
            )
        )
    return out


def detect_borrowed_at_risk(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Queues running on borrowed quota that another queue of their cohort could take back.

    Fires only when some other queue of the cohort could reclaim or preempt the borrowed
    capacity (:func:`can_take_back`, from the policies ``GET /v1/queues`` shows): a cohort
    whose other queues all have ``reclaim_within_cohort = never`` and no
    ``borrow_within_cohort`` policy leaves the borrower alone. WARNING when one of those
    queues (the "lending queues" of the summary) has pending jobs (a reclaim may come in the
    next cycle), INFO otherwise. The numbers include the reclaim time.
    """
    out = []
    for q in sorted(snapshot.queues, key=lambda q: q.name):
        borrowed = sum(q.borrowed.values())
        if borrowed <= 0 or q.cohort is None:
            continue
        threats = [
            o
            for o in snapshot.queues
            if o.name != q.name and o.cohort == q.cohort and can_take_back(o, q, snapshot.jobs)
        ]
        if not threats:
            continue
        waiting = sum(o.pending for o in threats)
        rt = reclaim_time_s(q, snapshot.jobs)
        what = ", ".join(f"{v} {k}" for k, v in sorted(q.borrowed.items()) if v)
        out.append(
            Finding(
                PitfallKind.BORROWED_AT_RISK,
                Severity.WARNING if waiting else Severity.INFO,
                f"queue {q.name}",
                f"borrows {what} from cohort {q.cohort}; {waiting} job(s) pending in lending queues; "
                f"reclaim takes {'?' if rt is None else f'{rt:.0f} s'}",
                "jobs above nominal quota can be preempted after their grace period: checkpoint often",
                {
                    "borrowed": float(borrowed),
                    "pending_in_cohort": float(waiting),
                    **({"reclaim_time_s": rt} if rt is not None else {}),
                },
            )
        )
    return out


def detect_fragmented_gangs(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Pending gangs whose reason is FRAGMENTED: enough free devices in total, none placed together."""
    out = []
    for j in sorted(snapshot.jobs, key=lambda j: j.id):
        if j.state != "pending" or j.reason_code != "FRAGMENTED":
            continue
        waited = snapshot.now - j.submit_time if j.submit_time is not None else None
        out.append(
            Finding(
                PitfallKind.FRAGMENTED_GANG,
                Severity.WARNING,
                f"job {j.id}",
                f"{j.workers}x{j.gpus_per_worker} {j.resource} blocked by fragmentation, not quota: "
                f"{j.reason_message or 'no node set holds it'}",
                "fewer, larger ranks (or `--nodes`) may fit; small jobs spread over nodes keep gangs out",
                {
                    "workers": float(j.workers),
                    "gpus_per_worker": float(j.gpus_per_worker),
                    **({"waited_s": waited} if waited is not None else {}),
                },
                job=j.id,
            )
        )
    return out


def detect_mig_pending_reset(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """GPUs whose pending MIG mode differs from the current one (``nvmlDeviceGetMigMode``)."""
    out = []
    for node in snapshot.nodes:
        if node.inventory is None:
            continue
        for gpu in node.inventory.gpus:
            cur, pend = gpu.mig_mode_current, gpu.mig_mode_pending
            if not isinstance(cur, bool) or not isinstance(pend, bool) or cur == pend:
                continue
            out.append(
                Finding(
                    PitfallKind.MIG_PENDING_RESET,
                    Severity.WARNING,
                    f"{node.name} GPU {gpu.index}",
                    f"MIG mode is {'on' if cur else 'off'} but {'on' if pend else 'off'} is pending a GPU reset",
                    "drain the GPU, then `nvidia-smi -r -i <index>` (or reboot) to apply the MIG mode",
                    {"mig_mode_current": float(cur), "mig_mode_pending": float(pend)},
                    node.name,
                    gpu.uuid,
                )
            )
    return out


_POWER_CAP_ADVICE = (
    "the driver holds the clocks at the power cap, which is normal for a GPU running flat out; "
    "it only matters if one GPU of a gang is held while the others are not"
)
_THROTTLED_ADVICE = "check airflow and fans (thermal) or the power cap (power); throttled GPUs slow the whole gang"


def detect_throttling(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """GPUs whose clocks are held down by thermal or power limits
    (``nvmlDeviceGetCurrentClocksEventReasons``), one finding per GPU.

    A thermal, hardware-slowdown or power-brake reason (``sw_thermal_slowdown``,
    ``hw_thermal_slowdown``, ``hw_slowdown``, ``hw_power_brake_slowdown``) is a WARNING.
    ``sw_power_cap`` with none of those beside it is INFO: the driver holds the clocks at the
    power cap, which a GPU running flat out does all the time (a real H200 under large matrix
    products reports it continuously at about 510 W of its 700 W limit:
    ``tests/fixtures/device-h200/run-big.json``); it only matters when one GPU of a gang is held
    while the others are not. ``numbers`` holds ``temperature_c``, ``power_w`` and
    ``power_limit_w`` where NVML gave them.
    """
    out = []
    for node in snapshot.nodes:
        if node.inventory is None:
            continue
        for gpu in node.inventory.gpus:
            if not isinstance(gpu.clock_event_reasons, tuple):
                continue
            reasons = [r for r in gpu.clock_event_reasons if throttle_kind(r)]
            if not reasons:
                continue
            kinds = sorted({kind for r in reasons if (kind := throttle_kind(r))})
            if held_at_power_cap_only(gpu.clock_event_reasons):
                head, severity, advice = "clocks held at the power cap", Severity.INFO, _POWER_CAP_ADVICE
            else:
                head, severity, advice = "/".join(kinds) + " throttling", Severity.WARNING, _THROTTLED_ADVICE
            temp, power, limit = _num(gpu.temperature_c), _num(gpu.power_w), _num(gpu.power_limit_w)
            nums: dict[str, float] = {}
            parts = [head + " (" + ", ".join(reasons) + ")"]
            if temp is not None:
                nums["temperature_c"] = temp
                parts.append(f"{temp:.0f} C")
            if power is not None:
                nums["power_w"] = power
                parts.append(f"{power:.0f} W" + (f" of {limit:.0f} W" if limit is not None else ""))
            if limit is not None:
                nums["power_limit_w"] = limit
            out.append(
                Finding(
                    PitfallKind.THROTTLING,
                    severity,
                    f"{node.name} GPU {gpu.index}",
                    ", ".join(parts),
                    advice,
                    nums,
                    node.name,
                    gpu.uuid,
                )
            )
    return out


def detect_memory_held_after_job(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Device memory still held after the job that used it ended.

    Fires for a device the coordinator marks ``held``, for a device whose NVML process list
    names a pid that no longer exists (a leaked context), and for one whose process belongs
    to a job that has finished.
    """
    out = []
    for dev in iter_devices(snapshot):
        h = dev.holder
        dead = [pid for pid in dev.pids if (o := snapshot.processes.get((dev.node, pid))) is not None and not o.alive]
        ended = sorted(
            {
                o.job
                for pid in dev.pids
                if (o := snapshot.processes.get((dev.node, pid))) is not None
                and o.job
                and (j := snapshot.job(o.job)) is not None
                and j.finished
            }
        )
        if not (h is not None and h.state == HELD) and not dead and not ended:
            continue
        job = (h.job if h is not None and h.state == HELD else None) or (ended[0] if ended else None)
        used = _num(dev.info.memory_used_bytes)
        why = []
        if job:
            why.append(f"job {job} ended")
        if dead:
            why.append(f"pid(s) {', '.join(map(str, dead))} gone")
        out.append(
            Finding(
                PitfallKind.MEMORY_HELD_AFTER_JOB,
                Severity.CRITICAL,
                f"{dev.node} {dev.label}",
                ("; ".join(why) or "marked held") + (f", {_gib(used)} still in use" if used is not None else ""),
                "a leftover context or zombie process pins the memory: find it with `fuser -v /dev/nvidia*`, "
                "kill it, or reset the GPU",
                {"memory_used_bytes": used} if used is not None else {},
                dev.node,
                dev.uuid,
                job,
            )
        )
    return out


def detect_device_violations(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Ranks seen by NVML on a device they were not given (``CUDA_VISIBLE_DEVICES`` is no fence
    where the node cannot confine ranks; docs/security.md)."""
    labels = {(d.node, d.uuid): d.label for d in iter_devices(snapshot)}
    out = []
    for node in snapshot.nodes:
        for v in node.violations:
            label = labels.get((node.name, v.device), v.device)
            out.append(
                Finding(
                    PitfallKind.DEVICE_VIOLATION,
                    Severity.CRITICAL,
                    f"{node.name} {label}",
                    f"job {v.job} rank {v.rank} (pid {v.pid}{', ' + v.user if v.user else ''}) uses {label}, "
                    f"which it was not given (its devices: {', '.join(v.allowed) or 'none'})",
                    'the job ignores CUDA_VISIBLE_DEVICES; cancel it, or set violation = "kill" in the cluster '
                    "config, and confine ranks with a delegated cgroup (docs/security.md)",
                    {"pid": float(v.pid), "rank": float(v.rank)},
                    node.name,
                    v.device,
                    v.job,
                )
            )
    return out


SNAPSHOT_DETECTORS = (
    detect_device_violations,
    detect_shared_card_memory,
    detect_sharers_contend,
    detect_memory_held_after_job,
    detect_allocated_no_process,
    detect_foreign_processes,
    detect_kernel_busy_sm_idle,
    detect_shared_memory_pressure,
    detect_throttling,
    detect_mig_pending_reset,
    detect_fragmented_gangs,
    detect_borrowed_at_risk,
)
