"""Admission fair sharing: tenants of one queue ordered by their decayed usage history.

Kueue's admission fair sharing (LocalQueues of a ClusterQueue), Slurm's fair-share among the
users of an account. Every tenant has a history ``H`` (devices, decayed) and the time of its
last update. With ``a(e) = 1 - 0.5 ** (e / half_life)``, an update at time ``t`` sets
``H = H * (1 - a(t - last)) + U * a(t - last)``, where ``U`` is the devices the tenant's jobs
hold now (running and terminating). Updates happen at every ``k * sampling_interval``
(:func:`sample`, driven by the caller) and when one of its jobs starts (:func:`on_admit`, which
also adds the entry penalty ``request * a(sampling_interval)``).

A tenant's score is ``H / fair_weight`` (infinite for weight 0); lower scores go first inside a
queue, and among victims of one queue the higher score goes first. Everything here is pure:
the caller keeps the histories (the simulator in memory, the coordinator in SQLite).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace

from labgang.launcher.model import AdmissionFairSharing, TenantSpec
from labgang.launcher.scheduler.snapshot import RunningJob, TenantUsage

TenantKey = tuple[str, str]
"""``(queue, tenant name)``; the queue's default tenant has name ""."""


def key_of(queue: str, tenant: str | None) -> TenantKey:
    """The key of ``tenant`` in ``queue`` (None = the queue's default tenant)."""
    return (queue, tenant or "")


def decay_factor(elapsed: float, half_life: float) -> float:
    """``a(e) = 1 - 0.5 ** (e / half_life)``: the weight of the present in an update."""
    if elapsed <= 0:
        return 0.0
    return 1.0 - float(0.5 ** (elapsed / half_life))


def update(tenant: TenantUsage, now: float, held: int, half_life: float) -> TenantUsage:
    """``tenant`` decayed to ``now`` while holding ``held`` devices."""
    a = decay_factor(now - tenant.last, half_life)
    return replace(tenant, history=tenant.history * (1.0 - a) + held * a, last=now)


def on_admit(tenant: TenantUsage, now: float, held: int, request: int, policy: AdmissionFairSharing) -> TenantUsage:
    """``tenant`` after one of its jobs (``request`` devices) starts at ``now``; ``held``
    already includes that job. Adds Kueue's entry penalty."""
    out = update(tenant, now, held, policy.half_life)
    penalty = request * decay_factor(policy.sampling_interval, policy.half_life)
    return replace(out, history=out.history + penalty)


def score(tenant: TenantUsage) -> float:
    """``H / fair_weight``; infinite when the weight is 0."""
    if tenant.weight <= 0:
        return math.inf
    return tenant.history / tenant.weight


def initial(specs: Iterable[TenantSpec]) -> tuple[TenantUsage, ...]:
    """Histories at t=0 from the configured tenants (every device of ``usage`` counts 1)."""
    return tuple(TenantUsage(s.queue, s.name, s.fair_weight, float(sum(s.usage.values())), 0.0) for s in specs)


def held_by_tenant(running: Iterable[RunningJob]) -> dict[TenantKey, int]:
    """Devices held per tenant by jobs holding quota (terminating ones included)."""
    out: dict[TenantKey, int] = {}
    for j in running:
        k = key_of(j.queue, j.tenant)
        out[k] = out.get(k, 0) + j.request.total
    return out


def sample(
    tenants: Mapping[TenantKey, TenantUsage], at: float, held: Mapping[TenantKey, int], half_life: float
) -> dict[TenantKey, TenantUsage]:
    """Every tenant updated at the sampling instant ``at`` (``held``: devices per tenant)."""
    return {k: update(t, at, held.get(k, 0), half_life) for k, t in tenants.items()}


def due_samples(last_sample: float, now: float, interval: float) -> list[float]:
    """The sampling instants ``k * interval`` (k >= 1) in ``(last_sample, now]``, in order."""
    out = []
    k = math.floor(last_sample / interval) + 1
    while k * interval <= now:
        out.append(k * interval)
        k += 1
    return out


class TenantBook:
    """One cycle's working copy of the tenants' histories and holdings.

    Args:
        tenants: histories from the snapshot.
        running: jobs holding quota (for ``U``).
        policy: the admission fair sharing settings.
    """

    def __init__(
        self, tenants: Iterable[TenantUsage], running: Iterable[RunningJob], policy: AdmissionFairSharing
    ) -> None:
        self.policy = policy
        self.usage: dict[TenantKey, TenantUsage] = {(t.queue, t.name): t for t in tenants}
        self.held = held_by_tenant(running)
        self.changed = False

    def get(self, key: TenantKey) -> TenantUsage:
        """The tenant's history (a default tenant: history 0, weight 1)."""
        t = self.usage.get(key)
        if t is None:
            t = TenantUsage(key[0], key[1])
        return t

    def score(self, key: TenantKey) -> float:
        """The tenant's score now."""
        return score(self.get(key))

    def admit(self, key: TenantKey, now: float, request: int) -> None:
        """One of ``key``'s jobs starts now: update its history and add the entry penalty."""
        self.held[key] = self.held.get(key, 0) + request
        self.usage[key] = on_admit(self.get(key), now, self.held[key], request, self.policy)
        self.changed = True

    def result(self) -> tuple[TenantUsage, ...]:
        """Every tenant's history, in a stable order."""
        return tuple(self.usage[k] for k in sorted(self.usage))
