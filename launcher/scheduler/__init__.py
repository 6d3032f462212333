"""The pure scheduler: :func:`run_cycle` turns a :class:`Snapshot` into a :class:`CycleResult`.

No I/O, no clock reads, no randomness. See :mod:`.cycle` for the phases.
"""

from labgang.launcher.scheduler.cycle import run_cycle
from labgang.launcher.scheduler.decisions import Admit, CycleResult, Pending, PendingReason, Preempt, ReasonCode
from labgang.launcher.scheduler.snapshot import Device, Node, PendingJob, Placement, RankPlacement, RunningJob, Snapshot
from labgang.launcher.scheduler.unschedulable import check_schedulable

__all__ = [
    "Admit",
    "CycleResult",
    "Device",
    "Node",
    "Pending",
    "PendingJob",
    "PendingReason",
    "Placement",
    "Preempt",
    "RankPlacement",
    "ReasonCode",
    "RunningJob",
    "Snapshot",
    "check_schedulable",
    "run_cycle",
]
