"""Jobs of a scenario that can never start: more than their queue's quota or the cluster could
ever give them. The coordinator refuses such a job at submission (the same
:func:`~labgang.launcher.scheduler.unschedulable.never_schedulable`); ``labgang simulate`` keeps
it pending for good and warns about it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from labgang.launcher.scheduler.shares import share_refusal
from labgang.launcher.scheduler.unschedulable import never_schedulable
from labgang.launcher.simulate.scenario import Scenario

# The submission field never_schedulable names -> the scenario key that sets it.
_SCENARIO_KEY = {"gpu_model": "model"}


@dataclass(frozen=True)
class NeverStarts:
    """One job that can never start.

    Attributes:
        index: its position in ``[[jobs]]``. job: its id.
        key: the job's key at fault ("workers", "gpus_per_worker", "mig", "model", "nodes", "queue").
        reason: why, with the numbers (the scheduler's UNSCHEDULABLE message).
    """

    index: int
    job: str
    key: str
    reason: str

    def line(self) -> str:
        """The warning ``labgang simulate`` prints after ``WARNING <file>:``."""
        return (
            f"jobs[{self.index}] ({self.job!r}) can never start ({self.key}): {self.reason}; "
            "the coordinator would refuse it at submission"
        )

    def to_dict(self) -> dict[str, Any]:
        """The warning for ``--json`` and ``--trace``."""
        return {"job": self.job, "index": self.index, "key": self.key, "reason": self.reason}


def never_starting(scenario: Scenario) -> list[NeverStarts]:
    """Every job of ``scenario`` that could not start even on an empty cluster, in file order
    (an elastic gang is judged at its minimum size, as the coordinator judges it)."""
    queues = {q.name: q for q in scenario.queues}
    out = []
    for i, job in enumerate(scenario.file.jobs):
        found = never_schedulable(
            job.request().floor(), queues[job.queue], scenario.queues, scenario.nodes, scenario.cohorts
        )
        if found is not None:
            reason, key = found
            out.append(NeverStarts(i, job.id, _SCENARIO_KEY.get(key, key), reason.message))
            continue
        refused = share_refusal(scenario.gpu_sharing, queues[job.queue], job.shards, job.mps)
        if refused is not None:  # the coordinator's own check (coordinator/requests.py _check_share)
            out.append(NeverStarts(i, job.id, "mps" if job.mps and not job.shards else "shards", refused))
    return out
