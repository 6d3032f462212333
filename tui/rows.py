"""Table rows for every view, as plain strings: shared by the Textual widgets and ``--once``.

Pure functions of a :class:`~labgang.tui.state.ClusterState`: no clock reads (ages are
relative to ``snapshot.now``), so the same state always gives the same rows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from labgang.agent.inventory import held_at_power_cap_only, throttle_kind
from labgang.launcher.cli.format import format_resources
from labgang.launcher.durations import format_duration
from labgang.launcher.jobtable import fold_pending_tasks
from labgang.launcher.pitfalls import DeviceSample, Finding, JobView
from labgang.launcher.text import printable
from labgang.tui.sharers import budgeted_jobs, sharers_text
from labgang.tui.state import ClusterState, Filters, sort_jobs

GiB = 1024**3

DEVICE_COLUMNS = ("node", "device", "model", "memory", "util", "SM act", "temp", "power", "flags", "holder")
JOB_COLUMNS = ("id", "name", "user", "queue", "state", "prio", "ranks×dev", "nodes", "age", "restarts", "reason")
QUEUE_COLUMNS = (
    "queue",
    "cohort",
    "nominal",
    "used",
    "borrowed",
    "lent",
    "share",
    "borrow limit",
    "pending",
    "running",
    "reclaim",
)
FINDING_COLUMNS = ("sev", "pitfall", "where", "what", "advice")


def _safe(*cells: Any) -> tuple[str, ...]:
    """Table cells with control characters escaped (a job name's newline or ANSI escape stays in its cell)."""
    flat = cells[0] if len(cells) == 1 and isinstance(cells[0], tuple) else cells
    return tuple(printable(str(c)) for c in flat)


def is_known(value: Any) -> bool:
    """A real number (not None, not an NVML ``Unavailable``)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def na(value: Any) -> str:
    """``n/a (reason)`` for an NVML ``Unavailable``, ``-`` for None."""
    reason = getattr(value, "reason", None)
    return f"n/a ({reason})" if reason else "-"


def mem_bar(used: Any, total: Any, width: int = 10, ascii_only: bool = False) -> str:
    """``"▇▇▇▁▁▁▁▁▁▁ 24.0/80.0G"``: a bar of used memory plus the figures in GiB."""
    if not is_known(used) or not is_known(total) or total <= 0:
        return na(used if not is_known(used) else total)
    filled = round(width * min(1.0, used / total))
    full, empty = ("#", ".") if ascii_only else ("█", "░")
    return f"{full * filled}{empty * (width - filled)} {used / GiB:.1f}/{total / GiB:.0f}G"


def pct(value: Any) -> str:
    return f"{value:.0f}%" if is_known(value) else na(value)


@dataclass(frozen=True, slots=True)
class DeviceRow:
    """One device line. ``key`` is the device UUID; ``state`` drives the colour."""

    key: str
    state: str
    cells: tuple[str, ...]


def _holder_text(dev: DeviceSample, state: ClusterState) -> tuple[str, str]:
    h = dev.holder
    if h is None:
        return "free", "free"
    if h.state == "allocated":
        job = state.snapshot.job(h.job)
        user = h.user or (job.user if job else "")
        queue = h.queue or (job.queue if job else "")
        return "allocated", " ".join(x for x in (h.job or "?", user, queue) if x)
    if h.state == "foreign":
        users = sorted({o.user for pid in dev.pids if (o := state.snapshot.processes.get((dev.node, pid))) and o.user})
        return "foreign", "foreign" + (f" ({', '.join(users)})" if users else f" ({len(dev.pids)} proc)")
    if h.state == "held":
        return "held", f"held after {h.job}" if h.job else "held"
    return h.state, h.state


def _flags(dev: DeviceSample) -> str:
    gpu = dev.parent or dev.info
    flags = []
    reasons = gpu.clock_event_reasons
    if isinstance(reasons, tuple):
        if held_at_power_cap_only(reasons):
            flags.append("power-cap")  # the driver's power management, not a fault (detect_throttling: info)
        else:
            kinds = sorted({k for r in reasons if (k := throttle_kind(r))})
            flags += [f"{k}-throttle" for k in kinds]
    cur, pend = gpu.mig_mode_current, gpu.mig_mode_pending
    if isinstance(cur, bool) and isinstance(pend, bool) and cur != pend:
        flags.append("mig-pending")
    if any(getattr(getattr(gpu, f), "reason", None) == "gpu_lost" for f in ("memory_used_bytes", "temperature_c")):
        flags.append("lost")
    ecc = gpu.ecc_volatile_uncorrected
    if is_known(ecc) and ecc > 0:
        flags.append(f"ecc:{ecc}")
    return ",".join(flags) or "-"


def device_rows(state: ClusterState, filters: Filters = Filters(), ascii_only: bool = False) -> list[DeviceRow]:
    """Rows for nodes → GPUs → MIG devices (MIG devices indented under their GPU's index)."""
    out = []
    shards_per_gpu = {n.name: n.shards_per_gpu for n in state.snapshot.nodes}
    drained = {n.name: n.drain for n in state.snapshot.nodes if n.drain is not None}
    for dev in state.devices:
        if not filters.match_device(dev):
            continue
        gpu = dev.parent or dev.info
        model = gpu.name if isinstance(gpu.name, str) else na(gpu.name)
        model = model.replace("NVIDIA ", "")
        if dev.is_mig:
            label = f"{gpu.index}.{dev.info.index} {dev.info.profile}"
            util = "n/a (mig)"
            temp, power = "", ""
        else:
            label = f"{gpu.index}"
            util = pct(gpu.utilization_gpu_pct)
            temp = f"{gpu.temperature_c:.0f}C" if is_known(gpu.temperature_c) else na(gpu.temperature_c)
            power = (
                f"{gpu.power_w:.0f}/{gpu.power_limit_w:.0f}W"
                if is_known(gpu.power_w) and is_known(gpu.power_limit_w)
                else (f"{gpu.power_w:.0f}W" if is_known(gpu.power_w) else na(gpu.power_w))
            )
        kind, holder = _holder_text(dev, state)
        if kind == "free" and dev.node in drained:  # free, but no new job goes there (labgang drain)
            holder = f"drained: {drained[dev.node]}"
        if not dev.is_mig:  # a shared card: its sharers and their memory (tui/sharers.py)
            holder = sharers_text(gpu, shards_per_gpu.get(dev.node)) or holder
        out.append(
            DeviceRow(
                dev.uuid,
                kind,
                _safe(
                    dev.node,
                    label,
                    model,
                    mem_bar(dev.info.memory_used_bytes, dev.info.memory_total_bytes, ascii_only=ascii_only),
                    util,
                    pct(dev.info.sm_active_pct),
                    temp,
                    power,
                    _flags(dev),
                    holder,
                ),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class JobRow:
    key: str
    state: str
    cells: tuple[str, ...]


def _fold_key(j: JobView) -> tuple[Any, ...]:
    """What pending tasks of one array share to fold into one row: the array and all the row shows
    but the id (a task moved, renamed, reprioritised or waiting for another reason keeps its own
    row, by the rule of ``labgang queue``: :func:`labgang.launcher.jobtable.fold_pending_tasks`)."""
    return (j.array_id, j.name, j.user, j.queue, j.priority, j.shape_with_resource, j.reason_code, j.reason_message)


def job_rows(
    state: ClusterState, filters: Filters = Filters(), sort: str = "state", show_finished: bool = False
) -> list[JobRow]:
    """Rows for the jobs view: running and pending (and finished when asked), filtered and sorted.

    The pending tasks of one job array share one row, ``45_[1-30%4]``, as ``labgang queue`` shows
    them (its key is the first task's id)."""
    now = state.snapshot.now
    jobs = [j for j in state.snapshot.jobs if (show_finished or not j.finished) and filters.match_job(j)]
    out = []
    budgets = budgeted_jobs(state.snapshot)  # a running share's memory against its --gpu-mem (tui/sharers.py)
    shown = sort_jobs(jobs, sort, now)
    folded = fold_pending_tasks(
        (i, _fold_key(j), j.array_id, j.array_index, j.array_limit)
        for i, j in enumerate(shown)
        if j.state == "pending" and j.array_id is not None and j.array_index is not None
    )
    for i, j in enumerate(shown):
        job_id = j.id
        if i in folded:
            shown_id = folded[i]
            if shown_id is None:
                continue  # folded into the row of its array's first pending task
            job_id = shown_id
        age = now - j.submit_time if j.submit_time is not None else None
        reason = ""
        if j.state == "pending" and j.reason_code:
            reason = f"{j.reason_code}: {j.reason_message}" if j.reason_message else j.reason_code
        elif j.finished and j.exit_status is not None:
            reason = f"exit {j.exit_status}"
        elif j.state == "running" and j.id in budgets:
            reason = f"gpu-mem {budgets[j.id]}"
        out.append(
            JobRow(
                j.id,
                j.state,
                _safe(
                    job_id,
                    j.name or "-",
                    j.user,
                    j.queue,
                    j.state,
                    str(j.priority),
                    j.shape_with_resource,
                    ",".join(j.nodes) or "-",
                    format_duration(age),
                    str(j.restart_count),
                    reason,
                ),
            )
        )
    return out


def _res(m: Any) -> str:
    """As ``labgang queues`` writes amounts (``cpu=4,gpu=4,memory=8G``), ``0`` for none."""
    return format_resources(m) if m else "0"


@dataclass(frozen=True, slots=True)
class QueueRow:
    key: str
    borrowing: bool
    cells: tuple[str, ...]


def _share(share: float | None, weight: float) -> str:
    """A queue's fair share and weight (``"250.00/w2"``, ``"inf/w0"``); "-" when not reported."""
    if share is None:
        return "-"
    return f"{'inf' if math.isinf(share) else format(share, '.2f')}/w{weight:g}"


def queue_rows(state: ClusterState, filters: Filters = Filters()) -> list[QueueRow]:
    """Rows for the queues view with quota accounting and reclaim time."""
    from labgang.launcher.pitfalls import reclaim_time_s

    out = []
    for q in sorted(state.snapshot.queues, key=lambda q: q.name):
        if filters.queue and q.name != filters.queue:
            continue
        borrowed = sum(q.borrowed.values())
        rt = reclaim_time_s(q, state.snapshot.jobs) if borrowed else None
        out.append(
            QueueRow(
                q.name,
                borrowed > 0,
                (
                    q.name,
                    q.cohort or "-",
                    _res(q.nominal),
                    _res(q.used),
                    _res(q.borrowed),
                    _res(q.lent),
                    _share(q.fair_share, q.fair_weight),
                    _res(q.borrowing_limit) if q.borrowing_limit else "none",
                    str(q.pending),
                    str(q.running),
                    "-" if not borrowed else ("?" if rt is None else format_duration(rt)),
                ),
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class FindingRow:
    key: str
    severity: str
    cells: tuple[str, ...]


def finding_rows(state: ClusterState, filters: Filters = Filters()) -> list[FindingRow]:
    """Rows for the pitfall panel, most severe first."""
    out = []
    for key, f in finding_keys(state):
        if filters.match_finding(f, state):
            out.append(
                FindingRow(
                    key,
                    f.severity.value,
                    _safe((f.severity.value, f.kind.value, f.subject, f.summary, f.advice)),
                )
            )
    return out


def finding_keys(state: ClusterState) -> list[tuple[str, Finding]]:
    """A stable row key per finding (kind, subject, device, job), so a table row survives refreshes."""
    seen: dict[str, int] = {}
    out = []
    for f in state.findings:
        key = f"{f.kind.value}|{f.subject}|{f.uuid or ''}|{f.job or ''}"
        n = seen.get(key, 0)
        seen[key] = n + 1
        out.append((key if n == 0 else f"{key}|{n}", f))
    return out


def summary_line(state: ClusterState, filters: Filters = Filters(), sort: str = "state") -> str:
    """One line: where the data is from, device and job counts, allocation rate, filters, errors."""
    devs = state.devices
    counts: dict[str, int] = {}
    for d in devs:
        k = d.holder.state if d.holder else "free"
        counts[k] = counts.get(k, 0) + 1
    jobs = state.snapshot.jobs
    running = sum(1 for j in jobs if j.state in ("running", "admitted", "terminating"))
    pending = sum(1 for j in jobs if j.state == "pending")
    rate = "-" if state.allocation_rate_pct is None else f"{state.allocation_rate_pct:.0f}%"
    parts = [
        f"{state.mode}: {state.source}" if state.source else state.mode,
        f"{len(state.snapshot.nodes)} node(s)",
        f"{len(devs)} devices: " + ", ".join(f"{counts[k]} {k}" for k in sorted(counts)),
        f"jobs {running} running / {pending} pending",
        f"alloc busy {rate}",
        f"pitfalls {len(state.findings)}",
    ]
    if filters.active:
        parts.append(f"filter {filters.describe()}")
    if sort != "state":
        parts.append(f"sort {sort}")
    if state.error:
        parts.append(f"ERROR {state.error}")
    return " | ".join(parts)


def job_detail_lines(job: JobView, now: float) -> list[str]:
    """The header of the job detail view: fields, then history."""
    lines = [
        f"job {job.id} {job.name}  user {job.user}  queue {job.queue}  priority {job.priority}",
        f"state {job.state}  {job.shape_with_resource}  nodes {','.join(job.nodes) or '-'}"
        f"  restarts {job.restart_count}" + (f"  exit {job.exit_status}" if job.exit_status is not None else ""),
        "submitted "
        + (format_duration(now - job.submit_time) + " ago" if job.submit_time else "-")
        + ("  started " + format_duration(now - job.start_time) + " ago" if job.start_time else ""),
    ]
    if job.reason_code:
        lines.append(f"reason {job.reason_code}: {job.reason_message}")
    for h in job.history[-5:]:
        when = h.get("time")
        lines.append(
            f"  {format_duration(now - when) + ' ago' if when else '-':>10}  {h.get('event', '')}"
            f"  {h.get('message', '')}"
        )
    return [printable(line) for line in lines]
