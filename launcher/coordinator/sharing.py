"""What the scheduler needs to remember between cycles for fair sharing, kept by the coordinator.

- **Holds** last one cycle: the jobs that held their queue's idle quota in the last cycle are
  passed as ``held_last_cycle`` in the next snapshot (they do not hold again in it).
- **Tenants' usage histories** (admission fair sharing): each tenant's decayed usage and the
  time of its last update, sampled every ``sampling_interval`` and updated by the scheduler's
  entry penalties. They are written to the store (table ``tenant_usage``, meta
  ``afs_last_sample``), so a restarted coordinator forgets nothing.
- **What a sample counts** comes from the accounting records (``lifecycle/attempts.py``): the
  devices of every attempt holding devices now (:meth:`SharingState.held_by_attempts`), the same
  records whose device-seconds ``labgang report`` and ``labgang_gpu_seconds_total`` add up, so
  fair sharing and the report cannot count different work.

The rules themselves are in :mod:`labgang.launcher.scheduler.tenants`; this module only
keeps and persists their state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from labgang.launcher.accounts import user_groups
from labgang.launcher.config import ClusterConfig
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.scheduler import tenants as afs
from labgang.launcher.scheduler.decisions import CycleResult
from labgang.launcher.scheduler.snapshot import TenantUsage
from labgang.launcher.store import JobSpec, Store

LAST_SAMPLE_KEY = "afs_last_sample"


class SharingState:
    """Holds of the last cycle and the tenants' usage histories of one coordinator.

    Args:
        config: the cluster configuration (tenants, weights, admission fair sharing).
        store: the database the histories are loaded from and written to.
        now: the current time, seconds (the first sampling instant counts from here on a
            fresh database).
    """

    def __init__(self, config: ClusterConfig, store: Store, now: float) -> None:
        self.config = config
        self.store = store
        self.held: set[str] = set()
        self.usage: dict[afs.TenantKey, TenantUsage] = {}
        self._groups: dict[int, tuple[str, ...]] = {}
        policy = config.sharing_policy().admission
        self.policy = policy
        if policy is None:
            self.last_sample = now
            return
        weights = {(t.queue, t.name): t.fair_weight for t in config.tenants}
        for t in afs.initial(t.to_spec() for t in config.tenants):
            self.usage[(t.queue, t.name)] = TenantUsage(t.queue, t.name, t.weight, t.history, now)
        for queue, name, history, last in store.load_tenant_usage():
            if queue in {q.name for q in config.queues}:
                self.usage[(queue, name)] = TenantUsage(queue, name, weights.get((queue, name), 1.0), history, last)
        saved = store.meta(LAST_SAMPLE_KEY)
        self.last_sample = float(saved) if saved is not None else now

    def tenant(self, spec: JobSpec) -> str | None:
        """The tenant of a job (None: its queue's default tenant)."""
        if not self.config.tenants:
            return None
        groups = self._groups.get(spec.uid)
        if groups is None:
            groups = self._groups[spec.uid] = user_groups(spec.uid)
        return self.config.tenant_of(spec.queue, spec.user, groups)

    def due(self, now: float) -> bool:
        """True when admission fair sharing has a sampling instant in (last sample, ``now``]."""
        return self.policy is not None and bool(afs.due_samples(self.last_sample, now, self.policy.sampling_interval))

    def held_by_attempts(self, jobs: Iterable[JobRecord]) -> dict[afs.TenantKey, int]:
        """Devices held per tenant: the devices of each job's open attempt record (jobs holding
        devices; one whose record is missing, from a store older than the records, counts its
        ranks' devices)."""
        held: dict[afs.TenantKey, int] = {}
        for job in jobs:
            if not job.status.state.holds_devices:
                continue
            rec = job.attempt_record
            if rec is not None and rec.end_time is None and rec.attempt == job.status.attempt:
                n = rec.gpus
            else:
                n = sum(len(r.devices) for r in job.ranks.values())
            key = afs.key_of(job.spec.queue, self.tenant(job.spec))
            held[key] = held.get(key, 0) + n
        return held

    def sample(self, now: float, held: Mapping[afs.TenantKey, int]) -> None:
        """Apply every sampling instant up to ``now`` (``held``: devices per tenant,
        :meth:`held_by_attempts`)."""
        if self.policy is None:
            return
        due = afs.due_samples(self.last_sample, now, self.policy.sampling_interval)
        if not due:
            return
        for key in held:
            self.usage.setdefault(key, TenantUsage(key[0], key[1], 1.0, 0.0, self.last_sample))
        for at in due:
            self.usage = afs.sample(self.usage, at, held, self.policy.half_life)
        self.last_sample = due[-1]
        self._persist(self.usage.values())
        self.store.save_meta(LAST_SAMPLE_KEY, repr(self.last_sample))

    def snapshot_tenants(self) -> tuple[TenantUsage, ...]:
        """Every tenant's history, for the next snapshot."""
        return tuple(self.usage[k] for k in sorted(self.usage))

    def after_cycle(self, result: CycleResult) -> None:
        """Remember the cycle's holds and the histories its admissions changed."""
        self.held = set(result.held)
        if self.policy is None:
            return
        changed = [t for t in result.tenants if self.usage.get((t.queue, t.name)) != t]
        for t in result.tenants:
            self.usage[(t.queue, t.name)] = t
        self._persist(changed)

    def _persist(self, rows: Iterable[TenantUsage]) -> None:
        for t in rows:
            self.store.save_tenant_usage(t.queue, t.name, t.history, t.last)
