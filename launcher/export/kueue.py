"""``labgang export kueue``: the queue policy as Kueue objects (``kueue.x-k8s.io/v1beta2``, one YAML stream).

v1beta2 is the version Kueue serves as its storage version (v1beta1 is still served but
deprecated). Objects, each kind sorted by name:

- ``Namespace`` (core v1) for every LocalQueue namespace;
- ``WorkloadPriorityClass`` per ``priority_classes`` entry (``value`` is an int32);
- ``ResourceFlavor`` per GPU model (``nodeLabels`` ``nvidia.com/gpu.product`` as the NVIDIA
  GPU operator's feature discovery sets it: the product name with ``-`` for spaces) and
  per MIG profile (resource ``nvidia.com/mig-<profile>``, mixed strategy);
- ``Cohort`` per cohort;
- ``ClusterQueue`` per queue: one resource group per resource (``nvidia.com/gpu`` with a
  flavor per model; each ``nvidia.com/mig-<profile>`` with its profile's flavor), quota
  per flavor, ``preemption``, ``queueingStrategy``, ``cohortName``, a ``namespaceSelector``
  on its LocalQueues' namespaces;
- ``LocalQueue`` per queue, in a namespace per queue or per group (``namespace_per``).

What Kueue cannot express is listed as comments at the top (see :class:`~.common.Gap`).
The mapping table is in ``docs/export.md``.
"""

from __future__ import annotations

from typing import Any

import yaml
from labgang.launcher.config.cluster import ClusterConfig, CohortConfig, QueueConfig
from labgang.launcher.export import gpu_sharing
from labgang.launcher.export.common import (
    INT32_MAX,
    INT32_MIN,
    Export,
    ExportError,
    Gap,
    Inventory,
    cohort_members,
    cohort_table,
    dns_name,
    header_lines,
    host_quota_gaps,
    resource_names,
    split_quota,
    unique,
    weight_quantity,
)
from labgang.launcher.model import GPU, MIG_PREFIX

API_VERSION = "kueue.x-k8s.io/v1beta2"
FILE_NAME = "kueue.yaml"
NAMESPACE_PER = ("queue", "group")
MAX_RESOURCE_GROUPS = 16
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
GENERIC_GPU_FLAVOR = "nvidia-gpu"

_WITHIN = {
    "never": "Never",
    "lower-priority": "LowerPriority",
    "lower-or-newer-equal-priority": "LowerOrNewerEqualPriority",
}
_RECLAIM = {"never": "Never", "lower-priority": "LowerPriority", "any": "Any"}
_BORROW = {"never": "Never", "lower-priority": "LowerPriority"}
_QUEUEING = {"best-effort-fifo": "BestEffortFIFO", "strict-fifo": "StrictFIFO"}


def k8s_resource(resource: str) -> str:
    """labgang resource -> Kubernetes extended resource (``gpu`` -> ``nvidia.com/gpu``,
    ``mig-1g.10gb`` -> ``nvidia.com/mig-1g.10gb``, as the NVIDIA device plugin names them)."""
    return "nvidia.com/" + resource


def gpu_product(model: str) -> str:
    """An NVML product name as the ``nvidia.com/gpu.product`` node label spells it (spaces -> ``-``)."""
    return model.strip().replace(" ", "-")


def _flavors(cfg: ClusterConfig, inv: Inventory) -> dict[str, dict[str, Any]]:
    """Flavor name -> ResourceFlavor object, for every resource."""
    out: dict[str, dict[str, Any]] = {}
    models = inv.gpu_models()
    for model in models or {}:
        name = dns_name(model, f"inventory GPU model {model!r}")
        out[name] = {"nodeLabels": {GPU_PRODUCT_LABEL: gpu_product(model)}}
    profiles = inv.mig_profiles()
    for resource in resource_names(cfg, inv):
        if resource == GPU and not models:
            out[GENERIC_GPU_FLAVOR] = {}
        elif resource.startswith(MIG_PREFIX):
            labels = {MIG_STRATEGY_LABEL: "mixed"}
            parents = profiles.get(resource.removeprefix(MIG_PREFIX), {})
            if len(parents) == 1:
                labels[GPU_PRODUCT_LABEL] = gpu_product(next(iter(parents)))
            out[_mig_flavor(resource)] = {"nodeLabels": labels}
    return out


def _mig_flavor(resource: str) -> str:
    return dns_name(resource.replace("+", "-"), f"MIG resource {resource!r}")


def _gpu_flavor_weights(inv: Inventory) -> dict[str, int]:
    models = inv.gpu_models()
    if not models:
        return {GENERIC_GPU_FLAVOR: 1}
    return {dns_name(m, m): n for m, n in models.items()}


def _quota_entries(
    table: QueueConfig | CohortConfig, has_parent: bool, resource: str, weights: dict[str, int]
) -> dict[str, dict[str, Any]]:
    """Flavor -> ``{name, nominalQuota[, borrowingLimit][, lendingLimit]}`` for one resource of a
    queue or cohort (limits only with a cohort or parent; a queue lends at most its quota)."""
    nominal = split_quota(table.nominal.get(resource, 0), weights)
    borrowing = split_quota(table.borrowing_limit[resource], weights) if resource in table.borrowing_limit else None
    lending = split_quota(table.lending_limit[resource], weights) if resource in table.lending_limit else None
    out: dict[str, dict[str, Any]] = {}
    for flavor in sorted(weights):
        entry: dict[str, Any] = {"name": k8s_resource(resource), "nominalQuota": nominal[flavor]}
        if has_parent and borrowing is not None:
            entry["borrowingLimit"] = borrowing[flavor]
        if has_parent and lending is not None:
            entry["lendingLimit"] = (
                min(lending[flavor], nominal[flavor]) if isinstance(table, QueueConfig) else lending[flavor]
            )
        out[flavor] = entry
    return out


def _resource_groups(
    cfg: ClusterConfig, table: QueueConfig | CohortConfig, has_parent: bool, inv: Inventory
) -> list[dict[str, Any]]:
    groups = []
    for resource in resource_names(cfg, inv):
        weights = _gpu_flavor_weights(inv) if resource == GPU else {_mig_flavor(resource): 1}
        entries = _quota_entries(table, has_parent, resource, weights)
        groups.append(
            {
                "coveredResources": [k8s_resource(resource)],
                "flavors": [{"name": f, "resources": [entries[f]]} for f in sorted(entries)],
            }
        )
    return groups


def _preemption(q: QueueConfig, index: int) -> dict[str, Any]:
    reclaim = _RECLAIM[q.reclaim_within_cohort.value]
    borrow: dict[str, Any] = {"policy": _BORROW[q.borrow_within_cohort.policy.value]}
    if q.borrow_within_cohort.max_priority_threshold is not None:
        threshold = q.borrow_within_cohort.max_priority_threshold
        if not INT32_MIN <= threshold <= INT32_MAX:
            raise ExportError(
                f"queues[{index}].borrow_within_cohort.max_priority_threshold",
                f"{threshold} is outside Kueue's int32 range; allowed: {INT32_MIN}..{INT32_MAX}",
            )
        borrow["maxPriorityThreshold"] = threshold
    if reclaim == "Never" and borrow["policy"] != "Never":
        raise ExportError(
            f"queues[{index}].borrow_within_cohort.policy",
            f"{q.borrow_within_cohort.policy.value!r} with reclaim_within_cohort 'never' is refused by Kueue "
            "(borrowWithinCohort needs reclaimWithinCohort); allowed: 'never', or set reclaim_within_cohort",
        )
    return {
        "withinClusterQueue": _WITHIN[q.within_queue.value],
        "reclaimWithinCohort": reclaim,
        "borrowWithinCohort": borrow,
    }


def _fair_sharing(cfg: ClusterConfig, weight: float, where: str) -> dict[str, Any] | None:
    """``spec.fairSharing`` when fair sharing is on or the weight is not Kueue's default 1; else None."""
    if not cfg.fair_sharing and weight == 1.0:
        return None
    return {"weight": weight_quantity(weight, where)}


def _cohort_spec(cfg: ClusterConfig, cohort: str, names: dict[str, str], inv: Inventory) -> dict[str, Any]:
    """``spec`` of a Cohort: its parent, the quota it owns (and its limits towards the parent), its weight."""
    table = cohort_table(cfg, cohort)
    if table is None:
        return {}
    index = cfg.cohorts.index(table)
    spec: dict[str, Any] = {}
    if table.parent is not None:
        spec["parentName"] = names[table.parent]
    if table.nominal or table.borrowing_limit or table.lending_limit:
        spec["resourceGroups"] = _resource_groups(cfg, table, table.parent is not None, inv)
    fair = _fair_sharing(cfg, table.fair_weight, f"cohorts[{index}].fair_weight")
    if fair is not None:
        spec["fairSharing"] = fair
    return spec


def _namespaces(q: QueueConfig, index: int, namespace_per: str) -> list[str]:
    if namespace_per == "group" and q.groups:
        return sorted({dns_name(g, f"queues[{index}].groups", label=True) for g in q.groups})
    return [dns_name(q.name, f"queues[{index}].name", label=True)]


def _gaps(cfg: ClusterConfig, inv: Inventory, namespace_per: str, queue_ns: dict[str, list[str]]) -> list[Gap]:
    gaps: list[Gap] = host_quota_gaps(cfg, "add cpu and memory to the ClusterQueue's coveredResources by hand")
    models = inv.gpu_models()
    for i, q in enumerate(cfg.queues):
        ns = ", ".join(queue_ns[q.name])
        if q.users is not None:
            gaps.append(
                Gap(
                    f"queues[{i}].users",
                    "a per-user access list",
                    f"a RoleBinding in namespace {ns} letting only these users create workloads",
                )
            )
        if q.groups is not None and namespace_per == "queue":
            gaps.append(
                Gap(
                    f"queues[{i}].groups",
                    "a per-group access list",
                    f"a RoleBinding (subjects of kind Group) in namespace {ns}; or --namespace-per group",
                )
            )
        elif q.groups is not None:
            gaps.append(
                Gap(
                    f"queues[{i}].groups",
                    "group membership (each group got a namespace)",
                    f"a RoleBinding (subjects of kind Group) in namespace {ns}",
                )
            )
        if q.starvation_after is not None:
            gaps.append(
                Gap(
                    f"queues[{i}].starvation_after",
                    "the starvation reservation (devices held for a job waiting this long)",
                    "queueingStrategy StrictFIFO (the head blocks its ClusterQueue until it fits)",
                )
            )
        if len(models) > 1 and any(r == GPU for r in (*q.nominal, *q.borrowing_limit, *q.lending_limit)):
            split = split_quota(q.nominal.get(GPU, 0), {dns_name(m, m): n for m, n in models.items()})
            parts = ", ".join(f"{f}={n}" for f, n in sorted(split.items()))
            gaps.append(
                Gap(
                    f"queues[{i}].nominal.gpu",
                    "a quota counted over every GPU model",
                    f"quota per flavor (GPU model), split by the cluster's share of each model: {parts}",
                )
            )
    gaps.append(
        Gap(
            "default_grace_s",
            f"the grace period ({cfg.default_grace_s:g} s) between SIGTERM and SIGKILL, and a job's own grace",
            "the Pod's terminationGracePeriodSeconds in each Job template",
        )
    )
    if cfg.admins or cfg.admin_groups:
        gaps.append(
            Gap(
                "admins, admin_groups",
                "who may cancel any job",
                "a ClusterRoleBinding to Kueue's batch admin ClusterRole",
            )
        )
    gaps.append(
        Gap(
            "default_queue",
            f"the queue ({cfg.default_queue!r}) of jobs that name none",
            "a LocalQueue named 'default' in each namespace (Kueue's LocalQueueDefaulting)",
        )
    )
    gaps += _sharing_gaps(cfg)
    gaps += _policy_gaps(cfg)
    gaps += gpu_sharing.kueue_gaps(cfg)
    gaps.append(
        Gap(
            "startup_timeout_s, requeue_backoff_s, requeue_backoff_max_s, max_start_failures",
            "start timeout and retry backoff",
            "Kueue's Configuration: waitForPodsReady.timeout and requeuingStrategy "
            "(backoffBaseSeconds, backoffMaxSeconds, backoffLimitCount)",
        )
    )
    return gaps


def _cluster_queue_spec(
    cfg: ClusterConfig, inv: Inventory, index: int, cohorts: dict[str, str], namespaces: list[str]
) -> dict[str, Any]:
    """``spec`` of queue ``cfg.queues[index]``'s ClusterQueue."""
    q = cfg.queues[index]
    spec: dict[str, Any] = {}
    if q.cohort is not None:
        spec["cohortName"] = cohorts[q.cohort]
    spec["namespaceSelector"] = {
        "matchExpressions": [{"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": namespaces}]
    }
    spec["queueingStrategy"] = _QUEUEING[q.queueing.value]
    spec["preemption"] = _preemption(q, index)
    spec["resourceGroups"] = _resource_groups(cfg, q, q.cohort is not None, inv)
    if cfg.admission_fair_sharing is not None:
        spec["admissionScope"] = {"admissionMode": "UsageBasedAdmissionFairSharing"}
    fair = _fair_sharing(cfg, q.fair_weight, f"queues[{index}].fair_weight")
    if fair is not None:
        spec["fairSharing"] = fair
    return spec


_STRATEGIES = {
    "less-than-or-equal-to-final-share": "LessThanOrEqualToFinalShare",
    "less-than-initial-share": "LessThanInitialShare",
}


def _sharing_gaps(cfg: ClusterConfig) -> list[Gap]:
    """Fair-sharing settings that live in Kueue's Configuration (not in objects), and tenants."""
    gaps: list[Gap] = []
    if cfg.fair_sharing:
        strategies = [_STRATEGIES[s.value] for s in cfg.sharing_policy().fair_preemption]
        gaps.append(
            Gap(
                "fair_sharing, fair_preemption",
                "turning fair sharing on (the weights are exported)",
                f"Kueue's Configuration: fairSharing.enable true, preemptionStrategies {strategies}",
            )
        )
    afs = cfg.admission_fair_sharing
    if afs is not None:
        gaps.append(
            Gap(
                "admission_fair_sharing",
                f"the usage half-life ({afs.half_life:g} s) and sampling interval ({afs.sampling_interval:g} s)",
                "Kueue's Configuration: admissionFairSharing.usageHalfLifeTime, usageSamplingInterval "
                "(each ClusterQueue has admissionScope UsageBasedAdmissionFairSharing)",
            )
        )
    for i, t in enumerate(cfg.tenants):
        gaps.append(
            Gap(
                f"tenants[{i}]",
                f"tenant {t.name!r} of queue {t.queue!r} (weight {t.fair_weight:g})",
                "Kueue's tenants are LocalQueues: a LocalQueue in the tenant's own namespace with fairSharing.weight",
            )
        )
    return gaps


def _policy_gaps(cfg: ClusterConfig) -> list[Gap]:
    """Who may use which priority and per-user limits (launcher/coordinator/policy.py): Kueue has a
    WorkloadPriorityClass per class (exported) but neither a per-queue list of classes, a per-queue
    default class, admin-only raw priorities, nor any per-user quota."""
    gaps: list[Gap] = []
    for i, q in enumerate(cfg.queues):
        if q.priority_classes is not None or q.default_priority_class is not None:
            gaps.append(
                Gap(
                    f"queues[{i}].priority_classes, queues[{i}].default_priority_class",
                    "the classes this queue's jobs may use, and its default class",
                    "a ValidatingAdmissionPolicy on the kueue.x-k8s.io/priority-class label of workloads in the "
                    "queue's namespaces (a default: a MutatingAdmissionPolicy, or the label in the Job templates)",
                )
            )
        limits = [
            k
            for k in ("max_gpus_per_user", "max_running_jobs_per_user", "max_submitted_jobs_per_user")
            if getattr(q, k) is not None
        ]
        if limits:
            gaps.append(
                Gap(
                    ", ".join(f"queues[{i}].{k}" for k in limits),
                    "per-user limits (Kueue has no per-user quota)",
                    "a namespace and LocalQueue per user, each capped by a ResourceQuota on "
                    "requests.nvidia.com/gpu and count/jobs.batch (not admission-aware)",
                )
            )
    if cfg.priority_classes:
        gaps.append(
            Gap(
                "priority_classes (who may use a raw number)",
                "raw priorities for admins only",
                "RBAC: WorkloadPriorityClasses are cluster objects; workloads name one by label, never a number",
            )
        )
    return gaps


def _obj(kind: str, name: str, spec: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace is not None:
        meta["namespace"] = namespace
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


def build_objects(
    cfg: ClusterConfig, inv: Inventory, namespace_per: str = "queue"
) -> tuple[list[dict[str, Any]], list[Gap]]:
    """The Kueue objects for ``cfg`` and what does not translate.

    Args:
        cfg: a validated cluster config.
        inv: the inventory (may be empty).
        namespace_per: ``"queue"`` (a namespace per queue) or ``"group"`` (a namespace per
            group named in ``queues[i].groups``; queues without groups get their own).

    Returns:
        ``(objects, gaps)``: objects as plain dicts in output order, gaps sorted.

    Raises:
        ExportError: a name with no Kubernetes spelling, two names that collide, a priority
            outside int32, more than 16 resources, or a preemption combination Kueue refuses.
        ValueError: ``namespace_per`` is not one of ``NAMESPACE_PER``.
    """
    if namespace_per not in NAMESPACE_PER:
        raise ValueError(f"namespace_per: {namespace_per!r}; allowed: {', '.join(NAMESPACE_PER)}")
    resources = resource_names(cfg, inv)
    if len(resources) > MAX_RESOURCE_GROUPS:
        extra = resources[MAX_RESOURCE_GROUPS]
        where = next((f"queues[{i}].nominal" for i, q in enumerate(cfg.queues) if extra in q.nominal), "inventory")
        raise ExportError(
            where,
            f"{len(resources)} resources need {len(resources)} resource groups; allowed: at most "
            f"{MAX_RESOURCE_GROUPS} per ClusterQueue (one for gpu, one per MIG profile)",
        )
    queues = unique(
        ((f"queues[{i}].name", q.name, dns_name(q.name, f"queues[{i}].name")) for i, q in enumerate(cfg.queues)),
        "ClusterQueue",
    )
    members = cohort_members(cfg)
    cohort_where = {c.name: f"cohorts[{i}].name" for i, c in enumerate(cfg.cohorts)}
    for i, q in enumerate(cfg.queues):
        if q.cohort is not None:
            cohort_where.setdefault(q.cohort, f"queues[{i}].cohort")
    for i, c in enumerate(cfg.cohorts):
        if c.parent is not None:
            cohort_where.setdefault(c.parent, f"cohorts[{i}].parent")
    cohorts = unique(((cohort_where[c], c, dns_name(c, cohort_where[c])) for c in members), "Cohort")
    classes = unique(
        ((f"priority_classes.{n}", n, dns_name(n, f"priority_classes.{n}")) for n in sorted(cfg.priority_classes)),
        "WorkloadPriorityClass",
    )
    queue_ns = {q.name: _namespaces(q, i, namespace_per) for i, q in enumerate(cfg.queues)}

    wpcs = []
    for name, value in sorted(cfg.priority_classes.items(), key=lambda kv: classes[kv[0]]):
        if not INT32_MIN <= value <= INT32_MAX:
            raise ExportError(
                f"priority_classes.{name}", f"{value} is outside Kueue's int32 range; allowed: {INT32_MIN}..{INT32_MAX}"
            )
        wpcs.append(
            {
                "apiVersion": API_VERSION,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": classes[name]},
                "value": value,
                "description": f"labgang priority class {name!r}",
            }
        )
    flavors = [_obj("ResourceFlavor", n, spec) for n, spec in sorted(_flavors(cfg, inv).items())]
    cohort_objs = [
        _obj("Cohort", cohorts[raw], _cohort_spec(cfg, raw, cohorts, inv))
        for raw in sorted(members, key=lambda c: cohorts[c])
    ]
    cqs = [
        _obj("ClusterQueue", queues[q.name], _cluster_queue_spec(cfg, inv, i, cohorts, queue_ns[q.name]))
        for i, q in sorted(enumerate(cfg.queues), key=lambda iq: queues[iq[1].name])
    ]
    local = sorted((ns, queues[q.name]) for q in cfg.queues for ns in queue_ns[q.name])
    lqs = [_obj("LocalQueue", name, {"clusterQueue": name}, namespace=ns) for ns, name in local]
    namespaces = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in sorted({ns for ns, _ in local})
    ]
    gaps = _gaps(cfg, inv, namespace_per, queue_ns)
    return [*namespaces, *wpcs, *flavors, *cohort_objs, *cqs, *lqs], sorted(gaps)


def render(objects: list[dict[str, Any]], header: list[str]) -> str:
    """One YAML stream: ``header`` as ``#`` comments, then each object as a document."""
    comments = "".join(f"# {line}".rstrip() + "\n" for line in header)
    docs = [yaml.safe_dump(o, sort_keys=False, default_flow_style=False, width=1000) for o in objects]
    return comments + "".join("---\n" + d for d in docs)


def export(cfg: ClusterConfig, inv: Inventory, config_source: str, namespace_per: str = "queue") -> Export:
    """Build ``kueue.yaml`` for ``cfg``.

    Returns:
        An :class:`Export` with one file, ``kueue.yaml``, and the gaps.

    Raises:
        ExportError: see :func:`build_objects`.
    """
    objects, gaps = build_objects(cfg, inv, namespace_per)
    header = header_lines(f"Kueue objects ({API_VERSION}) for labgang's queue policy", config_source, inv, gaps)
    return Export({FILE_NAME: render(objects, header)}, tuple(gaps))
