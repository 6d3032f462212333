"""``labgang export job``: a job file's lifecycle policies (docs/group-lifecycle.md) as JobSet
fields, and what Slurm cannot express.

JobSet (``jobset.x-k8s.io/v1alpha2``): ``success_policy = "any"`` is ``successPolicy.operator:
Any``, ``"group:NAME"`` is ``operator: All`` over ``targetReplicatedJobs: [NAME]`` ("all" is
JobSet's default); ``failure_policy = "restart"`` with ``max_restarts`` is
``failurePolicy.maxRestarts`` (a failure recreates every replicated job, as labgang restarts the
whole job); ``startup_order`` is ``startupPolicy.startupPolicyOrder: InOrder`` (the replicated
jobs start in their list order, each once the one before it is ready). Slurm's heterogeneous
job has none of them: each is a gap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from labgang.launcher.export.common import Gap, dns_name


def jobset_policies(policies: Mapping[str, Any], names: Sequence[str]) -> tuple[dict[str, Any], list[Gap]]:
    """The JobSet ``spec`` fields for ``policies`` (body fields: ``success_policy``,
    ``failure_policy``, ``max_restarts``, ``startup_order``) of a job whose groups are ``names``
    (group order), and what does not translate exactly.

    Raises:
        ExportError: a group name with no valid Kubernetes spelling.
    """
    spec: dict[str, Any] = {}
    gaps: list[Gap] = []
    success = policies.get("success_policy", "all")
    if success == "any":
        spec["successPolicy"] = {"operator": "Any"}
    elif isinstance(success, str) and success.startswith("group:"):
        target = success.partition(":")[2]
        spec["successPolicy"] = {
            "operator": "All",
            "targetReplicatedJobs": [dns_name(target, "success_policy", label=True)],
        }
    if policies.get("failure_policy") == "restart":
        spec["failurePolicy"] = {"maxRestarts": int(policies.get("max_restarts") or 0)}
    order = list(policies.get("startup_order") or ())
    if order:
        spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
        rest = [n for n in names if n not in order]
        if order + rest != list(names) or len(rest) > 1:
            gaps.append(
                Gap(
                    "startup_order",
                    f"groups started in the order {', '.join(order)} (the others last, together)",
                    "InOrder: every replicated job in its list order, one after another",
                )
            )
        gaps.append(Gap("startup_order", "a group starts once the ranks before it started", "once they are ready"))
    return spec, gaps


def hetjob_policy_gaps(policies: Mapping[str, Any]) -> list[Gap]:
    """What a Slurm heterogeneous job loses of ``policies`` (body fields, as :func:`jobset_policies`)."""
    gaps: list[Gap] = []
    success = policies.get("success_policy", "all")
    if success != "all":
        gaps.append(
            Gap("success_policy", f"the job done when {success} succeeded", "srun ends when every component ended")
        )
    if policies.get("failure_policy") == "restart":
        gaps.append(
            Gap(
                "failure_policy",
                f"the whole job restarted after a rank's failure, up to {policies.get('max_restarts') or 0} times",
                "none: a failed step ends the job (resubmit, or --requeue for node failures)",
            )
        )
    if policies.get("startup_order"):
        gaps.append(Gap("startup_order", "groups started one after another", "every component starts at once"))
    return gaps
