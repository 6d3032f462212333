"""Pitfall detectors: plain functions over cluster snapshots that say what is quietly wasting GPUs.

The TUI shows these findings and the coordinator exports them; both build a
:class:`ClusterSnapshot` (node inventories, plus the coordinator's device, job and
queue views when there is a coordinator) and call :func:`detect_all`.

Each detector is a pure function ``detect_x(snapshot, thresholds) -> list[Finding]``:
no I/O, no clock reads (``snapshot.now`` is the time), no dependence on dict order.
The only stateful piece is :class:`PitfallTracker`, which keeps a short history of
per-device activity samples (``now`` is always passed in) for the two findings that
need time: *allocated but idle* and the cluster's *allocation rate*.

A value NVML could not give (an ``Unavailable`` from ``labgang.agent.inventory``)
is never treated as 0: a detector that needs it stays silent.

Units: seconds, bytes, percent (0..100), watts, degrees Celsius.

One job per module: :mod:`.findings` (what a finding is), :mod:`.thresholds` (``[pitfalls]``),
:mod:`.views` (typed API views and the device walk), :mod:`.reclaim` (the reclaim rules as a
client reads them), :mod:`.detectors` (the snapshot detectors), :mod:`.tracker` (history and
:func:`detect_all`) and :mod:`.series` (recent samples per device, for graphs). Import names from
this package; the modules are an implementation detail.
"""

from __future__ import annotations

from labgang.launcher.pitfalls.detectors import (
    SNAPSHOT_DETECTORS,
    detect_allocated_no_process,
    detect_borrowed_at_risk,
    detect_device_violations,
    detect_foreign_processes,
    detect_fragmented_gangs,
    detect_kernel_busy_sm_idle,
    detect_memory_held_after_job,
    detect_mig_pending_reset,
    detect_shared_memory_pressure,
    detect_throttling,
)
from labgang.launcher.pitfalls.findings import (
    ALLOCATED,
    DEVICE_STATES,
    FOREIGN,
    FREE,
    HELD,
    LOST,
    Finding,
    PitfallKind,
    Severity,
)
from labgang.launcher.pitfalls.reclaim import can_take_back, reclaim_time_s
from labgang.launcher.pitfalls.series import DeviceSeries, SeriesView
from labgang.launcher.pitfalls.thresholds import PitfallThresholds
from labgang.launcher.pitfalls.tracker import BUSY, IDLE, UNKNOWN, PitfallTracker, detect_all
from labgang.launcher.pitfalls.views import (
    ClusterSnapshot,
    DeviceSample,
    DeviceView,
    JobView,
    NodeView,
    ProcessOwner,
    QueueView,
    RankView,
    iter_devices,
)

__all__ = [
    "ALLOCATED",
    "BUSY",
    "DEVICE_STATES",
    "FOREIGN",
    "FREE",
    "HELD",
    "IDLE",
    "LOST",
    "SNAPSHOT_DETECTORS",
    "UNKNOWN",
    "ClusterSnapshot",
    "DeviceSample",
    "DeviceSeries",
    "DeviceView",
    "Finding",
    "JobView",
    "NodeView",
    "PitfallKind",
    "PitfallThresholds",
    "PitfallTracker",
    "ProcessOwner",
    "QueueView",
    "RankView",
    "SeriesView",
    "Severity",
    "can_take_back",
    "detect_all",
    "detect_allocated_no_process",
    "detect_borrowed_at_risk",
    "detect_device_violations",
    "detect_foreign_processes",
    "detect_fragmented_gangs",
    "detect_kernel_busy_sm_idle",
    "detect_memory_held_after_job",
    "detect_mig_pending_reset",
    "detect_shared_memory_pressure",
    "detect_throttling",
    "iter_devices",
    "reclaim_time_s",
]
