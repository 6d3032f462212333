"""The pure scheduler: :func:`run_cycle` turns a :class:`Snapshot` into a :class:`CycleResult`.

No I/O, no clock reads, no randomness. See :mod:`.cycle` for the phases.
"""

from typing import TYPE_CHECKING, Any

from labgang.launcher.scheduler.decisions import Admit, CycleResult, Pending, PendingReason, Preempt, ReasonCode
from labgang.launcher.scheduler.snapshot import Device, Node, PendingJob, Placement, RankPlacement, RunningJob, Snapshot

if TYPE_CHECKING:
    from labgang.launcher.scheduler.cycle import run_cycle
    from labgang.launcher.scheduler.unschedulable import check_schedulable


def __getattr__(name: str) -> Any:
    """:func:`run_cycle` and :func:`check_schedulable` on first use (PEP 562): whoever runs a cycle
    or checks a request imports the cycle or the check and all under them; whoever only needs the
    scheduler's types (the lifecycle model) does not pay for that import (bench/README.md, "Issue
    23, fifth pass" and "sixth pass").

    Raises:
        AttributeError: any other name this package does not have.
    """
    if name == "run_cycle":
        from labgang.launcher.scheduler.cycle import run_cycle

        return run_cycle
    if name == "check_schedulable":
        from labgang.launcher.scheduler.unschedulable import check_schedulable

        return check_schedulable
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
