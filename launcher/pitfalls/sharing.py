"""Pitfalls of shared cards (``--shards``/``--mps``): their memory, and sharers that contend.

Both read each GPU's sharers as its node's agent reports them (``GpuInfo.sharers``,
``agent/sharers.py``: each sharing rank's grant, budget and memory in use) and the processes NVML
shows (their per-process SM share where NVML gives one, else their CPU activity).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from labgang.agent.mem_size import size_text
from labgang.launcher.pitfalls.findings import Finding, PitfallKind, Severity
from labgang.launcher.pitfalls.thresholds import PitfallThresholds
from labgang.launcher.pitfalls.views import ClusterSnapshot, DeviceSample, _num, iter_devices


def _gib(b: float) -> str:
    return size_text(b)


def _shared(snapshot: ClusterSnapshot) -> Iterable[DeviceSample]:
    for dev in iter_devices(snapshot):
        if not dev.is_mig and dev.info.sharers:  # a whole GPU's info is a GpuInfo
            yield dev


def detect_shared_card_memory(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Shared cards whose sharers together use ``shared_card_memory_pct`` or more of the card's memory.

    Time-slicing partitions nothing: the next allocation of any sharer fails with out-of-memory,
    and a service on such a card fails some of its calls (5 % per call over 30 calls leaves about
    21 % of the work whole). The finding names the biggest user, its usage and its budget.
    """
    out = []
    for dev in _shared(snapshot):
        total = _num(dev.info.memory_total_bytes)
        sharers = dev.info.sharers
        used = float(sum(s.used_memory_bytes for s in sharers))
        if not total or 100.0 * used / total < t.shared_card_memory_pct:
            continue
        biggest = max(sharers, key=lambda s: (s.used_memory_bytes, s.job, -s.rank))
        budget = f" (budget {_gib(biggest.gpu_mem_bytes)})" if biggest.gpu_mem_bytes else " (no --gpu-mem budget)"
        out.append(
            Finding(
                PitfallKind.SHARED_CARD_MEMORY,
                Severity.WARNING,
                f"{dev.node} {dev.label}",
                f"{len(sharers)} sharers use {_gib(used)} of {_gib(total)} ({100.0 * used / total:.0f}%); "
                f"the biggest is job {biggest.job} rank {biggest.rank} with {_gib(biggest.used_memory_bytes)}{budget}",
                "the next allocation of any sharer fails with out-of-memory: give the big job --gpu-mem, "
                "a whole GPU, or MPS (whose memory limit the server enforces)",
                {
                    "sharers": float(len(sharers)),
                    "memory_used_bytes": used,
                    "memory_total_bytes": float(total),
                    "memory_used_pct": 100.0 * used / total,
                    "biggest_used_bytes": float(biggest.used_memory_bytes),
                },
                dev.node,
                dev.uuid,
                biggest.job,
            )
        )
    return out


def _busy_jobs(dev: DeviceSample, t: PitfallThresholds) -> dict[tuple[str, int], float]:
    """(job, rank) of each sharer with a busy process → its busiest process's activity (%)."""
    procs: list[Any] = []
    for group in (dev.info.processes, getattr(dev.info, "mps_processes", ())):
        if isinstance(group, tuple):
            procs.extend(group)
    busy: dict[tuple[str, int], float] = {}
    for p in procs:
        if p.job is None or p.rank is None:
            continue
        activity = _num(p.sm_pct)
        if activity is None:
            activity = p.cpu_pct  # no per-process SM share from NVML: what the process does on the host
        if activity is not None and activity >= t.sharer_busy_pct:
            key = (str(p.job), int(p.rank))
            busy[key] = max(busy.get(key, 0.0), float(activity))
    return busy


def detect_sharers_contend(snapshot: ClusterSnapshot, t: PitfallThresholds) -> list[Finding]:
    """Shared cards on which two or more sharers are busy at once: each gets a fraction of the card.

    Time-sliced contexts take turns (MPS ones split the SMs), so a job that was sized on a whole
    card runs slower by about the number of busy sharers; fine for notebooks, a surprise for a
    benchmark or a deadline.
    """
    out = []
    for dev in _shared(snapshot):
        sharers = {(s.job, s.rank) for s in dev.info.sharers}
        busy = {k: v for k, v in _busy_jobs(dev, t).items() if k in sharers}
        if len(busy) < 2:
            continue
        names = ", ".join(f"job {job} rank {rank} ({pct:.0f}%)" for (job, rank), pct in sorted(busy.items()))
        out.append(
            Finding(
                PitfallKind.SHARERS_CONTEND,
                Severity.INFO,
                f"{dev.node} {dev.label}",
                f"{len(busy)} busy sharers take turns on one card: {names}",
                f"each gets about 1/{len(busy)} of the card: give a job that needs speed a whole GPU, or MPS with "
                "--mps to split the SMs instead of time",
                {"busy_sharers": float(len(busy)), "sharers": float(len(sharers))},
                dev.node,
                dev.uuid,
            )
        )
    return out
