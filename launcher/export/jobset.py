"""``labgang export job``: one job of groups (a ``-f job.toml``, docs/job-groups.md) as a Kueue
JobSet or a Slurm heterogeneous job, and what does not translate.

Kueue: a ``jobset.x-k8s.io/v1alpha2`` JobSet, suspended and labelled with the queue, one
replicated job per group (``parallelism`` = ``completions`` = the group's ranks, indexed), GPUs
as ``nvidia.com/gpu`` or ``nvidia.com/mig-<profile>`` limits; Kueue admits a JobSet as one
workload, which is labgang's all or nothing. Slurm: an ``sbatch`` script with one component per
group separated by ``#SBATCH hetjob``, and one ``srun`` launching every component
(``--het-group``), each with its own command and variables.

Each input group is a ``groups`` element of the submission body
(:func:`labgang.launcher.cli.job_groups.groups_from_file`): ``name``, ``workers``,
``gpus_per_worker``, ``mig``, ``nodes``, ``gpu_model``, ``topology``, ``cpus_per_task``, ``mem``,
``mem_per_gpu``, ``argv``, ``env``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import Any

import yaml
from labgang.launcher.export.common import Export, Gap, dns_name
from labgang.launcher.export.job_policies import hetjob_policy_gaps, jobset_policies

IMAGE = "REPLACE-WITH-YOUR-IMAGE"
"""The container image the JobSet names: labgang runs commands on the host, Kubernetes in an image."""


def _name(group: Mapping[str, Any], index: int) -> str:
    return str(group.get("name") or f"g{index}")


def _gaps_common(groups: Sequence[Mapping[str, Any]], colocate: Sequence[Sequence[str]], target: str) -> list[Gap]:
    gaps: list[Gap] = []
    for i, g in enumerate(groups):
        where = f"group[{i}] ({_name(g, i)})"
        level = g.get("topology")
        if level in ("nvlink", "pcie-switch", "numa"):
            gaps.append(
                Gap(
                    f"{where}.resources.topology",
                    f"the ranks' GPUs required on one {level} domain",
                    "one node for the group (kubernetes.io/hostname)"
                    if target == "kueue"
                    else "--nodes=1 on the component",
                )
            )
        if g.get("gpu_model"):
            gaps.append(
                Gap(
                    f"{where}.resources.gpu_model",
                    f"GPUs whose name contains {g['gpu_model']!r}",
                    "a nodeSelector on nvidia.com/gpu.product"
                    if target == "kueue"
                    else "--constraint with a node feature",
                )
            )
    for together in colocate:
        gaps.append(
            Gap(
                "colocate",
                f"groups {', '.join(together)} on one node",
                "a required podAffinity on kubernetes.io/hostname between their pods (added)"
                if target == "kueue"
                else "the components are started together but may land on different nodes; --nodelist by hand",
            )
        )
    return gaps


def kueue_jobset(
    groups: Sequence[Mapping[str, Any]],
    colocate: Sequence[Sequence[str]],
    name: str,
    queue: str | None,
    policies: Mapping[str, Any] | None = None,
) -> Export:
    """``jobset.yaml``: the job as a JobSet admitted by Kueue as one workload; ``policies``: the
    file's lifecycle policies (:func:`labgang.launcher.export.job_policies.jobset_policies`).

    Raises:
        ExportError: a job or group name with no valid Kubernetes spelling.
    """
    job_name = dns_name(name, "name", label=True)
    gaps = _gaps_common(groups, colocate, "kueue")
    gaps.append(Gap("command", "ranks run on the host as the user", f"a container image ({IMAGE}: set it)"))
    together = {n for c in colocate for n in c}
    jobs = []
    for i, g in enumerate(groups):
        gname = _name(g, i)
        limits: dict[str, Any] = {}
        if g.get("mig"):
            limits[f"nvidia.com/mig-{g['mig']}"] = 1
        elif g.get("gpus_per_worker", 1):
            limits["nvidia.com/gpu"] = g.get("gpus_per_worker", 1)
        if g.get("cpus_per_task"):
            limits["cpu"] = g["cpus_per_task"]
        if g.get("mem_per_gpu"):
            limits["memory"] = g["mem_per_gpu"] * max(1, int(g.get("gpus_per_worker") or 1))
        if g.get("mem"):
            gaps.append(Gap(f"group[{i}] ({gname}).resources.mem", "memory per node", "memory per pod (set per rank)"))
        container: dict[str, Any] = {"name": dns_name(gname, f"group[{i}].name", label=True), "image": IMAGE}
        container["command"] = list(g.get("argv") or [])
        if g.get("env"):
            container["env"] = [{"name": k, "value": v} for k, v in g["env"].items()]
        if limits:
            container["resources"] = {"limits": limits}
        pod: dict[str, Any] = {"restartPolicy": "Never", "containers": [container]}
        if g.get("topology") or (g.get("nodes") == 1):
            pod["affinity"] = _same_node({"jobset.sigs.k8s.io/replicatedjob-name": gname})
        if gname in together:
            pod["affinity"] = _same_node({"labgang.io/colocate": job_name})
        labels = {"labgang.io/colocate": job_name} if gname in together else {}
        if g.get("nodes") not in (None, 1):
            gaps.append(
                Gap(f"group[{i}] ({gname}).resources.nodes", f"exactly {g['nodes']} nodes", "no node count (as fit)")
            )
        template: dict[str, Any] = {"spec": pod}
        if labels:
            template["metadata"] = {"labels": labels}
        workers = int(g.get("workers") or 1)
        jobs.append(
            {
                "name": dns_name(gname, f"group[{i}].name", label=True),
                "replicas": 1,
                "template": {
                    "spec": {
                        "parallelism": workers,
                        "completions": workers,
                        "completionMode": "Indexed",
                        "backoffLimit": 0,
                        "template": template,
                    }
                },
            }
        )
    extra, policy_gaps = jobset_policies(policies or {}, [_name(g, i) for i, g in enumerate(groups)])
    gaps += policy_gaps
    metadata: dict[str, Any] = {"name": job_name}
    if queue:
        metadata["labels"] = {"kueue.x-k8s.io/queue-name": dns_name(queue, "queue", label=True)}
    obj = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": metadata,
        "spec": {"suspend": True, "replicatedJobs": jobs, **extra},
    }
    text = yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, width=1000)
    return Export({"jobset.yaml": text}, tuple(sorted(set(gaps))))


def _same_node(labels: Mapping[str, str]) -> dict[str, Any]:
    term = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": "kubernetes.io/hostname"}
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def slurm_hetjob(
    groups: Sequence[Mapping[str, Any]],
    colocate: Sequence[Sequence[str]],
    name: str,
    queue: str | None,
    policies: Mapping[str, Any] | None = None,
) -> Export:
    """``hetjob.sbatch``: the job as a Slurm heterogeneous job (components split by ``#SBATCH hetjob``);
    the file's lifecycle ``policies`` are gaps (:func:`labgang.launcher.export.job_policies.hetjob_policy_gaps`)."""
    gaps = _gaps_common(groups, colocate, "slurm") + hetjob_policy_gaps(policies or {})
    lines = ["#!/bin/bash", f"#SBATCH --job-name={name}"]
    if queue:
        lines.append(f"#SBATCH --partition={queue}")
    launches: list[str] = []
    names: list[str] = []
    for i, g in enumerate(groups):
        if i:
            lines.append("#SBATCH hetjob")
        gname = _name(g, i)
        lines.append(f"#SBATCH --ntasks={int(g.get('workers') or 1)}")
        if g.get("mig"):
            lines.append(f"#SBATCH --gres=gpu:{g['mig']}:1")
        else:
            per = int(1 if g.get("gpus_per_worker") is None else g["gpus_per_worker"])
            if per:
                lines.append(f"#SBATCH --gpus-per-task={per}")
        if g.get("nodes"):
            lines.append(f"#SBATCH --nodes={g['nodes']}")
        elif g.get("topology"):
            lines.append("#SBATCH --nodes=1")
        if g.get("cpus_per_task"):
            lines.append(f"#SBATCH --cpus-per-task={g['cpus_per_task']}")
        if g.get("mem"):
            lines.append(f"#SBATCH --mem={int(g['mem']) // (1024 * 1024)}M")
        if g.get("mem_per_gpu"):
            lines.append(f"#SBATCH --mem-per-gpu={int(g['mem_per_gpu']) // (1024 * 1024)}M")
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in (g.get("env") or {}).items())
        command = " ".join(shlex.quote(w) for w in g.get("argv") or [])
        launches.append(f"--het-group={i} {'env ' + env + ' ' if env else ''}{command}")
        names.append(f"{i} = {gname}")
    lines.append("")
    lines.append("# het groups: " + ", ".join(names))
    lines.append("srun " + " \\\n   : ".join(launches))
    return Export({"hetjob.sbatch": "\n".join(lines) + "\n"}, tuple(sorted(set(gaps))))
