"""The pure scheduler: :func:`run_cycle` turns a :class:`Snapshot` into a :class:`CycleResult`.

No I/O, no clock reads, no randomness. See :mod:`.cycle` for the phases.
"""

from typing import TYPE_CHECKING, Any

from labgang.launcher.scheduler.decisions import Admit, CycleResult, Pending, PendingReason, Preempt, ReasonCode
from labgang.launcher.scheduler.snapshot import Device, Node, PendingJob, Placement, RankPlacement, RunningJob, Snapshot
from labgang.launcher.scheduler.unschedulable import check_schedulable

if TYPE_CHECKING:
    from labgang.launcher.scheduler.cycle import run_cycle


def __getattr__(name: str) -> Any:
    """:func:`run_cycle` on first use (PEP 562): whoever runs a cycle imports the cycle and all
    under it; whoever only needs the scheduler's types (the lifecycle model, a submission's check)
    does not pay for that import (bench/README.md, "Issue 23, fifth pass").

    Raises:
        AttributeError: any other name this package does not have.
    """
    if name == "run_cycle":
        from labgang.launcher.scheduler.cycle import run_cycle

        return run_cycle
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
