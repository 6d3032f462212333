"""A period of history as a scenario file (docs/scenarios.md): ``labgang history --export``.

The file holds the cluster (``[[nodes]]``), the queue policy in force (queues, cohorts, priority
classes, fair sharing, from ``cluster.toml``) and one ``[[jobs]]`` table per finished job: its
submit time (seconds after the period's first submission), queue, integer priority, gang shape
and resource, its dependency and array structure, and as ``duration`` the time its last
attempt really held its devices. A job array is one table with ``array`` (the indices that
finished, and its ``%N`` cap) and ``durations`` (each task's own held time). ``labgang simulate``
and ``labgang plan replay`` read it back; it can be edited and shared.

Ids are the coordinator's with a ``j`` in front (``j12``, an array's tasks ``j12_3``), so that
``--dependency afterok:12`` becomes ``afterok:j12``. A dependency on a job outside the export
is dropped (counted in :attr:`Exported.dropped_dependencies`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import tomli_w
from labgang.launcher.accounts import user_groups
from labgang.launcher.arrays import fold
from labgang.launcher.config.cluster import ClusterConfig
from labgang.launcher.config.queues import CohortModel, QueueModel, TenantModel
from labgang.launcher.host_quota import quota_text
from labgang.launcher.jobgroups import GroupSpec
from labgang.launcher.lifecycle.dependency import parse_dependency
from labgang.launcher.lifecycle.records import JobSpec
from labgang.launcher.model import GPU
from labgang.launcher.plan.past import PastJob

_ID_IN_DEPENDENCY = re.compile(r"(?<=:)([0-9]+(?:_[0-9]+)?)")


@dataclass(frozen=True)
class NodeShape:
    """One node of the exported cluster: ``gpus`` whole GPUs of ``model``; with ``mig`` (a MIG
    profile such as ``1g.10gb``), ``gpus`` GPUs each holding one MIG device of that profile."""

    name: str
    gpus: int
    model: str = ""
    mig: str = ""

    def table(self) -> dict[str, Any]:
        """Its ``[[nodes]]`` table."""
        out: dict[str, Any] = {"name": self.name, "gpus": self.gpus}
        if self.model:
            out["model"] = self.model
        if self.mig:
            out["mig"] = [self.mig]
        return out


@dataclass
class Exported:
    """A scenario document and what the export left out.

    Attributes:
        data: the scenario as TOML-ready tables (``parse_scenario`` reads it).
        t0: unix seconds of the first submission (scenario time 0).
        dropped_dependencies: jobs whose dependency named a job outside the export (replayed without it).
        retired_queues: queues the jobs ran in that the exported policy no longer defines: each is in
            the file under its real name with the whole cluster as its nominal quota and nothing else
            (as the built-in default queue), so that the file replays as it stands.
        real_waits: scenario job name (``j12``, ``j12_3``) -> its real waits in seconds (for fidelity checks).
    """

    data: dict[str, Any]
    t0: float
    dropped_dependencies: list[str] = field(default_factory=list)
    retired_queues: list[str] = field(default_factory=list)
    real_waits: dict[str, list[float]] = field(default_factory=dict)

    def toml(self) -> str:
        """The scenario file's text."""
        return tomli_w.dumps(self.data)


def scenario_id(job_id: str) -> str:
    """``"12"`` -> ``"j12"``, ``"12_3"`` -> ``"j12_3"``: a coordinator id as a scenario id."""
    return f"j{job_id}"


def _sizes(table: dict[str, Any]) -> dict[str, Any]:
    """A queue's or cohort's table with its quotas' ``memory`` bytes as sizes (``"256G"``): a bare
    number there reads back as MiB (launcher/host_quota.py)."""
    for key in ("nominal", "borrowing_limit", "lending_limit"):
        if key in table:
            table[key] = {res: quota_text(res, n) for res, n in table[key].items()}
    return table


def policy_tables(config: ClusterConfig) -> dict[str, Any]:
    """The scenario tables of a ``cluster.toml``'s queue policy: ``queues``, ``cohorts``,
    ``priority_classes``, ``sharing``, ``tenants`` (with admission fair sharing only: a scenario
    takes them only then) and ``[scenario]``'s fair-sharing keys (under ``"scenario"``)."""
    queue_keys = set(QueueModel.model_fields)
    cohort_keys = set(CohortModel.model_fields)
    out: dict[str, Any] = {
        "queues": [
            _sizes(q.model_dump(mode="json", include=queue_keys, exclude_defaults=True)) | {"name": q.name}
            for q in config.queues
        ],
    }
    if config.cohorts:
        out["cohorts"] = [
            _sizes(c.model_dump(mode="json", include=cohort_keys, exclude_defaults=True)) | {"name": c.name}
            for c in config.cohorts
        ]
    if config.priority_classes:
        out["priority_classes"] = dict(config.priority_classes)
    if config.gpu_sharing().enabled:  # shares of a card (docs/sharing.md)
        out["sharing"] = config.sharing.model_dump(mode="json", exclude_defaults=True)
    if config.admission_fair_sharing is not None and config.tenants:  # a scenario takes tenants only then
        tenant_keys = set(TenantModel.model_fields)
        out["tenants"] = [
            t.model_dump(mode="json", include=tenant_keys, exclude_defaults=True) | {"name": t.name, "queue": t.queue}
            for t in config.tenants
        ]
    meta: dict[str, Any] = {}
    if config.fair_sharing:
        meta["fair_sharing"] = True
    if config.fair_preemption is not None:
        meta["fair_preemption"] = list(config.fair_preemption)
    if config.admission_fair_sharing is not None:
        meta["admission_fair_sharing"] = config.admission_fair_sharing.model_dump(mode="json")
    out["scenario"] = meta
    return out


def _job_table(job: PastJob, submit: float, typical_stop: float | None, tenant: str | None) -> dict[str, Any]:
    spec = job.spec
    table: dict[str, Any] = {"id": scenario_id(job.id), "queue": spec.queue}
    # who submitted it: per-user limits, `share_gpus = "user"` and MPS servers (one user's each) read it
    table["user"] = spec.user
    if tenant is not None:
        table["tenant"] = tenant
    if spec.groups:  # a job of groups (docs/job-groups.md): its groups, in the scenario's form
        table["groups"] = [_group_table(g) for g in spec.groups]
        if spec.colocate:
            table["colocate"] = [list(c) for c in spec.colocate]
    else:
        if spec.workers != 1:
            table["workers"] = spec.workers
        if spec.resource != GPU:
            table["mig"] = spec.resource.removeprefix("mig-")
        elif spec.per_worker != 1:
            table["gpus_per_worker"] = spec.per_worker
    if spec.priority:
        table["priority"] = spec.priority
    table["submit"] = round(submit, 3)
    table["duration"] = round(job.held_s, 3)
    if job.time_limit_s is not None and math.isfinite(job.time_limit_s):  # it ended TIMEOUT: so does the replay
        table["time_limit"] = round(job.time_limit_s, 3)
    # A victim keeps its devices until it is gone: its longest stop seen, else the period's median
    # stop (a job that was never stopped stops as the others did), at most its --grace.
    stop = job.stop_s if job.stop_s is not None else typical_stop
    grace = spec.grace_s if stop is None else min(spec.grace_s, stop)
    if grace:
        table["grace"] = round(grace, 3)
    if spec.nodes is not None and not spec.groups:
        table["nodes"] = spec.nodes
    if spec.gpu_model and not spec.groups:
        table["model"] = spec.gpu_model
    if spec.min_workers is not None:
        table["min_workers"] = spec.min_workers
    if spec.shards:
        table["shards"] = spec.shards
    if spec.mps:
        table["mps"] = spec.mps
    if spec.gpu_mem:
        table["gpu_mem"] = f"{-(-spec.gpu_mem // (1 << 20))}M"  # a scenario size, rounded up to MiB
    table["name"] = spec.name
    return table


def _group_table(g: GroupSpec) -> dict[str, Any]:
    """One ``[[jobs.groups]]`` table of a past job of groups (docs/scenarios.md)."""
    table: dict[str, Any] = {"name": g.name, "workers": g.workers}
    if g.resource == GPU:
        table["gpus_per_worker"] = g.per_worker
    else:
        table["mig"] = g.resource.removeprefix("mig-")
    table.update({k: v for k, v in (("nodes", g.nodes), ("model", g.gpu_model), ("topology", g.topology)) if v})
    if g.cpus_per_task:
        table["cpus_per_task"] = g.cpus_per_task
    return table


def _dependency(text: str, known: set[str]) -> str | None:
    """``text`` in scenario ids, or None when it names a job outside the export."""
    names = parse_dependency(text).job_ids
    if any(name not in known for name in names):
        return None
    return _ID_IN_DEPENDENCY.sub(lambda m: scenario_id(m.group(1)), text)


def export_scenario(
    jobs: Iterable[PastJob],
    config: ClusterConfig,
    nodes: Iterable[NodeShape],
    *,
    name: str = "history",
    description: str = "",
    groups_of: Callable[[int], Iterable[str]] = user_groups,
) -> Exported:
    """The scenario of ``jobs`` (in submission order) on ``nodes`` under ``config``'s queue policy.

    With admission fair sharing in ``config``, each job's table names its ``tenant``: the first
    of ``config``'s tenants of its queue that matches its user or one of the groups
    ``groups_of(uid)`` gives (the user's groups on this machine now, as the coordinator looks
    them up); none: the queue's default tenant, and no key.

    Raises:
        ValueError: ``jobs`` is empty (a history with no finished jobs).
    """
    jobs = sorted(jobs, key=lambda j: j.seq)
    if not jobs:
        raise ValueError("no finished jobs in the period: nothing to export or replay")
    t0 = min(j.submit for j in jobs)
    policy = policy_tables(config)
    meta = {"name": name, "source": "labgang history --export", **policy.pop("scenario")}
    if description:
        meta["description"] = description
    known: set[str] = set()
    for job in jobs:
        known.add(job.id)
        if job.spec.array is not None:
            known.add(job.spec.array.array_id)
    # An array's id stands for all its tasks: only when every task of it is in the export.
    tasks_by_array: dict[str, list[PastJob]] = {}
    for job in jobs:
        if job.spec.array is not None:
            tasks_by_array.setdefault(job.spec.array.array_id, []).append(job)
    for array_id, tasks in tasks_by_array.items():
        if len(tasks) != tasks[0].spec.array.count:  # type: ignore[union-attr]
            known.discard(array_id)
    with_tenants = config.admission_fair_sharing is not None and bool(config.tenants)
    groups: dict[int, tuple[str, ...]] = {}

    def tenant_of(spec: JobSpec) -> str | None:
        if not with_tenants:
            return None
        if spec.uid not in groups:
            groups[spec.uid] = tuple(groups_of(spec.uid))
        return config.tenant_of(spec.queue, spec.user, groups[spec.uid])

    stops = sorted(j.stop_s for j in jobs if j.stop_s is not None)
    typical_stop = stops[(len(stops) - 1) // 2] if stops else None
    out = Exported({"scenario": meta}, t0)
    nodes = list(nodes)
    out.data["nodes"] = [n.table() for n in nodes]
    configured = {q.name for q in config.queues}
    out.retired_queues = [q for q in dict.fromkeys(j.spec.queue for j in jobs) if q not in configured]
    if out.retired_queues:  # a config change since: keep the jobs' real queue, defined as the default one is
        capacity: dict[str, int] = {}
        for node in nodes:
            resource = f"mig-{node.mig}" if node.mig else GPU
            capacity[resource] = capacity.get(resource, 0) + node.gpus
        policy["queues"] += [{"name": q, "nominal": dict(sorted(capacity.items()))} for q in out.retired_queues]
    out.data.update(policy)
    tables: list[dict[str, Any]] = []
    done_arrays: set[str] = set()
    for job in jobs:
        out.real_waits[scenario_id(job.id)] = list(job.waits)
        array = job.spec.array
        if array is not None and array.array_id in done_arrays:
            continue
        table = _job_table(job, job.submit - t0, typical_stop, tenant_of(job.spec))
        if array is not None:
            done_arrays.add(array.array_id)
            tasks = sorted(tasks_by_array[array.array_id], key=lambda t: t.spec.array.index)  # type: ignore[union-attr]
            table["id"] = scenario_id(array.array_id)
            table["array"] = fold(t.spec.array.index for t in tasks) + (  # type: ignore[union-attr]
                f"%{array.limit}" if array.limit is not None else ""
            )
            table["submit"] = round(min(t.submit for t in tasks) - t0, 3)
            del table["duration"]
            table["durations"] = [round(t.held_s, 3) for t in tasks]
        if job.spec.dependency:
            dependency = _dependency(job.spec.dependency, known)
            if dependency is None:
                out.dropped_dependencies.append(table["id"])
            else:
                table["dependency"] = dependency
        tables.append(table)
    out.data["jobs"] = tables
    return out
