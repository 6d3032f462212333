"""The scheduler's memory between cycles (:class:`~labgang.launcher.lifecycle.cycle_memory.CycleMemory`:
holds of the last cycle, the tenants' usage histories), kept by the coordinator and persisted.

The histories are written to the store (table ``tenant_usage``, meta ``afs_last_sample``), so a
restarted coordinator forgets nothing. Sampling and what a sample counts are the cycle memory's,
the one definition ``labgang simulate`` keeps too; this module loads, persists and names tenants
(a user's tenant follows their Unix groups).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from labgang.launcher.accounts import user_groups
from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.coordinator.store import JobSpec, Store
from labgang.launcher.lifecycle.cycle_memory import CycleMemory, held_by_attempts
from labgang.launcher.lifecycle.records import JobRecord
from labgang.launcher.scheduler import tenants as afs
from labgang.launcher.scheduler.snapshot import TenantUsage

LAST_SAMPLE_KEY = "afs_last_sample"


class SharingState:
    """The cycle memory of one coordinator, loaded from and written to its store.

    Args:
        config: the cluster configuration (tenants, weights, admission fair sharing).
        store: the database the histories are loaded from and written to.
        now: the current time, seconds (the first sampling instant counts from here on a
            fresh database).

    Attributes:
        memory: the :class:`CycleMemory` the cycle driver reads and updates.
    """

    def __init__(self, config: ClusterConfig, store: Store, now: float) -> None:
        self.config = config
        self.store = store
        self._groups: dict[int, tuple[str, ...]] = {}
        policy = config.sharing_policy().admission
        usage: dict[afs.TenantKey, TenantUsage] = {}
        last_sample = now
        if policy is not None:
            weights = {(t.queue, t.name): t.fair_weight for t in config.tenants}
            for t in afs.initial(t.to_spec() for t in config.tenants):
                usage[(t.queue, t.name)] = TenantUsage(t.queue, t.name, t.weight, t.history, now)
            for queue, name, history, last in store.load_tenant_usage():
                if queue in {q.name for q in config.queues}:
                    usage[(queue, name)] = TenantUsage(queue, name, weights.get((queue, name), 1.0), history, last)
            saved = store.meta(LAST_SAMPLE_KEY)
            last_sample = float(saved) if saved is not None else now
        self.memory = CycleMemory(policy, usage, last_sample)

    @property
    def held(self) -> set[str]:
        """Ids of the jobs that held their queue's idle quota in the last cycle."""
        return self.memory.held

    @property
    def last_sample(self) -> float:
        """The last sampling instant taken, seconds."""
        return self.memory.last_sample

    def tenant(self, spec: JobSpec) -> str | None:
        """The tenant of a job (None: its queue's default tenant)."""
        if not self.config.tenants:
            return None
        groups = self._groups.get(spec.uid)
        if groups is None:
            groups = self._groups[spec.uid] = user_groups(spec.uid)
        return self.config.tenant_of(spec.queue, spec.user, groups)

    def held_by_attempts(self, jobs: Iterable[JobRecord]) -> dict[afs.TenantKey, int]:
        """Devices held per tenant (:func:`~labgang.launcher.lifecycle.cycle_memory.held_by_attempts`)."""
        return held_by_attempts(jobs, self.tenant)

    def sample(self, now: float, held: Mapping[afs.TenantKey, int]) -> None:
        """Apply every sampling instant up to ``now`` (``held``: devices per tenant,
        :meth:`held_by_attempts`) and persist the histories (the cycle driver's ``sample`` does
        this with the jobs in memory)."""
        if self.memory.sample(now, held):
            self.remember([], True)

    def snapshot_tenants(self) -> tuple[TenantUsage, ...]:
        """Every tenant's history, for the next snapshot."""
        return self.memory.tenants()

    def remember(self, changed: Iterable[TenantUsage], sampled: bool) -> None:
        """Persist what the cycle driver changed in :attr:`memory`: every history and the last
        sampling instant when ``sampled``, else the ``changed`` histories."""
        if sampled:
            self._persist(self.memory.usage.values())
            self.store.save_meta(LAST_SAMPLE_KEY, repr(self.memory.last_sample))
        else:
            self._persist(changed)

    def _persist(self, rows: Iterable[TenantUsage]) -> None:
        for t in rows:
            self.store.save_tenant_usage(t.queue, t.name, t.history, t.last)
