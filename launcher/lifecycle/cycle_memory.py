"""What the scheduler remembers from one cycle to the next, for fair sharing: one definition the
coordinator (``coordinator/sharing.py`` adds persistence) and ``labgang simulate`` both keep.

- **Holds** last one cycle: the jobs that held their queue's idle quota in the last cycle are
  passed as ``held_last_cycle`` in the next snapshot (they do not hold again in it).
- **Tenants' usage histories** (admission fair sharing): each tenant's decayed usage and the time
  of its last update, sampled at every ``sampling_interval`` instant (:meth:`CycleMemory.sample`)
  and updated by the scheduler's entry penalties (:meth:`CycleMemory.after_cycle`).
- **What a sample counts** comes from the accounting records (``lifecycle/attempts.py``): the
  devices of every attempt holding devices now (:func:`held_by_attempts`), the same records whose
  device-seconds ``labgang report`` adds up, so fair sharing and the report cannot count
  different work.

The rules themselves are in :mod:`labgang.launcher.scheduler.tenants`. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from labgang.launcher.lifecycle.records import JobRecord, JobSpec
from labgang.launcher.model import AdmissionFairSharing
from labgang.launcher.scheduler import tenants as afs
from labgang.launcher.scheduler.decisions import CycleResult
from labgang.launcher.scheduler.snapshot import TenantUsage

TenantOf = Callable[[JobSpec], "str | None"]
"""A job's tenant for admission fair sharing (None: its queue's default tenant)."""


def held_by_attempts(jobs: Iterable[JobRecord], tenant_of: TenantOf) -> dict[afs.TenantKey, int]:
    """Devices held per tenant ``(queue, tenant)``: the devices of each job's open attempt record,
    for jobs holding devices (one whose record is missing, from a store older than the records,
    counts its ranks' devices); jobs in other states are skipped."""
    held: dict[afs.TenantKey, int] = {}
    for job in jobs:
        if not job.status.state.holds_devices:
            continue
        rec = job.attempt_record
        if rec is not None and rec.end_time is None and rec.attempt == job.status.attempt:
            n = len(rec.devices)  # whole devices, shares included (rec.gpus would be a share's part)
        else:
            n = sum(len(r.devices) for r in job.ranks.values())
        key = afs.key_of(job.spec.queue, tenant_of(job.spec))
        held[key] = held.get(key, 0) + n
    return held


class CycleMemory:
    """Holds of the last cycle and the tenants' usage histories.

    Args:
        policy: admission fair sharing (None: off; :meth:`sample` then does nothing).
        usage: each tenant's history to start from, by ``(queue, tenant)``.
        last_sample: the last sampling instant taken, seconds (the next ones follow it every
            ``policy.sampling_interval``).
    """

    def __init__(
        self, policy: AdmissionFairSharing | None, usage: Mapping[afs.TenantKey, TenantUsage], last_sample: float
    ) -> None:
        self.policy = policy
        self.usage: dict[afs.TenantKey, TenantUsage] = dict(usage)
        self.last_sample = last_sample
        self.held: set[str] = set()

    def due(self, now: float) -> bool:
        """True when admission fair sharing has a sampling instant in (last sample, ``now``]."""
        return self.policy is not None and bool(afs.due_samples(self.last_sample, now, self.policy.sampling_interval))

    def sample(self, now: float, held: Mapping[afs.TenantKey, int]) -> bool:
        """Apply every sampling instant up to ``now`` (``held``: devices per tenant,
        :func:`held_by_attempts`); True when one was taken (then every history changed)."""
        if self.policy is None:
            return False
        due = afs.due_samples(self.last_sample, now, self.policy.sampling_interval)
        if not due:
            return False
        for key in held:
            self.usage.setdefault(key, TenantUsage(key[0], key[1], 1.0, 0.0, self.last_sample))
        for at in due:
            self.usage = afs.sample(self.usage, at, held, self.policy.half_life)
        self.last_sample = due[-1]
        return True

    def tenants(self) -> tuple[TenantUsage, ...]:
        """Every tenant's history, for the next snapshot (in key order)."""
        return tuple(self.usage[k] for k in sorted(self.usage))

    def after_cycle(self, result: CycleResult) -> list[TenantUsage]:
        """Remember the cycle's holds and the histories its admissions changed; returns those
        changed histories (empty when admission fair sharing is off)."""
        self.held = set(result.held)
        if self.policy is None:
            return []
        changed = [t for t in result.tenants if self.usage.get((t.queue, t.name)) != t]
        for t in changed:
            self.usage[(t.queue, t.name)] = t
        return changed
