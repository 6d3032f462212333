"""What a pitfall detector reports: :class:`Finding`, its :class:`PitfallKind` and :class:`Severity`,
and the device states of the coordinator's device view."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Device states in the coordinator's ``GET /v1/nodes`` device view.
FREE, ALLOCATED, FOREIGN, LOST, HELD = "free", "allocated", "foreign", "lost", "held"
DEVICE_STATES = (FREE, ALLOCATED, FOREIGN, LOST, HELD)
_FINISHED_JOB_STATES = ("succeeded", "failed", "cancelled", "timeout", "node_fail")
_HOLDING_JOB_STATES = ("admitted", "running", "terminating")


class Severity(str, enum.Enum):
    """How urgent a finding is; sorts CRITICAL first."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"critical": 0, "warning": 1, "info": 2}[self.value]


class PitfallKind(str, enum.Enum):
    """Every kind of finding the detectors produce."""

    KERNEL_BUSY_SM_IDLE = "kernel-busy-sm-idle"
    ALLOCATED_IDLE = "allocated-idle"
    LOW_ALLOCATION_RATE = "low-allocation-rate"
    ALLOCATED_NO_PROCESS = "allocated-no-process"
    FOREIGN_PROCESS = "foreign-process"
    SHARED_MEMORY_PRESSURE = "shared-memory-pressure"
    BORROWED_AT_RISK = "borrowed-at-risk"
    FRAGMENTED_GANG = "fragmented-gang"
    MIG_PENDING_RESET = "mig-pending-reset"
    THROTTLING = "throttling"
    MEMORY_HELD_AFTER_JOB = "memory-held-after-job"
    DEVICE_VIOLATION = "device-violation"
    SHARED_CARD_MEMORY = "shared-card-memory"
    SHARERS_CONTEND = "sharers-contend"


@dataclass(frozen=True, slots=True)
class Finding:
    """One pitfall, with the numbers that triggered it and one line on what to do.

    Attributes:
        kind: which detector fired.
        severity: how urgent.
        subject: what it is about, e.g. ``"node1 GPU 3"``, ``"job j-12"``, ``"queue vision"``.
        summary: one line with the numbers, e.g. ``"utilization.gpu 97% but SM activity 8%"``.
        advice: one line on what to do.
        numbers: the raw figures by name (units in the name: ``_pct``, ``_s``, ``_bytes``).
        node: the node the finding is about, or None for cluster-wide findings.
        uuid: the device UUID, or None.
        job: the job id, or None.
    """

    kind: PitfallKind
    severity: Severity
    subject: str
    summary: str
    advice: str
    numbers: Mapping[str, float] = field(default_factory=dict)
    node: str | None = None
    uuid: str | None = None
    job: str | None = None

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        """The inverse of :meth:`to_dict` (as ``GET /v1/pitfalls`` returns findings).

        Raises:
            ValueError: an unknown kind or severity.
            KeyError: a field is missing.
        """
        return cls(
            PitfallKind(d["kind"]),
            Severity(d["severity"]),
            str(d["subject"]),
            str(d["summary"]),
            str(d["advice"]),
            {str(k): float(v) for k, v in (d.get("numbers") or {}).items()},
            d.get("node"),
            d.get("uuid"),
            d.get("job"),
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (enums as their string values)."""
        return {
            "kind": self.kind.value,
            "severity": self.severity.value,
            "subject": self.subject,
            "summary": self.summary,
            "advice": self.advice,
            "numbers": dict(self.numbers),
            "node": self.node,
            "uuid": self.uuid,
            "job": self.job,
        }
