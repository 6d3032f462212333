"""Kueue v1beta2's rules for the five kinds labgang exports, restated for the tests.

Written from Kueue's CRD schemas and admission webhooks (kueue.x-k8s.io, v1beta2 is the
served storage version; v1beta1 is served but deprecated). Each rule returns problems as
``"<kind>/<name>: <what>"`` strings, so a test can assert an empty list and show all
violations at once.

- Names of cluster-scoped objects, flavors, cohorts and ``clusterQueue`` references are
  DNS-1123 subdomains (at most 253 characters); namespaces are DNS-1123 labels.
- ClusterQueue, Cohort, ResourceFlavor and WorkloadPriorityClass are cluster-scoped;
  LocalQueue is namespaced and names its ClusterQueue in ``spec.clusterQueue``.
- WorkloadPriorityClass has ``value`` (int32, required) and ``description`` at the top
  level, not under ``spec``.
- ResourceFlavor ``spec.nodeLabels`` is a string-to-string map.
- ClusterQueue ``spec``: ``cohortName``; ``queueingStrategy`` StrictFIFO|BestEffortFIFO;
  ``preemption.withinClusterQueue`` Never|LowerPriority|LowerOrNewerEqualPriority,
  ``preemption.reclaimWithinCohort`` Never|LowerPriority|Any,
  ``preemption.borrowWithinCohort.policy`` Never|LowerPriority with an optional integer
  ``maxPriorityThreshold``; borrowWithinCohort other than Never needs reclaimWithinCohort
  other than Never.
- ``resourceGroups`` (ClusterQueue and Cohort): at most 16; each has ``coveredResources``
  (1..64) and ``flavors`` (1..64), every flavor lists exactly the covered resources in the
  same order, each with ``nominalQuota`` and optional ``borrowingLimit``/``lendingLimit``,
  all non-negative quantities; a resource is covered by one group only and a flavor is
  used once per queue; ``borrowingLimit``/``lendingLimit`` need a ``cohortName`` (Cohort:
  a ``parentName``); a ClusterQueue's ``lendingLimit`` is at most its ``nominalQuota``.
- ``fairSharing.weight`` (ClusterQueue, Cohort, LocalQueue) is a non-negative quantity, 0 or
  above 1e-9 (smaller weights collapse to 0 and are refused).
- ClusterQueue ``admissionScope.admissionMode`` is UsageBasedAdmissionFairSharing or
  NoAdmissionFairSharing.
- Cohort ``spec.parentName`` names its parent cohort.
"""

from __future__ import annotations

import re
from typing import Any

API = "kueue.x-k8s.io/v1beta2"
SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUANTITY = re.compile(r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(\d+)))?$")
WITHIN = {"Never", "LowerPriority", "LowerOrNewerEqualPriority"}
RECLAIM = {"Never", "LowerPriority", "Any"}
BORROW = {"Never", "LowerPriority"}
QUEUEING = {"StrictFIFO", "BestEffortFIFO"}
ADMISSION_MODES = {"UsageBasedAdmissionFairSharing", "NoAdmissionFairSharing"}
CLUSTER_SCOPED = {"ClusterQueue", "Cohort", "ResourceFlavor", "WorkloadPriorityClass"}
SPEC_KEYS = {
    "ClusterQueue": {
        "cohortName",
        "namespaceSelector",
        "queueingStrategy",
        "preemption",
        "resourceGroups",
        "fairSharing",
        "flavorFungibility",
        "stopPolicy",
        "admissionChecksStrategy",
        "admissionScope",
    },
    "Cohort": {"parentName", "resourceGroups", "fairSharing"},
    "ResourceFlavor": {"nodeLabels", "nodeTaints", "tolerations", "topologyName"},
    "LocalQueue": {"clusterQueue", "stopPolicy", "fairSharing"},
}


def _quantity(value: Any) -> float | None:
    """A Kubernetes quantity as a number (only what the tests need: ints and plain decimals), None if invalid."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return float(value)
    if isinstance(value, str) and QUANTITY.match(value):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _resource_groups(where: str, spec: dict[str, Any], has_parent: bool, is_queue: bool) -> list[str]:
    problems: list[str] = []
    groups = spec.get("resourceGroups", [])
    if len(groups) > 16:
        problems.append(f"{where}: {len(groups)} resourceGroups; at most 16")
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for g, group in enumerate(groups):
        covered = group.get("coveredResources")
        flavors = group.get("flavors")
        if not isinstance(covered, list) or not 1 <= len(covered) <= 64:
            problems.append(f"{where}: resourceGroups[{g}].coveredResources must list 1..64 resources")
            continue
        if not isinstance(flavors, list) or not 1 <= len(flavors) <= 64:
            problems.append(f"{where}: resourceGroups[{g}].flavors must list 1..64 flavors")
            continue
        for resource in covered:
            if resource in seen_resources:
                problems.append(f"{where}: resource {resource} covered by two resource groups")
            seen_resources.add(resource)
        for flavor in flavors:
            name = flavor.get("name")
            if not isinstance(name, str) or not SUBDOMAIN.match(name):
                problems.append(f"{where}: flavor name {name!r} is not a DNS-1123 subdomain")
            if name in seen_flavors:
                problems.append(f"{where}: flavor {name} used twice")
            seen_flavors.add(name)
            resources = flavor.get("resources", [])
            if [r.get("name") for r in resources] != covered:
                problems.append(f"{where}: flavor {name} must list {covered} in order")
            for r in resources:
                nominal = _quantity(r.get("nominalQuota"))
                if nominal is None or nominal < 0:
                    problems.append(f"{where}: {name}/{r.get('name')} nominalQuota must be a quantity >= 0")
                    continue
                for key in ("borrowingLimit", "lendingLimit"):
                    if key not in r:
                        continue
                    value = _quantity(r[key])
                    if value is None or value < 0:
                        problems.append(f"{where}: {name}/{r.get('name')} {key} must be a quantity >= 0")
                    if not has_parent:
                        problems.append(f"{where}: {name}/{r.get('name')} {key} needs a cohort (or parent)")
                    if key == "lendingLimit" and is_queue and value is not None and value > nominal:
                        problems.append(f"{where}: {name}/{r.get('name')} lendingLimit above nominalQuota")
    return problems


def _fair_sharing(where: str, spec: dict[str, Any]) -> list[str]:
    if "fairSharing" not in spec:
        return []
    weight = _quantity(spec["fairSharing"].get("weight", 1))
    if weight is None or weight < 0 or 0 < weight <= 1e-9:
        return [f"{where}: fairSharing.weight must be a quantity, 0 or above 1e-9"]
    return []


def _cluster_queue(where: str, spec: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    if "cohortName" in spec and not SUBDOMAIN.match(str(spec["cohortName"])):
        problems.append(f"{where}: cohortName is not a DNS-1123 subdomain")
    if spec.get("queueingStrategy", "BestEffortFIFO") not in QUEUEING:
        problems.append(f"{where}: queueingStrategy {spec.get('queueingStrategy')!r} not in {sorted(QUEUEING)}")
    pre = spec.get("preemption", {})
    if pre.get("withinClusterQueue", "Never") not in WITHIN:
        problems.append(f"{where}: preemption.withinClusterQueue not in {sorted(WITHIN)}")
    if pre.get("reclaimWithinCohort", "Never") not in RECLAIM:
        problems.append(f"{where}: preemption.reclaimWithinCohort not in {sorted(RECLAIM)}")
    bwc = pre.get("borrowWithinCohort", {})
    if bwc.get("policy", "Never") not in BORROW:
        problems.append(f"{where}: preemption.borrowWithinCohort.policy not in {sorted(BORROW)}")
    if "maxPriorityThreshold" in bwc and not isinstance(bwc["maxPriorityThreshold"], int):
        problems.append(f"{where}: borrowWithinCohort.maxPriorityThreshold must be an integer")
    if pre.get("reclaimWithinCohort", "Never") == "Never" and bwc.get("policy", "Never") != "Never":
        problems.append(f"{where}: borrowWithinCohort needs reclaimWithinCohort other than Never")
    scope = spec.get("admissionScope")
    if scope is not None and scope.get("admissionMode") not in ADMISSION_MODES:
        problems.append(f"{where}: admissionScope.admissionMode not in {sorted(ADMISSION_MODES)}")
    problems += _resource_groups(where, spec, bool(spec.get("cohortName")), True)
    return problems + _fair_sharing(where, spec)


def problems(obj: dict[str, Any]) -> list[str]:
    """Every rule ``obj`` (one exported Kueue object) breaks; empty when it follows them all."""
    kind = obj.get("kind")
    meta = obj.get("metadata", {})
    name = meta.get("name")
    where = f"{kind}/{name}"
    out: list[str] = []
    if obj.get("apiVersion") != API:
        return [f"{where}: apiVersion {obj.get('apiVersion')!r}, expected {API}"]
    if not isinstance(name, str) or len(name) > 253 or not SUBDOMAIN.match(name):
        out.append(f"{where}: metadata.name is not a DNS-1123 subdomain")
    if kind in CLUSTER_SCOPED and "namespace" in meta:
        out.append(f"{where}: cluster-scoped, must not have a namespace")
    if kind == "WorkloadPriorityClass":
        value = obj.get("value")
        if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) <= value < 2**31:
            out.append(f"{where}: value must be an int32")
        if "spec" in obj:
            out.append(f"{where}: has no spec (value and description are top-level)")
        return out
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return [*out, f"{where}: spec must be an object"]
    unknown = set(spec) - SPEC_KEYS.get(str(kind), set())
    if unknown:
        out.append(f"{where}: unknown spec fields {sorted(unknown)}")
    if kind == "ClusterQueue":
        out += _cluster_queue(where, spec)
    elif kind == "Cohort":
        if "parentName" in spec and not SUBDOMAIN.match(str(spec["parentName"])):
            out.append(f"{where}: parentName is not a DNS-1123 subdomain")
        out += _resource_groups(where, spec, bool(spec.get("parentName")), False) + _fair_sharing(where, spec)
    elif kind == "ResourceFlavor":
        labels = spec.get("nodeLabels", {})
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
            out.append(f"{where}: nodeLabels must map strings to strings")
    elif kind == "LocalQueue":
        if not LABEL.match(str(meta.get("namespace", ""))):
            out.append(f"{where}: namespaced; metadata.namespace must be a DNS-1123 label")
        if not SUBDOMAIN.match(str(spec.get("clusterQueue", ""))):
            out.append(f"{where}: spec.clusterQueue must name a ClusterQueue")
        out += _fair_sharing(where, spec)
    else:
        out.append(f"{where}: not a kind labgang exports")
    return out
